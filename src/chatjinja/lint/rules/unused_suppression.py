"""LN001 unused-suppression: a ``chatjinja: ignore[...]`` comment that silences nothing."""

from __future__ import annotations

from typing import Iterator

from ..model import TemplateModel
from ..rule import Finding, Rule

DOC = """\
## What it does
Reports a `{# chatjinja: ignore[CODE] #}` (next line) or `{# chatjinja: ignore-file[CODE] #}`
suppression that silences no diagnostic, or that names a code no rule has. The runner reports
this itself after the other rules ran; codes of rules not selected in a run are not reported.

## Why is this bad?
A stale suppression hides the next real finding of that rule on that line, and an unknown code
usually is a typo that suppresses nothing.

## Example
```jinja
{#- chatjinja: ignore[WS001] #}
{{- 'hello' }}
```

## Use instead
```jinja
{{- 'hello' }}
```

## Fix safety
No fix: deleting a comment tag can change which whitespace jinja2 trims around it.
"""


def check(model: TemplateModel) -> Iterator[Finding]:
    return iter(())  # computed by the runner once suppressions have been matched


RULE = Rule("LN001", "unused-suppression", "warning", "A suppression comment silences nothing", DOC, check)
