"""Applying fixes: merge the edits of diagnostics (safe ones, or unsafe ones too) into new source text, or show them as a diff.

A fix is *safe* when it cannot change any render of the template; one that changes the prompt
(removing leaked whitespace does, by design) is *unsafe* and applied only when asked for.
"""

from __future__ import annotations

import difflib
from typing import Iterable

from .diagnostic import Diagnostic
from .runner import lint

__all__ = ["apply_fixes", "fix_diffs", "fix_source", "unified_diff"]


def apply_fixes(text: str, diagnostics: Iterable[Diagnostic], *, unsafe: bool = False) -> tuple[str, int]:
    """Apply every safe fix (and unsafe ones with ``unsafe``) whose edits do not overlap an earlier one;
    returns (new text, fixes applied)."""
    fixes = [d.fix for d in diagnostics if d.fix is not None and (d.fix.safe or unsafe)]
    fixes.sort(key=lambda f: min(e.start for e in f.edits))
    taken: list[tuple[int, int]] = []
    edits = []
    applied = 0
    for fix in fixes:
        ranges = [(e.start, e.end) for e in fix.edits]
        if any((a < t and s < b) or (a == s and b == t) for a, b in ranges for s, t in taken):
            continue
        taken.extend(ranges)
        edits.extend(fix.edits)
        applied += 1
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        text = text[: edit.start] + edit.text + text[edit.end :]
    return text, applied


def fix_source(source: str, select: Iterable[str] | None = None, *, ignore: Iterable[str] | None = None,
               config=None, unsafe: bool = False, max_rounds: int = 10) -> str:
    """The template with every safe fix of the selected rules applied (repeated until nothing changes);
    ``unsafe=True`` applies the fixes that change the prompt too.

    ``fix_source(text, select=["WS001"], unsafe=True)`` removes only leaked whitespace.
    """
    select = list(select) if select is not None else None
    ignore = list(ignore) if ignore is not None else None
    for _ in range(max_rounds):
        diagnostics = lint(source, select=select, ignore=ignore, config=config)
        new, applied = apply_fixes(source, diagnostics, unsafe=unsafe)
        if not applied or new == source:
            return new
        source = new
    return source


def fix_diffs(text: str, path: str, diagnostics: Iterable[Diagnostic], select: Iterable[str] | None = None, *,
              ignore: Iterable[str] | None = None, config=None) -> list[str]:
    """The safe fixes' diff, then the unsafe fixes' diff (on top of the safe ones), each headed by its kind
    (what ``chatjinja lint --diff`` prints); ``diagnostics`` are the template's, to tell whether each kind has fixes."""
    found = list(diagnostics)
    out = []
    safe = fix_source(text, select=select, ignore=ignore, config=config) if any(
        d.fix is not None and d.fix.safe for d in found) else text
    if safe != text:
        out.append(f"# safe fixes (--fix): {path}\n" + unified_diff(text, safe, path))
    if any(d.fix is not None and not d.fix.safe for d in found):
        unsafe = fix_source(safe, select=select, ignore=ignore, config=config, unsafe=True)
        if unsafe != safe:
            out.append(f"# unsafe fixes, they change the rendered prompt (--fix --unsafe-fixes): {path}\n"
                       + unified_diff(safe, unsafe, path))
    return out


def unified_diff(old: str, new: str, path: str) -> str:
    return "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), fromfile=f"a/{path}", tofile=f"b/{path}")
    )
