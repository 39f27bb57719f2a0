"""Data-driven rule tests: tests/lint/cases/<CODE>.json holds pass, fail and fix cases for every rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatjinja.lint import all_rules, fix_source, lint
from chatjinja.lint.registry import OPT_IN

CASES = Path(__file__).parent / "cases"


def _load(code: str) -> dict:
    return json.loads((CASES / f"{code}.json").read_text(encoding="utf-8"))


def _cases(kind: str) -> list:
    return [
        pytest.param(rule.code, case, id=f"{rule.code}-{kind}-{i}")
        for rule in all_rules()
        if (CASES / f"{rule.code}.json").is_file()
        for i, case in enumerate(_load(rule.code).get(kind, []))
    ]


def test_every_rule_has_cases() -> None:
    for rule in all_rules():
        data = _load(rule.code)
        assert data.get("pass") and data.get("fail"), f"{rule.code} needs pass and fail cases"
        if rule.fixable:
            assert data.get("fix"), f"{rule.code} has a fix, so it needs fix cases"


@pytest.fixture(autouse=True)
def _small_limits(monkeypatch, request) -> None:
    """LN003's cases nest 6 deep: its limit is lowered to 5 for them (the real one is 48)."""
    if "LN003" in request.node.name:
        monkeypatch.setattr("chatjinja.limits.MAX_SOURCE_NESTING", 5)


def _select(code: str) -> list[str] | None:
    """The default selection, and every rule for the opt-in PT rules."""
    return ["ALL"] if code.startswith(OPT_IN) else None


@pytest.mark.parametrize("code, template", _cases("pass"))
def test_pass(code: str, template: str) -> None:
    found = [d for d in lint(template, select=_select(code)) if d.code == code]  # LN001 needs the others
    assert found == []


@pytest.mark.parametrize("code, case", _cases("fail"))
def test_fail(code: str, case: dict) -> None:
    template = case["template"]
    found = [d for d in lint(template, select=_select(code)) if d.code == code]
    got = [[d.span.line, template[d.span.start : d.span.end]] for d in found]
    assert got == case["expect"]
    for d in found:
        assert d.span.column >= 1 and d.message


@pytest.mark.parametrize("code, case", _cases("fix"))
def test_fix(code: str, case: dict) -> None:
    select = None if code == "LN001" else [code]  # LN001 needs the rules its suppressions name
    fixed = fix_source(case["template"], select=select, unsafe=True)
    assert fixed == case["fixed"]
    assert [d for d in lint(fixed, select=select) if d.code == code] == []
