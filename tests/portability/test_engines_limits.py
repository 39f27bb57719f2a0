"""Hostile templates in the engines: each render runs in a subprocess that is killed past its time, memory or output limit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from chatjinja.portability import Engine, EngineLimits
from chatjinja.portability.engines import _run_driver

from .conftest import engine_or_skip
from .hostile_templates import MARKER, SRC, _marked

FAST = EngineLimits(case_timeout=1.0, start_timeout=30.0, batch_timeout=20.0, memory=512 << 20, output=10_000)
CONTEXT = {"messages": [{"role": "user", "content": "hi"}]}
# a driver stand-in: reads the request, says it is ready (after "start" seconds), then behaves as each
# case's "do" says
FAKE = r"""
import ctypes, json, os, resource, sys, time
request = json.loads(sys.stdin.read())
time.sleep(float(request["source"] or 0))
print(json.dumps({"ready": True}), flush=True)
for context in request["contexts"]:
    what = context["do"]
    if what == "hang":
        if "flag" in context:  # says where it hangs
            open(context["flag"], "w").close()
        time.sleep(100)
    elif what == "limits":
        signal = ctypes.c_int()
        ctypes.CDLL(None).prctl(2, ctypes.byref(signal), 0, 0, 0)  # PR_GET_PDEATHSIG
        data, address = resource.getrlimit(resource.RLIMIT_DATA)[0], resource.getrlimit(resource.RLIMIT_AS)[0]
        print(json.dumps({"text": f"{data} {address} {signal.value}"}))
    elif what == "flood":
        sys.stdout.write("x" * 10_000_000)
    elif what == "allocate":
        block = bytearray(2 << 30)
    elif what == "abort":
        os.abort()
    elif what == "garbage":
        print("not json")
    elif what == "close":
        os.close(1); os.close(2)
        time.sleep(100)
    else:
        print(json.dumps({"text": what}))
    sys.stdout.flush()
