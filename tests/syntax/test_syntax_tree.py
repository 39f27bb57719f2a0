"""The AST's contract: strict grammar, spans on every node and inside their parents, full traversal."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from chatjinja.errors import TemplateSyntaxError
from chatjinja.source import Source, Span
from chatjinja.syntax import NodeVisitor, ast, build_parser, iter_child_nodes, parse, walk
from chatjinja.syntax.visitor import child_fields, dispatch_table
from tests.syntax.support import SYNTAX_CASES, corpus_sources

REPO = Path(__file__).resolve().parents[2]
DEVSTRAL = REPO / "templates" / "devstral-small-2-24b-instruct-2512.jinja"


def _accepted_case_texts() -> list[str]:
    return [
        p.read_bytes().decode("utf-8") for p in sorted(SYNTAX_CASES.glob("*.jinja")) if not p.stem.startswith("error-")
    ]


def _trees() -> list[ast.Template]:
    texts = _accepted_case_texts() + [text for _, text in corpus_sources()]
    if DEVSTRAL.exists():
        texts.append(DEVSTRAL.read_text(encoding="utf-8"))
    trees = []
    for text in texts:
        try:
            trees.append(parse(text))
        except TemplateSyntaxError:
            pass
    return trees


@pytest.fixture(scope="module")
def trees():
    return _trees()


def test_grammar_builds_in_strict_mode():
    """strict=True turns shift/reduce and reduce/reduce conflicts into errors."""
    build_parser(strict=True)


def test_every_node_class_has_a_span():
    classes = ast.node_classes()
    assert len(classes) >= 50
    for cls in classes:
        assert dataclasses.is_dataclass(cls), cls
        names = [f.name for f in dataclasses.fields(cls)]
        assert names[0] == "span", cls


def test_goldens_use_every_node_class():
    seen = {type(node) for text in _accepted_case_texts() for node in walk(parse(text))}
    assert set(ast.node_classes()) - seen == set()


def _check_spans(node: ast.Node, text: str) -> None:
    span = node.span
    assert isinstance(span, Span)
    assert 0 <= span.start <= span.end <= len(text), node
    for child in iter_child_nodes(node):
        assert span.start <= child.span.start and child.span.end <= span.end, (
            type(node).__name__,
            node.span,
            type(child).__name__,
            child.span,
        )
        _check_spans(child, text)


def test_spans_nest(trees):
    for tree in trees:
        text_length = tree.span.end
        assert tree.span.start == 0
        _check_spans(tree, " " * text_length)


def test_template_body_spans_tile_the_source():
    """Top-level statements cover the template text without gaps or overlaps."""
    for text in _accepted_case_texts():
        tree = parse(text)
        position = 0
        for stmt in tree.body:
            assert stmt.span.start == position, (stmt, text)
            position = stmt.span.end
        assert position == len(text)


def _naive_children(node: ast.Node) -> list[ast.Node]:
    out = []
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        values = value if isinstance(value, tuple) else (value,)
        out.extend(v for v in values if isinstance(v, ast.Node) and field.name != "span")
    return out


def test_visitor_reaches_every_node(trees):
    class Collect(NodeVisitor):
        def __init__(self):
            self.seen = []

        def generic_visit(self, node):
            self.seen.append(node)
            super().generic_visit(node)

    for tree in trees:
        expected = []
        stack = [tree]
        while stack:
            node = stack.pop()
            expected.append(node)
            stack.extend(reversed(_naive_children(node)))
        visitor = Collect()
        visitor.visit(tree)
        assert [id(n) for n in visitor.seen] == [id(n) for n in expected]
        assert [id(n) for n in walk(tree)] == [id(n) for n in expected]


def test_visit_methods_dispatch_by_class():
    class Names(NodeVisitor):
        def __init__(self):
            self.names = []

        def visit_Name(self, node):
            self.names.append(node.name)

    visitor = Names()
    visitor.visit(parse("{% for m in messages %}{{ m.content ~ suffix }}{% endfor %}"))
    assert visitor.names == ["m", "messages", "m", "suffix"]


def test_visit_methods_of_a_base_class_stand_for_the_classes_below_it():
    """``visit_Expr`` / ``visit_Stmt`` take every expression / statement without a method of its own."""

    class Kinds(NodeVisitor):
        def __init__(self):
            self.seen = []

        def visit_Name(self, node):
            self.seen.append(("name", node.name))

        def visit_Expr(self, node):
            self.seen.append(("expr", type(node).__name__))
            self.generic_visit(node)

        def visit_Stmt(self, node):
            self.seen.append(("stmt", type(node).__name__))
            self.generic_visit(node)

    visitor = Kinds()
    visitor.visit(parse("{% if a %}{{ b.c }}x{% endif %}"))
    assert visitor.seen == [("stmt", "If"), ("name", "a"), ("stmt", "Output"), ("expr", "Getattr"), ("name", "b"),
                            ("stmt", "Data")]


def test_child_fields_are_the_fields_declared_to_hold_nodes():
    """Derived from the annotations, once per class: a node, an optional node or a tuple of nodes; never a plain value."""
    assert child_fields(ast.For) == (("target", False), ("iter", False), ("condition", False), ("body", True),
                                     ("else_body", True), ("open_tag", False), ("else_tag", False), ("end_tag", False))
    assert child_fields(ast.Const) == ()  # ``value: Any`` holds a literal, never a node
    assert child_fields(ast.Filter) == (("node", False), ("args", True), ("kwargs", True), ("dyn_args", False),
                                        ("dyn_kwargs", False))
    for cls in ast.node_classes():
        hints = {f.name: f.type for f in dataclasses.fields(cls)}
        for name, many in child_fields(cls):
            assert hints[name].startswith("tuple[") == many, (cls, name)


def test_a_dispatch_table_maps_each_concrete_class_to_its_handlers_in_order():
    table = dispatch_table([((ast.Name, ast.Output), "first"), ((ast.Expr,), "second"), ((ast.Name,), "first")])
    assert table[ast.Name] == ["first", "second"]
    assert table[ast.Output] == ["first"]
    assert table[ast.Getattr] == ["second"]
    assert set(table) == {cls for cls in ast.node_classes() if issubclass(cls, ast.Expr)} | {ast.Output}
    assert ast.Expr not in table  # only concrete classes: a node's type looks its handlers up directly


@pytest.mark.skipif(
    not DEVSTRAL.exists(), reason="templates/devstral-small-2-24b-instruct-2512.jinja not in this checkout"
)
def test_devstral_raise_exception_spans():
    text = DEVSTRAL.read_text(encoding="utf-8")
    tree = parse(Source(text, DEVSTRAL.name))
    calls = [
        n
        for n in walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.node, ast.Name) and n.node.name == "raise_exception"
    ]
    lines = text.split("\n")
    expected = [
        (i + 1, line.index("raise_exception") + 1) for i, line in enumerate(lines) if "raise_exception(" in line
    ]
    assert [(c.span.line, c.span.column) for c in calls] == expected
    first = calls[0]
    assert (first.span.line, first.span.column) == (18, 21)
    assert (
        text[first.span.start : first.span.end]
        == "raise_exception('Only text chunks are supported in system message contents.')"
    )
    message = first.args[0]
    assert (
        isinstance(message, ast.Const) and message.value == "Only text chunks are supported in system message contents."
    )
    assert (message.span.line, message.span.column, message.span.end_column) == (18, 37, 97)
    output = next(n for n in walk(tree) if isinstance(n, ast.Output) and n.expr is first)
    assert output.tag.strip_left and not output.tag.strip_right
    assert (output.span.line, output.span.column) == (18, 17)


def test_span_spot_checks():
    text = "{% if x %}\n  {{- user.name | upper }}\n{%- endif %}"
    tree = parse(text)
    stmt = tree.body[0]
    assert isinstance(stmt, ast.If)
    assert (stmt.open_tag.span.line, stmt.open_tag.span.column, stmt.open_tag.span.end_column) == (1, 1, 11)
    assert stmt.end_tag.strip_left and (stmt.end_tag.span.line, stmt.end_tag.span.column) == (3, 1)
    output = stmt.body[1]
    assert isinstance(output, ast.Output) and output.tag.strip_left
    flt = output.expr
    assert isinstance(flt, ast.Filter) and text[flt.span.start : flt.span.end] == "user.name | upper"
    assert (flt.span.line, flt.span.column, flt.span.end_line, flt.span.end_column) == (2, 7, 2, 24)


def test_error_positions():
    with pytest.raises(TemplateSyntaxError) as info:
        parse("line one\n{% for m in messages %}\n  {{ m }}\n", name="t.jinja")
    err = info.value
    assert err.open_block == "for" and "'endfor'" in err.expected
    assert str(err) == "unclosed 'for' block opened at 2:1, expected 'endfor'"
    assert err.source_name == "t.jinja" and err.location() == "t.jinja:4:1"
    with pytest.raises(TemplateSyntaxError) as info:
        parse("{{ a +\n   }}")
    assert (info.value.lineno, info.value.column) == (2, 4)
    assert info.value.expected == ("an expression",)


def test_static_half_never_imports_jinja2():
    code = (
        "import sys; from chatjinja.syntax import parse; "
        "parse('{% for m in messages %}{{ m.content|trim }}{% endfor %}'); "
        "assert 'jinja2' not in sys.modules, 'jinja2 imported'"
    )
    env = {"PYTHONPATH": str(REPO / "src")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr


def test_parser_is_built_once():
    from chatjinja.syntax import parser as module

    parse("{{ x }}")
    built = module._built
    parse("{{ y }}")
    assert module._built is built


def test_names_and_keywords_overlap_only_where_designed():
    """States where a keyword-spelled name could be either are the three the lexer settles.

    A grammar change that adds another such state needs a decision in ``JinjaLexer`` (and a
    line in COMPATIBILITY.md), so it fails here first.
    """
    from chatjinja.syntax import parser as module

    parse("{{ x }}")
    driver = module._built[2]
    keywords = set(module.KEYWORDS.values())
    overlaps = {}
    for state, actions in driver.states.items():
        if "NAME" in actions and keywords & set(actions):
            overlaps[state] = frozenset(keywords & set(actions))
    kinds = set(overlaps.values())
    test_arg = {state for state, kws in overlaps.items() if "AND" in kws}
    assert test_arg == driver.lexer._test_arg_states(driver.states)
    assert kinds - {overlaps[s] for s in test_arg} == {frozenset({"NOT"}), frozenset({"WITH", "WITHOUT"})}


def test_fast_spans_are_real_spans():
    """The parser builds spans without Span's frozen-dataclass __init__; they must be the same objects."""
    from chatjinja.syntax.transform import new_span

    assert new_span is not Span, "Span changed shape: the parser fell back to the (slower) constructor"
    made = new_span(2, 3, 4, 5, 10, 20)
    assert type(made) is Span and made == Span(2, 3, 4, 5, 10, 20) and hash(made) == hash(Span(2, 3, 4, 5, 10, 20))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.line = 1  # type: ignore[misc]


