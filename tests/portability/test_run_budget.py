"""One budget for a whole portability run: what its time does not reach is cut and named, never compared, never ``identical``.

The clock is injected (:class:`FakeClock`), so these tests say where the run stops by what the clock
reads, not by how fast the machine is; the engines are stand-ins (a Python driver in a subprocess, or an
object that answers without one).
"""

from __future__ import annotations

import json
import sys

from chatjinja.portability import EngineResult, PortabilityBudget, probe_cases
from chatjinja.portability.engines import Engine, EngineLimits
from chatjinja.observation import CLIENT_SHAPES, PROBE_SHAPES
from chatjinja.portability.report import PortabilityReport, compare_engines, format_json, format_sarif, format_text

# the members a template without modes is compared on (continue_final_message is transformers' alone)
SPACE = len(PROBE_SHAPES) + len(CLIENT_SHAPES) - 1

TEMPLATE = "{{ messages | length }}"
# a stand-in driver: ready, then what TEMPLATE renders (so every case is identical)
COUNT = r"""
import json, sys

request = json.loads(sys.stdin.read())
print(json.dumps({"ready": True}), flush=True)
for context in request["contexts"]:
    print(json.dumps({"text": str(len(context["messages"]))}), flush=True)
"""
LIMITS = EngineLimits(case_timeout=30.0, start_timeout=30.0, memory=512 << 20, output=10_000)


class FakeClock:
    """Seconds that pass only when a test says so (``tick`` more at every reading)."""

    def __init__(self, tick: float = 0.0):
        self.now = 0.0
        self.tick = tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


class Slow(Engine):
    """The stand-in driver, after which the clock has gone ``spend`` seconds further."""

    clock: FakeClock
    spend: float = 0.0

    def render_many(self, source, contexts, **kwargs):
        results = super().render_many(source, contexts, **kwargs)
        self.clock.now += self.spend
        return results


def _slow(name: str, clock: FakeClock, spend: float) -> Slow:
    engine = Slow(name, "0", (sys.executable, "-c", COUNT), LIMITS)
    engine.clock, engine.spend = clock, spend
    return engine


class Refusing:
    """An engine that raises on every case, and remembers what it was sent."""

    version = "0"

    def __init__(self):
        self.sent: list[list] = []

    def render_many(self, source, contexts, **kwargs):
        self.sent.append(list(contexts))
        return [EngineResult(None, "TemplateError: no")] * len(contexts)


def test_within_the_budget_every_case_is_compared():
    clock = FakeClock()
    engines = {"first": _slow("first", clock, 0.0), "second": _slow("second", clock, 0.0)}
    compared = compare_engines(TEMPLATE, engines, budget=PortabilityBudget(seconds=20.0, clock=clock))
    assert {name: e.verdict for name, e in compared.items()} == {"first": "identical", "second": "identical"}
    assert all(len(e.cases) == SPACE and not e.cut for e in compared.values())


def test_an_engine_the_time_did_not_reach_is_cut_whole_and_named():
    clock = FakeClock()
    # the first engine spends the whole run's time: the second is not run at all
    engines = {"first": _slow("first", clock, 100.0), "second": _slow("second", clock, 0.0)}
    budget = PortabilityBudget(seconds=20.0, clock=clock)
    compared = compare_engines(TEMPLATE, engines, budget=budget)
    assert compared["first"].verdict == "identical"
    second = compared["second"]
    assert second.verdict == "incomplete"
    assert second.counts() == {"cut": SPACE}
    assert {case.cause for case in second.cases} == {"not run: second's share (0.0 s) of the run's time budget of 20 s ran out"}
    report = PortabilityReport("t.jinja", None, compared, budget)
    assert not report.ok
    text = format_text(report)
    assert f"  second 0: incomplete ({SPACE} cut)\n    cut: user, assistant, assistant_last," in text
    assert "      cause: not run: second's share (0.0 s) of the run's time budget of 20 s ran out\n" in text
    assert text.endswith(f"first identical; second incomplete\nnot compared (cut): {SPACE} cases in second; the budget: "
                         "20 s for the run, 1 s, 512 MiB and 1000000 characters an engine render\n")
    document = json.loads(format_json(report))
    assert document["cut"] == {"second": [case.name for case in second.cases]}
    assert document["engines"]["second"]["verdict"] == "incomplete"
    assert document["budget"]["seconds"] == 20.0
    notes = json.loads(format_sarif(report))["runs"][0]["results"]
    assert len(notes) == SPACE and {note["level"] for note in notes} == {"note"}
    assert notes[0]["message"]["text"].startswith("probe 'user' was not compared (cut) in second: not run: ")


