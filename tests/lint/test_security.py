"""Security rules: every hostile template is flagged, no corpus template is."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatjinja.lint import lint
from tests.conftest import corpus_or_skip, corpus_templates

HOSTILE = sorted((Path(__file__).parent / "hostile").glob("*.jinja"))


def test_hostile_suite_size() -> None:
    assert len(HOSTILE) >= 40
    assert {p.name[:5] for p in HOSTILE} == {"sc001", "sc002", "sc003", "sc004", "sc005"}


@pytest.mark.parametrize("path", HOSTILE, ids=lambda p: p.stem)
def test_hostile_template_flagged_by_its_rule(path: Path) -> None:
    expected = path.name[:5].upper()  # the file name says which security rule must catch it
    found = lint(path.read_text(encoding="utf-8"), select=["SC"])
    assert expected in {d.code for d in found}
    assert all(d.severity == "error" for d in found)


@pytest.mark.corpus
def test_security_rules_silent_on_the_corpus() -> None:
    corpus_or_skip()
    noisy = {}
    for path in corpus_templates():
        # LN002 (a template jinja2 cannot parse either) is reported whatever is selected; it is not a security finding
        found = [d for d in lint(path.read_text(encoding="utf-8"), select=["SC"]) if d.code.startswith("SC")]
        if found:
            noisy[path.name] = [f"{d.code} {d.span} {d.message}" for d in found]
    assert noisy == {}
