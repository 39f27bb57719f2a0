"""Text report: ``path:line:col: CODE message``, the source line with a caret, then a summary by severity."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from ..lint.diagnostic import Diagnostic

__all__ = ["render"]

# Characters shown as "�" so a terminal never acts on them (bidi overrides, zero-width ...); one column each.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u2069\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)


def _visible(line: str) -> str:
    return _HIDDEN.sub("\ufffd", line)


def _excerpt(d: Diagnostic, text: str | None) -> list[str]:
    if text is None:
        return []
    lines = text.split("\n")
    if d.span.line > len(lines):
        return []
    line = lines[d.span.line - 1].rstrip("\r")
    col = d.span.column - 1
    if d.span.end_line == d.span.line:
        width = max(1, d.span.end_column - d.span.column)
    else:
        width = max(1, len(line) - col)
    prefix = "".join(c if c == "\t" else " " for c in line[:col])
    return [f"  {_visible(line)}", f"  {prefix}{'^' * width}"]


def _summary(diagnostics: Sequence[Diagnostic], files: int) -> str:
    if not diagnostics:
        return f"All checks passed ({files} template{'s' if files != 1 else ''})."
    counts = {s: sum(1 for d in diagnostics if d.severity == s) for s in ("error", "warning", "note")}
    parts = [f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n]
    fixable = sum(1 for d in diagnostics if d.fix is not None and d.fix.safe)
    unsafe = sum(1 for d in diagnostics if d.fix is not None and not d.fix.safe)
    line = f"Found {len(diagnostics)} problem{'s' if len(diagnostics) != 1 else ''} ({', '.join(parts)})"
    line += f" in {files} template{'s' if files != 1 else ''}."
    if fixable:
        line += f" {fixable} fixable with --fix."
    if unsafe:
        line += f" {unsafe} {'more ' if fixable else ''}fixable with --fix --unsafe-fixes (they change the prompt)."
    return line


def render(diagnostics: Sequence[Diagnostic], *, sources: Mapping[str, str] | None = None, files: int | None = None) -> str:
    """The report; ``sources`` maps a diagnostic's path to its template text (for the excerpt)."""
    sources = sources or {}
    out: list[str] = []
    for d in diagnostics:
        out.append(f"{d.path}:{d.span.line}:{d.span.column}: {d.code} {d.message}")
        out.extend(_excerpt(d, sources.get(d.path)))
    if out:
        out.append("")
    out.append(_summary(diagnostics, files if files is not None else max(len(sources), 1)))
    return "\n".join(out) + "\n"
