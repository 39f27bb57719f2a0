"""Text reports of the release gates: pure functions of a ``TemplateDiff`` or a ``ModelCheck``."""

from __future__ import annotations

from typing import Any

__all__ = ["diff_text", "check_text"]

_CONTEXT = 40


def _snippet(text: str, offset: int) -> str:
    start = max(0, offset - _CONTEXT // 2)
    end = offset + _CONTEXT
    body = repr(text[start:end])
    return ("..." if start > 0 else "") + body + ("..." if end < len(text) else "")


def diff_text(diff: Any, *, include_lint: bool = True) -> str:
    """The diff as text; ``include_lint=False`` leaves out the lint section and the notes (for golden files)."""
    lines = [f"--- {diff.old_name}", f"+++ {diff.new_name}", ""]
    if diff.capability_changes:
        lines.append("capabilities:")
        for change in diff.capability_changes:
            mark = {"lost": "-", "gained": "+", "changed": "~"}[change.change]
            lines.append(f"  {mark} {change.message}  [{change.field}: {change.old} -> {change.new}]")
    else:
        lines.append("capabilities: no change")
    if diff.special_token_changes:
        lines.append("special tokens:")
        for name, old, new in diff.special_token_changes:
            lines.append(f"  ~ {name}: {old!r} -> {new!r}")
    if not include_lint:
        pass
    elif diff.lint_changes:
        new = [c for c in diff.lint_changes if c.status == "new"]
        fixed = [c for c in diff.lint_changes if c.status == "fixed"]
        lines.append(f"lint: {len(new)} new, {len(fixed)} fixed")
        for c in new:
            lines.append(f"  + {c.code} {c.severity} {c.line}:{c.column} {c.message}")
        for c in fixed:
            lines.append(f"  - {c.code} {c.severity} {c.line}:{c.column} {c.message}")
    else:
        lines.append("lint: no new or fixed findings")
    differences = diff.render_differences
    if differences:
        lines.append(f"renders: {len(differences)} of {diff.conversations} conversations of the space differ")
        for d in differences:
            where = "error" if d.old_is_error or d.new_is_error else f"first difference at {d.line}:{d.column}"
            lines.append(f"  {d.conversation}: {where}")
            lines.append(f"    - {d.old if d.old_is_error else _snippet(d.old, d.offset)}")
            lines.append(f"    + {d.new if d.new_is_error else _snippet(d.new, d.offset)}")
    else:
        lines.append(f"renders: all {diff.conversations} conversations of the space render identically")
    for note in diff.notes if include_lint else ():
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"


def check_text(check: Any) -> str:
    lines = [f"{check.location}: {len(check.templates)} template(s)"]
    for t in check.templates:
        status = "used" if t.used else "not used"
        lines.append(f"  {t.where}  [{t.name}, {status}]")
        if t.capabilities is not None:
            lines.append(f"    supports: {t.capabilities}")
    if check.special_tokens:
        tokens = ", ".join(f"{k}={v!r}" for k, v in check.special_tokens.items())
        lines.append(f"  special tokens: {tokens}")
    if check.findings:
        lines.append("")
        for f in check.findings:
            where = f"{f.path}:{f.line}:{f.column}" if f.line else f.path
            lines.append(f"{where}: {f.severity}: {f.code} {f.message}")
    counts: dict[str, int] = {}
    for f in check.findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    summary = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in sorted(counts.items())) or "no findings"
    lines.append("")
    lines.append(f"checked {len(check.templates)} template(s): {summary}")
    for note in check.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"
