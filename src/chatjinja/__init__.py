"""chatjinja: render LLM chat templates exactly as transformers does, safely; analyse and lint them.

Public API re-exports only. Names are imported lazily, so ``import chatjinja`` stays cheap and
the static half (parser, analyser, linter) never loads jinja2 unless rendering is used.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:  # not at run time: ``import chatjinja`` should not pay for ``typing``
    from typing import Any


_EXPORTS = {
    "__version__": "chatjinja.version",
    "apply_chat_template": "chatjinja.template",
    "render_batch": "chatjinja.batch",
    "ChatTemplate": "chatjinja.template",
    "load_template": "chatjinja.template",
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
    "probe": "chatjinja.probing",
    "check_portability": "chatjinja.portability",
    "response_template": "chatjinja.serving.derive",
    "write_response_template": "chatjinja.serving.checkpoint",
    "parse_response": "chatjinja.serving.parse",
    "ResponseStream": "chatjinja.serving.parse",
    "ReplyError": "chatjinja.serving.parse",
    "ResponseTemplateError": "chatjinja.serving.derive",
    "add_generation_tags": "chatjinja.training.generation_tags",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'chatjinja' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
