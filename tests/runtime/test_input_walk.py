"""The three walks that check the caller's data is plain JSON within the depth budget agree.

``_walk_plain`` (recursive, for narrow data), ``_walk_plain_levels`` (a level at a time through
``gc.get_referents``, for wide data) and ``_walk_plain_graph`` (each container once, for data that
shares containers) must reach the same verdict on any data, and collect the same containers; checked
against a plain reference definition written here, on random data that mixes JSON types with
lookalikes (subclasses of str/int/dict/list, tuples, sets, bytes, objects, non-string keys) and
shares containers between paths.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatjinja.runtime import budget

JSON_ATOMS = (str, int, float, bool, type(None))


class Text(str):
    pass


class Number(int):
    pass


class Mapping(dict):
    pass


class Items(list):
    pass


class Thing:
    pass


def _atom(rng: random.Random, odd: float):
    if rng.random() < odd:
        return rng.choice([Text("t"), Number(3), (1, 2), {1, 2}, b"b", Thing(), 1j, frozenset()])
    return rng.choice(["s", "", "é" * 3, 0, -7, 2**70, 1.5, True, False, None])


def make(seed: int, odd: float, share: float) -> object:
    """Random nested data; ``share`` is how often a container already made is used again."""
    rng = random.Random(seed)
    made: list = []

    def value(depth: int):
        if made and rng.random() < share:
            return rng.choice(made)
        if depth > rng.randint(0, 7) or rng.random() < 0.3:
            return _atom(rng, odd)
        if rng.random() < 0.5:
            items = [value(depth + 1) for _ in range(rng.randint(0, 5))]
            container = Items(items) if rng.random() < odd else items
        else:
            container = {}
            for index in range(rng.randint(0, 5)):
                key = rng.choice([f"k{index}", index, Text(f"t{index}")]) if rng.random() < odd else f"k{index}"
                container[key] = value(depth + 1)
            container = Mapping(container) if rng.random() < odd else container
        made.append(container)
        return container

    root = {"content": [value(1) for _ in range(rng.randint(1, 4))]}
    return root if rng.random() < 0.5 else [root, value(1)]


def reference(value: object, level: int, limit: float) -> tuple[bool, bool, set[int]]:
    """By definition: is every reachable object exact JSON data (keys: exact atoms), is a container
    reachable at a level ``>= limit`` (along any path), and the ids of the containers reachable
    (through dicts and lists only). Written for clarity, not speed."""
    containers: dict[int, object] = {}
    deepest = {}  # id -> the deepest level it is reached at (finite: the data here has no cycles)
    plain = True

    def visit(item: object, at: int) -> None:
        nonlocal plain
        kind = type(item)
        if kind not in (dict, list):
            plain = plain and kind in JSON_ATOMS
            return
        containers[id(item)] = item
        if id(item) in deepest and deepest[id(item)] >= at:
            return
        deepest[id(item)] = at
        if kind is dict:
            plain = plain and all(type(key) in JSON_ATOMS for key in item)
        for child in item.values() if kind is dict else item:
            visit(child, at + 1)

    visit(value, level)
    return plain, max(deepest.values()) >= limit, set(containers)


def run(walk, value: object, level: int, limit: float) -> tuple[str, set[int]]:
    seen: list = []
    try:
        walk(value, level, limit, seen)
    except budget._NotPlain:
        return "not plain", set(map(id, seen))
    except budget._TooDeep:
        return "too deep", set(map(id, seen))
    return "plain", set(map(id, seen)) - {id(budget._SHARED)}


WALKS = {
    "recursive": budget._walk_plain,
    "levels": budget._walk_plain_levels,
    "graph": budget._walk_plain_graph,
}


# the random data of the property tests: a seed for ``make``, and how often a lookalike type appears
SEEDS = st.integers(0, 2**32)
ODDITY = st.sampled_from([0.0, 0.0, 0.05, 0.3])


@settings(max_examples=400, deadline=None)
@given(seed=SEEDS, odd=ODDITY, share=st.sampled_from([0.0, 0.2, 0.6]), limit=st.integers(1, 12))
def test_walks_agree_with_the_definition(seed, odd, share, limit):
    value = make(seed, odd, share)
    plain, too_deep, reachable = reference(value, 0, limit)
    for name, walk in WALKS.items():
        verdict, seen = run(walk, value, 0, limit)
        if plain and not too_deep:
            assert verdict == "plain", name
            assert seen == reachable, name  # every container collected, nothing else
        elif plain:
            assert verdict == "too deep", name
        elif not too_deep:
            assert verdict == "not plain", name
        else:
            # data both too deep and not plain may stop at either first (the callers copy data that
            # is not plain and check the copy's depth, so both end in the same budget error)
            assert verdict in ("too deep", "not plain"), name
        assert seen <= reachable, name


def test_the_walks_stop_on_cycles():
    cyclic: list = []
    cyclic.append(cyclic)
    cyclic.append({"a": cyclic})
    for name, walk in WALKS.items():
        seen: list = []
        if name == "recursive":
            # as a tree a cycle is as deep as the limit (the graph walk takes over past 65,536 containers)
            with pytest.raises(budget._TooDeep):
                walk(cyclic, 0, 50, seen)
        else:
            with pytest.raises((budget._TooDeep, budget._ManyContainers)):
                walk(cyclic, 0, budget._INF, seen)
    # and through the public entry: too deep with the budget, not plain (copied) without it
    assert budget.is_plain_checked(cyclic, None, wide=True) is False
    with pytest.raises(budget.BudgetExceeded):
        budget.is_plain_checked(cyclic, 128, wide=True)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), odd=st.sampled_from([0.0, 0.05, 0.3]), limit=st.integers(1, 8), start=st.integers(-1, 2))
def test_is_plain_checked_agrees_with_the_definition(seed, odd, limit, start):
    value = make(seed, odd, 0.2)
    for candidate in (value, value["content"] if type(value) is dict else value[0]["content"]):
        _check_entry(candidate, limit, start)


@pytest.mark.parametrize(
    "value",
    [{}, [], {"a": 1, "b": "x", "c": None}, ["x", 1.5, True], {1: "x", None: 2}, {"a": Text("x")}, [Number(1)], {Text("k"): 1}, {(1, 2): 1}],
)
@pytest.mark.parametrize("limit", [0, 1, 2])
def test_is_plain_checked_on_flat_values(value, limit):
    # flat dicts and lists, empty ones, non-string keys, lookalike values, at the depth limit
    _check_entry(value, limit, 0)
    _check_entry(value, limit, 1)


def _check_entry(value, limit, start):
    plain, too_deep, reachable = reference(value, start, limit)
    seen: list = []
    try:
        verdict = "plain" if budget.is_plain_checked(value, limit, "input", start, seen) else "not plain"
    except budget.BudgetExceeded as error:
        assert error.budget == "max_input_depth"
        verdict = "too deep"
    if plain and not too_deep:
        assert verdict == "plain"
        assert set(map(id, seen)) - {id(budget._SHARED)} == reachable
    elif plain:
        assert verdict == "too deep"
    elif not too_deep:
        assert verdict == "not plain"
    else:
        assert verdict in ("too deep", "not plain")


def test_a_long_list_of_containers_already_seen_changes_nothing(monkeypatch):
    # a batch collects the containers of all its conversations in one list: a value walked after many
    # others gets the same verdict, its containers appended, and the tree walk its own allowance
    calls = []
    real_graph = budget._walk_plain_graph
    monkeypatch.setattr(budget, "_walk_plain_graph", lambda *args: calls.append(1) or real_graph(*args))
    earlier = [[] for _ in range(budget._TREE_WALK_CONTAINERS)]
    value = {"content": [{"a": [1, 2]}, "x"], "more": {"b": None}}
    plain, too_deep, reachable = reference(value, 0, 10)
    assert plain and not too_deep
    seen = list(earlier)
    assert budget.is_plain_checked(value, 10, "input", 0, seen) is True
    assert seen[: len(earlier)] == earlier
    assert set(map(id, seen[len(earlier) :])) == reachable
    assert calls == []  # a tree walk, not the graph walk


@settings(max_examples=300, deadline=None)
@given(seed=SEEDS, odd=ODDITY, share=st.sampled_from([0.0, 0.0, 0.3]), limit=st.integers(1, 9), start=st.sampled_from([-1, 0]))
def test_the_input_shape_bound_holds_for_every_container_of_the_input(seed, odd, share, limit, start):
    """``Meter.input_shape_bound`` (which lets ``tojson(indent=...)`` of the caller's data skip its walk)
    is at least the (values x levels) product the walk would find, for every container the template
    can reach, whether the data was plain (kept) or copied (not from the caller's size when the data
    shares containers), and for short lists the template builds of them."""
    from chatjinja.runtime._implementation import hooks

    _json_shape = hooks._json_shape
    from chatjinja.runtime.render import _rebuilt

    inputs: list = []
    try:
        value = _rebuilt(make(seed, odd, share), limit, "input", inputs, start=start)
    except budget.BudgetExceeded:
        return  # (too deep: never reaches a template)
    meter = budget.Meter(budget.Budgets(max_input_depth=limit))
    meter.input_containers = inputs
    shared = budget._SHARED in inputs or len(set(map(id, inputs))) < len(inputs)
    containers = [container for container in inputs if type(container) in (dict, list, tuple)]
    assert containers or type(value) not in (dict, list)
    for container in containers:
        nodes, deepest = _json_shape(container, budget._INF)
        bound = meter.input_shape_bound(container)
        assert bound >= nodes * deepest
        if not shared:  # (shared data: none is taken as the caller's, but a flat list still gets a bound)
            assert bound < budget._INF
    # a short list or tuple the template built of the caller's containers (any of them, repeated too)
    # and plain values: bounded as well; with a container of its own in it, not
    rng = random.Random(seed)
    for _ in range(5):
        built = [rng.choice(containers) if containers and rng.random() < 0.6 else rng.choice(["s", 1, None]) for _ in range(rng.randint(0, 6))]
        for candidate in (built, tuple(built)):
            nodes, deepest = _json_shape(candidate, budget._INF)
            assert meter.input_shape_bound(candidate) >= nodes * deepest
        assert meter.input_shape_bound(built + [[1]]) == budget._INF
        assert meter.input_shape_bound([built]) == budget._INF
