"""SC003 invisible-unicode: zero-width, bidirectional-control and tag characters in the template."""

from __future__ import annotations

import re
import unicodedata
from typing import Iterator

from ..context import LintContext
from ..rule import Finding, Rule

DOC = """\
## What it does
Reports invisible characters anywhere in the template — in string literals, in text between
tags and in comments: zero-width characters (U+200B–U+200D, U+2060–U+2064, U+FEFF, U+180E,
U+034F), bidirectional marks, embeddings, overrides and isolates (U+200E, U+200F, U+061C,
U+202A–U+202E, U+2066–U+2069), Unicode tag characters (U+E0000–U+E007F), variation selectors
(U+FE00–U+FE0F except VS-15/VS-16 after a visible symbol, U+E0100–U+E01EF), Hangul fillers
and the soft hyphen.

## Why is this bad?
They make a template read differently from what it renders ("Trojan Source"): a reviewer sees
`'user'` where the template compares against `'us\\u200ber'`, or reads text that a bidi override
reorders. Tag characters and variation selectors can smuggle whole hidden instructions into the
prompt, invisible in every editor.

## Example
```jinja
{{- 'You are a helpful\u200b assistant.' }}
```

## Use instead
```jinja
{{- 'You are a helpful assistant.' }}
```

## Fix safety
No fix: whether the character was meant to be there is for a human to decide.
"""

_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e007f\U000e0100-\U000e01ef]+"
)


def _is_emoji_presentation(text: str, start: int) -> bool:
    """VS-15/VS-16 right after a visible symbol (an emoji or dingbat) is ordinary emoji text."""
    run = text[start]
    if run not in "\ufe0e\ufe0f" or start == 0:
        return False
    return unicodedata.category(text[start - 1]) in ("So", "Sm", "Nd") or text[start - 1] in "#*"


def finish(ctx: LintContext) -> Iterator[Finding]:
    text = ctx.text
    for m in _INVISIBLE.finditer(text):
        if m.end() - m.start() == 1 and _is_emoji_presentation(text, m.start()):
            continue
        names = sorted({f"U+{ord(c):04X}" for c in m.group()})
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        yield Finding(m.start(), m.end(), f"{m.end() - m.start()} invisible character(s) ({shown}) in the template")


RULE = Rule("SC003", "invisible-unicode", "error", "Invisible or bidirectional Unicode in the template", DOC, finish=finish)
