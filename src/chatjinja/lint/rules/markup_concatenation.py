"""JN002 markup-concatenation: a ``|safe`` (Markup) value joined to plain strings with ``+``."""

from __future__ import annotations

from typing import Iterable, Iterator

from ...syntax import ast as A
from ..context import LintContext
from ..rule import Finding, Rule
from .content_as_string import filter_name_end

DOC = """\
## What it does
Finds `+` between a value that went through `|safe` (or `|escape`/`|e`/`|forceescape`, which
also return `markupsafe.Markup`) and anything else: a variable set from `...|safe`, or an inline
`(x|safe)`.

## Why is this bad?
`Markup + str` and `str + Markup` HTML-escape the plain side, even though transformers renders
with autoescape off: `'[TOOL_CALLS]' + name + '[ARGS]' + (arguments|tojson|safe)` turns a tool
named `get_a&b's` into `get_a&amp;b&#39;s`. `|safe` is never needed in a chat template. (`~` is
not affected: without autoescape jinja2 joins its operands as plain strings.)

## Example
```jinja
{%- set name = messages[0]['name']|safe %}{{- '[NAME]' + name }}
```

## Use instead
```jinja
{%- set name = messages[0]['name'] %}{{- '[NAME]' + name }}
```

## Fix safety
No fix is applied by `--fix`; removing `|safe` changes the output exactly where escaping happened.
"""

MARKUP_FILTERS = frozenset({"safe", "escape", "e", "forceescape"})


def _markup_filter(value) -> A.Filter | None:
    """The ``|safe`` (``|escape`` ...) that makes the whole of ``value`` Markup, if any."""
    while isinstance(value, A.Filter):
        if value.name in MARKUP_FILTERS:
            return value
        value = value.node
    return None


def _markup_names(ctx: LintContext) -> dict[str, A.Filter]:
    found = ctx.scratch.get("JN002")
    if found is None:
        found = {}
        for name, values in ctx.assignments.items():
            for value in values:
                filt = _markup_filter(value)
                if filt is not None:
                    found.setdefault(name, filt)
        ctx.scratch["JN002"] = found
    return found


def check(node: A.BinOp, ctx: LintContext) -> Iterable[Finding]:
    if node.op != "+":
        return ()
    left, right = node.left, node.right
    if not (isinstance(left, (A.Name, A.Filter)) or isinstance(right, (A.Name, A.Filter))):
        return ()  # (neither side can be Markup)
    return _joined(node, ctx)


def _joined(node: A.BinOp, ctx: LintContext) -> Iterator[Finding]:
    markup = _markup_names(ctx)
    for side in (node.left, node.right):
        if isinstance(side, A.Name) and side.name in markup:
            filt = markup[side.name]
            end = filter_name_end(ctx, filt)
            line = ctx.source.lines.position(end)[0]
            yield Finding(side.span.start, side.span.end, f"'{side.name}' is Markup (|{filt.name} on line {line}); "
                          "joining it with plain strings HTML-escapes them ('&' becomes '&amp;')")
        elif isinstance(side, A.Filter) and side.name in MARKUP_FILTERS:
            end = filter_name_end(ctx, side)
            yield Finding(end - len(side.name), end, f"a |{side.name} value is joined with '+': the plain side gets "
                          "HTML-escaped ('&' becomes '&amp;')")


RULE = Rule("JN002", "markup-concatenation", "warning", "A |safe (Markup) value is joined to plain strings", DOC,
            (A.BinOp,), check)
