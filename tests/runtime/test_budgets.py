"""Resource budgets: each one stops its attack at its limit, names itself and the line, and never changes output."""

from __future__ import annotations

import copy
import json
import pickle
import subprocess
import sys
import threading
import time
import types

import jinja2
import pytest

from chatjinja import BudgetExceeded, ChatTemplate, apply_chat_template
from chatjinja.runtime.budget import DEFAULT_BUDGETS, NO_LIMIT, Budgets, Meter, resolve_budgets
from tests.conftest import CORPUS, corpus_templates
from tests.reference import SPECIAL_TOKENS
from tests.runtime.conversations import probe_cases

MSGS = [{"role": "user", "content": "hi"}]


def render(source: str, messages=None, **kwargs):
    return apply_chat_template(copy.deepcopy(messages or MSGS), source, **kwargs)


def exceeded(source: str, messages=None, **kwargs) -> BudgetExceeded:
    with pytest.raises(BudgetExceeded) as info:
        render(source, messages, **kwargs)
    return info.value


# -- each budget at its boundary ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "limit", "template_at_limit", "template_over"),
    [
        ("max_output_chars", 100, "{{ 'x' * 100 }}", "{{ 'x' * 100 }}."),
        ("max_output_chars", 100, "{% for i in range(10) %}{{ 'x' * 10 }}{% endfor %}", "{% for i in range(10) %}{{ 'x' * 10 }}{% endfor %}!"),
        ("max_string_chars", 50, "{{ ('a' * 50)|length }}", "{{ ('a' * 51)|length }}"),
        ("max_string_chars", 50, "{{ ('a' * 25 ~ 'b' * 25)|length }}", "{{ ('a' * 25 ~ 'b' * 26)|length }}"),
        ("max_string_chars", 50, "{{ ('a' * 25 + 'b' * 25)|length }}", "{{ ('a' * 25 + 'b' * 26)|length }}"),
        ("max_string_chars", 50, "{{ ('x'|center(50))|length }}", "{{ ('x'|center(51))|length }}"),
        ("max_string_chars", 50, "{{ ('x'.rjust(50))|length }}", "{{ ('x'.rjust(51))|length }}"),
        # the text filters that at most quintuple a string (sized only from a fifth of the threshold up)
        ("max_string_chars", 50, "{{ ('\"' * 10)|e|length }}", "{{ ('\"' * 11)|e|length }}"),
        ("max_string_chars", 50, "{{ ('ß' * 25)|upper|length }}", "{{ ('ß' * 26)|upper|length }}"),
        ("max_string_chars", 50, "{{ ('%50s' % 'a')|length }}", "{{ ('%51s' % 'a')|length }}"),
        ("max_string_chars", 50, "{{ ('{:>50}'.format('a'))|length }}", "{{ ('{:>51}'.format('a'))|length }}"),
        ("max_string_chars", 50, "{{ (['a' * 10] * 5)|join|length }}", "{{ (['a' * 10] * 5)|join('-')|length }}"),
        ("max_sequence_items", 50, "{{ ([0] * 50)|length }}", "{{ ([0] * 51)|length }}"),
        ("max_sequence_items", 50, "{{ ([0] * 25 + [1] * 25)|length }}", "{{ ([0] * 25 + [1] * 26)|length }}"),
        # two strings of 2,000 characters (2,049 bytes each) and the output (2 parts of 4 characters:
        # 2 * 88 + 4 * 8 bytes) fit in 4,400 bytes, three strings do not
        ("max_built_bytes", 4400, "{% set a = 'a' * 2000 %}{% set b = a ~ 'b' %}{{ a|length }}{{ b|length }}", "{% set a = 'a' * 2000 %}{% set b = a ~ 'b' %}{% set c = b + 'c' %}{{ c|length }}"),
        # a generator turned into a list or a string: its items are counted as they are consumed
        ("max_built_bytes", 40000, "{{ range(500)|map('string')|join|length }}", "{{ range(1000)|map('string')|join|length }}"),
        ("max_built_bytes", 40000, "{{ range(500)|map('string')|list|length }}", "{{ ''.join(range(1000)|map('string'))|length }}"),
        ("max_int_bits", 64, "{{ 2 ** 32 }}", "{{ 2 ** 33 }}"),
        ("max_int_bits", 64, "{{ (2 ** 31) * (2 ** 31) }}", "{{ (2 ** 32) * (2 ** 32) }}"),
        ("max_loop_iterations", 100, "{% for i in range(10) %}{% for j in range(9) %}{% endfor %}{% endfor %}", "{% for i in range(101) %}{% endfor %}"),
        ("max_steps", 30, "{% for i in range(10) %}{{ i|string }}{% endfor %}", "{% for i in range(10) %}{{ i|string|string }}{% endfor %}"),
        # fuel is charged where code starts: the template its call sites (2 or 3 calls of m), a macro
        # call its own sites (|upper), a loop iteration 1 + its sites (a recursive loop's too)
        ("max_steps", 4, "{% macro m() %}{{ 'a'|upper }}{% endmacro %}{{ m() }}{{ m() }}", "{% macro m() %}{{ 'a'|upper }}{% endmacro %}{{ m() }}{{ m() }}{{ m() }}"),
        ("max_steps", 2, "{% macro m(x=('a'|upper)) %}{% endmacro %}{{ m() }}", "{% macro m(x=('a'|upper)) %}{% endmacro %}{{ m() }}{{ m() }}"),
        ("max_steps", 8, "{% for x in [[0], [0]] recursive %}{% if x is iterable %}{{ loop(x) }}{% endif %}{% endfor %}", "{% for x in [[0], [0], [0]] recursive %}{% if x is iterable %}{{ loop(x) }}{% endif %}{% endfor %}"),
        ("max_recursion_depth", 5, "{% macro m(n) %}{% if n > 0 %}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(4) }}", "{% macro m(n) %}{% if n > 0 %}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(5) }}"),
        ("max_source_chars", 30, "{{ 'a' }}" + " " * 21, "{{ 'a' }}" + " " * 22),
        ("max_source_nesting", 4, "{{ ((((1)))) }}", "{% if 1 %}{{ ((((1)))) }}{% endif %}"),
    ],
)
def test_budget_boundary(budget, limit, template_at_limit, template_over):
    budgets = Budgets.off().replace(**{budget: limit})
    assert render(template_at_limit, budgets=budgets) == render(template_at_limit, budgets=None)
    error = exceeded(template_over, budgets=budgets)
    assert error.budget == budget
    assert error.limit == limit
    assert budget in str(error) and str(limit) in str(error)


