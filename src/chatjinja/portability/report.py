"""The portability report: each engine's renderings of the probe conversations compared with transformers', and its text, JSON and SARIF forms."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..loading import template_record
from ..conform.compare import Difference, first_difference, visible, whitespace_only
from ..report.sarif import INFORMATION_URI, SARIF_SCHEMA, _uri
from .budget import PortabilityBudget, RunClock
from .context import PortabilityCase, probe_cases
from .engines import ENGINE_NAMES, Engine, EngineResult, EngineUnavailable, available_engines

__all__ = ["CASE_STATUSES", "CaseComparison", "EngineComparison", "PortabilityReport", "compare_engines",
           "format_json", "format_sarif", "format_text", "check_portability"]

#: identical: the same text; both-fail: transformers and the engine both raised (the template rejects
#: the conversation everywhere); differs: both rendered, different text; fails: the engine raised where
#: transformers rendered; renders: the engine rendered where transformers raised; cut: not compared,
#: because a budget or limit stopped chatjinja's render or the engine's, or the run's time ran out first
CASE_STATUSES = ("identical", "both-fail", "differs", "fails", "renders", "cut")
AGREEING = ("identical", "both-fail")
#: the verdicts of an engine: every case agrees; some case does not; none differs but some were cut; it cannot run here
VERDICTS = ("identical", "differs", "incomplete", "unavailable")


@dataclass
class CaseComparison:
    """One probe conversation in one engine, beside transformers."""

    name: str
    status: str
    expected: str | None
    expected_error: str | None
    text: str | None
    error: str | None
    difference: Difference | None = None
    cause: str | None = None

    @property
    def agrees(self) -> bool:
        return self.status in AGREEING

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "transformers": self.expected,
            "transformers_error": self.expected_error,
            "engine": self.text,
            "engine_error": self.error,
            "difference": self.difference.to_dict() if self.difference else None,
            "cause": self.cause,
        }


@dataclass
class EngineComparison:
    """One engine over the probe suite: ``identical``, ``differs``, ``incomplete`` (nothing differs, but some
    cases were cut: not compared) or ``unavailable`` (with the reason)."""

    name: str
    version: str | None = None
    reason: str | None = None
    cases: list[CaseComparison] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.reason is not None:
            return "unavailable"
        if any(not case.agrees and case.status != "cut" for case in self.cases):
            return "differs"
        return "incomplete" if any(case.status == "cut" for case in self.cases) else "identical"

    @property
    def cut(self) -> list[CaseComparison]:
        """The cases not compared, each with its ``cause``."""
        return [case for case in self.cases if case.status == "cut"]

    def counts(self) -> dict[str, int]:
        return {status: n for status in CASE_STATUSES if (n := sum(case.status == status for case in self.cases))}

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "version": self.version, "reason": self.reason,
                "counts": self.counts(), "cases": [case.to_dict() for case in self.cases]}


@dataclass
class PortabilityReport:
    """A template's probe conversations in every engine asked for, within ``budget``."""

    template: str
    path: str | None
    engines: dict[str, EngineComparison]
    budget: PortabilityBudget = field(default_factory=PortabilityBudget)

    @property
    def compared(self) -> list[EngineComparison]:
        return [e for e in self.engines.values() if e.verdict != "unavailable"]

    @property
    def ok(self) -> bool:
        """Some engine ran, and every engine that ran rendered every case as transformers does (a case cut is
        not known to: ``incomplete`` is no pass)."""
        return bool(self.compared) and all(e.verdict == "identical" for e in self.compared)

    def to_dict(self) -> dict[str, Any]:
        b = self.budget
        return {"template": self.template,
                "budget": {"seconds": b.seconds, "render_seconds": b.render_seconds, "start_seconds": b.start_seconds,
                           "memory": b.memory, "output_chars": b.output_chars},
                "cut": {name: [case.name for case in e.cut] for name, e in self.engines.items() if e.cut},
                "engines": {name: e.to_dict() for name, e in self.engines.items()}}


