"""CT001 content-as-string: message ``content`` used as a string without an ``is string`` check."""

from __future__ import annotations

from typing import Iterable, Iterator

from ...syntax import ast as A
from ..context import LintContext, last_key, path_key
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


def filter_name_end(ctx: LintContext, node: A.Filter) -> int:
    """The offset just after a filter's name (``x|trim(...)`` → after ``trim``)."""
    at = ctx.text.find(node.name, node.node.span.end if node.node is not None else node.span.start, node.span.end)
    return at + len(node.name) if at != -1 else node.span.end


def usage(ctx: LintContext, ref) -> tuple[int, str] | None:
    """(end offset, description) when ``ref`` is used as a string by the node above it."""
    parent = ctx.parent_of(ref)
    if isinstance(parent, A.Filter) and parent.node is ref:
        if parent.name in STRING_FILTERS:
            return filter_name_end(ctx, parent), f"filters it with |{parent.name}"
        return None
    if isinstance(parent, A.Getattr) and parent.attr in STRING_METHODS:
        above = ctx.parent_of(parent)
        if isinstance(above, A.Call) and above.node is parent:
            return parent.span.end, f"calls .{parent.attr}() on it"
        return None
    if isinstance(parent, A.BinOp) and parent.op == "+":
        return ref.span.end, "concatenates it with '+'"
    if isinstance(parent, A.Concat):
        return ref.span.end, "concatenates it with '~'"
    if isinstance(parent, A.Operand) and parent.op in ("in", "not in") and parent.expr is ref:
        return ref.span.end, "searches it with 'in'"
    return None


def check(node, ctx: LintContext) -> Iterable[Finding]:
    if (node.name not in ctx.assignments) if type(node) is A.Name else last_key(node) != "content":
        return ()  # (at a glance: a name never assigned, an attribute or item other than 'content')
    return _findings(node, ctx)


def _findings(node, ctx: LintContext) -> Iterator[Finding]:
    if isinstance(node, A.Name):
        if node.name not in ctx.assignments or not ctx.is_key_ref(node, "content"):
            return
        if isinstance(ctx.parent_of(node), (A.Set, A.With)):
            return
    elif last_key(node) != "content" or not ctx.is_key_ref(node, "content"):
        return
    use = usage(ctx, node)
    if use is None:
        return
    key = path_key(node) or ctx.source_text(node)
    if ctx.guarded(key):
        return
    end, how = use
    yield Finding(node.span.start, end, f"'{ctx.source_text(node)}' may be a list of chunks or None, but the template "
                  f"{how} without an 'is string' check")


RULE = Rule("CT001", "content-as-string", "warning", "Message content used as a string without a type check", DOC,
            (A.Getattr, A.Getitem, A.Name), check)
