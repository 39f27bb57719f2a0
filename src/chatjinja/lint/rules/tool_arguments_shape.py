"""TC001 tool-arguments-shape: tool-call ``arguments`` assumed a mapping, or always ``|tojson``-ed."""

from __future__ import annotations

from typing import Iterable, Iterator

from ...syntax import ast as A
from ..context import LintContext, last_key, path_key
from ..rule import Finding, Rule
from .content_as_string import filter_name_end

DOC = """\
## What it does
Finds tool-call `arguments` (`tool_call.function.arguments`, `tool_call['arguments']`, or a
variable set from one) used as a mapping — `|items`, `|dictsort`, `.items()`, `.keys()`,
`.values()`, `.get()`, `arguments['key']`, `arguments.key` — or passed through `|tojson`, with no
enclosing `{% if %}` testing its type (`is string`, `is mapping`).

## Why is this bad?
OpenAI-style clients send `arguments` as a JSON *string*; transformers' examples send a dict.
A template that iterates it fails on a string, and one that always applies `|tojson` encodes a
string a second time (`"{\\"city\\": \\"Paris\\"}"`), which the model was never trained on.

## Example
```jinja
{%- for call in messages[0].tool_calls %}{{- call.function.arguments|tojson }}{%- endfor %}
```

## Use instead
```jinja
{%- for call in messages[0].tool_calls %}{%- if call.function.arguments is string %}{{- call.function.arguments }}{%- else %}{{- call.function.arguments|tojson }}{%- endif %}{%- endfor %}
```

## Fix safety
No fix.
"""

_MAPPING_FILTERS = frozenset({"items", "dictsort"})
_MAPPING_METHODS = frozenset({"items", "keys", "values", "get"})


def check(node, ctx: LintContext) -> Iterable[Finding]:
    if (node.name not in ctx.assignments) if type(node) is A.Name else last_key(node) != "arguments":
        return ()  # (at a glance: a name never assigned, an attribute or item other than 'arguments')
    return _findings(node, ctx)


def _findings(node, ctx: LintContext) -> Iterator[Finding]:
    if isinstance(node, A.Name):
        if node.name not in ctx.assignments or not ctx.is_key_ref(node, "arguments"):
            return
        if isinstance(ctx.parent_of(node), (A.Set, A.With)):
            return
    elif last_key(node) != "arguments" or not ctx.is_key_ref(node, "arguments"):
        return
    key = path_key(node) or ctx.source_text(node)
    if ctx.guarded(key, ("string", "mapping")):
        return
    parent = ctx.parent_of(node)
    how = None
    end = node.span.end
    if isinstance(parent, (A.Getattr, A.Getitem)) and parent.node is node:
        above = ctx.parent_of(parent)
        called = isinstance(above, A.Call) and above.node is parent
        attr = last_key(parent)
        if isinstance(parent, A.Getattr) and attr in _MAPPING_METHODS and called:
            how = f"calls .{attr}() on it"
        elif attr is not None and not called:
            how = f"reads the key {attr!r} from it"
        end = parent.span.end
    elif isinstance(parent, A.Filter) and parent.node is node:
        if parent.name in _MAPPING_FILTERS:
            how = f"applies |{parent.name}"
        elif parent.name == "tojson":
            how = "always applies |tojson (a JSON string is encoded twice)"
        end = filter_name_end(ctx, parent)
    if how is None:
        return
    yield Finding(node.span.start, end, f"tool-call arguments '{ctx.source_text(node)}' can be a dict or a JSON string, "
                  f"but the template {how} without checking which")


RULE = Rule("TC001", "tool-arguments-shape", "warning", "Tool-call arguments assumed to be a mapping, or always |tojson-ed",
            DOC, (A.Getattr, A.Getitem, A.Name), check)