def test_input_depth_boundary():
    def nested(depth):
        value = "x"
        for _ in range(depth):
            value = [value]
        return value

    budgets = Budgets.off().replace(max_input_depth=10)
    # the conversation list is level 1, a message level 2, its content list level 3: nested(8) reaches level 10
    render("{{ messages[0].content|length }}", [{"role": "user", "content": nested(8)}], budgets=budgets)
    error = exceeded("{{ messages[0].content|length }}", [{"role": "user", "content": nested(9)}], budgets=budgets)
    assert error.budget == "max_input_depth"
    error = exceeded("{{ tools }}", budgets=budgets, tools=[{"a": nested(20)}])
    assert error.budget == "max_input_depth"


def _chain(count):
    """``count`` lists, each holding the next: the outermost first."""
    lists = [[] for _ in range(count)]
    for outer, inner in zip(lists, lists[1:]):
        outer.append(inner)
    return lists


@pytest.mark.parametrize("graph_walk", [False, True])
def test_input_depth_of_shared_containers(monkeypatch, graph_walk):
    # Python data can reach one container by several paths; past ``_TREE_WALK_CONTAINERS`` the walk goes
    # through each container once, and the depth is still that of the longest path
    from chatjinja.runtime import budget

    if graph_walk:
        monkeypatch.setattr(budget, "_TREE_WALK_CONTAINERS", 1)
    budgets = Budgets.off().replace(max_input_depth=10)
    template = "{{ messages[0].content|length }}"
    # the content list is level 3: a chain of 7 below it ends at level 10, of 8 at level 11; the walk
    # meets the chain's third list first at level 4, then again at level 6 through the chain's head
    for count, fits in [(7, True), (8, False)]:
        chain = _chain(count)
        messages = [{"role": "user", "content": [chain[2], chain[0]]}]
        if fits:
            assert render(template, messages, budgets=budgets) == "2"
        else:
            assert exceeded(template, messages, budgets=budgets).budget == "max_input_depth"
    from tests.security.hostile_inputs import cyclic_pair, shared_lists

    assert render(template, [{"role": "user", "content": shared_lists(8)}], budgets=budgets) == "2"
    assert exceeded(template, [{"role": "user", "content": shared_lists(9)}], budgets=budgets).budget == "max_input_depth"
    assert exceeded(template, [{"role": "user", "content": cyclic_pair()}], budgets=budgets).budget == "max_input_depth"


@pytest.mark.reference
def test_shared_containers_render_as_transformers_renders_them():
    from tests.reference import hf_outcome, our_outcome
    from tests.security.hostile_inputs import shared_lists

    # printed (its text is sized: the caller's containers are shared), through tojson, and not printed
    for template in ["{{ messages[0].content }}", "{{ messages[0].content|tojson }}", "{{ messages[0].content|length }}"]:
        for levels in (1, 6):
            messages = [{"role": "user", "content": shared_lists(levels, "ab")}, {"role": "user", "content": "c"}]
            assert our_outcome(template, messages) == hf_outcome(template, messages)


