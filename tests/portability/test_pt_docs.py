"""Every PT rule's page is true in the real engines: its "Example" renders differently from transformers in each
engine its findings name, and its "Use instead" renders identically in every engine present, over the template's
whole conversation space (``chatjinja portability``'s comparison: the probe and client shapes, in each mode)."""

from __future__ import annotations

import pytest

from chatjinja.lint import all_rules, lint
from chatjinja.portability import ENGINE_NAMES
from chatjinja.portability.report import compare_engines

from .conftest import engine_or_skip

PT_RULES = [rule for rule in all_rules() if rule.code.startswith("PT")]


def _verdicts(source: str, engines: dict) -> dict[str, str]:
    return {name: found.verdict for name, found in compare_engines(source, engines).items()}


def _named_pairs() -> list:
    """(rule, engine) for each engine the findings on the rule's example name."""
    return [pytest.param(rule, name, id=f"{rule.code}-{name}")
            for rule in PT_RULES
            for name in ENGINE_NAMES
            if name in {e for d in lint(rule.example(), select=[rule.code]) for e in d.engines}]


def test_every_rule_names_an_engine_in_its_example() -> None:
    assert {rule.code for rule, _ in (p.values for p in _named_pairs())} == {rule.code for rule in PT_RULES}


@pytest.mark.parametrize("rule, name", _named_pairs())
def test_example_differs_in_the_engines_named(rule, name) -> None:
    adapter = engine_or_skip(name)
    assert _verdicts(rule.example(), {name: adapter}) == {name: "differs"}


@pytest.mark.parametrize("rule", PT_RULES, ids=lambda r: r.code)
def test_use_instead_is_identical_everywhere(rule) -> None:
    present = {}
    for name in ENGINE_NAMES:
        try:
            present[name] = engine_or_skip(name)
        except pytest.skip.Exception:
            continue
    if not present:
        pytest.skip("no engine is available")
    assert _verdicts(rule.use_instead(), present) == {name: "identical" for name in present}
