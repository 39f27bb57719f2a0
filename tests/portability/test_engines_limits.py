"""Hostile templates in the engines: each render runs in a subprocess that is killed past its time, memory or output limit."""

from __future__ import annotations

import sys

import pytest

from chatjinja.portability import Engine, EngineLimits
from chatjinja.portability.engines import _run_driver

from .conftest import engine_or_skip

FAST = EngineLimits(case_timeout=1.0, batch_timeout=20.0, memory=512 << 20, output=10_000)
CONTEXT = {"messages": [{"role": "user", "content": "hi"}]}
# a driver stand-in: reads the request, then behaves as the case's "messages[0].content" says
FAKE = r"""
import json, os, sys, time
request = json.loads(sys.stdin.read())
for context in request["contexts"]:
    what = context["do"]
    if what == "hang":
        time.sleep(100)
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


def _fake(*steps: str) -> list:
    return _run_driver((sys.executable, "-c", FAKE), "", [{"do": step} for step in steps], FAST)


def test_a_render_past_its_time_is_killed_and_the_next_case_runs_in_a_new_process():
    hung, after = _fake("hang", "fine")
    assert hung.text is None and hung.error == "timeout: no result within 1 s (engine process killed)"
    assert after.text == "fine"


def test_output_past_the_cap_is_not_read_and_the_process_is_killed():
    flood, after = _fake("flood", "fine")
    assert flood.error == "output limit: over 10000 characters (engine process killed)"
    assert after.text == "fine"


def test_memory_past_the_limit_ends_the_render_not_the_machine():
    big, after = _fake("allocate", "fine")
    assert big.text is None and big.error.startswith("engine process exited with status 1: MemoryError")
    assert after.text == "fine"


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
    limits = EngineLimits(case_timeout=1.0, batch_timeout=1.5, memory=512 << 20, output=100)
    results = _run_driver((sys.executable, "-c", FAKE), "", [{"do": "hang"}, {"do": "hang"}, {"do": "fine"}], limits)
    assert results[0].error.startswith("timeout")
    assert [r.text for r in results] == [None, None, None]
    assert results[-1].error == "not run: the engine took over 1.5 s for this batch"


# the same limits around the real engines: an endless loop, a huge string

ENDLESS = "{% for a in range(10000) %}{% for b in range(10000) %}{% for c in range(10000) %}{% endfor %}{% endfor %}{% endfor %}"
HUGE = "{% for i in range(3000) %}xxxxxxxxxx{% endfor %}"


@pytest.mark.parametrize("name", ["minijinja", "hfjs", "llamacpp"])
def test_an_endless_template_is_killed_in_every_engine(name):
    found = engine_or_skip(name)
    limited = Engine(found.name, found.version, found.command, FAST, found.reserved)
    endless, after = limited.render_many(ENDLESS + "{{ messages[0].content }}", [CONTEXT, CONTEXT])
    assert endless.error == "timeout: no result within 1 s (engine process killed)"
    assert after.error == endless.error  # the same template again: killed again, on its own clock


@pytest.mark.parametrize("name", ["minijinja", "hfjs", "llamacpp"])
def test_output_over_the_cap_is_refused_in_every_engine(name):
    found = engine_or_skip(name)
    limited = Engine(found.name, found.version, found.command, FAST, found.reserved)
    result = limited.render(HUGE, CONTEXT)
    assert result.text is None
    assert result.error.startswith("output limit")