def test_shared_input_is_walked_once():
    # 2**40 paths to 41 lists: transformers' own copy of the messages follows every path; with budgets
    # the walk goes through each list once, and printing it stops at the string budget
    from tests.security.hostile_inputs import shared_lists

    messages = [{"role": "user", "content": shared_lists(40)}]
    assert apply_chat_template(messages, "{{ messages[0].content|length }}") == "2"
    assert apply_chat_template(messages, "{{ messages[0].content|length }}", budgets=None) == "2"
    assert exceeded("{{ messages[0].content }}", messages).budget == "max_string_chars"


def test_indented_json_of_the_callers_data(monkeypatch):
    # ``tojson(indent=n)`` is refused before it runs when (values x levels x n) crosses the string
    # budget; the caller's data is walked for that only when all of it is too big for a bound taken
    # from its size (``Meter.input_shape_bound``): the fallback walk still refuses what it must.
    # The walks are counted where they can be, in the pure-Python hooks (compiled code calls the
    # walk directly); ``test_pure_python_hooks`` runs this test with them.
    from chatjinja.runtime._implementation import COMPILED
    from chatjinja.runtime._implementation import hooks as _hooks

    walks: list = []
    shape = _hooks._json_shape
    monkeypatch.setattr(_hooks, "_json_shape", lambda value, limit: walks.append(1) or shape(value, limit))

    def walked(count: int) -> bool:  # (compiled: the pure-Python run of this test counts them)
        return COMPILED or len(walks) == count

    budgets = Budgets.off().replace(max_string_chars=10_000, max_input_depth=128)
    chain = _chain(50)  # 50 lists and a leaf: 51 values on 51 levels
    chain[-1].append(1)
    messages = [{"role": "user", "content": chain[0]}]
    template = "{{ messages[0].content|tojson(indent=%d)|length }}"
    # 51 * 51 * 3 = 7,803 characters at most: rendered (the bound, 57 values x 130 levels x 3, is over)
    assert render(template % 3, messages, budgets=budgets) == str(len(json.dumps(chain[0], indent=3)))
    assert walked(1)
    # 51 * 51 * 4 = 10,404: refused before the JSON is made
    error = exceeded(template % 4, messages, budgets=budgets)
    assert (error.budget, "indented JSON" in str(error)) == ("max_string_chars", True)
    # a small input passes on the bound alone (57 x 130 x 1 = 7,410), with the same output
    assert render(template % 1, messages, budgets=budgets) == str(len(json.dumps(chain[0], indent=1)))
    assert walked(2)  # (the one at width 4)
    # a list the template makes of the caller's containers: bounded the same way, one level deeper
    listed = "{{ [messages[0].content]|tojson(indent=%d)|length }}"
    error = exceeded(listed % 4, messages, budgets=budgets)
    assert (error.budget, "indented JSON" in str(error)) == ("max_string_chars", True)
    assert render(listed % 1, messages, budgets=budgets) == str(len(json.dumps([chain[0]], indent=1)))
    assert walked(3)  # (the one at width 4)
    # the same data built by the template is walked (not the caller's): refused at width 4 too
    built = "{% set ns = namespace(v=1) %}{% for i in range(50) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v|tojson(indent=4)|length }}"
    assert exceeded(built, budgets=budgets).budget == "max_string_chars"
    assert render(built.replace("indent=4", "indent=3"), budgets=budgets) == str(len(json.dumps(chain[0], indent=3)))


@pytest.mark.parametrize(
    ("item", "items", "steps"),
    [
        # a string against a list: O(1) per item unless the item is a string of its length
        ("y", ["x" * 5000] * 10, 0),  # 10 x 2 characters: no step, and the items are not looked at
        ("y" * 100, ["x" * 100] * 20, 1),  # 20 x 101 = 2,020 characters (the items' text is 2,082)
        ("y" * 5000, ["x" * 5000] * 10, 48),  # 10 x 5,001 = 50,010 characters
        ("y" * 5000, ["x"] * 10, 0),  # 10 x 5,001, but the items' text is 42 characters
        ("y" * 5000, tuple(["x" * 60] * 20), 1),  # the items' text: 20 x 64 + 2 = 1,282 characters
        # anything else: the items' text (a list against a list of lists compares item by item)
        (["x"], [["x" * 5000]] * 10, 48),
        (1, ["x" * 5000] * 10, 48),
    ],
)
def test_in_a_list_is_charged_for_what_it_may_compare(item, items, steps):
    from chatjinja.runtime.budget import guarded_render
    from chatjinja.runtime.environment import default_environment

    environment = default_environment()
    with guarded_render(DEFAULT_BUDGETS) as meter:
        before = meter.steps
        assert environment.budget_in(item, items) is (item in items)
        assert meter.steps - before == steps


