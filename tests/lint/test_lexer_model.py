"""The linter's whitespace model (chatjinja.lint.lexer) against jinja2's own lexer, with transformers' options."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from chatjinja.lint.lexer import ScanError, scan
from tests.conftest import corpus_or_skip, corpus_templates

HERE = Path(__file__).parent
BUNDLED = sorted((HERE.parents[1] / "templates").glob("*.jinja"))
HOSTILE = sorted((HERE / "hostile").glob("*.jinja"))

SHAPES = [
    "{% if x %}\n  a\n{% endif %}\n",
    "  {% if x %}\n{%- endif %}  \n  {{ y }}  \n",
    "{% if x +%}\n  {%+ endif %}\n",
    "{# c #}\n   {# d -#}   \n{{ a -}}\n\n{{ b }}",
    "{% raw %}\n  {{ x }}\n  {% endraw %}\n\n",
    "{% for a in b %}\r\n    {{ a }}\r\n{% endfor %}\r\n",
    "\t{% if x %}\t\n\t{% endif %}",
    "a\n    {{ 'x' }}\n    {% if y %}b{% endif %}",
    "{{ {'a': {'b': 1}} }}\n  {% set d = {'x': '%}'} %}\n  {{ d }}",
]


def _reference(text: str) -> list[str]:
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return [value for _, token, value in env.lexer.tokeniter(text, None) if token == "data"]


def _ours(text: str) -> list[str]:
    result = scan(text)
    return [text[t.kept_start : t.kept_end].replace("\r\n", "\n") for t in result.texts if t.kept_end > t.kept_start]


def _check(text: str) -> None:
    try:
        expected = _reference(text)
    except jinja2.TemplateSyntaxError:
        with pytest.raises(ScanError):
            _ours(text)
        return
    assert _ours(text) == expected


@pytest.mark.parametrize("text", SHAPES)
def test_shapes(text: str) -> None:
    _check(text)


@pytest.mark.parametrize("path", BUNDLED + HOSTILE, ids=lambda p: p.name)
def test_bundled_and_hostile(path: Path) -> None:
    _check(path.read_text(encoding="utf-8"))


@pytest.mark.corpus
def test_corpus() -> None:
    corpus_or_skip()
    mismatches = []
    for path in corpus_templates():
        text = path.read_text(encoding="utf-8")
        try:
            expected = _reference(text)
        except jinja2.TemplateSyntaxError:
            continue
        if _ours(text) != expected:
            mismatches.append(path.name)
    assert mismatches == []
