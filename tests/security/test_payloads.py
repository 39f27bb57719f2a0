"""The attack suite: every payload in ``payloads/`` ends as its header says; DoS payloads stop fast and small.

Non-DoS payloads are also run through transformers (``tests/reference.py``) and must end the same
way there. DoS payloads are never run in transformers: each runs in a fresh process (forked from a
server that has chatjinja imported) that measures the peak-RSS growth of the render, then renders a
benign template to show the process still works. Their wall time is measured by
``benchmarks/bench_attacks.py``, not asserted here (tests assert counts, never time).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import resource
from typing import Any

import pytest

from tests.reference import SPECIAL_TOKENS, hf_outcome
from tests.security import hostile_inputs
from tests.security.payloads import Payload, load_payloads

PAYLOADS = load_payloads()
DOS = [p for p in PAYLOADS if p.is_dos]
OTHER = [p for p in PAYLOADS if not p.is_dos]

MAX_EXTRA_BYTES = 512 * 1024 * 1024
BENIGN_TEMPLATE = "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"


def _ours(source: str, conversation: Any, strict: bool = False, **kwargs: Any) -> tuple:
    from chatjinja import apply_chat_template

    try:
        return ("text", apply_chat_template(conversation, source, strict=strict, **SPECIAL_TOKENS, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the class is what we compare
        budget = getattr(exc, "budget", None)
        return ("error", type(exc).__name__ if budget is None else f"BudgetExceeded:{budget}", str(exc))


def test_suite_is_large_and_headers_are_valid():
    assert len(PAYLOADS) >= 60
    assert len(DOS) >= 30
    from chatjinja.runtime.budget import Budgets

    for payload in PAYLOADS:
        assert payload.mode in ("default", "strict"), payload.name
        assert payload.reference in ("run", "skip"), payload.name
        for budget in payload.budgets:
            assert budget in Budgets.names(), payload.name


@pytest.mark.reference
@pytest.mark.parametrize("payload", OTHER, ids=[p.name for p in OTHER])
def test_payload_outcome(payload: Payload):
    hostile_inputs.Dangerous.calls = 0
    ours = _ours(payload.source, hostile_inputs.conversation(payload.input), strict=payload.mode == "strict")
    if payload.expect == "inert":
        assert ours[0] == "text", ours
    else:
        assert ours[:2] == ("error", payload.expect), ours
    assert "PWNED" not in ours[-1]
    assert hostile_inputs.Dangerous.calls == 0
    if payload.reference == "run" and payload.mode == "default":
        assert hf_outcome(payload.source, hostile_inputs.conversation(payload.input)) == ours


# -- DoS payloads, each in a fresh process ---------------------------------------------------------


def _run_dos(source: str, input_spec: Any, budgets: dict | None = None) -> dict:
    """In the child: warm up, render the payload, measure, render something benign."""
    from chatjinja import apply_chat_template
    from chatjinja.runtime.budget import DEFAULT_BUDGETS

    apply_chat_template(hostile_inputs.conversation(None), BENIGN_TEMPLATE)
    conversation = _make_input(input_spec)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcome = _ours(source, conversation, budgets=DEFAULT_BUDGETS if budgets is None else budgets)
    extra = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    del conversation
    after = apply_chat_template(hostile_inputs.conversation(None), BENIGN_TEMPLATE)
    return {"outcome": outcome[:2], "message": outcome[-1][:300], "extra_bytes": extra, "after": after}


def _make_input(spec: Any) -> Any:
    if spec is None or isinstance(spec, str):
        return hostile_inputs.conversation(spec)
    kind, size = spec
    if kind == "deep_list":
        return [{"role": "user", "content": hostile_inputs.deep_list(size)}]
    if kind == "deep_tools":
        return [{"role": "user", "content": "x", "extra": hostile_inputs.deep_dict(size)}]
    if kind == "cyclic":
        return [{"role": "user", "content": hostile_inputs.cyclic_list()}]
    if kind == "cyclic_pair":
        return [{"role": "user", "content": hostile_inputs.cyclic_pair()}]
    if kind == "shared_lists":
        return [{"role": "user", "content": hostile_inputs.shared_lists(size)}]
    if kind == "huge_content":
        return [{"role": "user", "content": "a" * size}]
    raise KeyError(kind)


@pytest.fixture(scope="module")
def child_pool():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["chatjinja.runtime.render", "tests.security.hostile_inputs"])
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context, max_tasks_per_child=1) as pool:
        yield pool


def _expected_benign() -> str:
    from chatjinja import apply_chat_template

    return apply_chat_template(hostile_inputs.conversation(None), BENIGN_TEMPLATE)


def _check_dos(pool: Any, source: str, budgets: tuple[str, ...], input_spec: Any = None) -> None:
    # A payload a fuel or size budget must stop renders with the clock far away (60 s): which budget
    # stops it must not depend on how loaded the machine is. Only the payloads that expect the clock
    # (the compile deadline) keep the default timeout.
    limits = None if "timeout" in budgets else {"timeout": 60.0}
    result = pool.submit(_run_dos, source, input_spec, limits).result(timeout=120)
    assert result["outcome"] in [("error", f"BudgetExceeded:{budget}") for budget in budgets], result
    assert result["extra_bytes"] < MAX_EXTRA_BYTES, result
    assert result["after"] == _expected_benign()


@pytest.mark.parametrize("payload", DOS, ids=[p.name for p in DOS])
def test_dos_payload_stops(payload: Payload, child_pool):
    _check_dos(child_pool, payload.source, payload.budgets, payload.input)


# Payloads too big to commit: generated here.
GENERATED = {
    "template_50mb": ("x" * (50 * 1024 * 1024), "max_source_chars", None),
    "brackets_1e5": ("{{ " + "(" * 100_000 + "1" + ")" * 100_000 + " }}", "max_source_nesting", None),
    "brackets_1e4": ("{{ " + "[" * 10_000 + "1" + "]" * 10_000 + " }}", "max_source_nesting", None),
    "ifs_1e5": ("{% if true %}" * 100_000 + "x" + "{% endif %}" * 100_000, "max_source_chars", None),
    "ifs_1e4": ("{%if 1%}" * 10_000 + "x" + "{%endif%}" * 10_000, "max_source_nesting", None),
    # jinja2 compiles statement-heavy source at about 60 KB/s: 1 MB of calls or sums is 20-40 s of
    # compiling within the source budget, stopped by the compile deadline (half the timeout)
    "calls_1mb": ("{{a(b(c(d)))}}" * (1_000_000 // 14), "timeout", None),
    "sums_1mb": ("{{a+b+c+d+e}}" * (1_000_000 // 13), "timeout", None),
    # a comparison with a literal operand is not metered (the source bounds it), but a 500 KB literal
    # searched in nested short loops (each charged when it starts) is 10^6 searches: the clock at each
    # loop start stops it
    "literal_search_nested_loops": (
        "{% for i in range(1000) %}{% for j in range(1000) %}{% if 'zz' in '" + "a" * 500_000 + "' %}x{% endif %}{% endfor %}{% endfor %}",
        "timeout",
        None,
    ),
    "unterminated_tags_1e5": ("{% if x %}{{ (" * 50_000, "max_source_nesting", None),
    "input_list_1e5_deep": (BENIGN_TEMPLATE, "max_input_depth", ("deep_list", 100_000)),
    "input_dict_1e5_deep": (BENIGN_TEMPLATE, "max_input_depth", ("deep_tools", 100_000)),
    "input_cyclic": (BENIGN_TEMPLATE, "max_input_depth", ("cyclic", 0)),
    "input_cyclic_pair": (BENIGN_TEMPLATE, "max_input_depth", ("cyclic_pair", 0)),
    # 41 lists, 2**40 paths: the input walk must not follow every path, and printing it must be sized
    # (its text is not the size of the caller's data)
    "input_shared_lists_printed": (BENIGN_TEMPLATE, "max_string_chars", ("shared_lists", 40)),
    "input_shared_lists_tojson": (
        "{% for m in messages %}{{ m.content|tojson }}{% endfor %}", "max_string_chars", ("shared_lists", 40)
    ),
    "input_content_50mb": (BENIGN_TEMPLATE, "max_output_chars", ("huge_content", 50 * 1024 * 1024)),
}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_dos_stops(name: str, child_pool):
    source, budget, input_spec = GENERATED[name]
    _check_dos(child_pool, source, (budget,), input_spec)


def test_unterminated_string_is_a_syntax_error():
    import jinja2

    from chatjinja import apply_chat_template

    with pytest.raises(jinja2.TemplateSyntaxError):
        apply_chat_template(hostile_inputs.conversation(None), "{{ 'abc" + "x" * 100_000)


# -- what a render keeps, independent of the machine's speed -----------------------------------------

KEEPING = [p for p in DOS if "max_built_bytes" in p.budgets]
SMALL_BUILT = 16 * 1024 * 1024
SMALL_STRING = 2 * 1024 * 1024  # characters: a string is sized when built, so one may take 4 bytes a character


def _run_traced(source: str, input_spec: Any) -> tuple:
    """In a fresh child (tracemalloc counts every thread of a process): render under small budgets, traced."""
    import tracemalloc

    conversation = _make_input(input_spec)
    budgets = {"max_built_bytes": SMALL_BUILT, "max_string_chars": SMALL_STRING, "timeout": 60.0}
    tracemalloc.start()
    try:
        outcome = _ours(source, conversation, budgets=budgets)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return outcome[:2], peak


@pytest.mark.parametrize("payload", KEEPING, ids=[p.name for p in KEEPING])
def test_built_bytes_bound_what_a_render_keeps(payload: Payload, child_pool):
    """With small ``max_built_bytes`` and ``max_string_chars`` and a timeout far away, every payload that
    keeps what it builds is stopped by a budget other than the clock, and Python's own allocation count
    (tracemalloc) never passes the built bytes plus one more value (the last one, sized once it is
    built) plus a little: the accounting covers what the attack allocates, so the 512 MB guarantee does
    not depend on how fast the machine reaches the timeout."""
    outcome, peak = child_pool.submit(_run_traced, payload.source, payload.input).result(timeout=120)
    assert outcome[0] == "error" and outcome[1].startswith("BudgetExceeded:"), outcome
    assert outcome[1] != "BudgetExceeded:timeout", outcome
    assert peak <= SMALL_BUILT + 4 * SMALL_STRING + 8 * 1024 * 1024, f"{peak / 2**20:.0f} MiB traced"
