"""``chatjinja.syntax.whitespace`` is the one whitespace model: the analyser's copy computes the same texts.

(``analysis.execute.effective_texts`` is to be replaced by ``syntax.whitespace.effective_texts``; until
then this keeps the two equal, and afterwards it checks the re-export.)
"""

from __future__ import annotations

import pytest

from chatjinja.errors import TemplateSyntaxError
from chatjinja.syntax import parse
from chatjinja.syntax.whitespace import effective_texts, kept_ranges, tags_and_datas
from chatjinja.syntax.visitor import walk
from tests.syntax.support import corpus_sources

_SOURCES = corpus_sources()


@pytest.mark.corpus
@pytest.mark.skipif(not _SOURCES, reason="../shared/corpus not found")
def test_same_texts_as_the_analyser_on_the_corpus() -> None:
    from chatjinja.analysis.execute import effective_texts as analyser_texts

    compared = 0
    for key, text in _SOURCES:
        try:
            tree = parse(text)
        except TemplateSyntaxError:
            continue
        assert effective_texts(tree, text) == analyser_texts(tree, text), key
        compared += 1
    assert compared > 380


@pytest.mark.parametrize("text, kept", [
    ("{% if x %}\n  a\n{% endif %}\n", ["  a\n"]),  # trim_blocks after %}, lstrip_blocks before {%
    ("{{ x }}\n  {{ y }}", ["\n  "]),  # never before {{
    ("{%- if x -%}\n  a  \n{%- endif %}", ["a"]),  # - strips all whitespace on its side
    ("{% if x +%}\n  a\n  {%+ endif %}", ["\n  a\n  "]),  # + keeps it
    ("a\n", ["a"]),  # one trailing newline dropped (keep_trailing_newline=False)
    ("a\r\n", ["a"]),
])
def test_kept_text(text: str, kept: list[str]) -> None:
    tags, datas = tags_and_datas(walk(parse(text)))
    assert [text[a:b] for a, b in kept_ranges(text, tags, datas).values() if b > a] == kept