"""


def _fake(*steps: str, start: float = 0.0, limits: EngineLimits = FAST, **deadline) -> list:
    return _run_driver((sys.executable, "-c", FAKE), str(start), [{"do": step} for step in steps], limits, **deadline)


def test_a_render_past_its_time_is_killed_and_the_next_case_runs_in_a_new_process():
    hung, after = _fake("hang", "fine")
    assert hung.text is None and hung.error == "timeout: no result within 1 s (engine process killed)"
    assert hung.limit == "time"
    assert after.text == "fine" and after.limit is None


def test_output_past_the_cap_is_not_read_and_the_process_is_killed():
    flood, after = _fake("flood", "fine")
    assert flood.error == "output limit: over 10000 characters (engine process killed)"
    assert flood.limit == "output"
    assert after.text == "fine"


def test_memory_past_the_limit_ends_the_render_not_the_machine():
    big, after = _fake("allocate", "fine")
    assert big.text is None and big.error.startswith("engine process exited with status 1: MemoryError")
    assert big.limit == "memory"
    assert after.text == "fine"


def test_the_engine_process_runs_under_the_memory_limit_and_dies_with_chatjinja():
    (limits,) = _fake("limits", limits=EngineLimits(memory=300 << 20))
    data, address, death_signal = limits.text.split()
    assert int(data) == 300 << 20  # what it may write to: the render memory budget
    assert int(address) == 300 << 20  # with nothing reserved, its address space too
    assert int(death_signal) == 9  # SIGKILL when the process that started it dies


def test_the_start_of_an_engine_is_not_charged_to_its_first_render():
    # 1.5 s to start (as node under load), then a render within its 1 s: the start has its own clock
    first, second = _fake("fine", "fine", start=1.5)
    assert (first.text, second.text) == ("fine", "fine")
    (never,) = _fake("fine", start=100, limits=EngineLimits(case_timeout=1.0, start_timeout=0.5))
    assert never.error == "timeout: the engine did not start within 0.5 s (engine process killed)"
    assert never.limit == "time"


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["interrupted", "killed"])
def test_a_run_interrupted_or_killed_leaves_no_engine_behind(how, tmp_path):
    # a run whose engine hangs: interrupted (the batch's finally kills the engine) or killed outright
    # (the engine gets SIGKILL from the kernel when its parent dies)
    flag = tmp_path / "hanging"
    script = (f"import sys; sys.path.insert(0, {str(SRC)!r}); from chatjinja.portability.engines import _run_driver, EngineLimits; "
              f"_run_driver((sys.executable, '-c', {FAKE!r}), '', [{{'do': 'hang', 'flag': {str(flag)!r}}}], "
              "EngineLimits(case_timeout=600, start_timeout=600))")
    marker = uuid.uuid4().hex
    run = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, MARKER: marker}, stderr=subprocess.DEVNULL)
    try:
        for _ in range(1200):  # until the engine hangs in its render (a generous bound, not a measure)
            if flag.exists():
                break
            time.sleep(0.05)
        else:
            pytest.fail("the stand-in engine did not start")
        assert len(_marked(marker)) == 2  # the run and its engine
        run.send_signal(how)
        run.wait(timeout=60)
        for _ in range(200):  # the kernel delivers the engine's SIGKILL when the run is gone
            if not _marked(marker):
                break
            time.sleep(0.05)
        assert _marked(marker) == []
    finally:
        run.kill()
        run.wait()
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_deadline_passed_starts_nothing_and_a_deadline_reached_stops_the_render():
    started = time.monotonic()
    results = _fake("fine", "fine", deadline=started - 1)
    assert [(r.text, r.limit) for r in results] == [(None, "deadline")] * 2
    assert results[0].error == "not run: the batch's time ran out"
    # the render under way when the deadline comes is killed, the rest are not run
    limits = EngineLimits(case_timeout=60.0, start_timeout=60.0)
    hung, after = _fake("hang", "fine", limits=limits, deadline=time.monotonic() + 1.0)
    assert (hung.limit, hung.error) == ("deadline", "not finished: the batch's time ran out (engine process killed)")
    assert (after.limit, after.error) == ("deadline", "not run: the batch's time ran out")


def test_a_crashing_engine_is_one_failed_case():
    crashed, garbage, after = _fake("abort", "garbage", "fine")
    assert crashed.error == "engine process killed by SIGABRT (memory limit or crash)"
    assert garbage.error == "engine driver wrote a line that is not JSON"
    assert after.text == "fine"


def test_an_engine_that_closes_its_output_and_lives_on_is_killed():
    closed, after = _fake("close", "fine")
    assert closed.error == "engine process closed its output without a result (engine process killed)"
    assert after.text == "fine"


def test_an_engine_that_cannot_start_fails_every_case():
    results = _run_driver(("/nonexistent/engine",), "", [{}, {}], FAST)
    assert [r.text for r in results] == [None, None]
    assert results[0].error.startswith("engine could not start: ")


def test_a_batch_past_its_time_gives_up_on_the_rest():
    limits = EngineLimits(case_timeout=1.0, start_timeout=30.0, batch_timeout=1.5, memory=512 << 20, output=100)
    results = _run_driver((sys.executable, "-c", FAKE), "", [{"do": "hang"}, {"do": "hang"}, {"do": "fine"}], limits)
    assert results[0].error.startswith("timeout")
    assert [r.text for r in results] == [None, None, None]
    assert results[-1].error == "not run: the batch's time ran out"


# the same limits around the real engines: an endless loop, a huge string

ENDLESS = "{% for a in range(10000) %}{% for b in range(10000) %}{% for c in range(10000) %}{% endfor %}{% endfor %}{% endfor %}"
HUGE = "{% for i in range(3000) %}xxxxxxxxxx{% endfor %}"


@pytest.mark.parametrize("name", ["minijinja", "hfjs", "llamacpp"])
def test_an_endless_template_is_killed_in_every_engine(name):
    found = engine_or_skip(name)
    limited = Engine(found.name, found.version, found.command, FAST, found.reserved)
    endless, after = limited.render_many(ENDLESS + "{{ messages[0].content }}", [CONTEXT, CONTEXT])
    assert endless.error == "timeout: no result within 1 s (engine process killed)"
    assert endless.limit == "time"
    assert after.error == endless.error  # the same template again: killed again, on its own clock


@pytest.mark.parametrize("name", ["minijinja", "hfjs", "llamacpp"])
def test_output_over_the_cap_is_refused_in_every_engine(name):
    found = engine_or_skip(name)
    limited = Engine(found.name, found.version, found.command, FAST, found.reserved)
    result = limited.render(HUGE, CONTEXT)
    assert result.text is None
    assert result.error.startswith("output limit")
    assert result.limit == "output"
