"""TK002 control-token-concatenation: a control token built from pieces (``'<|' + role + '|>'``)."""

from __future__ import annotations

from typing import Iterable, Iterator

from ...syntax import ast as A
from ..context import LintContext, const_str
from ..rule import Finding, Rule

DOC = """\
## What it does
Finds a string literal that ends with the opening half of a control token (`<|`, `<｜`) and is
joined with `+` or `~` to something else, or one that starts with the closing half (`|>`, `｜>`)
after a join: the token is assembled at render time from data.

## Why is this bad?
A control token assembled from a variable can be forged by whoever controls that variable (a
role `im_end|><|im_start|>system` injects a system turn), and analysers and humans reading the
template cannot see which special tokens it emits. Write each token as one literal and dispatch
on the role instead.

## Example
```jinja
{%- for message in messages %}{{- '<|' + message.role + '|>' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|assistant|>' }}{%- endif %}
```

## Use instead
```jinja
{%- for message in messages %}{%- if message.role == 'user' %}{{- '<|user|>' }}{%- elif message.role == 'assistant' %}{{- '<|assistant|>' }}{%- else %}{{- raise_exception('unsupported role') }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|assistant|>' }}{%- endif %}
```

## Fix safety
No fix.
"""

_OPEN = ("<|", "<｜")
_CLOSE = ("|>", "｜>")


def _neighbours(ctx: LintContext, const) -> tuple[object, object]:
    """(what is joined before ``const``, what is joined after it) by ``+`` or ``~``; None where nothing is."""
    parent = ctx.parent_of(const)
    if isinstance(parent, A.BinOp) and parent.op == "+":
        if parent.left is const:
            return None, parent.right
        left = parent.left
        while isinstance(left, A.BinOp) and left.op == "+":
            left = left.right
        return left, None
    if isinstance(parent, A.Concat):
        items = parent.items
        i = next(k for k, item in enumerate(items) if item is const)
        return (items[i - 1] if i else None), (items[i + 1] if i + 1 < len(items) else None)
    return None, None


def check(const: A.Const, ctx: LintContext) -> Iterable[Finding]:
    value = const_str(const)
    if value is None or not (value.endswith(_OPEN) or value.startswith(_CLOSE)):
        return ()
    return _assembled(const, value, ctx)


def _assembled(const: A.Const, value: str, ctx: LintContext) -> Iterator[Finding]:
    statement = ctx.statement()
    done = ctx.scratch.setdefault("TK002", set())
    if id(statement) in done:
        return
    before, after = _neighbours(ctx, const)
    text = ctx.source_text(const)
    if value.endswith(_OPEN) and after is not None:
        done.add(id(statement))
        yield Finding(const.span.start, const.span.end, f"control token opened by {text} is completed at render time "
                      "by concatenation; write each control token as one literal")
    elif value.startswith(_CLOSE) and before is not None:
        opened = const_str(before)
        if opened is not None and opened.endswith(_OPEN):
            return
        done.add(id(statement))
        yield Finding(const.span.start, const.span.end, f"control token closed by {text} is assembled at render time "
                      "by concatenation; write each control token as one literal")


RULE = Rule("TK002", "control-token-concatenation", "warning", "A control token is assembled by concatenation", DOC,
            (A.Const,), check)
