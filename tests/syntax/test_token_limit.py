"""The static half's token limit (``chatjinja.limits.MAX_SOURCE_TOKENS``): exact, and the parse does no work past it.

Work is counted in executed Python lines (deterministic), never timed; the wall times of the largest
templates within the limit are in benchmarks/bench_static_budgets.py's output.
"""

from __future__ import annotations

import pytest

import chatjinja
from chatjinja.limits import MAX_SOURCE_TOKENS, StaticLimitExceeded
from chatjinja.lint import lint
from chatjinja.syntax import parse
from chatjinja.syntax.parser import _parser
from tests.work import executed_lines


def _count(text: str) -> int:
    return sum(len(chunk) for chunk in _parser()[2].lexer.chunks(text))


def _list_of(tokens: int) -> str:
    """A template of exactly ``tokens`` tokens, one shallow output (``{{ [1, 1, ...] }}``: 2 m + 3 for m items,
    one more for a data character after it), cheap to analyse."""
    items, extra = divmod(tokens - 3, 2)
    return "{{ [" + ", ".join(["1"] * items) + "] }}" + "x" * extra


@pytest.mark.parametrize("tokens", [5, 6, 1001, 1002])
def test_the_token_counts_of_the_test_shape(tokens: int) -> None:
    """The shape's count by hand: ``{{``, ``[``, m items, m - 1 commas, ``]``, ``}}``, and a data run."""
    assert _count(_list_of(tokens)) == tokens


@pytest.mark.parametrize("shape", [
    "'{{ messages[0].content }}\\n' * n",  # outputs and data runs
    "'{% for m in messages %}{{ m.content }}{% endfor %}' * n",  # tags
    "'{{ 1' + ' + 1' * n + ' }}'",  # one tag of many tokens: the limit falls inside it
    "'{% set x %}' + 'a' * n + '{% endset %}{{ x }}'",  # few tokens, long data
])
def test_the_limit_is_exact(shape: str) -> None:
    """A template of ``limit`` tokens parses; with the limit one lower it stops, naming the limit, at the first token past it."""
    text = eval(shape, {"n": 40})  # noqa: S307 - the test's own expressions
    count = _count(text)
    parse(text, max_source_tokens=count)
    with pytest.raises(StaticLimitExceeded) as caught:
        parse(text, max_source_tokens=count - 1)
    assert caught.value.limit == "max_source_tokens" and caught.value.value == count - 1
    assert caught.value.message == f"max_source_tokens exceeded (limit {count - 1}): template has more than {count - 1} tokens"
    last = [token for chunk in _parser()[2].lexer.chunks(text) for token in chunk][-1]
    assert caught.value.span.start == last[2]


def _lines(text: str, limit: int) -> int:
    """Python lines executed to parse ``text`` under a token limit (a parse past it is refused)."""
    return executed_lines(lambda: parse(text, max_source_tokens=limit), (StaticLimitExceeded,))


def test_no_work_is_done_past_the_limit() -> None:
    """Twice or twenty times the limit's tokens cost the same parse: the lexer stops with the parser at the first tag past it."""
    unit = "{% for m in messages %}{{ m.content }}{% endfor %}\n"
    parse(unit)
    limit = 2_000
    at_limit = _lines(unit * (limit // _count(unit)), limit)
    twice, twenty = _lines(unit * (2 * limit // _count(unit)), limit), _lines(unit * (20 * limit // _count(unit)), limit)
    assert twenty < 1.05 * twice, (twice, twenty)
    assert twice < 1.2 * at_limit, (at_limit, twice)
    without_limit = _lines(unit * (2 * limit // _count(unit)), 10**9)
    assert twice < 0.7 * without_limit, (twice, without_limit)


def test_analyze_and_lint_refuse_exactly_past_the_default_limit() -> None:
    """At ``MAX_SOURCE_TOKENS`` tokens both read the template (the analysis runs it until its fuel is spent: a
    list of 50,000 items); one token more and both stop at the first token past the limit, naming it."""
    at_limit = _list_of(MAX_SOURCE_TOKENS)
    with pytest.raises(StaticLimitExceeded) as caught:
        chatjinja.analyze(at_limit)
    assert caught.value.limit == "analysis_fuel"
    assert "LN003" not in {d.code for d in lint(at_limit)}
    over = _list_of(MAX_SOURCE_TOKENS + 1)
    with pytest.raises(StaticLimitExceeded) as caught:
        chatjinja.analyze(over)
    assert caught.value.limit == "max_source_tokens"
    found = lint(over)
    assert [d.code for d in found] == ["LN003"]
    assert found[0].message == (f"max_source_tokens exceeded (limit {MAX_SOURCE_TOKENS}): template has more than "
                                f"{MAX_SOURCE_TOKENS} tokens; nothing else was checked")
    assert found[0].span.start == caught.value.span.start == len(over) - len("}}")  # the token past the limit


def test_the_corpus_is_far_within_the_limit(corpus) -> None:
    """The limit's documented margin (``chatjinja.limits``, docs/reference/budgets.md): the corpus's largest
    template has 2,676 tokens."""
    most = max(_count(text) for _name, text in corpus)
    assert most == 2_676
    assert most * 30 < MAX_SOURCE_TOKENS
