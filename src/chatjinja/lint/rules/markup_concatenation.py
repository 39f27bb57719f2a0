"""JN002 markup-concatenation: a ``|safe`` (Markup) value joined to plain strings with ``+``."""

from __future__ import annotations

from typing import Iterator

from ..lexer import Token
from ..model import TemplateModel
from ..rule import Finding, Rule

DOC = """\
## What it does
Finds `+` between a value that went through `|safe` (or `|escape`/`|e`/`|forceescape`, which
also return `markupsafe.Markup`) and anything else: a variable set from `...|safe`, or an inline
`(x|safe)`.

## Why is this bad?
`Markup + str` and `str + Markup` HTML-escape the plain side, even though transformers renders
with autoescape off: `'[TOOL_CALLS]' + name + '[ARGS]' + (arguments|tojson|safe)` turns a tool
named `get_a&b's` into `get_a&amp;b&#39;s`. `|safe` is never needed in a chat template. (`~` is
not affected: without autoescape jinja2 joins its operands as plain strings.)

## Example
```jinja
{%- set name = messages[0]['name']|safe %}{{- '[NAME]' + name }}
```

## Use instead
```jinja
{%- set name = messages[0]['name'] %}{{- '[NAME]' + name }}
```

## Fix safety
No fix is applied by `--fix`; removing `|safe` changes the output exactly where escaping happened.
"""

MARKUP_FILTERS = frozenset({"safe", "escape", "e", "forceescape"})


def _markup_names(model: TemplateModel) -> dict[str, Token]:
    """Variables some assignment gives a Markup value → the ``safe`` (``escape`` ...) filter token that did it."""
    out: dict[str, Token] = {}
    for name, values in model.assignments.items():
        for _tag, value in values:
            for i, tok in enumerate(value[:-1]):
                if tok.is_op("|") and value[i + 1].kind == "name" and value[i + 1].value in MARKUP_FILTERS:
                    # only when the filter applies to the whole value (no + / ~ after it)
                    if not any(t.is_op("+", "~") for t in value[i + 2 :]):  # "x|safe ~ y" is a plain str
                        out.setdefault(name, value[i + 1])
    return out


def check(model: TemplateModel) -> Iterator[Finding]:
    text = model.text
    if "safe" not in text and "escape" not in text and "|e" not in text and "| e" not in text:
        return
    markup = _markup_names(model)
    for tag in model.tags:
        toks = tag.tokens
        for i, tok in enumerate(toks):
            joined = (i > 0 and toks[i - 1].is_op("+")) or (i + 1 < len(toks) and toks[i + 1].is_op("+"))
            if tok.kind == "name" and tok.value in markup and joined and not (i > 0 and toks[i - 1].is_op(".")):
                nxt = toks[i + 1] if i + 1 < len(toks) else None
                if nxt is not None and nxt.is_op(".", "[", "|", "("):
                    continue
                filt = markup[tok.value]
                line = model.source.lines.position(filt.start)[0]
                yield Finding(tok.start, tok.end, f"'{tok.value}' is Markup (|{filt.value} on line {line}); "
                              "joining it with plain strings HTML-escapes them ('&' becomes '&amp;')")
            elif (tok.is_op("|") and i + 1 < len(toks) and toks[i + 1].kind == "name" and toks[i + 1].value in MARKUP_FILTERS
                  and i + 2 < len(toks) and toks[i + 2].is_op("+")):
                yield Finding(toks[i + 1].start, toks[i + 1].end, f"a |{toks[i + 1].value} value is joined with "
                              f"'{toks[i + 2].value}': the plain side gets HTML-escaped ('&' becomes '&amp;')")


RULE = Rule("JN002", "markup-concatenation", "warning", "A |safe (Markup) value is joined to plain strings", DOC, check)
