"""One budget per call: ``add_generation_tags`` gives all its renders one budget and keeps only short renders;
tokenizing a chat is charged against the render memory budget. The hostile calls run in fresh processes
(``hostile_calls.py``); bounds are counts and peak RSS, never time (the times: benchmarks/bench_call_budgets.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatjinja.observation import render as observation_render
from chatjinja.training import generation_tags
from chatjinja.training.encode import TOKENIZE_BYTES_PER_BYTE, check_tokenize_size
from chatjinja.training.generation_tags import GenerationTagsBudgetExceeded, add_generation_tags
from tests.training import hostile_calls
from tests.training.conftest import reference_tokenizer

CHATML = hostile_calls.CHATML


# ---- generation tags, in this process, at small limits ---------------------------------------


@pytest.mark.parametrize("budget, limit, template", [
    ("total_output_chars", 2000, "{{ 'x' * 500 }}" + CHATML),  # each render within its own budget, four together not
    ("total_steps", 3000, "{% for i in range(400) %}{% set y = i|string %}{% endfor %}" + CHATML),
    ("total_seconds", 0.0, CHATML),
])
def test_the_renders_of_one_call_share_one_budget(budget: str, limit: float, template: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert add_generation_tags(template)  # taggable under the default call budget
    monkeypatch.setitem(generation_tags.CALL_BUDGETS, budget, limit)
    with pytest.raises(GenerationTagsBudgetExceeded, match=f"^budget {budget} of the call exceeded") as caught:
        add_generation_tags(template)
    assert caught.value.budget == budget and "\n" not in str(caught.value)


def test_a_render_is_limited_to_what_the_call_has_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first render, 5,000 characters, is stopped by the call's 4,000 (its own budget allows 32 Mi)."""
    monkeypatch.setitem(generation_tags.CALL_BUDGETS, "total_output_chars", 4000)
    calls = []
    real = observation_render.render_source
    monkeypatch.setattr(observation_render, "render_source", lambda *a, **k: calls.append(k["budgets"]) or real(*a, **k))
    with pytest.raises(GenerationTagsBudgetExceeded, match="total_output_chars"):
        add_generation_tags("{{ 'x' * 5000 }}" + CHATML)
    assert len(calls) == 1 and calls[0].max_output_chars == 4000


def test_long_renders_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A render longer than KEEP_CHARS is asked again rather than kept: the call holds no long text between renders."""
    taggers = []
    real_run = generation_tags._Tagger.run
    monkeypatch.setattr(generation_tags._Tagger, "run", lambda self: taggers.append(self) or real_run(self))
    template = "{{ 'x' * 70000 }}" + CHATML
    tagged = add_generation_tags(template)
    assert "{% generation %}" in tagged
    sizes = [len(error if error is not None else text if isinstance(text, str) else text[0])
             for text, error in taggers[0].rendered.values()]
    assert max(sizes, default=0) < 70_000  # every render prints the 70,000 x's: none of them is kept


def test_a_marked_render_of_many_operands_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generation_tags, "MAX_PIECES", 50)
    with pytest.raises(GenerationTagsBudgetExceeded, match="^budget max_pieces of the call exceeded"):
        add_generation_tags("{% for i in range(100) %}{{ 'a' }}{% endfor %}" + CHATML)


# ---- tokenizing, in this process, at small limits --------------------------------------------


def test_a_chat_to_tokenize_is_charged_against_the_render_memory_budget() -> None:
    budgets = {"max_built_bytes": TOKENIZE_BYTES_PER_BYTE * 100}
    check_tokenize_size(["a" * 100, "\U0001f642" * 25], budgets)  # 100 UTF-8 bytes each: fit
    for chat in ("a" * 101, "\U0001f642" * 26, "a" * 97 + "é" * 2):
        with pytest.raises(Exception, match=r"^budget max_built_bytes exceeded \(limit 51200\): tokenizing a rendered chat") as caught:
            check_tokenize_size([chat], budgets)
        assert type(caught.value).__name__ == "BudgetExceeded"
    check_tokenize_size(["a" * 10**6], None)  # budgets off: no limit


# ---- the hostile calls, each in a fresh process ----------------------------------------------


@pytest.mark.parametrize("case, budget", [
    ("prints_32mb", ("total_output_chars",)),
    ("prints_4mb", ("total_output_chars",)),
    ("slow_render", ("total_steps", "total_seconds")),  # which comes first depends on the machine's speed
])
def test_hostile_generation_tags_end_in_one_line_naming_the_call_budget(case: str, budget: tuple, tmp_path: Path) -> None:
    result = hostile_calls.run_in_fresh_process(case, tmp_path)
    assert result["code"] == 1, result
    lines = result["stderr"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot add generation tags: budget "), lines
    assert any(f"budget {name} of the call exceeded" in lines[0] for name in budget), lines
    assert result["peak"] < hostile_calls.PEAK_BYTES, result


def test_a_20mb_message_to_tokenize_is_refused_in_one_line(tekken_folder: Path, tmp_path: Path) -> None:
    result = hostile_calls.run_in_fresh_process("tokenize_20mb", tmp_path, tekken_folder)
    assert result["code"] == 1, result
    record = json.loads(result["output"].splitlines()[0])
    assert record["error"].startswith("BudgetExceeded: budget max_built_bytes exceeded (limit 268435456): tokenizing a rendered chat"), record
    assert result["peak"] < hostile_calls.PEAK_BYTES, result


def test_a_chat_at_the_tokenize_limit_gives_transformers_ids(tekken_folder: Path, tmp_path: Path) -> None:
    """512 KiB of digits (one token a byte, the most memory a byte measured) is tokenized as transformers does, within the bound."""
    result = hostile_calls.run_in_fresh_process("tokenize_at_limit", tmp_path, tekken_folder)
    assert result["code"] == 0, result
    assert result["peak"] < hostile_calls.PEAK_BYTES, result
    ours = json.loads((tmp_path / "tokenize_at_limit.out").read_text(encoding="utf-8"))
    messages = json.loads((tmp_path / "tokenize_at_limit.jsonl").read_text(encoding="utf-8"))["messages"]
    reference = reference_tokenizer(tekken_folder)
    expected = reference.apply_chat_template(messages, chat_template=hostile_calls.INST, tokenize=True, return_dict=True)
    assert ours["input_ids"] == list(expected["input_ids"])


def test_the_reference_states_the_call_budgets() -> None:
    """docs/reference/budgets.md, "One budget per call": one row per call budget, its default as the module has it."""
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "budgets.md").read_text(encoding="utf-8")
    rows = {m.group(1): float(m.group(2).replace(",", "")) for m in re.finditer(r"^\| `(total_\w+|max_renders|max_pieces)` \| ([\d,.]+)", page, re.M)}
    expected = {**generation_tags.CALL_BUDGETS, "max_renders": generation_tags.MAX_RENDERS, "max_pieces": generation_tags.MAX_PIECES}
    assert rows == {name: float(value) for name, value in expected.items()}
