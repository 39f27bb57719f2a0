"""Reporters: pure functions from diagnostics (and the rules that produced them) to text in one output format."""

from __future__ import annotations

from . import github, json, sarif, text

FORMATS = ("text", "json", "sarif", "github")

__all__ = ["FORMATS", "render_report"]


def render_report(fmt: str, diagnostics, *, rules, sources=None, tool_version: str = "", files: int | None = None) -> str:
    """Dispatch to ``report.<fmt>.render`` (the CLI's only entry point into this package); ``files``: how many
    templates were linted, for the text report's summary line."""
    if fmt == "text":
        return text.render(diagnostics, sources=sources or {}, files=files)
    if fmt == "json":
        return json.render(diagnostics, tool_version=tool_version)
    if fmt == "sarif":
        return sarif.render(diagnostics, rules=rules, tool_version=tool_version)
    if fmt == "github":
        return github.render(diagnostics)
    raise ValueError(f"unknown output format {fmt!r} (choose from {', '.join(FORMATS)})")
