"""Inline suppressions: ``{# chatjinja: ignore[CODE,...] #}`` (next line) and ``ignore-file[CODE,...]``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .lexer import Tag

__all__ = ["Suppression", "find_suppressions"]

_RE = re.compile(r"^\s*chatjinja:\s*(ignore|ignore-file)\[([^\]]*)\]\s*$")


@dataclass(eq=False)
class Suppression:
    tag: Tag
    file_wide: bool
    codes: tuple[str, ...]
    line: int  # the line it applies to (file-wide: 0)
    used: set[str] = field(default_factory=set)

    def covers(self, code: str, line: int) -> str | None:
        """The listed code (or prefix) that silences ``code`` on ``line``, if any."""
        if not self.file_wide and line != self.line:
            return None
        for listed in self.codes:
            if code.startswith(listed):
                return listed
        return None


def find_suppressions(text: str, tags: list[Tag], line_of) -> list[Suppression]:
    out = []
    for tag in tags:
        if tag.kind != "comment":
            continue
        m = _RE.match(text[tag.inner_start : tag.inner_end])
        if m is None:
            continue
        codes = tuple(c.strip().upper() for c in m.group(2).split(",") if c.strip())
        file_wide = m.group(1) == "ignore-file"
        out.append(Suppression(tag, file_wide, codes, 0 if file_wide else line_of(tag.end) + 1))
    return out
