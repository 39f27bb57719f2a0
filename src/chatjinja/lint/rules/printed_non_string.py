"""CT002 printed-non-string: ``{{ }}`` of a value that can be a list, dict or None (content, arguments, tools)."""

from __future__ import annotations

from typing import Iterator

from ..model import TemplateModel
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

_SUFFIXES = ("content", "arguments", "tool_calls")
_HARMLESS_FILTERS = frozenset({"trim", "safe", "e", "escape"})


def _printed_path(model: TemplateModel, tag):
    """The single path a ``{{ }}`` prints, if the expression is just a path with harmless filters."""
    toks = tag.tokens
    ps = model.paths(tag)
    if not ps or ps[0].start != 0:
        return None
    p = ps[0]
    i = p.end
    while i < len(toks):
        if toks[i].is_op("|") and i + 1 < len(toks) and toks[i + 1].kind == "name" and toks[i + 1].value in _HARMLESS_FILTERS:
            i += 2
            continue
        return None
    return p


def check(model: TemplateModel) -> Iterator[Finding]:
    text = model.text
    aliases = set().union(*(model.aliases_of(s) for s in _SUFFIXES))
    for tag in model.tags:
        if tag.kind != "var" or not tag.tokens:
            continue
        first = tag.tokens[0]
        if first.kind != "name" or (first.value not in aliases and not any(
            text.find(word, tag.inner_start, tag.inner_end) != -1 for word in ("content", "arguments", "tool_calls", "tools")
        )):
            continue
        p = _printed_path(model, tag)
        if p is None:
            continue
        key = None
        what = ""
        if len(p.segments) == 1 and (p.base in model.namespaces or p.base in model.chunk_vars):
            continue  # ns.content is the template's own value; block['content'] is a chunk's field
        if p.base == "tools" and not p.segments and "tools" not in model.assignments:
            key, what = "tools", "a list of tool definitions"
        else:
            for suffix in _SUFFIXES:
                if p.segments[-1:] == (suffix,) or (not p.segments and p.base in model.aliases_of(suffix)):
                    key = p.key()
                    what = {"content": "a list of chunks or None", "arguments": "a dict",
                            "tool_calls": "a list of dicts"}[suffix]
                    break
        if key is None or model.guarded(tag, key, ("string", "mapping", "iterable", "sequence", "none")):
            continue
        start, end = tag.tokens[0].start, tag.tokens[p.end - 1].end
        yield Finding(start, end, f"'{model.text[start:end]}' can be {what}, which {{{{ }}}} prints as a Python repr; "
                      "use |tojson or check its type")


RULE = Rule("CT002", "printed-non-string", "warning", "A value that can be a list, dict or None is printed with {{ }}",
            DOC, check)
