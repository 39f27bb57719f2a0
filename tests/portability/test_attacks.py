"""Whole portability runs on hostile templates, in the real engines, with a small injected budget.

A loop of a million iterations, one just within chatjinja's loop budget, a render of about 1 s, 50 MB of
output and the loop, filter-chain and output payloads of ``tests/security``, with a 3 s budget; and a
template that keeps eleven strings of 8 Mi characters in one conversation (within chatjinja's
``max_built_bytes``, so every engine is sent it) with time to spare. Each engine process has 160 MiB. All run in one fresh process,
after which the test finds each case compared or cut (and named, with why), no engine verdict
``identical``, no process left with the run's marker, and no engine process whose peak RSS passed the
memory budget by more than what its code takes. Nothing here reads a clock: the budget's time decides
*where* a run is cut, and the test asserts only *that* what was cut is named (and that something was,
where chatjinja's own fuel or size budgets stop the template, which no machine's speed changes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid

import pytest

from chatjinja.portability import ENGINE_NAMES, EngineUnavailable, engine
from tests.security.payloads import PAYLOAD_DIR

from .hostile_templates import MARKER, SRC, TEMPLATES, _marked

from chatjinja.observation import CLIENT_SHAPES, PROBE_SHAPES, space_of

# the members a template without modes is compared on (continue_final_message is transformers' alone)
SPACE = len(PROBE_SHAPES) + len(CLIENT_SHAPES) - 1
PROMPTED = [m.name for m in space_of("") if m.options.get("add_generation_prompt")]

#: the memory budget the runs give each engine process, and what its peak RSS may pass it by: the pages
#: of its code and libraries (RLIMIT_DATA bounds what it writes; node's binary alone is about 45 MB resident)
MEMORY = 160 << 20
CODE = 96 << 20
BUDGET = {"seconds": 3.0, "render_seconds": 0.5, "start_seconds": 5.0, "memory": MEMORY}
# the memory attack has time to spare: what stops it is the memory limit, on any machine
ROOMY = {"seconds": 120.0, "render_seconds": 60.0, "start_seconds": 60.0, "memory": MEMORY}
PAYLOADS = ("dos_nested_range", "dos_triple_range_output", "dos_output_loop", "single_map_chain")
ATTACKS = {
    # keeps_strings: @huggingface/jinja and llama.cpp pass 160 MiB on its one conversation
    **{name: (source, ROOMY if name == "keeps_strings" else BUDGET) for name, source in TEMPLATES.items()},
    **{name: ((PAYLOAD_DIR / f"{name}.jinja").read_text(encoding="utf-8"), BUDGET) for name in PAYLOADS},
}
#: stopped by chatjinja's fuel or size budgets on every conversation or some (the slow filter chain is
#: within them: how much of it a run reaches is up to the machine)
STOPPED_BY_CHATJINJA = ("loop_1m", "loop_999k", "prints_50mb", *PAYLOADS)

SCRIPT = textwrap.dedent("""
    import json, resource, sys
    sys.path.insert(0, {src!r})
    sys.path.insert(0, {root!r})
    from chatjinja.portability import PortabilityBudget, check_portability
    from tests.portability.hostile_templates import _marked
    attacks, engines, marker = json.loads(sys.stdin.read())
    runs = {{}}
    for name, (source, budget) in attacks.items():
        report = check_portability(source, engines, install=False, budget=PortabilityBudget(**budget))
        runs[name] = {{"report": report.to_dict(), "left": _marked(marker)}}
    runs["engine_peak"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps(runs))
""")


def _installed() -> list[str]:
    names = []
    for name in ENGINE_NAMES:
        try:
            engine(name, install=False)
        except EngineUnavailable:
            continue
        names.append(name)
    return names


@pytest.fixture(scope="module")
def runs() -> dict:
    names = _installed()
    required = [n for n in os.environ.get("CHATJINJA_REQUIRE_ENGINES", "").split(",") if n]
    if missing := [n for n in required if n not in names]:
        pytest.fail(f"engines required by CHATJINJA_REQUIRE_ENGINES but not installed: {', '.join(missing)}")
    if not names:
        pytest.skip("no engine installed")
    marker = uuid.uuid4().hex
    script = SCRIPT.format(src=str(SRC), root=str(SRC.parent))
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps([ATTACKS, names, marker]),
                          capture_output=True, text=True, timeout=600, env={**os.environ, MARKER: marker})
    left = _marked(marker)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    result["after"] = left
    result["engines"] = names
    return result


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_hostile_run_names_what_it_cut(runs, attack):
    report = runs[attack]["report"]
    assert report["budget"]["seconds"] == ATTACKS[attack][1]["seconds"]
    for name in runs["engines"]:
        engine_report = report["engines"][name]
        assert len(engine_report["cases"]) == SPACE  # every conversation is there: compared, or cut by name
        cut = [case["name"] for case in engine_report["cases"] if case["status"] == "cut"]
        assert all(case["cause"] for case in engine_report["cases"] if case["status"] == "cut")
        assert report["cut"].get(name, []) == cut
        assert (engine_report["verdict"] == "identical") == (engine_report["counts"].keys() <= {"identical", "both-fail"})


@pytest.mark.parametrize("attack", STOPPED_BY_CHATJINJA)
def test_what_chatjinja_stops_is_cut_in_every_engine_never_identical(runs, attack):
    report = runs[attack]["report"]
    for name in runs["engines"]:
        assert report["engines"][name]["verdict"] != "identical"
        # chatjinja's render stops at its loop budget, or (on a slow machine) the run's time stops it first
        causes = [case["cause"] for case in report["engines"][name]["cases"] if case["status"] == "cut"]
        assert any(c.startswith(("chatjinja's render stopped: BudgetExceeded", "not finished", "not run"))
                   for c in causes), causes


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_hostile_run_leaves_no_process_behind(runs, attack):
    assert runs[attack]["left"] == []


def test_no_process_is_left_once_the_runs_are_over(runs):
    assert runs["after"] == []


def test_every_engine_process_stayed_within_the_memory_budget(runs):
    assert runs["engine_peak"] <= MEMORY + CODE


def test_an_engine_that_would_keep_the_strings_is_stopped_at_the_memory_limit(runs):
    # what makes the memory test above mean something: an engine that would hold more is stopped
    cut = {name: [case for case in runs["keeps_strings"]["report"]["engines"][name]["cases"] if case["status"] == "cut"]
           for name in runs["engines"]}
    for name in set(runs["engines"]) & {"hfjs", "llamacpp"}:
        # (the template keeps them only under add_generation_prompt: the members that ask for it)
        assert [case["name"] for case in cut[name]] == PROMPTED, cut[name]
        assert cut[name][0]["cause"].endswith("(memory limit)")
