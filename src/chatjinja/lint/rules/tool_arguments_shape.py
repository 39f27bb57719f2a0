"""TC001 tool-arguments-shape: tool-call ``arguments`` assumed a mapping, or always ``|tojson``-ed."""

from __future__ import annotations

from typing import Iterator

from ..model import TemplateModel
from ..rule import Finding, Rule

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


def check(model: TemplateModel) -> Iterator[Finding]:
    for tag in model.tags:
        if tag.kind == "comment" or not tag.tokens:
            continue
        toks = tag.tokens
        for p, n in model.refs(tag, "arguments"):
            key = p.key(n)
            if model.guarded(tag, key, ("string", "mapping")):
                continue
            start = toks[p.start].start
            how = None
            end_tok = p.ends[n]
            if n < len(p.segments):
                seg = p.segments[n]
                after = p.ends[n + 1]
                called = after < len(toks) and toks[after].is_op("(")
                if seg in _MAPPING_METHODS and called:
                    how = f"calls .{seg}() on it"
                elif not called:
                    how = f"reads the key {seg!r} from it"
                end_tok = p.ends[n + 1]
            elif end_tok < len(toks) and toks[end_tok].is_op("|") and end_tok + 1 < len(toks):
                name = toks[end_tok + 1]
                if name.kind == "name" and name.value in _MAPPING_FILTERS:
                    how = f"applies |{name.value}"
                elif name.is_name("tojson"):
                    how = "always applies |tojson (a JSON string is encoded twice)"
                end_tok += 2
            if how is None:
                continue
            end = toks[end_tok - 1].end
            expr = model.text[start : toks[p.ends[n] - 1].end]
            yield Finding(start, end, f"tool-call arguments '{expr}' can be a dict or a JSON string, but the template "
                          f"{how} without checking which")


RULE = Rule("TC001", "tool-arguments-shape", "warning", "Tool-call arguments assumed to be a mapping, or always |tojson-ed",
            DOC, check)
