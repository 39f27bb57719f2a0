"""Security rules: every hostile template is flagged, no corpus template is."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatjinja.lint import lint
from tests.conftest import corpus_or_skip, corpus_templates, render_cases

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
    """No SC finding on any corpus template, nor on the template of any render case."""
    corpus_or_skip()
    sources = [(path.name, path.read_text(encoding="utf-8")) for path in corpus_templates()]
    sources += [(f"render case {case['key']}", case["template"]) for case in render_cases()]
    assert len(sources) > 400
    noisy = {}
    for name, source in sources:
        # LN002 (a template jinja2 cannot parse either) is reported whatever is selected; it is not a security finding
        found = [d for d in lint(source, select=["SC"]) if d.code.startswith("SC")]
        if found:
            noisy[name] = [f"{d.code} {d.span} {d.message}" for d in found]
    assert noisy == {}


def test_attack_payloads_flagged() -> None:
    """Every payload that is an attack (its expected outcome is an error, not inert text) is flagged by an SC
    rule, or stopped by LN003 (too deep or too large to lint) or LN002 (jinja2 cannot parse it either)."""
    from tests.security.payloads import load_payloads

    attacks = [p for p in load_payloads() if p.expect != "inert"]
    assert len(attacks) >= 120
    missed = {p.name for p in attacks
              if not any(d.code.startswith("SC") or d.code in ("LN002", "LN003") for d in lint(p.source, select=["SC"]))}
    assert missed == set()
