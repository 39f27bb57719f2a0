"""Differential test: every corpus template, chatjinja vs transformers 5.24.0, on the probe set."""

from __future__ import annotations

import collections

import pytest

from tests.conftest import CORPUS, corpus_or_skip, corpus_templates
from tests.reference import hf_outcome, our_outcome
from tests.runtime.conversations import probe_cases

PROBES = probe_cases()
TEMPLATES = corpus_templates()
TOTALS: collections.Counter = collections.Counter()


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
    assert not mismatches, mismatches


@pytest.fixture(scope="module", autouse=True)
def _print_totals():
    yield
    if TOTALS:
        print(
            f"\ncorpus parity: {len(TEMPLATES)} templates x {len(PROBES)} probes = {TOTALS['renders']} renders; "
            f"{TOTALS['texts']} texts, {TOTALS['errors']} errors, {TOTALS['mismatches']} mismatches"
        )
