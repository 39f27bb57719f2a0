"""Golden files: tests/syntax/cases/*.jinja with reviewed *.ast.txt or *.error.txt beside them.

Run with UPDATE_GOLDENS=1 to rewrite the outputs, then review the diff.
"""

from __future__ import annotations


import pytest

from chatjinja.errors import TemplateSyntaxError
from chatjinja.source import Source
from chatjinja.syntax import dump, format_error, parse
from tests.goldens import UPDATE, check_golden
from tests.syntax.support import SYNTAX_CASES

CASES = sorted(SYNTAX_CASES.glob("*.jinja"))


def render_case(path) -> tuple[str, str]:
    """(suffix, text) of the golden output for one case."""
    text = path.read_bytes().decode("utf-8")
    source = Source(text, path.name)
    try:
        tree = parse(source)
    except TemplateSyntaxError as exc:
        lines = [format_error(exc, source)]
        if exc.expected:
            lines.append("expected: " + ", ".join(exc.expected))
        if exc.open_block:
            lines.append(f"open block: {exc.open_block}")
        return ".error.txt", "\n".join(lines) + "\n"
    return ".ast.txt", dump(tree)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden(path):
    suffix, actual = render_case(path)
    golden = path.with_name(path.stem + suffix)
    other = path.with_name(path.stem + (".ast.txt" if suffix == ".error.txt" else ".error.txt"))
    if UPDATE:
        golden.write_text(actual, encoding="utf-8", newline="\n")
        if other.exists():
            other.unlink()
        return
    assert not other.exists(), f"{path.name} now gives {suffix}, but {other.name} exists (UPDATE_GOLDENS=1 to rewrite)"
    check_golden(golden, actual)


def test_goldens_cover_enough():
    errors = [p for p in CASES if p.stem.startswith("error-")]
    assert len(CASES) - len(errors) >= 60
    assert len(errors) >= 15
    for path in errors:
        assert path.with_name(path.stem + ".error.txt").exists() or UPDATE, path.name


def test_goldens_agree_with_jinja2(jinja2_accepts):
    for path in CASES:
        text = path.read_bytes().decode("utf-8")
        accepted, why = jinja2_accepts(text)
        assert accepted == (not path.stem.startswith("error-")), f"{path.name}: jinja2 says {why or 'ok'}"
