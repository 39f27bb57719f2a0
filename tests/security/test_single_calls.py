"""Every callable a template can reach, called once with arguments at the per-value budgets: its cost is
bounded by the budgets before it runs.

A single filter or method call is one C call (or Python code that calls no hook): the clock cannot stop
it, so the budgets must bound it from its arguments. The callables are found, not listed: the
environment's filters, tests and globals, and every attribute the sandbox lets a template read from
a value of each type a template can hold that is callable (``environment.getattr``, as a template
reads it). Each is tried with generated arguments on small values; every call shape that works there
is then made with values just under the per-value budgets (a string of ``max_string_chars``, a list
of ``max_sequence_items``), through the sandbox's own paths (the wrapped filters, ``Hooks.call``),
with the budgets 1/200 of the defaults (fast; the cost models are linear, so the decisions
are those of the defaults on values 200 times bigger) and no clock (deterministic). The call, and
the consumption of a generator it returns, must end in ``BudgetExceeded`` or complete with:

* Python's allocations (``tracemalloc``'s peak) within what is left of ``max_built_bytes`` plus the
  result (4 bytes a character of the string budget, twice) and a little;
* its Python-level work (function calls and C calls it makes, counted by ``sys.setprofile``, outside
  the budget hooks themselves) within 4 per step of fuel it was charged plus a constant: a filter
  written in Python (``urlize``, ``title``, ``pprint``, ``groupby``...) does its work as such calls,
  so one that was not charged for its input shows up here. One C call over a string (a ``str``
  method) is one event whatever its length; those are charged per character too, and their speed
  (at most tens of ns a character) is what ``benchmarks/bench_attacks.py`` measures.

A refused call must have been refused before the work: its allocation peak stays small.
"""

from __future__ import annotations

import itertools
import sys
import tracemalloc
import types
from typing import Any, Callable

import jinja2
import jinja2.nodes
import jinja2.runtime
import markupsafe
import pytest

from chatjinja.runtime import _implementation
from chatjinja.runtime.budget import DEFAULT_BUDGETS, BudgetExceeded, Budgets, guarded_render
from chatjinja.runtime.environment import ChatTemplateEnvironment