def test_loop_charged_upfront_only_within_the_budget():
    # a loop over a sequence of known length is charged its length when it starts unless that would
    # cross the budget: then it is counted as it goes, so one left early is not refused
    budgets = Budgets.off().replace(max_loop_iterations=100)
    early = "{% for i in range(1000) %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"
    assert render(early, budgets=budgets) == "01234"
    assert render("{% for c in 'x' * 100 %}{% endfor %}.", budgets=budgets) == "."
    assert exceeded("{% for c in 'x' * 101 %}{% endfor %}", budgets=budgets).budget == "max_loop_iterations"
    assert exceeded("{% for i in range(60) %}{% endfor %}{% for i in range(41) %}{% endfor %}", budgets=budgets).budget == "max_loop_iterations"


@pytest.mark.parametrize("charge", ["body", "loop"])
def test_fuel_looks_at_the_clock_each_time_the_steps_pass_a_multiple_of_clock_steps(charge):
    # a body's or an upfront loop's fuel is one subtraction from the meter's room until the steps
    # reach the next multiple of CLOCK_STEPS (or the step budget): only then is the clock looked at
    from chatjinja.runtime.budget import CLOCK_STEPS, guarded_render
    from chatjinja.runtime.environment import default_environment

    environment = default_environment()

    def spend(steps):
        if charge == "body":
            environment.budget_charge(steps)
        else:
            items = [0] * steps
            assert environment.budget_iter(items, 1) is items  # charged upfront, not wrapped

    with guarded_render(DEFAULT_BUDGETS) as meter:
        meter.deadline = 0.0  # long passed
        spend(CLOCK_STEPS - 1)
        assert meter.steps == CLOCK_STEPS - 1
        with pytest.raises(BudgetExceeded) as error:
            spend(1)
        assert error.value.budget == "timeout"
    with guarded_render(DEFAULT_BUDGETS) as meter:
        spend(CLOCK_STEPS - 1)
        spend(2)  # past the multiple, in time: the room is measured from the next one
        assert (meter.steps, meter.room) == (CLOCK_STEPS + 1, CLOCK_STEPS - 2)
    # (budget_iter's upfront path takes a loop whose steps fit in the room without testing its
    # length against _LOOP_UPFRONT: the room must never hold more)
    from chatjinja.runtime._implementation import hooks

    _LOOP_UPFRONT = hooks._LOOP_UPFRONT

    assert CLOCK_STEPS - 1 <= _LOOP_UPFRONT
    with guarded_render(Budgets(max_steps=10)) as meter:
        spend(10)
        assert meter.steps == 10
        if charge == "body":
            with pytest.raises(BudgetExceeded, match="max_steps"):
                spend(1)


def test_items_loops_are_charged_upfront_when_their_length_is_known():
    # ``d|items`` is a generator; one that has not started over an exact dict yields len(d) pairs
    from jinja2.filters import do_items

    from chatjinja.runtime.budget import guarded_render
    from chatjinja.runtime.environment import default_environment

    environment = default_environment()
    d = {"a": 1, "b": 2, "c": 3}
    with guarded_render(DEFAULT_BUDGETS) as meter:
        pairs = do_items(d)
        assert environment.budget_iter(pairs, 2) is pairs  # charged, not wrapped
        assert (meter.loops, meter.steps) == (3, 6)
        started = do_items(d)
        next(started)
        others = [
            (started, [("b", 2), ("c", 3)]),
            (do_items(jinja2.runtime.Undefined()), []),
            (do_items(types.MappingProxyType(d)), [("a", 1), ("b", 2), ("c", 3)]),  # not an exact dict
        ]
        for other, expected in others:
            wrapped = environment.budget_iter(other, 1)
            assert wrapped is not other  # counted as it goes
            before = meter.loops
            assert list(wrapped) == expected
            assert meter.loops - before == len(expected)
    budgets = Budgets.off().replace(max_loop_iterations=3)
    template = "{% for k, v in d|items %}{{ k }}{% if k == stop %}{% break %}{% endif %}{% endfor %}"
    assert render(template, d=d, stop="", budgets=budgets) == "abc"
    assert exceeded(template, d={**d, "d": 4}, stop="", budgets=budgets).budget == "max_loop_iterations"
    assert render(template, d={**d, "d": 4}, stop="a", budgets=budgets) == "a"  # left early: not refused


def test_timeout_stops_a_slow_render():
    error = exceeded("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", budgets={"timeout": 0.05, "max_loop_iterations": None, "max_steps": None})
    assert error.budget == "timeout"


