"""Attack payloads for the static half: each is parsed and analysed in a fresh process, within a memory bound and the analysis fuel.

Every payload either analyses (and then reports as not supported what the renderer's budgets
refuse) or stops with :class:`~chatjinja.limits.StaticLimitExceeded` naming the limit. Bounds are
counts, never times: the ``tracemalloc`` peak of the child and the fuel it spent (wall times and
RSS are in ``benchmarks/bench_static_budgets.py``).
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from chatjinja.analysis.values import ANALYSIS_FUEL

from ..conftest import REPO

PEAK_LIMIT = 160 * 1024 * 1024  # bytes traced at once in the child (the brief's bound is 512 MB)
CONTENT = "{{ messages[0]['content'] }}"  # printed after the attack: a run that the attack stops never prints it

# name -> (source, expected): "ok" (analyses; the content is printed: the attack fits),
# "refused" (analyses; the attack stops every run, as a render's budget would, so nothing is supported),
# or the name of the static limit that stops the analysis.
MODE_LOOPS = "".join("{%% if mode%d %%}{%% for i in range(5000) %%}{{ i }}{%% endfor %%}{%% endif %%}" % k
                     for k in range(8)) + CONTENT

PAYLOADS: dict[str, tuple[str, str]] = {
    "nested ifs (30,000)": ("{% if messages %}" * 30_000 + CONTENT + "{% endif %}" * 30_000, "max_source_nesting"),
    "nested ifs (49)": ("{% if messages %}" * 49 + CONTENT + "{% endif %}" * 49, "max_source_nesting"),
    "nested blocks (48)": ("{% if messages %}" * 47 + "{% for m in messages %}{{ m.content }}{% endfor %}"
                           + "{% endif %}" * 47, "ok"),
    "60,000 statements (3 MB)": ("".join("{% set v" + str(i) + " = 'abcdefghijklmnopqrstuvwxyz0123' %}"
                                         for i in range(60_000)) + CONTENT, "max_source_chars"),
    "20,000 statements (1 MB)": ("".join("{% set v" + str(i) + " = 'abcdefghijklmnopqrstuvwxyz0123' %}"
                                         for i in range(20_000)) + CONTENT, "max_source_tokens"),
    "15,000 statements (750 KB)": ("".join("{% set v" + str(i) + " = 'abcdefghijklmnopqrstuvwxyz0123' %}"
                                           for i in range(15_000)) + CONTENT, "analysis_fuel"),
    "5,000 statements (250 KB)": ("".join("{% set v" + str(i) + " = 'abcdefghijklmnopqrstuvwxyz0123' %}"
                                          for i in range(5_000)) + CONTENT, "ok"),
    "36,000 outputs (1 MB)": (CONTENT * 36_000, "max_source_tokens"),
    "10,000 outputs (280 KB)": (CONTENT * 10_000, "analysis_fuel"),
    # the work is in the modes: the default analyses, and the modes stop at their own fuel, named as cut
    "loops in eight modes": (MODE_LOOPS, "ok"),
    "'a' * 10**10": ("{{ 'a' * 10**10 }}" + CONTENT, "refused"),
    "'a'.encode() * 10**10": ("{{ ('a'.encode() * 10**10)|length }}" + CONTENT, "refused"),
    "[1] * 10**9": ("{{ [1] * 10**9 }}" + CONTENT, "refused"),
    "[1] * 2**21 (over the items budget)": ("{{ ([1] * 2**21)|length }}" + CONTENT, "refused"),
    "'x' * 10**6 * 10**6": ("{{ 'x' * 10**6 * 10**6 }}" + CONTENT, "refused"),
    "sort of 2*10**7 items": ("{{ (['b', 'a'] * 10**7)|sort|join }}" + CONTENT, "refused"),
    "sort of a 16M-character string": ("{{ ('ba' * 8388608)|sort|join }}" + CONTENT, "analysis_fuel"),
    "sorts in a loop": ("{% set l = range(100000)|list|reverse|list %}{% for i in range(100000) %}"
                        "{{ (l|sort)[0] }}{% endfor %}" + CONTENT, "analysis_fuel"),
    "join of 10**8 items": ("{{ (['ab'] * 10**8)|join }}" + CONTENT, "refused"),
    "'%*d' % (10**9, 1)": ("{{ '%*d' % (10**9, 1) }}" + CONTENT, "refused"),
    "'{:>1000000000}'.format(1)": ("{{ '{:>1000000000}'.format(1) }}" + CONTENT, "refused"),
    "tojson(indent=500000000)": ("{{ {'a': [1, 2]}|tojson(indent=500000000) }}" + CONTENT, "refused"),
    "deep parentheses": ("{{ " + "(" * 100_000 + "1" + ")" * 100_000 + " }}" + CONTENT, "max_source_nesting"),
    "deep lists": ("{{ " + "[" * 100_000 + "]" * 100_000 + " }}" + CONTENT, "max_source_nesting"),
    "unclosed brackets": ("{{ " + "[" * 100_000, "max_source_nesting"),
    "operator chain (100,000)": ("{{ 1" + " + 1" * 100_000 + " }}" + CONTENT, "max_source_tokens"),
    "operator chain (10,000)": ("{{ 1" + " + 1" * 10_000 + " }}" + CONTENT, "max_source_nesting"),  # the tree's depth
    "concatenation chain (100,000)": ("{{ 'a'" + " ~ 'a'" * 100_000 + " }}" + CONTENT, "max_source_tokens"),
    "concatenation chain (40,000)": ("{{ 'a'" + " ~ 'a'" * 40_000 + " }}" + CONTENT, "analysis_fuel"),
    "an integer too long to print": ("{{ 0x" + "f" * 5000 + " }}" + CONTENT, "refused"),
    "a repetition by a 20,000-bit integer": ("{{ 'a' * 0x" + "f" * 5000 + " }}" + CONTENT, "refused"),
    "a range of a 20,000-bit integer": ("{% for i in range(0x" + "f" * 5000 + ") %}{% endfor %}" + CONTENT, "refused"),
    "a 1 MB number literal": ("{{ 0x" + "f" * 1_000_000 + " }}" + CONTENT, "refused"),
    "macro recursion": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}" + CONTENT, "refused"),
    "macro branching on unknown text": (
        "{% macro f(n) %}{% if messages[0]['content']|length > 5 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}"
        "{% endmacro %}{{ f(0) }}" + CONTENT, "analysis_fuel"),
    "nested loops": ("{% for i in range(10**4) %}{% for j in range(10**4) %}{% for k in range(10**4) %}{{ k }}"
                     "{% endfor %}{% endfor %}{% endfor %}" + CONTENT, "analysis_fuel"),
    "a loop past the step limit": ("{% for i in range(99999) %}{% for j in range(3) %}{% endfor %}{% endfor %}" + CONTENT,
                                   "analysis_fuel"),
    "a loop within the step limit": ("{% for i in range(1000) %}{% for j in range(3) %}{% endfor %}{% endfor %}" + CONTENT,
                                     "ok"),
    "big strings kept in a list": ("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}"
                                   "{% set ns.l = ns.l + ['a' * 10**7] %}{% endfor %}" + CONTENT, "analysis_fuel"),
}

SECURITY_PAYLOADS = sorted((REPO / "tests" / "security" / "payloads").glob("dos_*.jinja"))


def _analyse(source: str, queue: "multiprocessing.Queue") -> None:
    """In the child: analyse ``source`` traced, and report the outcome, the traced peak and the fuel spent."""
    from chatjinja import analyze
    from chatjinja.analysis import collect
    from chatjinja.errors import TemplateSyntaxError
    from chatjinja.limits import StaticLimitExceeded

    made: list = []

    class Counted(collect.Fuel):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    collect.Fuel = Counted  # (this process only)
    tracemalloc.start()
    try:
        capabilities = analyze(source)
        outcome = "ok" if capabilities.content_string else "refused"
    except StaticLimitExceeded as exc:
        outcome = exc.limit
    except TemplateSyntaxError:
        outcome = "syntax error"
    except Exception as exc:  # noqa: BLE001 - a crash is an outcome the test reports at once, not a hang
        outcome = f"crashed: {type(exc).__name__}: {exc}"[:300]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    queue.put((outcome, peak, max((f.spent for f in made), default=0), len(made)))


def analyse_in_child(source: str) -> tuple[str, int, int]:
    """``(outcome, tracemalloc peak in bytes, fuel spent)`` of analysing ``source`` in a forked process: the
    most any one fuel spent (the default mode's, then the modes' own, ``collect._facts_in_modes``), never
    more than two fuels."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_analyse, args=(source, queue))
    child.start()
    try:
        for _ in range(600):  # (a hang guard, not a measurement: at most 10 minutes, or until the child dies)
            try:
                result = queue.get(timeout=1)
                break
            except queue_module.Empty:
                if not child.is_alive():  # (what it put before it ended is still read)
                    try:
                        result = queue.get(timeout=5)
                    except queue_module.Empty:
                        result = (f"died (exit {child.exitcode})", 0, 0, 0)
                    break
        else:
            result = ("no answer in 600 s", 0, 0, 0)
    finally:
        child.join(60)
        if child.is_alive():
            child.kill()
    outcome, peak, spent, fuels = result
    assert fuels <= 2, f"{fuels} analysis fuels made: one for the default mode, one for all the modes"
    return outcome, peak, spent


