"""The linter's budgets: any template is linted in bounded memory, or stops with one LN003 naming the limit.

Memory is the tracemalloc peak of a lint in a fresh process; work is counted in Python function calls
(executed lines, deterministic), never timed. Wall times are in benchmarks/bench_lint.py's output.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chatjinja.lint import lint
from chatjinja.lint.runner import MAX_DEPTH, MAX_NESTING, MAX_SOURCE_CHARS

SRC = Path(__file__).resolve().parents[2] / "src"
MB = 1024 * 1024

# name -> Python expression building the template text
SHAPES = {
    "nested_ifs_30000": "'{% if x %}' * 30000 + 'a' + '{% endif %}' * 30000",
    "nested_ifs_3000": "'{% if x %}' * 3000 + 'a' + '{% endif %}' * 3000",  # under the size limit
    "statements_60000": "'{% set x = 1 %}{{ x }}\\n' * 60000",
    "addition_chain_5000": "'{{ ' + ' + '.join(['1'] * 5000) + ' }}'",
    "attribute_path_5000": "'{{ messages' + '.a' * 5000 + ' }}'",
    "largest_linted": f"('{{% set x = messages[0].content %}}{{{{ x|trim }}}}\\n' * ({MAX_SOURCE_CHARS} // 48))",
    # (one level short of the limit: the subscript's bracket counts too)
    "deepest_linted": f"'{{% if x %}}' * {MAX_NESTING - 1} + '{{{{ messages[0].content }}}}' + '{{% endif %}}' * {MAX_NESTING - 1}",
}


def _lint_in_fresh_process(expression: str) -> dict:
    script = textwrap.dedent(f"""
        import json, sys, tracemalloc
        sys.path.insert(0, {str(SRC)!r})
        text = {expression}
        from chatjinja.lint import lint
        lint("{{{{ 1 }}}}")  # imports and the parser tables are not the lint's cost
        tracemalloc.start()
        found = lint(text)
        peak = tracemalloc.get_traced_memory()[1]
        print(json.dumps({{"chars": len(text), "peak": peak, "codes": sorted({{d.code for d in found}}),
                          "messages": [d.message for d in found if d.code == "LN003"]}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", ["nested_ifs_30000", "nested_ifs_3000", "statements_60000", "addition_chain_5000",
                                  "attribute_path_5000"])
def test_beyond_the_limits_one_ln003_in_little_memory(name: str) -> None:
    result = _lint_in_fresh_process(SHAPES[name])
    assert result["codes"] == ["LN003"], result
    assert len(result["messages"]) == 1
    limit = {"nested_ifs_3000": f"more than {MAX_NESTING} deep", "nested_ifs_30000": f"({MAX_SOURCE_CHARS})",
             "statements_60000": f"({MAX_SOURCE_CHARS})"}.get(name, f"more than {MAX_DEPTH} levels deep")
    assert limit in result["messages"][0]
    assert result["peak"] < 64 * MB, result


@pytest.mark.parametrize("name", ["largest_linted", "deepest_linted"])
def test_at_the_limits_linted_whole_within_512_mb(name: str) -> None:
    result = _lint_in_fresh_process(SHAPES[name])
    assert "LN003" not in result["codes"] and result["codes"], result
    assert result["peak"] < 512 * MB, result


def _lines(text: str) -> int:
    """Python lines executed to lint ``text`` (a deterministic measure of the work, loops in comprehensions too)."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        count += event == "line"
        return trace

    sys.settrace(trace)
    try:
        lint(text)
    finally:
        sys.settrace(None)
    return count


@pytest.mark.parametrize("body", [
    "{% if messages[0].content is string %}{{ messages[0].content|trim }}",
    "{% for m in messages %}{% if m.role == 'user' %}{{ m.content ~ '!' }}",
])
def test_work_grows_linearly_with_nesting(body: str, monkeypatch) -> None:
    """Doubling the nesting about doubles the work: nothing climbs the enclosing blocks. (The limits, which
    would cap any quadratic term at 64 levels, are lifted for this test.)"""
    monkeypatch.setattr("chatjinja.lint.runner.MAX_NESTING", 10_000)
    monkeypatch.setattr("chatjinja.lint.runner.MAX_DEPTH", 100_000)
    closers = "".join("{% end" + word + " %}" for word in ("if", "for") if "{% " + word in body)

    def nested(n: int) -> str:
        return body * n + closers * n

    lint(nested(3))  # the parser tables and imports are built once, not per lint
    small, large = _lines(nested(100)), _lines(nested(200))
    assert large < 2.3 * small, (small, large)
