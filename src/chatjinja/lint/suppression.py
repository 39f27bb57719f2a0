"""Inline suppressions: ``{# chatjinja: ignore[CODE,...] #}`` (next line) and ``ignore-file[CODE,...]``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Suppression", "find_suppressions"]

_RE = re.compile(r"^\s*chatjinja:\s*(ignore|ignore-file)\[([^\]]*)\]\s*$")


@dataclass(eq=False)
class Suppression:
    start: int  # offsets of the comment tag
    end: int
    body_start: int  # offsets of the comment's text (between the markers)
    body_end: int
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


def find_suppressions(comments, line_of) -> list[Suppression]:
    """The suppressions among the template's ``Comment`` nodes."""
    out = []
    for comment in comments:
        m = _RE.match(comment.text)
        if m is None:
            continue
        codes = tuple(c.strip().upper() for c in m.group(2).split(",") if c.strip())
        file_wide = m.group(1) == "ignore-file"
        tag = comment.tag
        span = tag.span
        body_start = span.start + 2 + (tag.strip_left or tag.keep_left)
        body_end = body_start + len(comment.text)
        out.append(Suppression(span.start, span.end, body_start, body_end, file_wide, codes,
                               0 if file_wide else line_of(span.end) + 1))
    return out
