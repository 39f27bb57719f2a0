"""TK001 bos-token-written: the template writes ``bos_token`` (a double BOS when the tokenizer adds one too)."""

from __future__ import annotations

from typing import Iterable, Iterator

from ...syntax import ast as A
from ..context import LintContext
from ..rule import Finding, Rule

DOC = """\
## What it does
Notes where the template writes `bos_token` into the prompt. When the tokenizer's configuration
is known (linting a `tokenizer_config.json`, or a template file next to one) and it says
`"add_bos_token": true`, the note becomes a warning. A template that sets `bos_token` itself
(`{% set bos_token = '<s>' %}`) writes its own text, not the tokenizer's token, and is left alone.

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


def _written(name: A.Name, ctx: LintContext) -> bool:
    statement = ctx.statement()
    if isinstance(statement, A.Output):
        return True
    return isinstance(statement, A.Set) and statement.target is not name


def finish(ctx: LintContext) -> Iterator[Finding]:
    if "bos_token" not in ctx.text or "bos_token" in ctx.assignments:
        return
    first = next((n for n in ctx.nodes(A.Name) if n.name == "bos_token" and n.span.start in ctx.scratch.get('TK001', ())), None)
    if first is None:
        return
    if ctx.add_bos_token:
        yield Finding(first.span.start, first.span.end, "the template writes bos_token and the tokenizer config sets "
                      "add_bos_token: true, so prompts get two BOS tokens", severity="warning")
    else:
        yield Finding(first.span.start, first.span.end, "the template writes bos_token; make sure the tokenizer does not "
                      "add a second one (add_bos_token)")


def check(name: A.Name, ctx: LintContext) -> Iterator[Finding]:
    if name.name == "bos_token" and _written(name, ctx):
        ctx.scratch.setdefault('TK001', set()).add(name.span.start)
    return ()


RULE = Rule("TK001", "bos-token-written", "note", "The template writes bos_token", DOC, (A.Name,), check, finish)
