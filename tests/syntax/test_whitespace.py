"""``chatjinja.syntax.whitespace``, the one whitespace model the analyser and WS001 share: what it keeps.

(That it keeps what jinja2's own lexer keeps is tested on generated templates in
tests/lint/test_robustness.py.)
"""

from __future__ import annotations

import pytest

from chatjinja.syntax import parse
from chatjinja.syntax.whitespace import kept_ranges, tags_and_datas
from chatjinja.syntax.visitor import walk



@pytest.mark.parametrize("text, kept", [
    ("{% if x %}\n  a\n{% endif %}\n", ["  a\n"]),  # trim_blocks after %}, lstrip_blocks before {%
    ("{{ x }}\n  {{ y }}", ["\n  "]),  # never before {{
    ("{%- if x -%}\n  a  \n{%- endif %}", ["a"]),  # - strips all whitespace on its side
    ("{% if x +%}\n  a\n  {%+ endif %}", ["\n  a\n  "]),  # + keeps it
    ("a\n", ["a"]),  # one trailing newline dropped (keep_trailing_newline=False)
    ("a\r\n", ["a"]),
    ("a \n  {#-\n", ["a"]),  # an unclosed comment ending the template strips like a closed one
    ("a\n  {#", ["a\n"]),  # lstrip_blocks before it
])
def test_kept_text(text: str, kept: list[str]) -> None:
    tags, datas = tags_and_datas(walk(parse(text)))
    assert [text[a:b] for a, b in kept_ranges(text, tags, datas).values() if b > a] == kept
