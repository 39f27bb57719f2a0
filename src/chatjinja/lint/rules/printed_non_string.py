"""CT002 printed-non-string: ``{{ }}`` of a value that can be a list, dict or None (content, arguments, tools)."""

from __future__ import annotations

from typing import Iterable, Iterator

from ...syntax import ast as A
from ..context import LintContext, path_key
from ..rule import Finding, Rule

DOC = """\
## What it does
Finds `{{ x }}` where `x` is message `content`, tool-call `arguments`, `tool_calls` or `tools`,
printed as it is (no filter, or only `|trim`/`|safe`), with no enclosing `{% if %}` that tests
its type (`is string`, `is mapping` ...).

## Why is this bad?
jinja2 prints lists, dicts and `None` with Python's `str()`: `[{'type': 'text', 'text': 'hi'}]`,
`{'city': 'Paris'}` with single quotes, or `None`. The model then sees Python reprs instead of
text or JSON. Use `|tojson` for structured values, or branch on the type.

## Example
```jinja
{%- for tool in tools %}{{- tool }}{%- endfor %}{{- tools }}
```

## Use instead
```jinja
{{- tools|tojson }}
```

## Fix safety
No fix: `|tojson` changes the output for strings too (it adds quotes).
"""

_SUFFIXES = {"content": "a list of chunks or None", "arguments": "a dict", "tool_calls": "a list of dicts"}
_HARMLESS_FILTERS = frozenset({"trim", "safe", "e", "escape"})


def check(output: A.Output, ctx: LintContext) -> Iterable[Finding]:
    expr = output.expr
    while isinstance(expr, A.Filter) and expr.node is not None and expr.name in _HARMLESS_FILTERS:
        expr = expr.node
    key = path_key(expr)
    return () if key is None else _findings(expr, key, ctx)


def _findings(expr, key: str, ctx: LintContext) -> Iterator[Finding]:
    what = None
    if isinstance(expr, A.Name) and expr.name == "tools" and "tools" not in ctx.assignments:
        what = "a list of tool definitions"
    else:
        for suffix, description in _SUFFIXES.items():
            if ctx.is_key_ref(expr, suffix):
                what = description
                break
    if what is None or ctx.guarded(key, ("string", "mapping", "iterable", "sequence", "none")):
        return
    yield Finding(expr.span.start, expr.span.end, f"'{ctx.source_text(expr)}' can be {what}, which {{{{ }}}} prints as a "
                  "Python repr; use |tojson or check its type")


RULE = Rule("CT002", "printed-non-string", "warning", "A value that can be a list, dict or None is printed with {{ }}",
            DOC, (A.Output,), check)
