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


# Attack payloads of tests/security/payloads/ the static rules do not recognise, and why: the runtime's
# budgets stop them (their headers say which), but their shape is ordinary template code.
NOT_DETECTED = {
    "dos_compare_eq_straight_line": "1,000 plain comparisons of two message contents (the size is the caller's)",
    "dos_compare_in_straight_line": "the same with 'in'",
    "dos_test_in_straight_line": "the same with 'is in'",
    "dos_macro_fanout": "a macro calling itself twice under a guard: recursive schema renderers in the corpus do too",
    "dos_slice_kept_in_loop": "a namespace list grown by one slice per iteration of a 1,000-step loop",
    "mutate_dict_setdefault": "mutates a dict literal of the template's own (not the caller's data)",
    "ns_non_namespace_target": "'{% set x.attr %}' on a loop variable: corpus templates (MiroThinker) do it too",
    "input_rich_object": "the hostile part is the caller's object, not the template",
}


def test_attack_payloads_flagged() -> None:
    """Every payload that is an attack (its expected outcome is an error, not inert text) is flagged by an SC
    rule, or stopped by LN003 (too deep or too large to lint) or LN002 (jinja2 cannot parse it either), except the
    ones listed with a reason."""
    from tests.security.payloads import load_payloads

    attacks = [p for p in load_payloads() if p.expect != "inert"]
    assert len(attacks) >= 120
    missed = {p.name for p in attacks
              if not any(d.code.startswith("SC") or d.code in ("LN002", "LN003") for d in lint(p.source, select=["SC"]))}
    assert missed == set(NOT_DETECTED)
