"""CT001 content-as-string: message ``content`` used as a string without an ``is string`` check."""

from __future__ import annotations

from typing import Iterator

from ..model import TemplateModel
from ..rule import Finding, Rule

DOC = """\
## What it does
Finds message `content` used as a string — concatenated with `+` or `~`, filtered with a string
filter (`|trim`, `|replace`, `|upper` ...), given a string method call (`.strip()`, `.split()`,
`.startswith()` ...) or searched with `in` — where no enclosing `{% if %}` tests it with
`is string` (or `is mapping` / `is iterable` / `is sequence`) and no earlier check raises when
it is not a string.

## Why is this bad?
transformers passes `content` through unchanged: multimodal and OpenAI-style clients send a list
of chunks (`[{"type": "text", "text": "..."}]`) and tool-calling assistant turns often send
`None`. Then `+` raises `TypeError`, `~` and `|trim` write the Python repr of the list into the
prompt, and `in` tests list membership instead of text.

## Example
```jinja
{%- for message in messages %}{{- '[INST]' + message['content'] + '[/INST]' }}{%- endfor %}
```

## Use instead
```jinja
{%- for message in messages %}{%- if message['content'] is string %}{{- '[INST]' + message['content'] + '[/INST]' }}{%- else %}{{- raise_exception('content must be a string') }}{%- endif %}{%- endfor %}
```

## Fix safety
No fix: what a list of chunks should become is the template author's decision.
"""

STRING_FILTERS = frozenset(
    "trim replace upper lower title capitalize striptags truncate wordwrap center indent wordcount urlize".split()
)
STRING_METHODS = frozenset(
    "strip lstrip rstrip split rsplit splitlines startswith endswith replace lower upper title capitalize find "
    "rfind index rindex count removeprefix removesuffix partition rpartition".split()
)


def usage(model: TemplateModel, tag, p, n) -> tuple[int, int, str] | None:
    """How ``p.key(n)`` is used as a string in ``tag``, as (start offset, end offset, description)."""
    toks = tag.tokens
    start, end_idx = toks[p.start].start, p.ends[n]
    if n < len(p.segments):
        method = p.segments[n]
        after = p.ends[n + 1]
        if method in STRING_METHODS and after < len(toks) and toks[after].is_op("(") and toks[after - 1].kind == "name":
            return start, toks[after - 1].end, f"calls .{method}() on it"
        return None
    nxt = toks[end_idx] if end_idx < len(toks) else None
    prev = toks[p.start - 1] if p.start > 0 else None
    if nxt is not None and nxt.is_op("|"):
        name = toks[end_idx + 1] if end_idx + 1 < len(toks) else None
        if name is not None and name.kind == "name" and name.value in STRING_FILTERS:
            return start, name.end, f"filters it with |{name.value}"
        return None
    if nxt is not None and nxt.is_op("+", "~"):
        return start, toks[end_idx - 1].end, f"concatenates it with '{nxt.value}'"
    if prev is not None and prev.is_op("+", "~"):
        return start, toks[end_idx - 1].end, f"concatenates it with '{prev.value}'"
    if prev is not None and prev.is_name("in"):
        first_in = next((i for i, t in enumerate(toks) if t.is_name("in")), None)
        if tag.keyword == "for" and first_in == p.start - 1:
            return None
        return start, toks[end_idx - 1].end, "searches it with 'in'"
    return None


def check(model: TemplateModel) -> Iterator[Finding]:
    for tag in model.tags:
        if tag.kind == "comment" or not tag.tokens or tag.keyword == "set" and _is_plain_alias(tag):
            continue
        for p, n in model.refs(tag, "content"):
            key = p.key(n)
            use = usage(model, tag, p, n)
            if use is None or model.guarded(tag, key):
                continue
            start, end, how = use
            expr = model.text[start : tag.tokens[p.ends[n] - 1].end]
            yield Finding(start, end, f"'{expr}' may be a list of chunks or None, but the template {how} "
                          "without an 'is string' check")


def _is_plain_alias(tag) -> bool:
    toks = tag.tokens
    return len(toks) >= 4 and toks[2].is_op("=") and all(t.kind == "name" or t.is_op(".", "[", "]") or t.kind in ("string", "int") for t in toks[3:])


RULE = Rule("CT001", "content-as-string", "warning", "Message content used as a string without a type check", DOC, check)
