"""WS001 leaked-whitespace: indentation and newlines between tags that trim_blocks/lstrip_blocks keep."""

from __future__ import annotations

from typing import Iterator

from ..diagnostic import Edit, Fix
from ..lexer import Tag, Text
from ..model import TemplateModel
from ..rule import Finding, Rule

DOC = """\
## What it does
Finds text between tags that is made only of spaces, tabs and newlines and that survives the
whitespace control transformers uses (`trim_blocks=True`, `lstrip_blocks=True`): `trim_blocks`
removes only the first newline after a `%}` or `#}`, and `lstrip_blocks` removes only the spaces
and tabs before a `{%` or `{#` at the start of a line — never before `{{`, and never the newline
that ends the previous line when that line ends in `}}`. A `+` marker that keeps whitespace on
purpose is respected; a single separator between two `{{ }}` tags on the same line, or a bare
newline between two `{{ }}` tags, is taken as intended.

## Why is this bad?
Indentation that makes a template readable ends up in the prompt: the model sees newlines and
spaces its training data never had (the Mistral V1 template printed with indentation renders
`"<s>\\n         [INST] Hello ..."` instead of `"<s> [INST] Hello ..."`).

## Example
```jinja
{% for message in messages %}
    {{ loop.index }}
{% endfor %}
```

## Use instead
```jinja
{% for message in messages %}
    {{- loop.index }}
{%- endfor %}
```

## Fix safety
The fix adds one `-` marker per leaking run, on the tag after it (`{{-`, `{%-`) or, at the end
of the template, on the tag before it (`-}}`). It removes exactly the reported whitespace, which
changes the rendered output: removing that whitespace is the purpose of the fix.
"""

_LAYOUT = frozenset(" \t\r\n")


def _describe(s: str) -> str:
    return repr(s).replace("'", '"') if len(s) <= 24 else repr(s[:20]).replace("'", '"')[:-1] + '..."'


def _intended(t: Text, ws: str) -> bool:
    if t.left_kept_by_plus or t.right_kept_by_plus:
        return True
    if t.before is not None and t.after is not None and t.before.kind == "var" and t.after.kind == "var":
        # "{{ a }} {{ b }}" or "{{ a }}\n{{ b }}": a separator, not layout
        return ws in (" ", "\n", "\r\n") or "\n" not in ws
    return False


def _fix(t: Text) -> Fix | None:
    after, before = t.after, t.before
    if after is not None and after.left == "":
        return Fix(f"Add '-' to '{after.open_text}'", (Edit(after.start + 2, after.start + 2, "-"),))
    if before is not None and before.right == "" and after is None:
        close = before.end - 2
        return Fix(f"Add '-' to '{before.close_text}'", (Edit(close, close, "-"),))
    return None


def _where(tag: Tag | None, side: str) -> str:
    if tag is None:
        return "the start of the template" if side == "before" else "the end of the template"
    return f"'{tag.close_text}'" if side == "before" else f"'{tag.open_text}'"


def check(model: TemplateModel) -> Iterator[Finding]:
    text = model.text
    for t in model.texts:
        if t.raw or t.kept_end <= t.kept_start:
            continue
        ws = text[t.kept_start : t.kept_end]
        if not _LAYOUT.issuperset(ws) or _intended(t, ws):
            continue
        message = (
            f"whitespace {_describe(ws)} between {_where(t.before, 'before')} and {_where(t.after, 'after')} "
            "is written into the prompt (trim_blocks/lstrip_blocks do not remove it)"
        )
        yield Finding(t.kept_start, t.kept_end, message, _fix(t))


RULE = Rule("WS001", "leaked-whitespace", "warning", "Whitespace from template layout is written into the prompt",
            DOC, check, fixable=True)
