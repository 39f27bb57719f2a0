"""LN002 template-syntax: jinja2 (in the Hugging Face environment) cannot parse the template."""

from __future__ import annotations

from ..rule import Rule

DOC = """\
## What it does
Reports a template that jinja2, configured as transformers configures it (the `generation` tag,
loop controls, `trim_blocks`, `lstrip_blocks`), rejects: exactly one finding, with the parser's
message, at the line and column where parsing stops (an unclosed block, an unknown tag, a tag or
string that never closes ...). No other rule runs on such a template. It is reported whatever
`--select` says (a template that cannot be parsed cannot be checked), unless `LN002` is ignored
explicitly.

## Why is this bad?
transformers raises `TemplateSyntaxError` for the same template, so it renders nothing.

## Example
```jinja
{%- for message in messages %}{{- loop.index }}{%- endif %}
```

## Use instead
```jinja
{%- for message in messages %}{{- loop.index }}{%- endfor %}
```

## Fix safety
No fix.
"""

RULE = Rule("LN002", "template-syntax", "error", "jinja2 cannot parse the template", DOC)