SCALE = 200
BUDGETS = Budgets(
    **{
        name: (None if name == "timeout" else value if name in ("max_recursion_depth", "max_input_depth", "max_source_nesting") else value // SCALE)
        for name, value in ((name, getattr(DEFAULT_BUDGETS, name)) for name in Budgets.names())
    }
)
CHARS = BUDGETS.max_string_chars - 16
ITEMS = BUDGETS.max_sequence_items - 16
EVENTS_PER_STEP = 4
FREE_EVENTS = 256  # a call's own fixed work: argument parsing, a few helper calls
PEAK_SLACK = 1 << 20
REFUSED_PEAK = 4 * CHARS + PEAK_SLACK  # (a copy of the value in the worst case: refused before the work)

ENVIRONMENT = ChatTemplateEnvironment()
# the budget hooks' own work is not the call's (their walks stop at the budgets); compiled, they make no events
HOOKS_FILE = getattr(getattr(_implementation.hooks.text_size, "__code__", None), "co_filename", None)


def _loop_context() -> Any:
    found = []
    ENVIRONMENT.from_string("{% for i in [1, 2] %}{{ keep(loop) }}{% endfor %}").render(keep=found.append)
    return found[0]


def _samples() -> dict[str, Any]:
    """A value of each type a template can hold or make (``bytes`` from ``encode``, ``Markup`` from
    ``escape``, views from ``dict`` methods, a generator from ``map``, the globals' objects)."""
    d = {"a": 1}
    return {
        "str": "ab", "bytes": b"ab", "int": 1, "float": 1.5, "bool": True, "NoneType": None,
        "list": [1], "tuple": (1,), "dict": d, "set": {1}, "frozenset": frozenset({1}),
        "dict_keys": d.keys(), "dict_values": d.values(), "dict_items": d.items(), "range": range(3),
        "generator": (x for x in [1]), "Markup": markupsafe.Markup("ab"),
        "Namespace": ENVIRONMENT.globals["namespace"](a=1), "Cycler": ENVIRONMENT.globals["cycler"](1, 2),
        "Joiner": ENVIRONMENT.globals["joiner"](), "LoopContext": _loop_context(),
        "Undefined": ENVIRONMENT.undefined(name="x"), "TemplateDict": ENVIRONMENT.globals["dict"],
    }


def reachable() -> dict[str, tuple[str, Any]]:
    """Every callable a template can reach, by id: (how it is called, the object or owner)."""
    found: dict[str, tuple[str, Any]] = {}
    for name in ENVIRONMENT.filters:
        found[f"filter:{name}"] = ("filter", name)
    for name in ENVIRONMENT.tests:
        found[f"test:{name}"] = ("test", name)
    for name, value in ENVIRONMENT.globals.items():
        if callable(value):
            found[f"global:{name}"] = ("global", name)
    for type_name, sample in _samples().items():
        for name in dir(sample):
            try:
                value = ENVIRONMENT.getattr(sample, name)
            except Exception:  # noqa: BLE001 - a property that raises is nothing to call
                continue
            if isinstance(value, jinja2.runtime.Undefined) or not callable(value):
                continue
            found[f"{type_name}.{name}"] = ("method", (type_name, name))
    return found


# -- the values and arguments tried --------------------------------------------------------------


def _values(size: int, items: int) -> dict[str, Any]:
    """Primary values of ``size`` characters or ``items`` items, in the shapes that are slowest for the
    filters that measure slowest (words for ``urlize``/``title``, lines for ``wordwrap``/``indent``,
    markup for ``striptags``, nested lists for ``pprint``)."""
    words = "a b<i>&amp;\n\t http://x.y "
    return {
        "words": (words * (size // len(words) + 1))[:size],
        "spaces": ("a " * (size // 2 + 1))[:size],
        "lines": ("a\n" * (size // 2 + 1))[:size],
        "letters": "a" * size,
        "strings": [str(i % 1000) for i in range(items)],
        "dicts": [{"a": str(i % 7), "b": i} for i in range(items)],
        "lists": [[i % 7, "x"] for i in range(items)],
        "ints": list(range(items)),
        "mapping": {str(i): str(i) for i in range(items)},
        "bytes": (b"a b\n" * (size // 4 + 1))[:size],
        "number": size,
    }


# the extra arguments tried, the ones that can make a call costly first (a value as big as the
# primary one, a width or count just under the budgets, a replacement longer than what it replaces)
_EXTRA_ARGS: list[tuple[tuple, dict]] = [
    ((), {}), (("big",), {}), ((1,), {}), (("big", "big"), {}), ((1, "big"), {}), ((1, 1), {}), (("a", "bb"), {}),
    ((), {"attribute": "a"}), (("a", "eq", "1"), {}), (("a",), {}), (("a", 1), {}), (("odd",), {}), (("string",), {}),
    (("a", "1"), {}), ((b"a",), {}), ((b"a", b"bb"), {}), (("{0}{0}",), {}), ((0,), {}), (("0",), {}), (("abcd",), {}),
    (([b"a", b"b"],), {}), ((None,), {}), (("upper",), {}),
]
SHAPES_PER_VALUE = 2  # the first that work, for each primary value


def _extra(args: tuple, kwargs: dict, big: Any, number: int) -> tuple[tuple, dict]:
    """The extra arguments, with ``"big"`` standing for a value as big as the primary one."""
    out = tuple(big if arg == "big" else number if arg == 1 and number else arg for arg in args)
    return out, kwargs


def _caller(kind: str, target: Any) -> Callable[..., Any]:
    """The callable as a template calls it: the wrapped filter, the test, or ``environment.call``."""
    context = ENVIRONMENT.from_string("").new_context({})
    if kind in ("filter", "test"):
        func = (ENVIRONMENT.filters if kind == "filter" else ENVIRONMENT.tests)[target]
        pass_arg = getattr(func, "jinja_pass_arg", None)
        first = {None: None, "eval_context": jinja2.nodes.EvalContext(ENVIRONMENT), "environment": ENVIRONMENT, "context": context}[
            getattr(pass_arg, "name", None)
        ]
        return (lambda *a, **k: func(first, *a, **k)) if first is not None else func
    if kind == "global":
        value = ENVIRONMENT.globals[target]
        return lambda *a, **k: ENVIRONMENT.call(context, value, *a, **k)
    raise KeyError(kind)


def _method(owner: Any, name: str) -> Any:
    return ENVIRONMENT.getattr(owner, name)


def _call_shapes(key: str, kind: str, target: Any) -> list[Callable[[dict], tuple[Callable, tuple, dict]]]:
    """The ways to call it that work on small values: each maps the values to (callable, args, kwargs)."""
    small = _values(40, 8)
    shapes = []
    seen = set()
    context = ENVIRONMENT.from_string("").new_context({})
    for value_name, (extra, kwargs) in itertools.product(small, _EXTRA_ARGS):
        # one working shape per value and kinds of arguments (``"big"``, a width, a string...)
        signature = (value_name, tuple("big" if arg == "big" else "n" if arg == 1 else type(arg).__name__ for arg in extra), tuple(kwargs))
        if signature in seen or sum(1 for other in seen if other[0] == value_name) >= SHAPES_PER_VALUE:
            continue
        def build(values: dict, value_name=value_name, extra=extra, kwargs=kwargs) -> tuple:
            value = values[value_name]
            args, kw = _extra(extra, kwargs, value, values["number"] if extra[:1] == (1,) else 0)
            if kind == "method":
                type_name, name = target
                owner = _owner(type_name, value)
                if owner is None:
                    raise TypeError("no owner")
                method = _method(owner, name)
                return (lambda *a, **k: ENVIRONMENT.call(context, method, *a, **k)), args, kw
            return _caller(kind, target), (value, *args), kw
        try:
            call, args, kw = build(small)
            _consume(call(*args, **kw))
        except Exception:  # noqa: BLE001 - a shape that does not fit this callable
            continue
        seen.add(signature)
        shapes.append(build)
    return shapes


def _owner(type_name: str, value: Any) -> Any:
    """A value of the method's type made from the primary value (None: not of this shape)."""
    kind = type(value)
    if type_name in ("str", "Markup") and kind is str:
        return value if type_name == "str" else markupsafe.Markup(value)
    if type_name == "bytes" and kind is bytes:
        return value
    if type_name in ("list", "tuple", "set", "frozenset") and kind is list and value and type(value[0]) is not dict:
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[type_name](
            value if type(value[0]) is not list else map(tuple, value)
        )
    if type_name in ("dict", "dict_keys", "dict_values", "dict_items") and kind is dict:
        return {"dict": value, "dict_keys": value.keys(), "dict_values": value.values(), "dict_items": value.items()}[type_name]
    if type_name == "int" and kind is int:
        return value
    if type_name in _SAMPLE_OWNERS and (kind is str or kind is int or (kind is list and type(value[0]) is str)):
        return SAMPLES[type_name]  # a sample of the type: its arguments come from the value
    return None


# types whose methods are called on a sample value (their arguments are the big values)
_SAMPLE_OWNERS = frozenset({"float", "bool", "NoneType", "range", "generator", "Namespace", "Cycler", "Joiner", "LoopContext", "Undefined", "TemplateDict"})


def _consume(result: Any) -> Any:
    """A generator (``map``, ``select``, ``|items``) does its work when consumed: consume it as ``|list`` does."""
    if isinstance(result, types.GeneratorType) or type(result).__name__ == "generator":
        return _caller("filter", "list")(result)
    return result


SAMPLES = _samples()
REACHABLE = reachable()
# Callables not called with generated arguments, and why
NOT_CALLED = {
    "global:raise_exception": "raises TemplateError at once, whatever its argument",
    "generator.throw": "raises the exception it is given",
    "generator.close": "O(1): finishes the generator",
    "generator.send": "resumes the generator: the item it yields is what consuming it does",
}


def test_the_callables_are_found_not_listed():
    # the enumeration reaches what a template reaches: every filter, test, global and the methods
    # of each type, and nothing the sandbox refuses (mutating methods, internals)
    assert {"filter:urlize", "filter:title", "test:in", "global:lipsum", "str.split", "bytes.center", "Markup.striptags", "int.to_bytes"} <= set(REACHABLE)
    assert "list.append" not in REACHABLE and "dict.update" not in REACHABLE and "list.sort" not in REACHABLE
    assert not any(".__" in key or "._" in key for key in REACHABLE)
    assert len(REACHABLE) > 250


def test_every_callable_has_a_cost():
    # each filter and method a template can reach is in the hooks' cost tables (or not wrapped at
    # all: O(1), ``_UNMETERED_FILTERS``), so none is charged only by the conservative default
    hooks = _implementation.hooks
    filters = {key.split(":", 1)[1] for key in REACHABLE if key.startswith("filter:")}
    assert filters - set(hooks._FILTER_COSTS) - hooks._UNMETERED_FILTERS == set()
    builtin_methods = {
        key.split(".", 1)[1]
        for key in REACHABLE
        if key.split(".")[0] in ("str", "bytes", "list", "tuple", "dict", "set", "frozenset", "dict_keys", "dict_values", "dict_items", "Markup")
    }
    assert builtin_methods - set(hooks._METHOD_COSTS) == set()


SHAPES = {key: (kind, target) for key, (kind, target) in REACHABLE.items() if key not in NOT_CALLED}


@pytest.fixture(scope="module")
def big_values() -> dict:
    return _values(CHARS, ITEMS)


def _profile_events(call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()``, counting the Python function calls and C calls it makes outside the budget hooks."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if (event == "call" or event == "c_call") and frame.f_code.co_filename != HOOKS_FILE:
            caller = frame.f_back
            if event == "call" and caller is not None and caller.f_code.co_filename == HOOKS_FILE:
                return  # (called by the hooks: the callable itself, or a check's ``isinstance``)
            count += 1

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    return result, count


@pytest.mark.parametrize("key", sorted(SHAPES))
def test_one_call_is_bounded_by_the_budgets(key: str, big_values: dict):
    kind, target = SHAPES[key]
    shapes = _call_shapes(key, kind, target)
    assert shapes, f"{key}: no generated call works on small values; add an argument shape to _EXTRA_ARGS"
    for build in shapes:
        try:
            call, args, kwargs = build(big_values)
        except Exception:  # noqa: BLE001 - no owner of this shape at this size
            continue
        with guarded_render(BUDGETS) as meter:
            meter.built = 0
            tracemalloc.start()
            try:
                try:
                    _, events = _profile_events(lambda: _consume(call(*args, **kwargs)))
                    refused = None
                except BudgetExceeded as error:
                    refused, events = error, 0
                except (TypeError, ValueError, LookupError, AttributeError, OverflowError, jinja2.TemplateError, RuntimeError):
                    refused, events = None, -1  # (fails as on small values: nothing done)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            steps = meter.steps
        where = f"{key} {[type(a).__name__ + (f'[{len(a)}]' if hasattr(a, '__len__') else '') for a in args]} {kwargs}"
        if refused is not None:
            assert peak <= REFUSED_PEAK, f"{where}: refused after allocating {peak} bytes ({refused})"
            continue
        if events < 0:
            continue
        assert peak <= BUDGETS.max_built_bytes + 8 * BUDGETS.max_string_chars + PEAK_SLACK, f"{where}: {peak} bytes traced"
        assert events <= EVENTS_PER_STEP * steps + FREE_EVENTS, f"{where}: {events} Python-level calls for {steps} steps of fuel"
