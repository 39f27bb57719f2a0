"""The linter never crashes: any text gives diagnostics (LN002 when jinja2 cannot parse it), and the whitespace
model of ``chatjinja.syntax.whitespace`` agrees with jinja2's lexer on generated templates."""

from __future__ import annotations

import jinja2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatjinja.lint import fix_source, lint
from chatjinja.errors import TemplateSyntaxError
from chatjinja.syntax import ast, parse, walk
from chatjinja.syntax.whitespace import kept_ranges, tags_and_datas

PIECES = [
    "{%", "%}", "{%-", "-%}", "{%+", "+%}", "{{", "}}", "{{-", "-}}", "{#", "#}", "-#}", "{#-",
    " if x ", " endif ", " for m in messages ", " endfor ", " set a = 1 ", " raw ", " endraw ", " else ",
    "message['content']", "m.role", " + ", " ~ ", "'str'", "\"q\"", "|trim", "|safe", ".items", "__class__",
    "\n", "\n    ", "  ", "\t", "\r\n", "text", "(", ")", "[", "]", "{", "}", "'", "\\", "\u200b", "\u202e",
]
templates = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(templates)
def test_lint_never_crashes(text: str) -> None:
    found = lint(text)
    assert all(d.span.line >= 1 and d.span.column >= 1 for d in found)
    fixed = fix_source(text)
    assert isinstance(fixed, str)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(templates)
def test_whitespace_model_matches_jinja2(text: str) -> None:
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    try:
        env.parse(text)
    except jinja2.TemplateSyntaxError:
        return  # jinja2 rejects it (the scanner may accept some of these: it does not check block nesting)
    expected = [v for _, token, v in env.lexer.tokeniter(text, None) if token == "data"]
    try:
        tree = parse(text)
    except TemplateSyntaxError:
        return  # accept/reject parity is test_ln002_parity's subject; this test compares the kept text

    nodes = list(walk(tree))
    tags, datas = tags_and_datas(nodes)
    pieces = [(a, text[a:b]) for a, b in kept_ranges(text, tags, datas).values() if b > a]
    pieces += [(n.span.start, n.text) for n in nodes if isinstance(n, ast.Raw) and n.text]
    ours = [piece.replace("\r\n", "\n") for _, piece in sorted(pieces)]
    assert ours == expected
