"""The linter's budgets: the static half's source limits, which are the renderer's (``chatjinja.limits``).

Any template within them is linted whole in bounded memory; any beyond them stops with one LN003 naming
the limit, exactly where ``chatjinja.analyze`` stops. Memory is the tracemalloc peak of a lint in a fresh
process; work is counted in executed Python lines (deterministic), never timed. Wall times are in
benchmarks/bench_static_budgets.py's output (``--lint``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import chatjinja
from chatjinja.limits import (
    MAX_FINDINGS,
    MAX_SOURCE_CHARS,
    MAX_SOURCE_NESTING,
    MAX_SOURCE_TOKENS,
    MAX_TREE_DEPTH,
    StaticLimitExceeded,
)
from chatjinja.lint import lint

from ..analysis.test_static_budgets import PAYLOADS
from ..work import executed_lines

SRC = Path(__file__).resolve().parents[2] / "src"
MB = 1024 * 1024

_UNIT = "{% set x = messages[0].content %}{{ x|trim }}\n"
_CHAIN = "{{ 1" + " + 1" * 170 + " }}\n"
_CHAIN_TOKENS = 2 * 170 + 3 + 1  # ``{{``, 171 ones, 170 pluses, ``}}`` and the newline's data run
# name -> Python expression building the template text
SHAPES = {
    "nested_ifs_30000": "'{% if x %}' * 30000 + 'a' + '{% endif %}' * 30000",
    "nested_ifs_3000": "'{% if x %}' * 3000 + 'a' + '{% endif %}' * 3000",  # under the size limit
    "statements_60000": "'{% set x = 1 %}{{ x }}\\n' * 60000",  # 1.4 M characters
    "addition_chain_5000": "'{{ ' + ' + '.join(['1'] * 5000) + ' }}'",
    "attribute_path_5000": "'{{ messages' + '.a' * 5000 + ' }}'",
    "largest_linted": f"(_UNIT * ({MAX_SOURCE_TOKENS} // 16))",  # up to the token limit (16 a unit), less than one unit
    # up to the token limit with no finding at all: every node goes through every rule
    "largest_clean": f"(_CHAIN * ({MAX_SOURCE_TOKENS} // {_CHAIN_TOKENS}))",
    # (one level short of the limit: the subscript's bracket counts too)
    "deepest_linted": f"'{{% if x %}}' * {MAX_SOURCE_NESTING - 1} + '{{{{ messages[0].content }}}}' + '{{% endif %}}' * {MAX_SOURCE_NESTING - 1}",
}


def _lint_in_fresh_process(expression: str, traced: bool = True) -> dict:
    """Lint in a fresh process: the codes, the LN003 messages and the peak, the lint's own (tracemalloc) or, for
    the 1 MiB templates (where tracing would multiply the test's time), the process's peak RSS."""
    script = textwrap.dedent(f"""
        import json, resource, sys, tracemalloc
        def _peak_rss():  # this process's high-water mark (ru_maxrss keeps the forking parent's across exec)
            with open("/proc/self/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) * 1024
        sys.path.insert(0, {str(SRC)!r})
        _UNIT = {_UNIT!r}
        _CHAIN = {_CHAIN!r}
        text = {expression}
        from chatjinja.lint import lint
        lint("{{{{ 1 }}}}")  # imports and the parser tables are not the lint's cost
        if {traced!r}:
            tracemalloc.start()
        found = lint(text)
        peak = tracemalloc.get_traced_memory()[1] if {traced!r} else _peak_rss()
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
    nesting = f"max_source_nesting exceeded (limit {MAX_SOURCE_NESTING}): {MAX_SOURCE_NESTING + 1} nested"
    limit = {"nested_ifs_3000": nesting, "nested_ifs_30000": nesting,
             "statements_60000": f"max_source_chars exceeded (limit {MAX_SOURCE_CHARS})"}.get(
        name, f"more than {MAX_TREE_DEPTH} levels deep")
    assert limit in result["messages"][0]
    assert result["peak"] < 64 * MB, result


@pytest.mark.parametrize("name", ["largest_clean", "deepest_linted"])
def test_at_the_limits_linted_whole_within_512_mb(name: str) -> None:
    result = _lint_in_fresh_process(SHAPES[name], traced=name != "largest_clean")
    if name == "largest_clean":  # the most whole chains within the token limit
        from chatjinja.syntax.parser import _parser

        assert sum(len(chunk) for chunk in _parser()[2].lexer.chunks(_CHAIN)) == _CHAIN_TOKENS
        assert result["chars"] == len(_CHAIN) * (MAX_SOURCE_TOKENS // _CHAIN_TOKENS)
    assert "LN003" not in result["codes"], result
    assert bool(result["codes"]) == (name == "deepest_linted"), result
    assert result["peak"] < 512 * MB, result


def test_a_template_of_many_findings_stops_at_the_findings_budget_within_512_mb() -> None:
    result = _lint_in_fresh_process(SHAPES["largest_linted"], traced=False)
    assert result["messages"] == [f"max_findings exceeded (limit {MAX_FINDINGS}): the lint stopped at this finding "
                                  "(CT001); nothing after it was checked"], result
    assert result["peak"] < 512 * MB, result


def test_the_findings_budget_stops_the_lint_where_it_is_reached(monkeypatch) -> None:
    """MAX_FINDINGS findings, then one LN003 at the next one's position; no rule sees what follows (the SC005
    at the end is not reported) and unused suppressions are not reported either (the lint did not see their lines)."""
    unit = "{% set x = messages[0].content %}{{ x|trim }}\n"
    text = "{# chatjinja: ignore[TK001] #}\n" + unit * 10 + "{{ 'a' * 10**10 }}\n"
    whole = lint(text)
    assert len(whole) > 10 and {"SC005", "LN001"} <= {d.code for d in whole}
    monkeypatch.setattr("chatjinja.limits.MAX_FINDINGS", 4)
    found = lint(text)
    stops = [d for d in found if d.code == "LN003"]
    kept = [d for d in found if d.code != "LN003"]
    assert len(stops) == 1 and len(kept) == 4, found
    assert all(d in whole for d in kept) and "SC005" not in {d.code for d in found}
    assert "LN001" not in {d.code for d in found}
    # the LN003 sits where the lint's fifth finding is: a finding of the whole lint that is not kept
    assert stops[0].span.start in {d.span.start for d in whole if d not in kept}
    assert stops[0].message.startswith("max_findings exceeded (limit 4): the lint stopped at this finding (")
    assert lint(text, ignore=["LN003"]) == kept


def _lines(text: str) -> int:
    """Python lines executed to lint ``text`` (a deterministic measure of the work)."""
    return executed_lines(lambda: lint(text))


@pytest.mark.parametrize("body", [
    "{% if messages[0].content is string %}{{ messages[0].content|trim }}",
    "{% for m in messages %}{% if m.role == 'user' %}{{ m.content ~ '!' }}",
])
def test_work_grows_linearly_with_nesting(body: str, monkeypatch) -> None:
    """Doubling the nesting about doubles the work: nothing climbs the enclosing blocks. (The limits, which
    would cap any quadratic term at 48 levels, are lifted for this test.)"""
    monkeypatch.setattr("chatjinja.limits.MAX_SOURCE_NESTING", 10_000)
    monkeypatch.setattr("chatjinja.limits.MAX_TREE_DEPTH", 100_000)
    closers = "".join("{% end" + word + " %}" for word in ("if", "for") if "{% " + word in body)

    def nested(n: int) -> str:
        return body * n + closers * n

    lint(nested(3))  # the parser tables and imports are built once, not per lint
    small, large = _lines(nested(100)), _lines(nested(200))
    assert large < 2.3 * small, (small, large)


def _analysis_limit(text: str) -> str | None:
    try:
        chatjinja.analyze(text)
    except StaticLimitExceeded as exc:
        return exc.limit if exc.limit.startswith("max_source") else None
    return None


@pytest.mark.parametrize("shape", [
    "'{% if x %}' * n + '{{ messages[0].content }}' + '{% endif %}' * n",  # blocks
    "'{{ ' + '(' * n + 'messages' + ')' * n + ' }}'",  # brackets
    "'{{ messages' + '.a' * (4 * n) + ' }}'",  # the tree's depth: an attribute path
    "'{{ 1' + ' + 1' * (4 * n) + ' }}'",  # an operator chain
    "'{{ x' + '|trim' * (4 * n) + ' }}'",  # a filter chain
])
def test_lint_refuses_exactly_what_analyze_refuses(shape: str) -> None:
    """One set of limits: around each limit, LN003 appears exactly where the analyser raises StaticLimitExceeded."""
    verdicts = []
    for n in range(MAX_SOURCE_NESTING - 3, MAX_SOURCE_NESTING + 3):
        text = eval(shape, {"n": n})  # noqa: S307 - the test's own expressions
        refused = _analysis_limit(text)
        ln003 = [d.message for d in lint(text) if d.code == "LN003"]
        assert bool(ln003) == bool(refused), (n, refused, ln003)
        assert not ln003 or ln003[0].startswith(f"{refused} exceeded"), ln003
        verdicts.append(bool(refused))
    assert verdicts[0] is False and verdicts[-1] is True, verdicts  # the limit is crossed inside the range


def test_size_limit_is_the_renderers() -> None:
    at_limit = "{{ messages[0].content }}" + " " * (MAX_SOURCE_CHARS - 25)
    assert len(at_limit) == MAX_SOURCE_CHARS
    assert "LN003" not in {d.code for d in lint(at_limit, select=["LN"])}
    over = [d.message for d in lint(at_limit + " ", select=["LN"])]
    assert over == [f"max_source_chars exceeded (limit {MAX_SOURCE_CHARS}): template source has {MAX_SOURCE_CHARS + 1} "
                    "characters; nothing else was checked"]


def test_attack_payloads_lint_in_little_memory() -> None:
    """Every attack payload of tests/analysis/test_static_budgets.py, linted one after another in one fresh process:
    LN003 exactly for those beyond the source limits, every other linted whole, and the process's peak RSS (the
    interpreter included, so a bound on each lint's) under 512 MB. (A payload of over MAX_FINDINGS findings stops at
    the findings budget; that is its own LN003.)"""
    script = textwrap.dedent(f"""
        import json, resource, sys
        def _peak_rss():  # this process's high-water mark (ru_maxrss keeps the forking parent's across exec)
            with open("/proc/self/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) * 1024
        sys.path.insert(0, {str(SRC)!r})
        sys.path.insert(0, {str(SRC.parent)!r})
        from tests.analysis.test_static_budgets import PAYLOADS
        from chatjinja.lint import lint
        def _codes(found):  # an LN003 of the findings budget (a payload of many findings) is named apart
            return sorted({{"LN003 max_findings" if d.code == "LN003" and d.message.startswith("max_findings")
                           else d.code for d in found}})
        out = {{name: _codes(lint(text)) for name, (text, _expected) in PAYLOADS.items()}}
        print(json.dumps([out, _peak_rss()]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=True)
    results, peak = json.loads(done.stdout)
    assert set(results) == set(PAYLOADS)
    for name, codes in results.items():
        beyond = PAYLOADS[name][1].startswith("max_source")
        assert ("LN003" in codes) == beyond, (name, codes)
        assert "LN002" not in codes, (name, codes)
    assert peak < 512 * MB, peak


def test_suppressions_cost_linear_work() -> None:
    """Each diagnostic is matched against its own line's suppressions only: doubling a template of suppressed lines
    about doubles the work (matching every diagnostic against every suppression made it quadratic)."""
    line = "{% for m in messages %}\n    {{ m.content }} {# chatjinja: ignore[WS001] #}\n{% endfor %}\n"
    lint(line)
    small, large = _lines(line * 150), _lines(line * 300)
    assert large < 2.3 * small, (small, large)
