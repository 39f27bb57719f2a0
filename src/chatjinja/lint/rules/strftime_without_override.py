"""DT001 strftime-without-override: the current date is written into the prompt with no caller override."""

from __future__ import annotations

from typing import Iterator

from ...syntax import ast as A
from ..context import LintContext
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

def _overridable(ctx: LintContext) -> bool:
    return any(count and test in ("defined", "undefined") and key != "strftime_now"
               for (key, test), count in ctx.active_tests.items())


def check(call: A.Call, ctx: LintContext) -> Iterator[Finding]:
    if not (isinstance(call.node, A.Name) and call.node.name == "strftime_now") or _overridable(ctx):
        return
    statement = ctx.statement()
    if isinstance(statement, A.Set):
        target = statement.target
        if not (isinstance(target, A.Name) and target.name in ctx.printed_names):
            return
    elif not isinstance(statement, A.Output):
        return
    paren = ctx.text.find("(", call.node.span.end)
    yield Finding(call.span.start, paren + 1, "strftime_now() writes the current date into the prompt and the caller "
                  "cannot override it; guard it with '{% if date_string is not defined %}'")


RULE = Rule("DT001", "strftime-without-override", "warning", "The current date is written with no caller override",
            DOC, (A.Call,), check)
