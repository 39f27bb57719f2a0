"""LN003 lint-limits: the template is too large or nested too deep for the linter to read within its budgets."""

from __future__ import annotations

from ..rule import Rule

DOC = """\
## What it does
Reports a template the linter does not read because it is beyond the static half's source limits,
which are the renderer's budgets with the same defaults (`chatjinja.limits`, docs/reference/budgets.md):
more than 1,048,576 characters (`max_source_chars`; the largest template in our corpus of 385 has
under 20,000), brackets and blocks (`if`, `for`, `macro` ...) nested more than 48 deep
(`max_source_nesting`; corpus templates nest at most 12 deep), or a parsed tree more than 192
levels deep (`MAX_TREE_DEPTH`, 4 x 48: long operator chains or attribute paths; corpus: at most
29). The parser, the analyser and the renderer refuse the same templates. No other rule runs on
such a template. A template within those limits is linted until it has 1,000 findings
(`MAX_FINDINGS`; the most any corpus template has is 38, with every rule selected): the next
finding is reported as an `LN003` at its position, and nothing after it is checked (nor are unused
suppressions reported, `LN001`). Like `LN002`, it is reported whatever `--select` says, unless
`LN003` is ignored explicitly.

## Why is this bad?
No chat template is that large or that deep; one that is was most likely generated to exhaust
the tools that read it. Nothing in it has been checked.

## Example
With the nesting limit lowered to 5 (the tests do this; the real limit is 48):
```jinja
{%- if a %}{%- if b %}{%- if c %}{%- if d %}{%- if e %}{%- if f %}{{- 'deep' }}{%- endif %}{%- endif %}{%- endif %}{%- endif %}{%- endif %}{%- endif %}
```

## Use instead
```jinja
{%- if a %}{%- if b %}{{- 'shallow' }}{%- endif %}{%- endif %}
```

## Fix safety
No fix.
"""

RULE = Rule("LN003", "lint-limits", "error", "The template is too large or too deep to lint", DOC)
