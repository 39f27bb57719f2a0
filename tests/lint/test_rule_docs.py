"""Docs are tests: every rule's "Example" triggers exactly that rule and "Use instead" triggers nothing."""

from __future__ import annotations

import pytest

from chatjinja.lint import all_rules, lint
from chatjinja.lint.registry import RULE_TABLE
from chatjinja.lint.rule import DOC_SECTIONS


@pytest.fixture(autouse=True)
def _small_limits(monkeypatch, request) -> None:
    """LN003's example nests 6 deep, as its page says: the limit is lowered to 5 for it (the real one is 48)."""
    if "LN003" in request.node.name:
        monkeypatch.setattr("chatjinja.limits.MAX_SOURCE_NESTING", 5)


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_example_triggers_only_its_rule(rule) -> None:
    for example in rule.examples():  # the first, and the further shapes a page shows
        assert {d.code for d in lint(example)} == {rule.code}, example


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_use_instead_is_clean(rule) -> None:
    assert [(d.code, d.message) for d in lint(rule.use_instead())] == []


def test_codes_names_and_docs() -> None:
    rules = all_rules()
    assert len({r.code for r in rules}) == len(rules) == len([m for m in RULE_TABLE.values() if m])
    assert len({r.name for r in rules}) == len(rules)
    for rule in rules:
        for section in DOC_SECTIONS:
            assert rule.section(section).strip(), f"{rule.code}: empty '{section}'"
        if rule.fixable:
            assert "purpose" in rule.section("Fix safety") or "never changes" in rule.section("Fix safety")


def test_security_rules_are_sc() -> None:
    security = {"template-loader", "sandbox-escape", "invisible-unicode", "poisoned-branch", "resource-abuse"}
    assert {r.name for r in all_rules() if r.code.startswith("SC")} == security
