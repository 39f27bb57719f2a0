"""GitHub Actions workflow commands: ``::error file=...,line=...,col=...::message`` per diagnostic."""

from __future__ import annotations

from typing import Sequence

from ..lint.diagnostic import Diagnostic

__all__ = ["render"]

_LEVEL = {"error": "error", "warning": "warning", "note": "notice"}


def _data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(value: str) -> str:
    return _data(value).replace(":", "%3A").replace(",", "%2C")


def render(diagnostics: Sequence[Diagnostic]) -> str:
    lines = []
    for d in diagnostics:
        props = (
            f"file={_prop(d.path)},line={d.span.line},col={d.span.column},"
            f"endLine={d.span.end_line},endColumn={max(d.span.end_column, 1)},title={_prop(f'{d.code} {d.name}')}"
        )
        lines.append(f"::{_LEVEL[d.severity]} {props}::{_data(f'{d.code} {d.message}')}")
    return "".join(line + "\n" for line in lines)
