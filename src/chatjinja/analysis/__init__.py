"""The static half's analyser: ``analyze(template) -> Capabilities``, from the Lark AST alone (never renders, never imports jinja2)."""

from __future__ import annotations

from typing import Any

from ..errors import ChatJinjaError
from ..source import Source
from .facts import (
    PROBED_FIELDS,
    SCHEMA_VERSION,
    Capabilities,
    ContentUse,
    Disagreement,
    Evidence,
    RaiseSite,
    RoleTest,
    VariableUse,
    disagreements,
)

__all__ = [
    "analyze",
    "Capabilities",
    "ContentUse",
    "Disagreement",
    "Evidence",
    "PROBED_FIELDS",
    "RaiseSite",
    "RoleTest",
    "SCHEMA_VERSION",
    "VariableUse",
    "disagreements",
    "modes_of",
    "source_of",
]


def source_of(template: Any) -> Source:
    """A :class:`Source` from template text, a ``Source`` or a ``ChatTemplate`` (duck-typed: no runtime import)."""
    if isinstance(template, Source):
        return template
    if isinstance(template, str):
        return Source(template)
    text = getattr(template, "source", None)
    if isinstance(text, str):
        return Source(text, getattr(template, "name", None) or "<string>")
    raise TypeError(f"analyze() takes template text, a Source or a ChatTemplate, got {type(template).__name__}")


def analyze(template: Any) -> Capabilities:
    """What a chat template supports, predicted statically from its AST (see docs/CAPABILITIES.md).

    Raises :class:`chatjinja.TemplateSyntaxError` when the template does not parse, and
    :class:`chatjinja.limits.StaticLimitExceeded` past one of the static half's limits: the
    renderer's source budgets (size, nesting; the parsed tree at most ``TREE_DEPTH_FACTOR`` times
    deeper), the static half's token limit (``MAX_SOURCE_TOKENS``) and the analysis fuel
    (:data:`chatjinja.analysis.values.ANALYSIS_FUEL`). Python's cyclic
    garbage collector is paused while it runs and restored after (``collect.collector_paused``).
    """
    from .collect import analyze_source  # lazy: analysis.facts (the Capabilities the runtime's probe returns) must not load Lark and the analyser

    return analyze_source(source_of(template))


def modes_of(template: Any) -> tuple:
    """The template's modes (:class:`chatjinja.analysis.modes.Mode`), from its tree alone: ``()`` when it
    has none, or does not parse, or is past a static limit (what cannot be analysed has no modes to try)."""
    from .collect import template_modes  # lazy: as ``analyze``

    try:
        return template_modes(source_of(template))
    except ChatJinjaError:
        return ()
