"""Template source text and the positions (spans) that every node, fact and diagnostic carries."""

from __future__ import annotations

import bisect
import re
from itertools import accumulate
from dataclasses import dataclass, field

_NEWLINE_RE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a source: 1-based line and column, exclusive end column, 0-based offsets.

    Columns count characters (Unicode code points), the convention SARIF calls
    ``unicodeCodePoints``.
    """

    line: int
    column: int
    end_line: int
    end_column: int
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.line}:{self.column}"

    def to_dict(self) -> dict[str, int]:
        return {
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "start": self.start,
            "end": self.end,
        }

    def cover(self, other: "Span") -> "Span":
        """The smallest span holding both spans."""
        first = self if self.start <= other.start else other
        last = self if self.end >= other.end else other
        return Span(first.line, first.column, last.end_line, last.end_column, first.start, last.end)


@dataclass(frozen=True)
class LineIndex:
    """Maps 0-based offsets to 1-based line/column positions."""

    text: str
    _starts: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Line breaks as jinja2's lexer counts them: \r\n, \r or \n
        starts = [0]
        if "\r" in self.text:
            starts += [m.end() for m in _NEWLINE_RE.finditer(self.text)]
        else:  # each line starts one past the end of the one before
            starts += accumulate(len(line) + 1 for line in self.text.split("\n"))
            starts.pop()  # (past the end of the text)
        object.__setattr__(self, "_starts", starts)

    def position(self, offset: int) -> tuple[int, int]:
        """(line, column), both 1-based, of a 0-based offset."""
        line = bisect.bisect_right(self._starts, offset) - 1
        return line + 1, offset - self._starts[line] + 1

    def span(self, start: int, end: int) -> Span:
        starts = self._starts
        line = bisect.bisect_right(starts, start) - 1
        column = start - starts[line] + 1
        if start <= end and (line + 1 == len(starts) or end < starts[line + 1]):  # within one line: one lookup
            return Span(line + 1, column, line + 1, column + end - start, start, end)
        end_line, end_column = self.position(end)
        return Span(line + 1, column, end_line, end_column, start, end)

    def line_text(self, line: int) -> str:
        """The text of a 1-based line, without its line break."""
        start = self._starts[line - 1]
        stop = self._starts[line] if line < len(self._starts) else len(self.text)
        return self.text[start:stop].rstrip("\r\n")

    @property
    def line_count(self) -> int:
        return len(self._starts)


@dataclass(frozen=True)
class Source:
    """A template's text and the name it is reported under (a path, a bundled name, ``<string>``)."""

    text: str
    name: str = "<string>"

    @property
    def lines(self) -> LineIndex:
        cached = self.__dict__.get("_lines")
        if cached is None:
            cached = LineIndex(self.text)
            object.__setattr__(self, "_lines", cached)
        return cached
