"""Docs are tests: every rule's "Example" triggers exactly that rule and "Use instead" triggers nothing."""

from __future__ import annotations

import pytest

from chatjinja.lint import all_rules, lint
from chatjinja.lint.registry import OPT_IN, RULE_TABLE
from chatjinja.lint.rule import DOC_SECTIONS


@pytest.fixture(autouse=True)
def _small_limits(monkeypatch, request) -> None:
    """LN003's example nests 6 deep, as its page says: the limit is lowered to 5 for it (the real one is 48)."""
    if "LN003" in request.node.name:
        monkeypatch.setattr("chatjinja.limits.MAX_SOURCE_NESTING", 5)


def _select(rule) -> list[str] | None:
    """The opt-in PT rules run with every rule selected; the others with the default selection."""
    return ["ALL"] if rule.code.startswith(OPT_IN) else None


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_example_triggers_only_its_rule(rule) -> None:
    for example in rule.examples():  # the first, and the further shapes a page shows
        codes = {d.code for d in lint(example, select=_select(rule))}
        if rule.code.startswith(OPT_IN):  # a portability rule may restate a default rule's finding (PT011 and CT001)
            codes = {c for c in codes if c.startswith(OPT_IN)}
        assert codes == {rule.code}, example


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_use_instead_is_clean(rule) -> None:
    assert [(d.code, d.message) for d in lint(rule.use_instead(), select=_select(rule))] == []


def test_codes_names_and_docs() -> None:
    rules = all_rules()
    assert len({r.code for r in rules}) == len(rules) == len([m for m in RULE_TABLE.values() if m])
    assert all(bool(r.engines) == r.code.startswith("PT") for r in rules)  # PT rules, and only they, name engines
    assert len({r.name for r in rules}) == len(rules)
    for rule in rules:
        for section in DOC_SECTIONS:
            assert rule.section(section).strip(), f"{rule.code}: empty '{section}'"
        if rule.fixable:
            assert "purpose" in rule.section("Fix safety") or "never changes" in rule.section("Fix safety")


def test_security_rules_are_sc() -> None:
    security = {"template-loader", "sandbox-escape", "invisible-unicode", "poisoned-branch", "resource-abuse"}
    assert {r.name for r in all_rules() if r.code.startswith("SC")} == security