# --- comparing ---------------------------------------------------------------------------------

_PYTHON_LITERALS = {"True": ("true",), "False": ("false",), "None": ("null", "none", "")}


def _cause(expected: str, text: str, difference: Difference) -> str:
    """A short guess at why two renderings differ, read off the first differing characters."""
    if whitespace_only(expected, text):
        if "\r" in text and "\r" not in expected or "\r" in expected and "\r" not in text:
            return "line endings differ (\\r\\n kept or dropped)"
        return "whitespace only (whitespace control, trim/lstrip or a trailing newline)"
    at = difference.offset
    ahead, behind = expected[at:at + 8], text[at:at + 8]
    start = max(expected.rfind(ch, 0, at) for ch in " [{(,:\n") + 1
    word = re.match(r"\w*", expected[start:]).group(0)  # type: ignore[union-attr]
    if word in _PYTHON_LITERALS and any(text[start:].startswith(alt) for alt in _PYTHON_LITERALS[word]):
        return f"Python's {word} printed as the engine's own literal"
    if ahead[:1] in "[{" and ahead and behind[:1] not in "[{":
        return "a list or dict printed differently (Python prints its repr; the engine prints JSON or nothing)"
    if ahead[:1] == "'" and behind[:1] == '"' or ahead[:1] == '"' and behind[:1] == "'":
        return "a list or dict printed as JSON instead of Python's repr (or the reverse)"
    if re.match(r"\.0\b", ahead) or re.match(r"\.0\b", behind):
        return "a float printed without its .0 (or an integer with one)"
    if ahead[:1].isdigit() and behind[:1].isdigit():
        return "a number printed differently"
    if not behind and expected.startswith(text):
        return "the engine's output stops early"
    if not ahead and text.startswith(expected):
        return "the engine prints more"
    return "the text differs"


def compare_case(case: PortabilityCase, text: str | None, error: str | None, cut: str | None = None) -> CaseComparison:
    """One probe conversation: chatjinja's (transformers') outcome beside the engine's; ``cut`` (why the
    engine's render was stopped or not made) or the case's own ``cut`` make it a case compared with nothing."""
    if case.cut is not None or cut is not None:
        return CaseComparison(case.name, "cut", case.text, case.error, text, error, cause=case.cut or cut)
    if case.error is not None:
        status = "both-fail" if error is not None else "renders"
        cause = None if error is not None else f"transformers raises {case.error}"
        return CaseComparison(case.name, status, None, case.error, text, error, cause=cause)
    if error is not None:
        return CaseComparison(case.name, "fails", case.text, None, None, error, cause=error)
    assert case.text is not None and text is not None
    difference = first_difference(case.text, text)
    if difference is None:
        return CaseComparison(case.name, "identical", case.text, None, text, None)
    return CaseComparison(case.name, "differs", case.text, None, text, None, difference, _cause(case.text, text, difference))


def _engine_cut(result: EngineResult, ran_out: str) -> str | None:
    """Why the engine's render was not finished (``None`` when it was): the engine's limit, or the run's time."""
    if result.limit is None:
        return None
    if result.limit != "deadline":
        return result.error
    return f"not run: {ran_out}" if (result.error or "").startswith("not run") else f"not finished: {ran_out} (engine process killed)"


def _capped(case: PortabilityCase, output_chars: int) -> PortabilityCase:
    if case.cut is None and case.text is not None and len(case.text) > output_chars:
        cut = f"chatjinja's render printed {len(case.text)} characters, over the output limit of {output_chars}"
        return PortabilityCase(case.name, case.context, None, None, cut)
    return case


