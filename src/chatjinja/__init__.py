"""chatjinja: render LLM chat templates exactly as transformers does, safely; analyse and lint them.

Public API re-exports only. Names are imported lazily, so ``import chatjinja`` stays cheap and
the static half (parser, analyser, linter) never loads jinja2 unless rendering is used.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:  # not at run time: ``import chatjinja`` should not pay for ``typing``
    from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "apply_chat_template": "chatjinja.runtime.render",
    "render_batch": "chatjinja.runtime.batch",
    "ChatTemplate": "chatjinja.template",
    "load_template": "chatjinja.loading.resolve",
    "ChatJinjaError": "chatjinja.errors",
    "BudgetExceeded": "chatjinja.runtime.budget",
    "TemplateSyntaxError": "chatjinja.errors",
    "TemplateNotFound": "chatjinja.errors",
    "LoadError": "chatjinja.errors",
    "Source": "chatjinja.source",
    "Span": "chatjinja.source",
    "parse": "chatjinja.syntax",
    "analyze": "chatjinja.analysis",
    "Capabilities": "chatjinja.analysis",
    "probe": "chatjinja.probe",
    "check_portability": "chatjinja.portability",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'chatjinja' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
