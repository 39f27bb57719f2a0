"""Prepared delimiters (serving/patterns.py): the same leftmost match as the pattern as written; a match called final is the match on every continuation; a window as wide as the lookbehinds reads alike."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from chatjinja.serving.patterns import Delimiter, Found, Work, prepare, required_suffix

regex = pytest.importorskip("regex")

PATTERNS = [
    # derived shapes (see tests/serving/test_hostile_replies.py): guarded opens, closes that take the rest or
    # stop before the next call, lookbehinds bounded and not
    r"(?:\G|(?<!\s))\s*<tool_call>",
    r"(?:\G|(?<!\s))\s*(?:<\|end\|>)[\s\S]*",
    r"(?:\G|(?<!\s))(?=\s*\[T\])|\s*(?:</s>)[\s\S]*|\s*\Z",
    r"(?<=\})(?=\s*\{\s*\"n)|\s*(?:<e>)[\s\S]*|\s*\Z",
    r"(?:\s*(?:<e>)[\s\S]*|\s*\Z)\s*",
    r"(?:<t>|(?<=\}\s*),\s*)\{\s*\"(?P<name>[\w.\-]+)\"\s*:\s*",
    r"\s*\}\s*(?:\]\s*<s>|(?=,\s*\{\s*\"[\w.\-]+\"\s*:\s*[\{\"]))",
    r"(?:(?:<e>)\s*+)?\s*(?P<name>[\w.\-]+)\s*",
    r"\s*(?:<e>)(?!\s*\s*(?:[\w.\-]+)\s*)[\s\S]*",
    # what transformers' stream gets wrong: an optional longer form, end and word assertions
    r"</t>(?:\s*<a>)?", r"x\Z", r"x$", r"ab\b", r"a\B", r"<t>|<t>x",
    # the transformers fallbacks' unguarded blanks
    r"\s*<tool_call>", r"\s*(?:<e>|<f>)",
]
ALPHABET = list(" \n<>/{}[],:\"taxbn_efTs") + ["<tool_call>", "<|end|>", "</s>", "[T]", "<e>", "</t>", "<a>"]
texts = st.lists(st.sampled_from(ALPHABET), max_size=24).map("".join)


def _original(source: str, text: str, pos: int) -> Found | None:
    m = regex.compile(source, regex.DOTALL).search(text, pos)
    if m is None:
        return None
    groups = m.groupdict()
    return Found(m.start(), m.end(), groups)


def _leftmost(delimiter: Delimiter, text: str, offset: int, pos: int, final_text: bool) -> tuple[Found | None, int]:
    """The reader's question, without its memory: (a match no continuation changes, the first position one could)."""
    work = Work()
    start = pos
    if delimiter.anchored is not None:
        found, changeable = delimiter.at(text, offset, pos, work, final_text)
        if changeable:
            return None, pos
        if found is not None:
            return found, offset + len(text) + 1
        start = pos + 1
    found, edge = delimiter.after(text, offset, start, work, final_text)
    if found is not None and found.start < edge:
        return found, offset + len(text) + 1
    return None, min(edge, found.start) if found is not None else edge


def _same(ours: Found | None, theirs: Found | None) -> bool:
    if ours is None or theirs is None:
        return ours is theirs
    return (ours.start, ours.end, ours.groups) == (theirs.start, theirs.end, theirs.groups)


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(PATTERNS), texts, st.integers(0, 30))
def test_the_same_leftmost_match_as_written(source: str, text: str, pos: int) -> None:
    pos = min(pos, len(text))
    found, _ = _leftmost(prepare(source), text, 0, pos, final_text=True)
    assert _same(found, _original(source, text, pos))


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(PATTERNS), texts, texts, st.integers(0, 30))
@example(r"x\Z", "ax", "y", 0)  # the end of the text so far is not the end of the reply
@example(r"ab\b", "ab", "c", 0)
@example(r"x$", "x", "\nz", 0)
@example(r"</t>(?:\s*<a>)?", "</t> ", "<a>", 0)  # transformers' stream commits "</t>" here
@example(r"<t>|<t>x", "<t>", "x", 0)
@example(r"\s*(?:<e>)(?!\s*\s*(?:[\w.\-]+)\s*)[\s\S]*", "<e> ", "a", 0)
def test_what_is_final_stays_final(source: str, head: str, tail: str, pos: int) -> None:
    """On the text so far: a match called final is the match on the whole text; no match on the whole text
    starts before the position called undecided."""
    pos = min(pos, len(head))
    found, hold = _leftmost(prepare(source), head, 0, pos, final_text=False)
    whole = _original(source, head + tail, pos)
    if found is not None:
        assert _same(found, whole)
    else:
        assert whole is None or whole.start >= hold


@settings(max_examples=800, deadline=None)
@given(st.sampled_from([p for p in PATTERNS if prepare(p).lookback is not None]), texts, texts)
def test_a_window_as_wide_as_the_lookbehinds(source: str, before: str, after: str) -> None:
    delimiter = prepare(source)
    text, pos = before + after, len(before)
    base = max(0, pos - delimiter.lookback)
    assert _same(_leftmost(delimiter, text[base:], base, pos, True)[0], _leftmost(delimiter, text, 0, pos, True)[0])


def test_lookback_and_suffixes() -> None:
    assert prepare(r"(?<=\}\s*),").lookback is None and prepare(r"(?<=\})x").lookback == 2
    assert prepare(r"(?<=a(?<=b))c").lookback is None and prepare(r"(?<=a{2}b?)c").lookback == 4
    assert prepare(r"(?P<x>a)(?P=x)").lookback == 1
    assert required_suffix(r"<p=(?P<key>\w+)>(?P<value>.*?)\s*</p>") == "</p>"
    assert required_suffix(r"<p>(?P<value>.*?)</p>|x") is None and required_suffix(r"(?P<value>.*?)(?=</p>)</p>") is None
    assert required_suffix(r"a\.b\d") is None and required_suffix(r"x\]") == "x]"


def test_unknown_syntax_is_used_as_written() -> None:
    delimiter = prepare(r"(?i)<TOOL>")
    assert delimiter.search.pattern == r"(?i)<TOOL>" and delimiter.anchored is None and delimiter.lookback is None
    found, _ = _leftmost(delimiter, "x <tool>", 0, 0, True)
    assert found is not None and found.start == 2