@pytest.fixture(scope="module", autouse=True)
def _parser_built_before_forking():
    from chatjinja import analyze

    analyze("{{ x }}")  # the children inherit the built grammar instead of each building it


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_an_attack_on_the_static_half_stops_within_its_bounds(name):
    source, expected = PAYLOADS[name]
    outcome, peak, spent = analyse_in_child(source)
    assert outcome == expected
    assert peak < PEAK_LIMIT, f"traced peak {peak >> 20} MiB"
    assert spent <= ANALYSIS_FUEL + _LAST_CHARGE_BOUND


# one charge can pass the limit by what it charges: the largest single charge is a string or list at the
# size limits (16M characters / 256, 1M items), or a statement list's expression nodes (the source size)
_LAST_CHARGE_BOUND = 2 * 1024 * 1024


@pytest.mark.parametrize("path", SECURITY_PAYLOADS, ids=lambda p: p.stem)
def test_the_renderers_denial_of_service_payloads_stay_within_the_static_bounds(path):
    outcome, peak, spent = analyse_in_child(path.read_text(encoding="utf-8"))
    assert outcome in ("ok", "refused", "syntax error", "analysis_fuel", "max_source_nesting", "max_source_chars",
                       "max_source_tokens")
    assert peak < PEAK_LIMIT, f"traced peak {peak >> 20} MiB"
    assert spent <= ANALYSIS_FUEL + _LAST_CHARGE_BOUND


