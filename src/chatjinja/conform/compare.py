"""Where two renderings first differ, shown in both strings with whitespace made visible."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Difference", "first_difference", "visible", "whitespace_only"]

_VISIBLE = {" ": "␠", "\n": "↵", "\t": "⇥", "\r": "␍", "\u00a0": "⍽"}
_CONTEXT = 16


def visible(text: str) -> str:
    """``text`` with spaces, newlines, tabs and carriage returns replaced by ``␠ ↵ ⇥ ␍``."""
    return "".join(_VISIBLE.get(ch, ch) for ch in text)


@dataclass(frozen=True)
class Difference:
    """The first differing position: character offset, 1-based line/column in each string, excerpts around it.

    When the texts are equal but the tokens are not, ``offset`` is -1 and ``token_index`` and the two
    token pieces say where (see :meth:`at_token`).
    """

    offset: int
    template_line: int
    template_column: int
    template_excerpt: str
    reference_excerpt: str
    token_index: int | None = None
    template_token: str | None = None
    reference_token: str | None = None

    def to_dict(self) -> dict:
        return {
            "offset": self.offset,
            "template_line": self.template_line,
            "template_column": self.template_column,
            "template": self.template_excerpt,
            "reference": self.reference_excerpt,
            "token_index": self.token_index,
            "template_token": self.template_token,
            "reference_token": self.reference_token,
        }

    @classmethod
    def at_token(cls, index: int, template_token: str | None, reference_token: str | None) -> "Difference":
        """Same text, different tokens: the first differing token (``offset`` is -1)."""
        return cls(-1, 0, 0, "", "", index, template_token, reference_token)

    def describe(self) -> str:
        if self.offset < 0:
            return (f"same text, first differing token {self.token_index}: "
                    f"template {self.template_token!r} | reference {self.reference_token!r}")
        where = f"offset {self.offset} (template line {self.template_line}, column {self.template_column})"
        return f"first difference at {where}: template {self.template_excerpt} | reference {self.reference_excerpt}"


def _excerpt(text: str, offset: int) -> str:
    start = max(0, offset - _CONTEXT)
    end = min(len(text), offset + _CONTEXT)
    before = ("…" if start > 0 else "") + visible(text[start:offset])
    after = visible(text[offset:end]) + ("…" if end < len(text) else "")
    marker = "⟦" + (after[:1] if offset < len(text) else "∅") + "⟧"
    return f"«{before}{marker}{after[1:] if offset < len(text) else ''}»"


def first_difference(template_text: str, reference_text: str) -> Difference | None:
    """``None`` when equal; otherwise the first differing character, marked ``⟦x⟧`` in both excerpts (``⟦∅⟧``: the string ended)."""
    if template_text == reference_text:
        return None
    limit = min(len(template_text), len(reference_text))
    offset = next((i for i in range(limit) if template_text[i] != reference_text[i]), limit)
    line = template_text.count("\n", 0, offset) + 1
    column = offset - (template_text.rfind("\n", 0, offset) + 1) + 1
    return Difference(offset, line, column, _excerpt(template_text, offset), _excerpt(reference_text, offset))


def whitespace_only(template_text: str, reference_text: str) -> bool:
    """True when the strings differ but are equal once all whitespace is removed."""
    return template_text != reference_text and re.sub(r"\s+", "", template_text) == re.sub(r"\s+", "", reference_text)