def test_string_unescaping_matches_the_decoder():
    """The fast path (no warnings filter) decodes like the guarded one, and bad escapes still raise."""
    import warnings

    from chatjinja.syntax.transform import unescape

    def guarded(body: str) -> str:
        body = body.replace("\r\n", "\n").replace("\r", "\n")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return body.encode("ascii", "backslashreplace").decode("unicode-escape")

    bodies = ["plain", "a\\nb", "tab\\t", "q\\'s", 'q\\"s', "\\x41\\u00e9\\U0001F600", "\\101", "\\N{BULLET}",
              "odd \\d \\s", "\\777", "é\\n", "\\\\", "line\\\ncontinued", "cr\r\nlf\r"]  # fmt: skip
    for body in bodies:
        assert unescape(body) == guarded(body), body
    for bad in ["\\x4", "\\u12", "\\N{NO SUCH NAME}", "end\\"]:
        with pytest.raises(UnicodeDecodeError):
            unescape(bad)


def test_lexer_fast_path_matches_the_exact_loop():
    """A tag's tokens come from one findall where possible, else from the exact regex loop; both must
    give the same tokens and errors, for every template and broken variants of the golden cases."""
    from chatjinja.syntax.parser import _parser

    fast = _parser()[2].lexer
    exact = type(fast).__new__(type(fast))
    exact.__dict__.update(fast.__dict__)
    # an end mark that never occurs: every tag goes to the exact loop
    exact._fast = {kind: (findall, "\0", kinds) for kind, (findall, _, kinds) in fast._fast.items()}

    def tokens(lexer, text: str) -> list:
        return [
            (kind, str(value) if isinstance(value, Exception) else value, start, end)
            for chunk in lexer.chunks(text)
            for kind, value, start, end in chunk
        ]

    texts = [p.read_bytes().decode("utf-8") for p in sorted(SYNTAX_CASES.glob("*.jinja"))]
    texts += [text for _, text in corpus_sources()]
    tricky = [
        "{{ {'a': {'b': 1}} }}", "{{ {'a': 1}}}", "{{ '}}' ~ x }}", "{% set x = '%}' %}", "{{ x -}}", "{%- if a +%}",
        "{{ (a }}", "{{ a) }}", "{{ [a) }}", "{{ 1.5 + 0x1f + 1_0 + 1e5 + 1.2.3 }}", "{{ é + _x + ٣ }}", "{{ a § b }}",
        "{{ 00 + 007 + 0_0 + 12x + x.0.1 + 1__2 + ٣٤ + ²2 + 9 }}",
        "{{ 'a\\nb' ~ '\\x4' }}", "{{ 'open }}", "{{ x ", "{% if a %}{{ b }}", "{{ a\u0301 }}", "{% for x in (1, 2) %}",
    ]  # fmt: skip
    broken = []
    for text in texts[:80]:
        broken += [text[:cut] for cut in range(1, len(text), max(1, len(text) // 8))]
    for text in texts + tricky + broken:
        assert tokens(fast, text) == tokens(exact, text), text[:200]


def test_set_tag_shortcut_matches_the_nesting_count():
    """Where the nesting count skips a ``{% set %}`` tag's tokens, it opens a block exactly when counting them would."""
    from chatjinja.syntax.parser import _count_nesting, _parser, _set_opens_block

    lexer = _parser()[2].lexer
    texts = [text for _, text in corpus_sources()]
    texts += ["{% set a %}", "{% set a = 1 %}", "{% set (a, b) %}", "{% set (a, b) = (1, 2) %}", "{% set a = (1) %}",
              "{% set a | upper %}", "{% set a | f(b=1) %}", "{% set a, b = f(c=1) %}", "{% set ns.x = [1] %}",
              "{% set a %}{% endset %}"]
    checked = set()
    for text in texts:
        for tokens in lexer.chunks(text):
            head = tokens[1] if len(tokens) > 1 and tokens[0][0] == "DATA" else tokens[0]
            if head[0] != "TAG_SET" or tokens[-1][0] != "BLOCK_END":
                continue
            opens = _set_opens_block(tokens)
            if opens is None:
                continue
            state = [0, 0, False, False]
            _count_nesting(tokens, state, 10**6, text)
            assert opens == (state[1] == 1), tokens
            checked.add(opens)
    assert checked == {True, False}