def test_error_names_the_template_line():
    source = "line one\n{% set ns = namespace(s='ab') %}\n{% for i in range(64) %}\n{% set ns.s = ns.s ~ ns.s %}\n{% endfor %}"
    error = exceeded(source)
    assert error.budget == "max_string_chars"
    assert error.lineno == 4
    assert "at template line 4" in str(error)


def test_budget_exceeded_is_a_template_error_and_pickles():
    error = exceeded("{{ 'a' * 10**10 }}")
    assert isinstance(error, jinja2.TemplateError)
    clone = pickle.loads(pickle.dumps(error))
    assert (clone.budget, clone.limit, clone.lineno, str(clone)) == (error.budget, error.limit, error.lineno, str(error))


def test_budgets_pickle_after_use():
    # a render caches a per-budgets meter class on the Budgets; pickling (render_batch ships budgets to
    # worker processes) carries the limits only
    budgets = Budgets(max_output_chars=7)
    assert exceeded("{{ 'x' * 8 }}", budgets=budgets).budget == "max_output_chars"
    clone = pickle.loads(pickle.dumps(budgets))
    assert clone == budgets
    assert exceeded("{{ 'x' * 8 }}", budgets=clone).limit == 7


def test_a_meter_holds_each_limit_in_its_own_slot():
    # Meter.__init__ unpacks Budgets.meter_limits by position: each limit must land in the field of its name
    budgets = Budgets(
        max_output_chars=1001, max_string_chars=1002, max_sequence_items=1003, max_built_bytes=1004, max_int_bits=1005,
        max_loop_iterations=1006, max_steps=1007, max_recursion_depth=1008, timeout=1009.0,
    )
    before = time.monotonic()
    meter = Meter(budgets)
    after = time.monotonic()
    expected = {
        "max_string": 1002, "max_items": 1003, "output_cap": 1001, "string_cap": 1002, "items_cap": 1003,
        "built_cap": 1004, "big": 1003, "_loop_cap": 1006, "_step_cap": 1007, "depth_cap": 1008,
    }
    assert {name: getattr(meter, name) for name in expected} == expected
    assert (meter.steps, meter.loops, meter.depth, meter.room) == (0, 0, 0, 1007)  # (room: up to the step budget)
    assert before + 1009.0 <= meter.deadline <= after + 1009.0  # (the clock read once, when the meter is made)
    off = Meter(Budgets(max_string_chars=None, max_steps=None, timeout=None))
    assert (off.max_string, off.string_cap, off._step_cap, off.room, off.deadline) == (None, NO_LIMIT, NO_LIMIT, 1023, float("inf"))
    assert NO_LIMIT < 1 << 61  # (a small int for compiled code, with room to add to)
    # a limit given as a float bounds whole counts: its floor (``None`` is no limit)
    floats = Meter(Budgets(max_string_chars=1002.7, max_sequence_items=None))
    assert (floats.string_cap, floats.items_cap, type(floats.string_cap)) == (1002, NO_LIMIT, int)


BAD_LIMITS = [float("nan"), -3, -0.5, float("inf"), float("-inf"), True, False, "5", "1.0", [1], b"1"]


@pytest.mark.parametrize("name", Budgets.names())
@pytest.mark.parametrize("value", BAD_LIMITS, ids=repr)
def test_a_limit_that_is_not_a_finite_number_at_least_0_is_refused(name, value):
    # one line naming the budget and the value, whichever way the budgets are made (a NaN timeout
    # would turn the clock off: no deadline is ever passed; -3 would stop every render at once)
    message = f"budget {name!r} must be a finite number >= 0 or None (off), got {value!r}"
    for make in (lambda: Budgets(**{name: value}), lambda: DEFAULT_BUDGETS.replace(**{name: value}), lambda: resolve_budgets({name: value})):
        with pytest.raises(ValueError) as error:
            make()
        assert str(error.value) == message and "\n" not in str(error.value)
    with pytest.raises(ValueError, match="must be a finite number"):
        render("{{ 1 }}", budgets={name: value})


@pytest.mark.parametrize("name", Budgets.names())
def test_a_limit_may_be_0_a_float_or_none(name):
    assert getattr(Budgets(**{name: 0}), name) == 0
    assert getattr(Budgets(**{name: 2.5}), name) == 2.5
    assert getattr(resolve_budgets({name: None}) or Budgets.off(), name) is None


def test_budgets_argument_forms():
    source = "{{ 'x' * 20 }}"
    assert render(source, budgets=None) == render(source, budgets=True) == render(source, budgets=Budgets.off()) == "x" * 20
    assert exceeded(source, budgets={"max_output_chars": 10}).budget == "max_output_chars"
    assert resolve_budgets({"timeout": None}).max_output_chars == DEFAULT_BUDGETS.max_output_chars
    with pytest.raises(TypeError):
        render(source, budgets="tight")


