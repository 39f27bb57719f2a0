"""Differential test: every corpus template, chatjinja vs transformers 5.25.0, on the probe set, with the
default budgets and with a hundredth of them."""

from __future__ import annotations

import collections

import pytest

from chatjinja.runtime.budget import DEFAULT_BUDGETS, Budgets
from tests.conftest import CORPUS, corpus_or_skip, corpus_templates
from tests.reference import hf_outcome, our_outcome
from tests.runtime.conversations import probe_cases

PROBES = probe_cases()
TEMPLATES = corpus_templates()
TOTALS: collections.Counter = collections.Counter()
# Every size, count and fuel limit divided by 100. The clock stays at its default (a hundredth of it
# would make the outcome depend on the machine's speed), and so do the depth and nesting limits (a
# hundredth of them is 0 or 1: no template or message list would fit).
_STRUCTURAL = ("timeout", "max_recursion_depth", "max_input_depth", "max_source_nesting")
HUNDREDTH = Budgets(
    **{name: getattr(DEFAULT_BUDGETS, name) if name in _STRUCTURAL else getattr(DEFAULT_BUDGETS, name) // 100 for name in Budgets.names()}
)


def _id(path):
    return str(path.relative_to(CORPUS / "templates"))


def test_probe_set_is_large_enough():
    assert len(PROBES) >= 12


def test_corpus_is_present():
    corpus_or_skip()
    assert len(TEMPLATES) == 385


@pytest.mark.corpus
@pytest.mark.reference
@pytest.mark.parametrize("path", TEMPLATES, ids=[_id(p) for p in TEMPLATES])
def test_corpus_template_matches_transformers(path):
    source = path.read_text(encoding="utf-8")
    mismatches = []
    for case_id, conversation, kwargs in PROBES:
        expected = hf_outcome(source, conversation, **kwargs)
        actual = our_outcome(source, conversation, **kwargs)
        TOTALS["renders"] += 1
        TOTALS["texts" if expected[0] == "text" else "errors"] += 1
        if actual != expected:
            TOTALS["mismatches"] += 1
            mismatches.append((case_id, expected[:2], actual[:2]))
        # a hundredth of the budgets: transformers' outcome, or a BudgetExceeded (counted)
        tight = our_outcome(source, conversation, budgets=HUNDREDTH, **kwargs)
        if tight[:2] == ("error", "BudgetExceeded"):
            TOTALS["exceeded at 1/100"] += 1
        elif tight != expected:
            TOTALS["mismatches at 1/100"] += 1
            mismatches.append((case_id, "1/100 budgets", expected[:2], tight[:2]))
    assert not mismatches, mismatches


@pytest.fixture(scope="module", autouse=True)
def _print_totals():
    yield
    if TOTALS:
        print(
            f"\ncorpus parity: {len(TEMPLATES)} templates x {len(PROBES)} probes = {TOTALS['renders']} renders; "
            f"{TOTALS['texts']} texts, {TOTALS['errors']} errors, {TOTALS['mismatches']} mismatches; at 1/100 of the "
            f"budgets {TOTALS['exceeded at 1/100']} BudgetExceeded, {TOTALS['mismatches at 1/100']} mismatches"
        )