def test_chatjinja_renders_within_its_share_and_the_cases_after_it_are_cut():
    clock = FakeClock(tick=1.0)  # a second passes at each reading: one render's worth
    cases = probe_cases(TEMPLATE, deadline=5.0, clock=clock, ran_out="out of time")
    rendered = [case for case in cases if case.cut is None]
    assert [case.text for case in rendered] == ["1", "3", "2", "2"]  # the cases before the deadline, in order
    assert cases[:len(rendered)] == rendered
    assert {case.cut for case in cases[len(rendered):]} == {"not run: out of time"}


def test_a_case_chatjinja_stopped_at_a_budget_is_cut_and_never_sent_to_an_engine():
    # over chatjinja's max_loop_iterations: transformers' outcome is not known, so nothing is compared
    loop = "{% for i in range(1000) %}{% for j in range(1001) %}{% endfor %}{% endfor %}" + TEMPLATE
    refusing = Refusing()
    compared = compare_engines(loop, {"refusing": refusing}, budget=PortabilityBudget(clock=FakeClock()))["refusing"]
    assert refusing.sent == []  # not even started
    assert compared.verdict == "incomplete"  # not both-fail, which would agree
    assert compared.counts() == {"cut": SPACE}
    assert compared.cases[0].cause.startswith("chatjinja's render stopped: BudgetExceeded: budget max_loop_iterations exceeded")


def test_a_render_over_the_output_limit_is_cut_on_both_sides():
    big = "{{ 'x' * 200 }}"
    refusing = Refusing()
    budget = PortabilityBudget(output_chars=100, clock=FakeClock())
    compared = compare_engines(big, {"refusing": refusing}, budget=budget)["refusing"]
    assert refusing.sent == [] and compared.counts() == {"cut": SPACE}
    assert compared.cases[0].cause == "chatjinja's render printed 200 characters, over the output limit of 100"


def test_an_engine_render_stopped_at_a_limit_is_cut_not_failed():
    clock = FakeClock()

    class Limited(Refusing):
        def render_many(self, source, contexts, **kwargs):
            return [EngineResult(None, "timeout: no result within 1 s (engine process killed)", "time")] + [
                EngineResult(None, "engine process killed by SIGABRT: out of memory (memory limit)", "memory")] * (len(contexts) - 1)

    compared = compare_engines(TEMPLATE, {"limited": Limited()}, budget=PortabilityBudget(clock=clock))["limited"]
    assert compared.verdict == "incomplete" and compared.counts() == {"cut": SPACE}
    assert compared.cases[0].cause == "timeout: no result within 1 s (engine process killed)"
    assert compared.cases[1].cause == "engine process killed by SIGABRT: out of memory (memory limit)"


def test_the_budget_gives_the_engines_chatjinjas_render_limits():
    from chatjinja.portability.engines import DEFAULT_LIMITS
    from chatjinja.observation import OUTPUT_LIMIT
    from chatjinja.runtime.budget import Budgets

    limits = PortabilityBudget().engine_limits()
    assert (limits.case_timeout, limits.start_timeout, limits.memory, limits.output) == (
        DEFAULT_LIMITS.case_timeout, DEFAULT_LIMITS.start_timeout, DEFAULT_LIMITS.memory, DEFAULT_LIMITS.output)
    assert limits.case_timeout == Budgets().timeout == 1.0
    assert limits.output == OUTPUT_LIMIT
    assert limits.memory == 512 << 20  # SECURITY.md's bound of a chatjinja render
    assert PortabilityBudget().seconds == 20.0
