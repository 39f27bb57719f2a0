"""SC001 template-loader: ``include`` / ``import`` / ``from`` / ``extends`` in a chat template."""

from __future__ import annotations

from typing import Iterator

from ...syntax import ast as A
from ..context import LintContext
from ..rule import Finding, Rule

DOC = """\
## What it does
Reports `{% include %}`, `{% import %}`, `{% from ... import %}` and `{% extends %}`.

## Why is this bad?
A chat template is one self-contained string; transformers' environment has no loader, so these
tags raise at render time — unless a runtime *does* configure a loader, in which case a template
from an untrusted model repository can read other files. Either way they do not belong in a chat
template. Use a `{% macro %}` inside the template instead.

## Example
```jinja
{%- include 'header.jinja' %}
```

## Use instead
```jinja
{%- macro header() %}{{- '[HEADER]' }}{%- endmacro %}{{- header() }}
```

## Fix safety
No fix.
"""

_KEYWORDS = {A.Include: "include", A.Import: "import", A.FromImport: "from", A.Extends: "extends"}


def check(node, ctx: LintContext) -> Iterator[Finding]:
    span = node.tag.span
    yield Finding(span.start, span.end, f"'{{% {_KEYWORDS[type(node)]} %}}' loads another template; chat templates must "
                  "be self-contained (transformers has no loader)")


RULE = Rule("SC001", "template-loader", "error", "The template loads other templates", DOC, tuple(_KEYWORDS), check)
