"""LN003 lint-limits: the template is too large or nested too deep for the linter to read within its budgets."""

from __future__ import annotations

from ..rule import Rule

DOC = """\
## What it does
Reports a template the linter does not read because it is beyond the static half's source limits
(`chatjinja.limits`, docs/reference/budgets.md). Two are the renderer's budgets with the same
defaults: more than 1,048,576 characters (`max_source_chars`; the largest template in our corpus of
385 has under 20,000), and brackets and blocks (`if`, `for`, `macro` ...) nested more than 48 deep
(`max_source_nesting`; corpus templates nest at most 12 deep), with a parsed tree at most 192 levels
deep (`MAX_TREE_DEPTH`, 4 x 48: long operator chains or attribute paths; corpus: at most 29). The
parser, the analyser and the renderer refuse the same templates for these. The third is the static
half's own: more than 100,000 tokens (`max_source_tokens`; the corpus's most is 2,676), which bounds
what parsing, analysing and linting any template costs. The renderer counts no tokens: its compile
budget (half its timeout) stops by time instead, and at the defaults it refused every 100,000-token
shape measured (jinja2 takes 1.2-3.3 s to compile them; benchmarks/README.md). The parser and the
analyser refuse the same templates as the linter. No other rule runs on such a template. A template
within those limits is linted until it has 1,000 findings (`MAX_FINDINGS`; the most any corpus
template has is 38, with every rule selected): the next finding is reported as an `LN003` at its
position, and nothing after it is checked (nor are unused suppressions reported, `LN001`). Like
`LN002`, it is reported whatever `--select` says, unless `LN003` is ignored explicitly.

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
