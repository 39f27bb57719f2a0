"""DT001 strftime-without-override: the current date is written into the prompt with no caller override."""

from __future__ import annotations

from typing import Iterator

from ..model import TemplateModel
from ..rule import Finding, Rule

DOC = """\
## What it does
Finds `strftime_now(...)` whose result reaches the prompt (printed, or set to a variable that is
printed) where no enclosing `{% if %}` tests a caller-supplied variable with `is defined` /
`is not defined` — the pattern `{% if date_string is not defined %}{% set date_string =
strftime_now(...) %}{% endif %}` that lets the caller pin the date.

## Why is this bad?
The prompt then changes every day: caches miss, evaluations are not reproducible, and tests of
the template cannot pin its output.

## Example
```jinja
{{- 'Today is ' + strftime_now('%d %B %Y') }}
```

## Use instead
```jinja
{%- if date_string is not defined %}{%- set date_string = strftime_now('%d %B %Y') %}{%- endif %}{{- 'Today is ' + date_string }}
```

## Fix safety
No fix.
"""


def _printed_names(model: TemplateModel) -> set[str]:
    return {t.value for tag in model.tags if tag.kind == "var" for t in tag.tokens if t.kind == "name"}


def check(model: TemplateModel) -> Iterator[Finding]:
    if "strftime_now" not in model.text:
        return
    printed = None
    for tag in model.tags:
        toks = tag.tokens
        for i, tok in enumerate(toks):
            if not (tok.is_name("strftime_now") and i + 1 < len(toks) and toks[i + 1].is_op("(")):
                continue
            if any(test in ("defined", "undefined") and key != "strftime_now" for key, test in model.guards(tag)):
                continue
            if tag.kind != "var":
                if tag.keyword != "set" or len(toks) < 3:
                    continue
                if printed is None:
                    printed = _printed_names(model)
                if toks[1].value not in printed:
                    continue
            yield Finding(tok.start, toks[i + 1].end, "strftime_now() writes the current date into the prompt and "
                          "the caller cannot override it; guard it with '{% if date_string is not defined %}'")


RULE = Rule("DT001", "strftime-without-override", "warning", "The current date is written with no caller override", DOC, check)
