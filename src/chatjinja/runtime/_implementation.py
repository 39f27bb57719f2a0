"""Which build of the render hooks (``_hooks.py``) this process runs: compiled or pure Python.

The package build compiles ``_hooks.py`` with mypyc into ``_hooks_native`` when it can
(``hatch_build.py``), recording the SHA-256 of the source it compiled. The compiled module is used
when it imports and was made from the ``_hooks.py`` beside it; otherwise (no C compiler at install
time, a source edited since, ``CHATJINJA_PURE_PYTHON=1``) the pure-Python module runs, with the
same behaviour, only slower. ``DESCRIPTION`` says which and why (``chatjinja --version`` prints it).
"""

from __future__ import annotations

import hashlib
import importlib
import os
from types import ModuleType

from . import _hooks as _pure


def _choose() -> tuple[ModuleType, str]:
    if os.environ.get("CHATJINJA_PURE_PYTHON", "") not in ("", "0"):
        return _pure, "pure Python (CHATJINJA_PURE_PYTHON is set)"
    try:
        native = importlib.import_module("._hooks_native", __package__)
    except ImportError:
        return _pure, "pure Python (no compiled build of the render hooks)"
    try:
        with open(_pure.__file__, "rb") as source:
            digest = hashlib.sha256(source.read()).hexdigest()
    except OSError:
        return _pure, "pure Python (the source of the render hooks cannot be read to check the compiled build)"
    if getattr(native, "SOURCE_SHA256", None) != digest:
        return _pure, "pure Python (the compiled render hooks were built from another _hooks.py: reinstall to rebuild)"
    return native, "compiled (mypyc)"


hooks, DESCRIPTION = _choose()
COMPILED = hooks is not _pure
