"""``render_cases.json`` (huggingface.js end-to-end cases): render exactly the expected text.

Two cases do not hold the text transformers 5.25.0 renders: Hammer2.1 (flagged in the corpus: its
expected text follows JavaScript printing rules) and functionary-medium-v2.2 (flagged as matching,
but its conversation has ``content: null``, a key transformers 5.x drops before rendering, so the
template raises). For those, chatjinja must match transformers; COMPATIBILITY.md records them.
"""

from __future__ import annotations

import datetime as real_datetime

import pytest

from chatjinja import apply_chat_template
from chatjinja.runtime import template_globals
from tests.conftest import corpus_or_skip, render_cases
from tests.reference import hf_outcome, outcome

CASES = render_cases()
FIXED_NOW = real_datetime.datetime(2025, 7, 10, 12, 0, 0)
# Flagged expected_matches_transformers=true, yet transformers 5.25.0 renders otherwise (see module docstring)
STALE_FLAG = {"meetkai/functionary-medium-v2.2"}


class _FixedDatetime(real_datetime.datetime):
    @classmethod
    def now(cls, tz=None):  # the hf.js tests fix the clock at 2025-07-10T12:00:00Z
        return FIXED_NOW if tz is None else FIXED_NOW.replace(tzinfo=tz)


@pytest.fixture
def fixed_clock(monkeypatch):
    import transformers.utils.chat_template_utils as hf_utils

    monkeypatch.setattr(template_globals, "datetime", _FixedDatetime)
    monkeypatch.setattr(hf_utils, "datetime", _FixedDatetime)


def _split(case):
    context = dict(case["context"])
    return context.pop("messages"), context


def test_render_cases_present():
    corpus_or_skip()
    assert len(CASES) == 43


@pytest.mark.corpus
@pytest.mark.parametrize("case", [c for c in CASES if c["expected_matches_transformers"]], ids=lambda c: c["key"])
def test_render_case_gives_expected_text(case, fixed_clock):
    messages, context = _split(case)
    ours = outcome(lambda: apply_chat_template(messages, case["template"], **context))
    if case["key"] in STALE_FLAG:
        assert ours[0] == "error" and ours == hf_outcome(case["template"], messages, **context)
    else:
        assert ours == ("text", case["expected"])


@pytest.mark.corpus
@pytest.mark.reference
@pytest.mark.parametrize("case", CASES, ids=lambda c: c["key"])
def test_render_case_matches_transformers(case, fixed_clock):
    messages, context = _split(case)
    expected = hf_outcome(case["template"], messages, **context)
    assert outcome(lambda: apply_chat_template(messages, case["template"], **context)) == expected
    agrees_with_file = expected == ("text", case["expected"])
    assert agrees_with_file == (case["expected_matches_transformers"] and case["key"] not in STALE_FLAG)
