"""``Diagnostic``: one finding of one rule at one span, with an optional fix."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..source import Span

__all__ = ["Diagnostic", "Edit", "Fix", "SEVERITIES", "severity_rank"]

# Ordered from least to most severe; the names are SARIF's result levels.
SEVERITIES = ("note", "warning", "error")


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity)


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``source[start:end]`` (0-based offsets) with ``text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class Fix:
    """A remedy: its title names what it does; ``safe`` fixes are applied by ``--fix``."""

    title: str
    edits: tuple[Edit, ...]
    safe: bool = True


@dataclass(frozen=True)
class Diagnostic:
    code: str
    name: str
    severity: str
    message: str
    span: Span
    path: str = "<string>"
    fix: Fix | None = field(default=None, compare=False)
    engines: tuple[str, ...] = ()  # PT rules: the engines predicted to render this differently from transformers

    def with_path(self, path: str) -> "Diagnostic":
        return replace(self, path=path)

    def sort_key(self) -> tuple:
        return (self.path, self.span.start, self.span.end, self.code, self.message)

    def to_dict(self) -> dict:
        out = {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "path": self.path,
            "span": self.span.to_dict(),
            "fix": None
            if self.fix is None
            else {
                "title": self.fix.title,
                "safe": self.fix.safe,
                "edits": [{"start": e.start, "end": e.end, "text": e.text} for e in self.fix.edits],
            },
        }
        if self.engines:
            out["engines"] = list(self.engines)
        return out
