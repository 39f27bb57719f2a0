"""GP001 generation-prompt-unread: a per-turn assistant header but ``add_generation_prompt`` never read."""

from __future__ import annotations

import re
from typing import Iterator

from ..model import TemplateModel
from ..rule import Finding, Rule

DOC = """\
## What it does
Finds templates that never read `add_generation_prompt` although, inside the message loop, they
write a per-turn header that names the role: the role itself (`'<|im_start|>' + message.role`)
or a literal assistant header (`<|im_start|>assistant`, `<|start_header_id|>assistant`,
`<start_of_turn>model`, `<|assistant|>` ...).

## Why is this bad?
`apply_chat_template(..., add_generation_prompt=True)` is how every inference server asks for
the assistant header that starts the model's reply. A template that ignores it makes the model
continue the user's turn instead of answering.

## Example
```jinja
{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' }}{%- endfor %}
```

## Use instead
```jinja
{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
```

## Fix safety
No fix: the header to add is model-specific.
"""

# "assistant" as a header ("<|assistant|>", "<|im_start|>assistant", "Assistant:", "[ASSISTANT]", "### Assistant\n"),
# not as a word in a message ("assistant message contents"); and the openers that put a role after them.
_HEADER = re.compile(
    r"(?:<\|?|\[|#+ ?|\b)assistant(?:\|?>|\]|:|\n|<)|<start_of_turn>model|<\|im_start\|>|<\|start_header_id\|>|<\|model\|>",
    re.I,
)


def check(model: TemplateModel) -> Iterator[Finding]:
    if "add_generation_prompt" in model.text:
        for tag in model.tags:
            if any(t.is_name("add_generation_prompt") for t in tag.tokens):
                return
    for tag in model.tags:
        if tag.kind != "var" or not any(b.keyword == "for" for b in tag.scope):
            continue
        toks = tag.tokens
        if any(t.is_name("raise_exception") for t in toks):
            continue
        # strings passed as call arguments (macro parameters) are not written as they are
        header = any(t.kind == "string" and _HEADER.search(t.literal) and not _in_call(toks, i) for i, t in enumerate(toks))
        if not header:
            for p, n in model.refs(tag, "role"):
                j = p.ends[n]
                if not (j < len(toks) and (toks[j].is_op("==", "!=") or toks[j].is_name("in", "is"))):
                    header = True
                    break
        if header:
            yield Finding(tag.start, tag.end, "the template writes a per-turn role header but never reads "
                          "add_generation_prompt, so it cannot open the assistant's reply")
            return
    for text in model.texts:
        if text.kept_end > text.kept_start and _HEADER.search(model.text, text.kept_start, text.kept_end):
            yield Finding(text.kept_start, text.kept_end, "the template writes a per-turn role header but never "
                          "reads add_generation_prompt, so it cannot open the assistant's reply")
            return


def _in_call(toks, i: int) -> bool:
    depth = 0
    for j in range(i - 1, -1, -1):
        if toks[j].is_op(")", "]", "}"):
            depth += 1
        elif toks[j].is_op("(", "[", "{"):
            if depth == 0:
                return toks[j].is_op("(") and j > 0 and toks[j - 1].kind == "name"
            depth -= 1
    return False


RULE = Rule("GP001", "generation-prompt-unread", "warning", "add_generation_prompt is never read", DOC, check)
