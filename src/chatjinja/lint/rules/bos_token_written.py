"""TK001 bos-token-written: the template writes ``bos_token`` (a double BOS when the tokenizer adds one too)."""

from __future__ import annotations

from typing import Iterator

from ..model import TemplateModel
from ..rule import Finding, Rule

DOC = """\
## What it does
Notes where the template writes `bos_token` into the prompt. When the tokenizer's configuration
is known (linting a `tokenizer_config.json`, or a template file next to one) and it says
`"add_bos_token": true`, the note becomes a warning.

## Why is this bad?
Tokenizers that add BOS themselves put a second one in front of a prompt that already starts
with `bos_token`: `<s><s>[INST] ...`. Inference servers that tokenize the rendered text with
`add_special_tokens=True` hit this; rendering with `tokenize=False` hides it.

## Example
```jinja
{{- bos_token }}
```

## Use instead
```jinja
{{- '[INST]' }}
```

## Fix safety
No fix: whether BOS belongs in the template depends on how the prompt is tokenized.
"""


def check(model: TemplateModel) -> Iterator[Finding]:
    if "bos_token" not in model.text:
        return
    for tag in model.tags:
        if tag.kind != "var" and tag.keyword != "set":
            continue
        for tok in tag.tokens:
            if tok.is_name("bos_token"):
                if model.add_bos_token:
                    yield Finding(tok.start, tok.end, "the template writes bos_token and the tokenizer config sets "
                                  "add_bos_token: true, so prompts get two BOS tokens", severity="warning")
                else:
                    yield Finding(tok.start, tok.end, "the template writes bos_token; make sure the tokenizer does not "
                                  "add a second one (add_bos_token)")
                return


RULE = Rule("TK001", "bos-token-written", "note", "The template writes bos_token", DOC, check)