def compare_engines(
    source: str,
    engines: dict[str, Engine | EngineUnavailable],
    special_tokens: dict[str, str] | None = None,
    cases: list[PortabilityCase] | None = None,
    budget: PortabilityBudget | None = None,
) -> dict[str, EngineComparison]:
    """The probe conversations (or ``cases``) through each engine, compared with transformers, all within
    ``budget``'s time (the default :class:`PortabilityBudget` when ``None``; the engines keep their own
    limits): chatjinja's renders take at most an equal share of it, each engine in turn an equal share of
    what is left; what a share does not reach is cut, and an engine is sent only the cases chatjinja
    rendered or rejected (never one whose render a budget stopped)."""
    budget = PortabilityBudget() if budget is None else budget
    run = budget.start()
    waiting = sum(not isinstance(found, EngineUnavailable) for found in engines.values())
    if cases is None:
        started = run.now()
        deadline = run.share(1 + waiting)
        cases = probe_cases(source, special_tokens, deadline=deadline, clock=run.now,
                            ran_out=run.ran_out("chatjinja", deadline - started))
    cases = [_capped(case, budget.output_chars) for case in cases]
    sent = [case for case in cases if case.cut is None]
    compared: dict[str, EngineComparison] = {}
    for name, found in engines.items():
        if isinstance(found, EngineUnavailable):
            compared[name] = EngineComparison(name, reason=found.reason)
            continue
        started = run.now()
        deadline = run.share(waiting)
        waiting -= 1
        results = found.render_many(source, [case.context for case in sent], deadline=deadline, clock=run.now) if sent else []
        answers = iter(results)
        comparisons = []
        for case in cases:
            if case.cut is not None:
                comparisons.append(compare_case(case, None, None))
                continue
            result = next(answers)
            comparisons.append(compare_case(case, result.text, result.error, _engine_cut(result, run.ran_out(name, deadline - started))))
        compared[name] = EngineComparison(name, found.version, cases=comparisons)
    return compared


def check_portability(template: Any, engines: Sequence[str] = ENGINE_NAMES, *, install: bool = True,
                      budget: PortabilityBudget | None = None) -> PortabilityReport:
    """Render the conversation space of ``template`` (a :class:`~chatjinja.ChatTemplate`, a source string or
    anything :func:`~chatjinja.load_template` takes) with transformers-identical chatjinja and with each of
    ``engines``, and compare them, the whole run within ``budget`` (:class:`PortabilityBudget`: 20 s, each
    engine process at chatjinja's render limits; installing an engine is not counted); engines that cannot
    run here are reported ``unavailable``, cases the budget did not reach ``cut``."""
    budget = PortabilityBudget() if budget is None else budget
    loaded = template_record(template)
    tokens = loaded.special_tokens or None
    found = available_engines(tuple(engines), install=install, limits=budget.engine_limits())
    return PortabilityReport(loaded.name, loaded.path, compare_engines(loaded.source, found, tokens, budget=budget), budget)


# --- formats -----------------------------------------------------------------------------------


def format_json(report: PortabilityReport) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _groups(comparison: EngineComparison) -> list[list[CaseComparison]]:
    """The cases that do not agree, those with the same status, cause and first difference together."""
    groups: dict[tuple, list[CaseComparison]] = {}
    for case in comparison.cases:
        if not case.agrees:
            d = case.difference
            key = (case.status, case.cause, d and (d.offset, d.template_excerpt, d.reference_excerpt))
            groups.setdefault(key, []).append(case)
    return list(groups.values())


