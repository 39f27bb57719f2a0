"""TK002 control-token-concatenation: a control token built from pieces (``'<|' + role + '|>'``)."""

from __future__ import annotations

from typing import Iterator

from ..model import TemplateModel
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


def check(model: TemplateModel) -> Iterator[Finding]:
    text = model.text
    if "<|" not in text and "|>" not in text and "｜" not in text:
        return
    for tag in model.tags:
        if not any(text.find(mark, tag.inner_start, tag.inner_end) != -1 for mark in ("<|", "|>", "<｜", "｜>")):
            continue
        toks = tag.tokens
        for i, tok in enumerate(toks):
            if tok.kind != "string":
                continue
            value = tok.literal
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            prev = toks[i - 1] if i > 0 else None
            if value.endswith(_OPEN) and nxt is not None and nxt.is_op("+", "~"):
                yield Finding(tok.start, tok.end, f"control token opened by {tok.value} is completed at render time "
                              "by concatenation; write each control token as one literal")
                break
            if value.startswith(_CLOSE) and prev is not None and prev.is_op("+", "~"):
                if i >= 2 and toks[i - 2].kind == "string" and toks[i - 2].literal.endswith(_OPEN):
                    continue
                yield Finding(tok.start, tok.end, f"control token closed by {tok.value} is assembled at render time "
                              "by concatenation; write each control token as one literal")
                break


RULE = Rule("TK002", "control-token-concatenation", "warning", "A control token is assembled by concatenation", DOC, check)
