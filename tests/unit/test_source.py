"""Line/column positions: 1-based, exclusive end, line breaks counted as jinja2 counts them."""

from __future__ import annotations

import jinja2
import pytest

from chatjinja.source import LineIndex, Source


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_lines_match_jinja2_line_numbers(newline):
    text = newline.join(["a", "{{ x }}", "", "{% if %}"])
    with pytest.raises(jinja2.TemplateSyntaxError) as info:
        jinja2.Environment().parse(text)
    index = LineIndex(text)
    offset = text.index("{% if")
    assert index.position(offset) == (info.value.lineno, 1)
    assert index.line_text(2) == "{{ x }}"
    assert index.line_text(3) == ""
    assert index.line_count == 4


def test_span_and_cover():
    index = Source("ab\ncd").lines
    first, second = index.span(0, 2), index.span(3, 5)
    assert (first.line, first.column, first.end_line, first.end_column) == (1, 1, 1, 3)
    assert (second.line, second.column, second.end_column) == (2, 1, 3)
    both = first.cover(second)
    assert (both.start, both.end, both.line, both.end_line) == (0, 5, 1, 2)
    assert str(second) == "2:1"


def test_a_span_is_its_two_positions() -> None:
    """``span`` (which takes one lookup for a span within a line) equals the two ``position`` lookups, on random
    text with every kind of line break jinja2 counts."""
    import random

    from chatjinja.source import LineIndex, Span

    rng = random.Random(5)
    for _ in range(2000):
        text = "".join(rng.choice("ab\n\r") for _ in range(rng.randint(0, 30)))
        lines = LineIndex(text)
        for _ in range(10):
            start, end = rng.randint(0, len(text)), rng.randint(0, len(text))
            assert lines.span(start, end) == Span(*lines.position(start), *lines.position(end), start, end)