def format_text(report: PortabilityReport, verbose: bool = False) -> str:
    """Per engine its verdict and counts, then each differing case (cases that differ alike on one line)
    with the first differing characters (whitespace made visible) and the cause, the cases cut with why;
    a last line names how many were cut and the budget."""
    lines = [f"{report.template}: its conversation space in each engine, beside transformers", ""]
    for name, comparison in report.engines.items():
        version = f" {comparison.version}" if comparison.version else ""
        if comparison.verdict == "unavailable":
            lines.append(f"  {name}: unavailable ({comparison.reason})")
            continue
        counts = ", ".join(f"{n} {status}" for status, n in comparison.counts().items())
        lines.append(f"  {name}{version}: {comparison.verdict} ({counts})")
        for group in _groups(comparison):
            case = group[0]
            names = ", ".join(c.name for c in group)
            lines.append(f"    {case.status}: {names}")
            if case.difference is not None:
                d = case.difference
                lines.append(f"      at offset {d.offset} (line {d.template_line}, column {d.template_column}): "
                             f"transformers {d.template_excerpt} | {name} {d.reference_excerpt}")
            if case.status == "renders" and case.text is not None:
                lines.append(f"      {name} renders «{_short(visible(case.text), 60)}»")
            if case.cause:
                lines.append(f"      cause: {_short(case.cause)}")
            if verbose and case.status == "differs":
                for c in group:
                    lines.append(f"      {c.name}: transformers «{_short(visible(c.expected or ''), 2000)}»")
                    lines.append(f"      {c.name}: {name} «{_short(visible(c.text or ''), 2000)}»")
    if not report.compared:
        lines += ["", "no engine could run: nothing compared"]
    else:
        lines += ["", "; ".join(f"{name} {e.verdict}" for name, e in report.engines.items())]
    cut = {name: len(e.cut) for name, e in report.engines.items() if e.cut}
    if cut:
        b = report.budget
        lines.append("not compared (cut): " + ", ".join(f"{n} cases in {name}" for name, n in cut.items())
                     + f"; the budget: {b.seconds:g} s for the run, {b.render_seconds:g} s, {b.memory >> 20} MiB and "
                     f"{b.output_chars} characters an engine render")
    return "\n".join(lines) + "\n"


def format_sarif(report: PortabilityReport, tool_version: str = "") -> str:
    """SARIF 2.1.0 as :mod:`chatjinja.report.sarif` writes it: one rule per engine, one result per case
    that does not render as in transformers (at the template's first line; the case and the engine in
    ``properties``; a note for a case cut), and a note for an engine that could not run."""
    names = list(report.engines)
    rules = [{
        "id": f"portability/{name}",
        "name": f"renders-differently-in-{name}",
        "shortDescription": {"text": f"A probe conversation renders differently in {name} than in transformers"},
        "fullDescription": {"text": "chatjinja portability renders the probe conversations with transformers-identical "
                            f"chatjinja and with {name}, configured as its servers configure it, and compares them."},
        "help": {"text": "See docs/guide/portability.md."},
        "defaultConfiguration": {"level": "warning"},
        "properties": {"tags": ["portability"]},
    } for name in names]
    location = [{"physicalLocation": {"artifactLocation": {"uri": _uri(report.path or report.template)},
                                      "region": {"startLine": 1, "startColumn": 1}}}]
    results = []
    for index, (name, comparison) in enumerate(report.engines.items()):
        if comparison.verdict == "unavailable":
            results.append({"ruleId": f"portability/{name}", "ruleIndex": index, "level": "note",
                            "message": {"text": f"{name} unavailable: {comparison.reason}"},
                            "locations": location, "properties": {"engine": name, "verdict": "unavailable"}})
            continue
        for case in comparison.cases:
            if case.agrees:
                continue
            detail = case.difference.describe() if case.difference else (case.cause or case.status)
            level = {"fails": "error", "cut": "note"}.get(case.status, "warning")
            status = "was not compared (cut)" if case.status == "cut" else case.status
            results.append({
                "ruleId": f"portability/{name}", "ruleIndex": index,
                "level": level,
                "message": {"text": f"probe '{case.name}' {status} in {name}: {_short(detail, 300)}"},
                "locations": location,
                "properties": {"engine": name, "engineVersion": comparison.version, "case": case.name,
                               "status": case.status, "cause": case.cause},
            })
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "chatjinja", "version": tool_version or "0",
                                "informationUri": INFORMATION_URI, "rules": rules}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
