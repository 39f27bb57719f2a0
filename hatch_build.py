"""Hatchling build hook: optionally compile ``chatjinja.runtime._hooks`` with mypyc.

Why: the budget hooks in ``_hooks.py`` run hundreds of times per render, so
they are the one place where compiling pays off. mypyc compiles a copy of that
module, named ``chatjinja.runtime._hooks_native``, with one constant added:
``SOURCE_SHA256``, the sha256 of the ``_hooks.py`` it was compiled from. The
runtime imports the native module only when that constant matches the shipped
``_hooks.py``, and otherwise uses ``_hooks.py`` itself; both run the same
source, so the pure-Python fallback behaves the same, only slower.

Compiling is optional. When mypy, setuptools or a C compiler is missing, or
the compile fails, the hook prints one warning line on stderr and the build
goes on as pure Python. ``CHATJINJA_PURE_PYTHON=1`` skips compiling.

- editable (``pip install -e .``): the extension is copied next to
  ``_hooks.py`` in ``src/chatjinja/runtime/``, where the editable install
  imports from (``.gitignore`` and the wheel ``exclude`` keep it out of
  commits and of later standard wheels).
- standard wheel: the extension is copied to ``build/mypyc/`` and
  force-included as ``chatjinja/runtime/<name>``; the wheel is then tagged
  for this interpreter and platform instead of ``py3-none-any``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

MODULE = "chatjinja/runtime/_hooks_native.py"
EXT_SUFFIXES = (".so", ".pyd")
TIMEOUT = 600  # seconds

SETUP_PY = """\
from mypyc.build import mypycify
from setuptools import setup

setup(
    name="chatjinja_native",
    ext_modules=mypycify(
        ["--follow-imports=skip", "--ignore-missing-imports", {module!r}],
        opt_level="3",
    ),
)
"""


def _is_ext(path: Path) -> bool:
    return path.suffix in EXT_SUFFIXES


def _short_reason(output: str) -> str:
    """The first error line of the compile output (mypy, setuptools or the compiler)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"\berror:|\w+Error\b", line)]
    reason = (errors or lines or ["no output"])[0]
    reason = reason.replace("_hooks_native.py", "_hooks.py")
    reason = reason if len(reason) <= 200 else reason[:197] + "..."
    more = len(re.findall(r"\.py:\d+: error:", output)) - 1  # further mypy errors
    return f"{reason}; {more} more" if more > 0 else reason


class MypycHooksBuildHook(BuildHookInterface[Any]):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version not in ("standard", "editable"):
            return
        runtime_dir = Path(self.root, "src", "chatjinja", "runtime")
        if version == "editable":
            # Stale extensions (any Python tag) never outlive a new editable build.
            for stale in runtime_dir.glob("_hooks_native*"):
                if _is_ext(stale):
                    stale.unlink()

        if os.environ.get("CHATJINJA_PURE_PYTHON", "") not in ("", "0"):
            print("chatjinja: CHATJINJA_PURE_PYTHON is set; installing pure Python", file=sys.stderr)
            return

        with tempfile.TemporaryDirectory(prefix="chatjinja-mypyc-") as tmp:
            built = self._compile(runtime_dir / "_hooks.py", Path(tmp))
            if isinstance(built, str):
                print(
                    f"chatjinja: building the compiled hooks failed ({built}); installing pure Python",
                    file=sys.stderr,
                )
                return
            if version == "editable":
                # The editable install puts src/ on sys.path: place the files there.
                for rel, path in built:
                    shutil.copy2(path, Path(self.root, "src", rel))
                return
            out_dir = Path(self.root, "build", "mypyc")
            shutil.rmtree(out_dir, ignore_errors=True)
            out_dir.mkdir(parents=True)
            for rel, path in built:
                target = out_dir / path.name
                shutil.copy2(path, target)
                build_data["force_include"][str(target)] = rel.as_posix()
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def _compile(self, source: Path, tmp: Path) -> list[tuple[Path, Path]] | str:
        """Compile ``source`` in ``tmp``: (package-relative path, file) pairs, or the reason it failed."""
        try:
            code = source.read_bytes()
        except OSError as exc:
            return f"cannot read {source.name}: {exc.strerror}"
        digest = hashlib.sha256(code).hexdigest()
        package = tmp / "chatjinja" / "runtime"
        package.mkdir(parents=True)
        (tmp / "chatjinja" / "__init__.py").write_bytes(b"")
        (package / "__init__.py").write_bytes(b"")
        constant = f'\n\nfrom typing import Final as _Final\n\nSOURCE_SHA256: _Final = "{digest}"\n'
        (tmp / MODULE).write_bytes(code + constant.encode())
        (tmp / "setup.py").write_text(SETUP_PY.format(module=MODULE), encoding="utf-8")
        try:
            result = subprocess.run(
                [sys.executable, "setup.py", "build_ext", "--inplace"],
                check=False,
                cwd=tmp,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            return f"timed out after {TIMEOUT} s"
        except OSError as exc:
            return f"cannot run {sys.executable}: {exc.strerror}"
        if result.returncode != 0:
            return _short_reason(result.stdout)
        # The module itself, plus any shared "<group>__mypyc" library mypyc made for it.
        built = [
            (path.relative_to(tmp), path)
            for path in sorted(tmp.rglob("*"))
            if _is_ext(path) and path.is_file() and path.relative_to(tmp).parts[0] != "build"
        ]
        if not any(
            rel.name.startswith("_hooks_native") and rel.parent == Path(MODULE).parent for rel, _ in built
        ):
            return "mypyc reported success but produced no _hooks_native extension"
        return built
