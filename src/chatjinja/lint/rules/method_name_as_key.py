"""JN001 method-name-as-key: ``x.items`` / ``x.keys`` / ``x.values`` / ``x.get`` read without a call."""

from __future__ import annotations

import re
from typing import Iterator

from ..diagnostic import Edit, Fix
from ..model import TemplateModel
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
The fix rewrites `x.items` as `x['items']`. It changes the output only where the template read
a method object instead of the key, which is its purpose.
"""

_METHODS = frozenset({"items", "keys", "values", "get", "update", "pop", "copy"})


_ATTRIBUTE_RE = re.compile(r"\.\s*(?:items|keys|values|get|update|pop|copy)\b")


def check(model: TemplateModel) -> Iterator[Finding]:
    search = _ATTRIBUTE_RE.search
    if search(model.text) is None:
        return
    for tag in model.tags:
        if not tag.tokens or search(model.text, tag.inner_start, tag.inner_end) is None:
            continue
        toks = tag.tokens
        for p in model.paths(tag):
            for k, seg in enumerate(p.segments):
                if seg not in _METHODS:
                    continue
                end = p.ends[k + 1]
                name_tok = toks[end - 1]
                if name_tok.kind != "name" or not toks[end - 2].is_op("."):
                    continue  # x['items'] already
                if end < len(toks) and toks[end].is_op("("):
                    continue
                if end < len(toks) and toks[end].is_name("is") and end + 1 < len(toks) and toks[end + 1].is_name("defined"):
                    continue
                dot = toks[end - 2]
                fix = Fix(f"Use ['{seg}']", (Edit(dot.start, name_tok.end, f"['{seg}']"),))
                expr = model.text[toks[p.start].start : name_tok.end]
                yield Finding(dot.start, name_tok.end, f"'{expr}' is the dict method .{seg}, not the key '{seg}'; "
                              f"use ['{seg}'] to read the key", fix)


RULE = Rule("JN001", "method-name-as-key", "warning", "A dict method name read as an attribute without a call", DOC,
            check, fixable=True)