def test_no_budgets_is_plain_jinja2():
    assert len(render("{{ 'a' * 20000000 }}", budgets=None)) == 20_000_000


def test_process_keeps_serving_after_a_budget_error():
    for _ in range(3):
        exceeded("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}")
        assert render("{{ messages[0].content }}") == "hi"


def test_meters_are_per_thread():
    results = {}

    def bomb():
        try:
            render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
        except BudgetExceeded as exc:
            results["bomb"] = exc.budget

    def benign():
        results["benign"] = [render("{% for i in range(1000) %}{{ i }}{% endfor %}", budgets={"max_loop_iterations": 1000}) for _ in range(50)]

    threads = [threading.Thread(target=bomb), threading.Thread(target=benign)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results["bomb"] in ("max_loop_iterations", "timeout")
    assert len(set(results["benign"])) == 1


def test_spans_path_is_budgeted_too():
    source = "{% for m in messages %}{% generation %}{{ 'x' * 100 }}{% endgeneration %}{% endfor %}"
    text, spans = render(source, return_assistant_spans=True)
    assert (text, spans) == render(source, return_assistant_spans=True, budgets=None)
    error = exceeded(source, return_assistant_spans=True, budgets={"max_output_chars": 50})
    assert error.budget == "max_output_chars"


def test_a_long_operator_chain_is_refused_by_its_tree_depth():
    # no bracket nests, but ``1 + 1 + ...`` parses to a tree as deep as the chain: it may be at most
    # 4x the nesting budget deep (checked after parsing; no clock here, so machine speed cannot decide)
    budgets = {"max_source_nesting": 10, "timeout": None}
    assert render("{{ " + " + ".join(["1"] * 38) + " }}", budgets=budgets) == "38"
    error = exceeded("{{ " + " + ".join(["1"] * 60) + " }}", budgets=budgets)
    assert error.budget == "max_source_nesting"


def test_compiled_cache_is_rechecked_against_tighter_budgets():
    source = "{% if 1 %}{% if 1 %}{{ ((1)) }}{% endif %}{% endif %}"
    render(source, budgets=None)  # cached without measuring
    assert render(source) == "1"
    assert exceeded(source, budgets={"max_source_nesting": 3}).budget == "max_source_nesting"


# -- strict mode -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    ["{{ ''.__class__ }}", "{{ ''|attr('__class__') }}", "{{ messages.append }}", "{{ '{0.__class__}'.format('') }}", "{{ lipsum.__globals__ }}"],
)
def test_strict_raises_where_default_renders_undefined(source):
    try:
        render(source)
    except jinja2.exceptions.SecurityError:
        pass  # some shapes raise in both modes; strict must too
    with pytest.raises(jinja2.exceptions.SecurityError):
        render(source, strict=True)
    with pytest.raises(jinja2.exceptions.SecurityError):
        render(source, strict=True, budgets=None)


def test_strict_does_not_change_benign_output():
    source = "{% for m in messages %}{{ m.role|upper }}:{{ m['content'] }}{{ m.get('x', '-') }}{% endfor %}{{ messages|length }}"
    assert render(source, strict=True) == render(source) == "USER:hi-1"


# -- ChatTemplate fields and per-call overrides ----------------------------------------------------


def test_chat_template_budgets_and_strict_fields():
    template = ChatTemplate("{{ 'x' * 20 }}{{ ''.__class__ }}", budgets={"max_output_chars": 10})
    with pytest.raises(BudgetExceeded):
        template.render(MSGS)
    assert template.render(MSGS, budgets=None) == "x" * 20
    assert ChatTemplate(template.source).render(MSGS) == "x" * 20
    with pytest.raises(jinja2.exceptions.SecurityError):
        ChatTemplate(template.source, strict=True).render(MSGS)
    with pytest.raises(jinja2.exceptions.SecurityError):
        ChatTemplate(template.source).render(MSGS, strict=True)
    with pytest.raises(BudgetExceeded):
        ChatTemplate("{{ " + "(" * 60 + "1" + ")" * 60 + " }}").compile()


# -- CLI -------------------------------------------------------------------------------------------


