"""The runner's one walk and its dispatch: what the index records, which check the runner calls, what a passed-over node costs.

Work is counted (sequence entries, generator frames), never timed.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from chatjinja.lint import lint
from chatjinja.lint.context import Leave, LintContext
from chatjinja.lint.registry import select_rules
from chatjinja.lint.rule import Finding, Rule
from chatjinja.lint.runner import _table, lint_source
from chatjinja.source import Source
from chatjinja.syntax import ast as A
from chatjinja.syntax import parse

RULES_DIR = str(Path(inspect.getfile(Rule)).parent / "rules")


def _context(text: str, select: list[str] | None) -> LintContext:
    source = Source(text)
    return LintContext(source, parse(source), None, None, frozenset(_table(select_rules(select, []))))


def test_the_sequence_holds_only_what_the_selected_rules_visit() -> None:
    text = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    everything = LintContext(Source(text), parse(Source(text)))  # record=None: every node
    only_data = _context(text, ["WS001"])  # WS001 visits Data
    kinds = {type(e) for e in only_data.events if type(e) is not Leave}
    assert A.Data in kinds and not kinds & {A.Name, A.Const, A.Getitem}
    # the tracked and statement kinds stay (the dispatch keeps what encloses a node), each closed by a Leave
    assert {A.For, A.Output} <= kinds
    assert sum(type(e) is Leave for e in only_data.events) == sum(
        type(e) in (A.For, A.Output, A.Data) for e in only_data.events)
    assert len(only_data.events) < len([e for e in everything.events if type(e) is not Leave]) + 4
    assert {type(e) for e in everything.events} >= {A.Name, A.Const, A.Getitem}


def test_a_rule_with_one_check_per_class_has_the_runner_call_that_one() -> None:
    def refuse(node, ctx):
        raise AssertionError("the runner called check, not the class's own")

    def on_const(node, ctx):
        yield Finding(node.span.start, node.span.end, f"const {node.value!r}")

    doc = "\n".join(f"## {s}\n```jinja\n{{{{ 1 }}}}\n```" for s in
                    ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety"))
    rule = Rule("ZZ001", "per-class", "warning", "test", doc, (A.Const, A.Name), refuse,
                checks={A.Expr: lambda node, ctx: (), A.Const: on_const})
    assert rule.check_for(A.Const) is on_const
    assert rule.check_for(A.Name) is rule.checks[A.Expr]  # by the class's MRO
    found = lint_source(Source("{{ x ~ 'a' }}"), (rule,))
    assert [d.message for d in found] == ["const 'a'"]


def test_passed_over_nodes_make_no_generator() -> None:
    """Operator chains of 150 constants: SC005, TK002 and JN002 visit every node and reject each at a glance."""
    text = ("{{ " + " + ".join(["1"] * 150) + " }}\n") * 3
    frames = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(RULES_DIR) and frame.f_code.co_flags & inspect.CO_GENERATOR:
            frames.append(frame.f_code.co_name)

    lint(text, select=["SC005", "TK002", "JN002"])  # (importing the rules makes generators of its own)
    sys.setprofile(profile)
    try:
        found = lint(text, select=["SC005", "TK002", "JN002"])
    finally:
        sys.setprofile(None)
    assert found == []
    assert len(frames) <= 10, frames  # (SC005's finish and its helpers), not one per node: 900 visits


def test_the_one_line_span_is_the_two_positions() -> None:
    """The findings' spans (``LineIndex.span``, one lookup within a line) on every pair of offsets of mixed line breaks."""
    from chatjinja.source import Span

    text = "ab\r\ncd\re\n\nfgh{{ x }}\r\n"
    lines = Source(text).lines
    for start in range(len(text) + 1):
        for end in range(start, len(text) + 1):
            assert lines.span(start, end) == Span(*lines.position(start), *lines.position(end), start, end), (start, end)
