"""Reporters: pure functions from diagnostics (and the rules that produced them) to text in one output format."""

from __future__ import annotations

FORMATS = ("text", "json", "sarif", "github")

__all__ = ["FORMATS", "render_report"]


def render_report(fmt: str, diagnostics, *, rules, sources=None, tool_version: str = "") -> str:
    """Dispatch to ``report.<fmt>.render`` (the CLI's only entry point into this package)."""
    if fmt == "text":
        from .text import render

        return render(diagnostics, sources=sources or {})
    if fmt == "json":
        from .json import render

        return render(diagnostics, tool_version=tool_version)
    if fmt == "sarif":
        from .sarif import render

        return render(diagnostics, rules=rules, tool_version=tool_version)
    if fmt == "github":
        from .github import render

        return render(diagnostics)
    raise ValueError(f"unknown output format {fmt!r} (choose from {', '.join(FORMATS)})")
