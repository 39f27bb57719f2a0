"""LN002 template-syntax: the template cannot be read (a tag or string never closes)."""

from __future__ import annotations

from typing import Iterator

from ..model import TemplateModel
from ..rule import Finding, Rule

DOC = """\
## What it does
Reports a template the linter cannot split into tags: a `{{`, `{%` or `{#` that is never closed,
a string that never ends, or a character jinja2 does not accept inside a tag. No other rule runs
on such a template. It is reported whatever `--select` says (a template that cannot be read
cannot be checked), unless `LN002` is ignored explicitly.

## Why is this bad?
transformers raises `TemplateSyntaxError` for the same template, so it renders nothing.

## Example
```jinja
{{- messages[0]['content'] -}
```

## Use instead
```jinja
{{- messages|length -}}
```

## Fix safety
No fix.
"""


def check(model: TemplateModel) -> Iterator[Finding]:
    return iter(())  # the runner reports scan errors


RULE = Rule("LN002", "template-syntax", "error", "The template cannot be read", DOC, check)