def _cli(*args, stdin='{"messages": [{"role": "user", "content": "hi"}]}'):
    return subprocess.run([sys.executable, "-m", "chatjinja", *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_cli_budget_flags(tmp_path):
    bomb = tmp_path / "bomb.jinja"
    bomb.write_text("{{ messages[0].content }}\n{{ 'a' * 10**10 }}")
    result = _cli("render", str(bomb))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "max_string_chars" in result.stderr and "Traceback" not in result.stderr
    assert ":2" in result.stderr  # the template line

    small = tmp_path / "small.jinja"
    small.write_text("{{ 'x' * 20 }}")
    assert _cli("render", str(small)).stdout == "x" * 20
    result = _cli("render", str(small), "--max-output-chars", "10")
    assert result.returncode == 1 and "max_output_chars" in result.stderr
    assert _cli("render", str(small), "--max-output-chars", "0").stdout == "x" * 20
    assert _cli("render", str(small), "--no-budgets").stdout == "x" * 20
    assert _cli("render", str(small), "--no-budgets", "--timeout", "1").returncode == 2
    assert _cli("render", str(small), "--timeout", "-1").returncode == 2

    probe = tmp_path / "probe.jinja"
    probe.write_text("{{ ''.__class__ }}ok")
    assert _cli("render", str(probe)).stdout == "ok"
    result = _cli("render", str(probe), "--strict")
    assert result.returncode == 1 and "SecurityError" in result.stderr


# -- the corpus never comes near the defaults ------------------------------------------------------

# A hundredth of the default fuel and sizes, half the default nesting: every corpus render must
# still produce exactly the budget-free output, so the defaults leave a wide margin.
TIGHT = Budgets(
    max_output_chars=DEFAULT_BUDGETS.max_output_chars // 100,
    max_string_chars=DEFAULT_BUDGETS.max_string_chars // 100,
    max_sequence_items=DEFAULT_BUDGETS.max_sequence_items // 100,
    max_built_bytes=DEFAULT_BUDGETS.max_built_bytes // 100,
    max_int_bits=DEFAULT_BUDGETS.max_int_bits // 100,
    max_loop_iterations=DEFAULT_BUDGETS.max_loop_iterations // 100,
    max_steps=DEFAULT_BUDGETS.max_steps // 100,
    max_recursion_depth=DEFAULT_BUDGETS.max_recursion_depth // 4,
    timeout=DEFAULT_BUDGETS.timeout,
    max_input_depth=DEFAULT_BUDGETS.max_input_depth // 10,
    max_source_chars=DEFAULT_BUDGETS.max_source_chars // 10,
    max_source_nesting=DEFAULT_BUDGETS.max_source_nesting // 2,
)
TEMPLATES = corpus_templates()


def _outcome(source, conversation, kwargs, budgets):
    try:
        return ("text", apply_chat_template(copy.deepcopy(conversation), source, budgets=budgets, **SPECIAL_TOKENS, **kwargs))
    except BudgetExceeded as exc:
        return ("budget", str(exc))
    except Exception as exc:  # noqa: BLE001 - the class and message are what we compare
        return ("error", type(exc).__name__, str(exc))


@pytest.mark.corpus
@pytest.mark.parametrize("path", TEMPLATES, ids=[str(p.relative_to(CORPUS / "templates")) for p in TEMPLATES])
def test_corpus_renders_identically_under_tight_budgets(path):
    source = path.read_text(encoding="utf-8")
    for case_id, conversation, kwargs in probe_cases():
        free = _outcome(source, conversation, kwargs, None)
        assert _outcome(source, conversation, kwargs, TIGHT) == free, case_id


# -- the checks that count built bytes change no result ---------------------------------------------

# Filters and methods whose argument or result ``max_built_bytes`` looks into (generators and ranges
# consumed by a filter, strings cut into pieces): rendered with the default budgets, each must give
# transformers' text or its exception class and message (a range is still a sequence to |last and
# |reverse; a wrapped generator still fails where a generator fails).
BUILT_BYTES_CASES = [
    "{{ range(3)|last }}|{{ range(4)|reverse|list }}|{{ range(3)|first }}",
    "{{ range(10)|list }}|{{ range(10)|batch(3)|list }}|{{ range(10)|slice(3)|list }}|{{ range(5)|join('-') }}",
    "{{ range(5)|sort(reverse=true) }}|{{ range(5)|unique|list }}|{{ range(5)|sum }}|{{ range(5)|max }}",
    "{{ 'abc'|list }}|{{ 'cab'|sort }}|{{ 'abcde'|batch(2)|list }}|{{ 'abcde'|slice(2)|list }}",
    "{{ ('x' * 2000)|list|length }}|{{ (('ab ' * 700).split())|length }}|{{ ('a' * 3000).partition('b')|length }}",
    "{{ range(4)|map('string')|join(',') }}|{{ range(4)|map('string')|list }}|{{ range(4)|map('string')|first }}",
    "{{ (range(3)|map('string'))|last }}",
    "{{ range(3)|dictsort }}",
    "{{ (range(3)|map('string'))|reverse|list }}",
    "{{ ''.join(range(3)|map('string')) }}|{{ 'a,b,,c'.split(',') }}|{{ 'a\nb'.splitlines() }}|{{ 'abc'.rpartition('b') }}",
    "{% for m in messages|selectattr('role', 'equalto', 'user')|list %}{{ m.content }}{% endfor %}",
    "{{ dict.fromkeys(range(3)|map('string'), 1) }}|{{ dict.fromkeys(range(3)) }}|{{ dict([('a', 1)]) }}",
    "{{ dict(range(2)|map('string')|map('list')) }}",
    "{{ dict(range(2)|map('string')|map('tojson')|map('list')|map('reverse')|map('list')) }}",
    "{% set d = {'b': 1, 'a': 2} %}{{ d|dictsort }}|{{ d.items()|list }}|{{ d.items()|sort }}|{{ d.items()|join(',') }}",
    "{% set d = {'b': 1, 'a': 2} %}{{ d.items()|batch(1)|list }}|{{ d.items()|reverse|list }}|{{ d.items()|last }}|{{ d.items()|unique|list }}",
    "{{ [{'k': 1}, {'k': 2}, {'k': 1}]|groupby('k')|list }}|{{ {'a': 1}|dictsort(reverse=true) }}",
    "{{ dict.fromkeys(range(3)) }}|{{ dict({'a': 1}.items()) }}|{{ cycler(*range(3)).next() }}|{{ dict(range(3)) }}",
    "{{ cycler(*range(2000)).next() }}|{{ namespace(range(2)) }}",
    "{{ ''.join(range(3)) }}",
    "{{ ','.join({'a': 1}.items()) }}",
    # str.translate and the methods of bytes (from str.encode) are size-checked before they run
    "{{ 'abc'.translate({97: 'xy', 98: none}) }}|{{ 'abc'.translate(['q'] * 100) }}|{{ 'abc'.translate('0123456789' * 10) }}",
    "{{ 'ab'.encode().center(6) }}|{{ 'a\tb'.encode().expandtabs(2) }}|{{ 'aa'.encode().replace('a'.encode(), 'bc'.encode()) }}|{{ '-'.encode().join(['a'.encode(), 'b'.encode()]) }}",
    # the filters that are not wrapped at all (nothing to meter)
    "{{ [1, 2]|length }}|{{ 'ab'|count }}|{{ [3, 4]|first }}|{{ [3, 4]|last }}|{{ x|default('d') }}|{{ -3|abs }}|{{ {'a': 1}|items|list }}|{{ 'a'|attr('upper') is defined }}",
    "{{ range(3)|map('string')|first }}|{{ (range(3)|map('string'))|last }}|{{ ''|first }}",
    # slices and comparisons go through the environment (sized, fuel for their length)
    "{{ messages[1:]|length }}|{{ 'abcdef'[::-1] }}|{{ 'abcdef'[1:5:2] }}|{{ [1, 2, 3][:2] }}|{{ 'ab'[5:] }}|{{ messages[0].content[:1] }}",
    "{% set a = messages[0].content %}{% set b = messages[2].content %}{{ a == b }}|{{ a != b }}|{{ a < b }}|{{ a >= b }}|{{ 'h' in a }}|{{ a not in b }}|{{ 'role' in messages[0] }}|{{ a in messages|map(attribute='content')|list }}",
    "{{ [1, 2] == [1, 2] }}|{{ {'a': 1} == {'a': 1} }}|{{ 1 in {1: 2} }}|{{ none == none }}|{{ 1 < 2 < 3 }}|{{ 'x' in 'xyz' }}",
    "{{ (['a', 'B'] * 600)|sort|first }}|{{ (['a', 'B'] * 600)|unique|list }}|{{ (['a', 'B'] * 600)|max }}|{{ ['b', 'A']|min }}|{{ messages|selectattr('role', 'equalto', 'user')|list|length }}",
    "{{ 1 is eq 1 }}|{{ 'a' is in 'abc' }}|{{ 2 is gt 1 }}|{{ [1, 2, 3]|select('lt', 3)|list }}|{{ 'x' is equalto 'x' }}|{{ 3 is ge 3 }}|{{ 1 is in [1] }}|{{ 2 is != 2 }}",
    "{{ 1 is eq }}",
    "{{ 'a' is in }}",
    "{{ [{'k': 'b'}, {'k': 'a'}]|sort(attribute='k')|map(attribute='k')|join }}|{{ {'b': 1, 'a': 2}|dictsort }}|{{ ([{'k': 'x' * 2000}] * 3)|groupby('k')|length }}",
]


@pytest.mark.parametrize("source", BUILT_BYTES_CASES)
def test_built_bytes_checks_keep_transformers_results(source):
    from tests.reference import hf_outcome, outcome

    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "bye"}]
    ours = outcome(lambda: apply_chat_template(copy.deepcopy(messages), source, budgets=DEFAULT_BUDGETS, **SPECIAL_TOKENS))
    assert ours == hf_outcome(source, messages, **SPECIAL_TOKENS)
