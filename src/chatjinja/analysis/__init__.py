"""The static half's analyser: ``analyze(template) -> Capabilities``, from the Lark AST alone (never renders, never imports jinja2)."""

from __future__ import annotations

from typing import Any

from ..errors import ChatJinjaError
from ..limits import MAX_SOURCE_NESTING, MAX_TREE_DEPTH, StaticLimitExceeded
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
    from .collect import collector_paused

    source = source_of(template)
    with collector_paused():  # (the parse too: its tree is most of what the collector would scan)
        try:
            return _analyze(source)
        except ChatJinjaError as exc:
            # Raised from here without its traceback, whose frames hold the tree and the runs: they are
            # freed now, while the collector waits, not scanned by the full pass that follows the pause.
            error = exc.with_traceback(None)
    raise error


def _analyze(source: Source) -> Capabilities:
    from ..syntax import parse
    from .collect import collect

    tree = parse(source)
    depth_limit = MAX_TREE_DEPTH
    if _deeper_than(tree, depth_limit):
        raise StaticLimitExceeded("max_source_nesting", MAX_SOURCE_NESTING,
                                  f"expression tree deeper than {depth_limit}", source_name=source.name)
    try:
        return collect(tree, source)
    except StaticLimitExceeded as exc:
        exc.source_name = source.name
        raise
    except RecursionError:
        raise ChatJinjaError("template is nested too deeply to analyse", source_name=source.name) from None


def _deeper_than(tree: Any, limit: int) -> bool:
    """Whether the tree is more than ``limit`` nodes deep (walked a level at a time, without recursion, stopping there)."""
    from ..syntax.visitor import child_nodes

    level, depth = [tree], 1
    while level:
        if depth > limit:
            return True
        below: list = []
        for node in level:
            below += child_nodes(node)
        level, depth = below, depth + 1
    return False
