"""Acceptance 2 on a sample: the PT rules' prediction (some PT finding names the engine) agrees with the real engine's
verdict on the probe suite (identical or not), per engine present.

The full corpus through three engines takes minutes, so the test takes every 8th corpus template (49 of 385, in
path order) and ``benchmarks/pt_agreement.py`` computes the full table (benchmarks/README.md). The floors are the
acceptance's 95% where the rules reach it (minijinja) and, below it, the sample's measured agreement less one
template, so a rule change that loses agreement fails here.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import REPO, corpus_or_skip

from .conftest import engine_or_skip

SAMPLE_STEP = 8
FLOORS = {"minijinja": 0.95, "hfjs": 0.83, "llamacpp": 0.87}


def _benchmark():
    """``benchmarks/pt_agreement.py``, imported once (the one place the table is computed)."""
    if "pt_agreement" not in sys.modules:
        spec = importlib.util.spec_from_file_location("pt_agreement", REPO / "benchmarks" / "pt_agreement.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["pt_agreement"] = module  # before running it: its dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules["pt_agreement"]


@pytest.fixture(scope="module")
def sample() -> list[tuple[str, str]]:
    return _benchmark().corpus_templates(corpus_or_skip())[::SAMPLE_STEP]


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_pt_predictions_agree_with_the_engine(name, sample) -> None:
    adapter = engine_or_skip(name)
    table = _benchmark().agreement_tables(sample, {name: adapter})[name]
    wrong = {cell: table.cells[cell] for cell in ("FP", "FN") if table.cells[cell]}
    assert table.agreement >= FLOORS[name], f"{name}: {table.agreement:.1%} on {table.total} templates; {wrong}"
