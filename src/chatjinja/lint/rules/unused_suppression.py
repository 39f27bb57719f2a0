"""LN001 unused-suppression: a ``chatjinja: ignore[...]`` comment that silences nothing (the runner reports it)."""

from __future__ import annotations

from ..rule import Rule

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
The fix is safe: it removes the unused code from the comment's list (and the whole
`chatjinja: ignore[...]` text when no code is left) but keeps the comment tag and its `-`/`+`
markers, so what jinja2 trims around it stays the same: the fix never changes a render. (Deleting the tag
itself could change the whitespace around it.)
"""


RULE = Rule("LN001", "unused-suppression", "warning", "A suppression comment silences nothing", DOC, fixable=True)
