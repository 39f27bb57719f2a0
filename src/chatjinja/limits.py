"""The source limits both halves apply (template size and nesting, the same defaults for rendering and for parsing and analysing), the static half's own (tokens, tree depth, findings), and the error the static half raises past one of its limits."""

from __future__ import annotations

from typing import Any

from .errors import ChatJinjaError

__all__ = [
    "MAX_SOURCE_CHARS",
    "MAX_SOURCE_NESTING",
    "MAX_SOURCE_TOKENS",
    "TREE_DEPTH_FACTOR",
    "MAX_TREE_DEPTH",
    "MAX_FINDINGS",
    "BLOCK_OPENERS",
    "StaticLimitExceeded",
]

#: characters of template source
MAX_SOURCE_CHARS = 1024 * 1024
#: nested brackets + blocks in the source (jinja2's parser recurses)
MAX_SOURCE_NESTING = 48
#: lexer tokens of one template the static half reads (template data counts one token a run): the
#: corpus's most is 2,676; each token costs the analysis up to about 7 microseconds, so this bounds
#: parsing, analysing and linting any template to well under 2 s. The renderer has no such count:
#: its compile budget (half its timeout) refuses templates this large by time instead
MAX_SOURCE_TOKENS = 100_000
#: the parsed tree may be this many times deeper than the source nesting (operator chains nest without brackets)
TREE_DEPTH_FACTOR = 4
#: depth of the parsed tree the static half accepts (the analyser and the linter; the renderer checks
#: ``TREE_DEPTH_FACTOR`` times its own ``max_source_nesting``, the same number by default)
MAX_TREE_DEPTH = TREE_DEPTH_FACTOR * MAX_SOURCE_NESTING
#: findings one lint reports before it stops (the corpus's most is 38 on one template with every rule
#: selected): past it a template is generated, and its findings cost more than its parse
MAX_FINDINGS = 1000
#: the tag names that open a block that an ``end...`` tag closes (``set`` opens one only without ``=``)
BLOCK_OPENERS = frozenset({"if", "for", "macro", "call", "filter", "block", "with", "generation", "autoescape", "trans"})


class StaticLimitExceeded(ChatJinjaError):
    """Parsing or analysing a template crossed one of the static half's limits; ``limit`` names it, ``value`` is its setting."""

    def __init__(self, limit: str, value: int, detail: str, *, span: Any = None, source_name: str | None = None):
        super().__init__(f"{limit} exceeded (limit {value}): {detail}", span=span, source_name=source_name)
        self.limit = limit
        self.value = value
        self.detail = detail
