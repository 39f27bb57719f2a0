"""The linting guide and docs/rules/ stay true: the rule table, one page per rule (the guide's example output is run by tests/test_docs_examples.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chatjinja.commands.rules import rule_page
from chatjinja.lint import all_rules
from chatjinja.lint.registry import listed_rules
from tests.goldens import check_golden

REPO = Path(__file__).resolve().parents[2]


def _lint_section() -> str:
    return (REPO / "docs" / "guide" / "linting.md").read_text(encoding="utf-8")


def test_readme_rule_table_lists_every_rule() -> None:
    section = _lint_section()
    rows = re.findall(r"^\| \[`([A-Z]{2}\d{3})`\]\(\.\./rules/\1\.md\) \| `([a-z-]+)` \| (\w+) \| (yes|) \|", section, re.M)
    assert [(c, n, s, f == "yes") for c, n, s, f in rows] == [(r.code, r.name, r.severity, r.fixable) for r in all_rules()]
    for rule in all_rules():  # a "|" in a cell must be escaped or it splits the table
        assert f"| {rule.summary.replace('|', chr(92) + '|')} |" in section


@pytest.mark.parametrize("rule", listed_rules(), ids=lambda r: r.code)
def test_rule_page(rule) -> None:
    """docs/rules/<CODE>.md is what ``chatjinja rules CODE`` prints, for every code (lint's and check's)."""
    check_golden(REPO / "docs" / "rules" / f"{rule.code}.md", rule_page(rule))


def test_one_page_per_code() -> None:
    assert sorted(p.stem for p in (REPO / "docs" / "rules").glob("*.md")) == sorted(r.code for r in listed_rules())
