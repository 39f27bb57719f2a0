"""JSON report, versioned: ``{"version": 1, "tool": ..., "diagnostics": [...], "summary": {...}}``.

Each diagnostic: code, name, severity (note|warning|error), message, path, span (1-based line and
column, exclusive end column, 0-based start/end offsets, columns in Unicode code points) and fix
(null, or title, safe and edits as 0-based [start, end) offsets with replacement text); a portability
(``PT``) diagnostic also has ``engines``, the engines predicted to render the template differently.
"""

from __future__ import annotations

import json
from typing import Sequence

from ..lint.diagnostic import SEVERITIES, Diagnostic

__all__ = ["SCHEMA_VERSION", "render", "to_document"]

SCHEMA_VERSION = 1


def to_document(diagnostics: Sequence[Diagnostic], *, tool_version: str = "") -> dict:
    return {
        "version": SCHEMA_VERSION,
        "tool": {"name": "chatjinja", "version": tool_version},
        "diagnostics": [d.to_dict() for d in diagnostics],
        "summary": {
            "total": len(diagnostics),
            "by_severity": {s: sum(1 for d in diagnostics if d.severity == s) for s in SEVERITIES},
            "fixable": sum(1 for d in diagnostics if d.fix is not None and d.fix.safe),
        },
    }


def render(diagnostics: Sequence[Diagnostic], *, tool_version: str = "") -> str:
    return json.dumps(to_document(diagnostics, tool_version=tool_version), indent=2, ensure_ascii=False) + "\n"
