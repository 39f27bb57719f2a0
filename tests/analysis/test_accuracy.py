"""Acceptance: the static analyser against the probe over every corpus template (table in accuracy.txt).

Run with ``pytest -s`` to see the table; ``UPDATE_GOLDENS=1`` rewrites accuracy.txt.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chatjinja.analysis import PROBED_FIELDS

from tests.goldens import check_golden

from .accuracy import corpus_accuracy

REPORT = Path(__file__).parent / "accuracy.txt"
FIELD_FLOOR = 0.97
CELL_FLOOR = 0.98

pytestmark = pytest.mark.corpus


def test_static_analysis_agrees_with_probe_on_the_corpus(corpus_dir):
    accuracy = corpus_accuracy()
    table = accuracy.table()
    print("\n" + table)
    low = {name: f"{100 * accuracy.field_rate(name):.1f}%" for name in PROBED_FIELDS if accuracy.field_rate(name) < FIELD_FLOOR}
    assert not low, f"fields below {FIELD_FLOOR:.0%} agreement: {low}\n{table}"
    assert accuracy.cell_rate >= CELL_FLOOR, table


def test_accuracy_report_is_current(corpus_dir):
    """accuracy.txt is the reviewed table; a change in any number or disagreement shows up here."""
    check_golden(REPORT, corpus_accuracy().table())


def test_every_corpus_template_is_compared(corpus_dir):
    accuracy = corpus_accuracy()
    assert accuracy.total == len(list((corpus_dir / "templates").rglob("*.jinja")))
