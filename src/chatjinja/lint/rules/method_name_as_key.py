"""JN001 method-name-as-key: ``x.items`` / ``x.keys`` / ``x.values`` / ``x.get`` read without a call."""

from __future__ import annotations

from typing import Iterator

from ...syntax import ast as A
from ..context import LintContext
from ..diagnostic import Edit, Fix
from ..rule import Finding, Rule

DOC = """\
## What it does
Finds attribute reads `x.items`, `x.keys`, `x.values`, `x.get`, `x.update`, `x.pop`, `x.copy`
that are not called.

## Why is this bad?
jinja2 looks attributes up with `getattr` first, so on a dict `x.items` is the bound method
`dict.items`, never the value stored under the key `"items"` — and JSON schemas in tool
definitions do have an `items` key (array parameters). The template prints
`<built-in method items of dict object at 0x...>` or iterates a method and fails.

## Example
```jinja
{%- for tool in tools %}{{- tool.function.parameters.items|tojson }}{%- endfor %}
```

## Use instead
```jinja
{%- for tool in tools %}{{- tool.function.parameters['items']|tojson }}{%- endfor %}
```

## Fix safety
The fix is unsafe (applied only with `--fix --unsafe-fixes`): it rewrites `x.items` as
`x['items']`, which changes the output wherever the template read a method object instead of the
key — that change is its purpose.
"""

_METHODS = frozenset({"items", "keys", "values", "get", "update", "pop", "copy"})


def check(node: A.Getattr, ctx: LintContext) -> Iterator[Finding]:
    if node.attr not in _METHODS:
        return
    parent = ctx.parent_of(node)
    if isinstance(parent, A.Call) and parent.node is node:
        return
    if isinstance(parent, A.Test) and parent.name in ("defined", "undefined"):
        return
    if isinstance(node.node, A.Name) and node.node.name in ctx.namespaces:
        return  # ns.items of a namespace() is its attribute, not a dict method
    dot = ctx.text.rfind(".", node.node.span.end, node.span.end)
    if dot == -1:
        return
    seg = node.attr
    fix = Fix(f"Use ['{seg}']", (Edit(dot, node.span.end, f"['{seg}']"),), safe=False)
    yield Finding(dot, node.span.end, f"'{ctx.source_text(node)}' is the dict method .{seg}, not the key '{seg}'; "
                  f"use ['{seg}'] to read the key", fix)


RULE = Rule("JN001", "method-name-as-key", "warning", "A dict method name read as an attribute without a call", DOC,
            (A.Getattr,), check, fixable=True)