def test_analyze_on_the_command_line_names_the_limit_in_one_line(tmp_path):
    template = tmp_path / "deep.jinja"
    template.write_text(PAYLOADS["nested ifs (30,000)"][0], encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "chatjinja", "analyze", str(template)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "max_source_nesting exceeded (limit 48)" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_the_source_limits_are_the_renderers():
    """One set of defaults: the renderer's source budgets are the static half's limits."""
    from chatjinja import limits
    from chatjinja.runtime.budget import Budgets

    assert Budgets().max_source_chars == limits.MAX_SOURCE_CHARS
    assert Budgets().max_source_nesting == limits.MAX_SOURCE_NESTING


def test_the_static_half_counts_nesting_as_the_renderer_does():
    """Just under and just over the nesting limit, the static half and the renderer decide alike."""
    from chatjinja.limits import MAX_SOURCE_NESTING, StaticLimitExceeded
    from chatjinja.runtime.budget import BudgetExceeded
    from chatjinja import apply_chat_template
    from chatjinja.syntax import parse

    n = MAX_SOURCE_NESTING
    shapes = {
        "ifs": lambda k: "{% if messages %}" * k + "x" + "{% endif %}" * k,
        "brackets": lambda k: "{{ " + "(" * k + "1" + ")" * k + " }}",
        "set blocks": lambda k: "{% set a %}" * k + "x" + "{% endset %}" * k,
        "mixed": lambda k: "{% for m in messages %}" * (k // 2) + "{{ " + "[" * (k - k // 2) + "]" * (k - k // 2) + " }}"
                            + "{% endfor %}" * (k // 2),
        "set with brackets": lambda k: "{% set a = " + "(" * k + "1" + ")" * k + " %}",
    }
    for name, shape in shapes.items():
        for k in (n, n + 1):
            source = shape(k)
            try:
                apply_chat_template([{"role": "user", "content": "hi"}], source)
                renderer = "ok"
            except BudgetExceeded as exc:
                renderer = exc.budget
            except Exception:  # noqa: BLE001 - past the nesting budget (Python's own block limit, say)
                renderer = "ok"
            try:
                parse(source)
                static = "ok"
            except StaticLimitExceeded as exc:
                static = exc.limit
            assert static == renderer, (name, k)


def test_modes_past_their_fuel_are_named_as_cut():
    from chatjinja import analyze

    report = analyze(MODE_LOOPS)
    assert report.content_string and len(report.modes) == 8
    assert report.modes_cut and report.to_dict()["modes_cut"] == list(report.modes_cut)
