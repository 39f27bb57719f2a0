"""Synthesised tags a maintainer would merge (issue 33, acceptance 4): TRL's hand-tagged corpus pairs, tags taken off
and synthesised again, measured by ``benchmarks/tags_review.py`` (the table in benchmarks/README.md)."""

from __future__ import annotations

import pytest

from benchmarks.tags_review import CORPUS, review
from tests.conftest import corpus_or_skip

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    corpus_or_skip()
    paths = sorted(CORPUS.rglob("*_training.jinja"))
    assert len(paths) >= 26, len(paths)
    return [review(path) for path in paths]


def test_no_copy_has_an_empty_block_or_an_empty_string_concatenation(rows: list[dict]) -> None:
    for row in rows:
        assert not row["refused"], row
        assert row["empty_blocks"] == 0, row
        assert row["empty_plus"] <= 0, row  # '' + or + '' the untagged template did not have


def test_blocks_and_changed_lines_stay_near_the_hand_written_copy(rows: list[dict]) -> None:
    within = [row["template"] for row in rows if row["within"]]
    assert len(within) >= 0.9 * len(rows), sorted({row["template"] for row in rows} - set(within))
