"""The conformance report: per-case results, and its text, JSON and Markdown-table forms (pure functions)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .compare import Difference, visible

__all__ = ["CaseResult", "ConformanceReport", "STATUSES", "format_json", "format_markdown_table", "format_text"]

# match: identical; both-rejected: the template raised and the reference rejected the conversation.
STATUSES = ("match", "mismatch", "template-error", "reference-rejected", "both-rejected")
AGREEING = ("match", "both-rejected")


@dataclass
class CaseResult:
    """One conversation: its status, the level compared at (``tokens`` or ``text``), both sides and the causes found."""

    name: str
    status: str
    level: str | None = None
    template_text: str | None = None
    reference_text: str | None = None
    template_error: str | None = None
    reference_error: str | None = None
    difference: Difference | None = None
    causes: list[str] = field(default_factory=list)
    cause_codes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return self.status in AGREEING

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "level": self.level,
            "template_text": self.template_text,
            "reference_text": self.reference_text,
            "template_error": self.template_error,
            "reference_error": self.reference_error,
            "difference": self.difference.to_dict() if self.difference else None,
            "causes": list(self.causes),
            "cause_codes": list(self.cause_codes),
            "notes": list(self.notes),
        }


@dataclass
class ConformanceReport:
    """A template compared with mistral-common for one tokenizer version over a conversation suite."""

    template: str
    version: str
    form: str
    reference: str
    cases: list[CaseResult]

    @property
    def ok(self) -> bool:
        """Every case matched (or both sides rejected it)."""
        return all(case.agrees for case in self.cases)

    def counts(self) -> dict[str, int]:
        return {status: sum(1 for c in self.cases if c.status == status) for status in STATUSES}

    def case(self, name: str) -> CaseResult:
        for result in self.cases:
            if result.name == name:
                return result
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "template": self.template,
            "against": f"mistral-common:{self.version}",
            "form": self.form,
            "reference": self.reference,
            "ok": self.ok,
            "counts": self.counts(),
            "cases": [case.to_dict() for case in self.cases],
        }


def format_json(report: ConformanceReport | list[ConformanceReport]) -> str:
    data = [r.to_dict() for r in report] if isinstance(report, list) else report.to_dict()
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _status_cell(case: CaseResult, with_causes: bool = False) -> str:
    if case.status == "match":
        return f"match ({case.level})"
    if with_causes and case.cause_codes:
        return f"{case.status}: {', '.join(case.cause_codes)}"
    return case.status


def format_text(report: ConformanceReport, verbose: bool = False) -> str:
    lines = [
        f"{report.template} against mistral-common:{report.version} ({report.form}: {report.reference})",
        "",
    ]
    width = max((len(c.name) for c in report.cases), default=4)
    for case in report.cases:
        lines.append(f"  {case.name.ljust(width)}  {_status_cell(case)}")
        if case.difference is not None:
            lines.append(f"  {'':{width}}    {case.difference.describe()}")
        if case.template_error:
            lines.append(f"  {'':{width}}    template raised: {case.template_error}")
        if case.reference_error:
            lines.append(f"  {'':{width}}    reference rejected: {case.reference_error}")
        for cause in case.causes:
            lines.append(f"  {'':{width}}    cause: {cause}")
        for note in case.notes:
            lines.append(f"  {'':{width}}    note: {note}")
        if verbose and not case.agrees:
            if case.template_text is not None:
                lines.append(f"  {'':{width}}    template:  {visible(case.template_text)}")
            if case.reference_text is not None:
                lines.append(f"  {'':{width}}    reference: {visible(case.reference_text)}")
    counts = ", ".join(f"{n} {status}" for status, n in report.counts().items() if n)
    verdict = "conforms" if report.ok else "differs"
    lines += ["", f"{len(report.cases)} cases: {counts} — {verdict}"]
    return "\n".join(lines) + "\n"


def format_markdown_table(reports: list[ConformanceReport]) -> str:
    """One row per case, one column per report (template against its version), cause codes after the status;
    ``—`` where a report lacks the case."""
    headers = [f"{r.template} vs {r.version}" for r in reports]
    names: list[str] = []
    for report in reports:
        for case in report.cases:
            if case.name not in names:
                names.append(case.name)
    lines = ["| case | " + " | ".join(headers) + " |", "|---|" + "---|" * len(reports)]
    for name in names:
        cells = []
        for report in reports:
            try:
                cells.append(_status_cell(report.case(name), with_causes=True))
            except KeyError:
                cells.append("—")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
