"""The llama.cpp peer cases (``../shared/peer/llamacpp``): each case's prompt, the response template derived
for its mode, what the derived parser reads from the model's output, and how that differs from the message
llama.cpp's own test expects."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chatjinja.serving.suite import _arguments
from tests.conftest import SHARED

PEER = SHARED / "peer" / "llamacpp"


# The cases come with templates, not model folders. LFM2's templates never render a call (the model
# writes ``<|tool_call_start|>[f(x=1)]<|tool_call_end|>`` in its content): the markers exist only as the
# tokenizer's special tokens. These are the special tokens LFM2's tokenizer adds (LiquidAI's model card;
# the LFM2.5-8B-A1B template beside them renders the same call markers), given as a server that loads the
# model folder gives them (``response_template(..., tokens=...)``).
LFM2_TOKENS = ("<|startoftext|>", "<|im_start|>", "<|im_end|>", "<|tool_list_start|>", "<|tool_list_end|>",
               "<|tool_call_start|>", "<|tool_call_end|>", "<|tool_response_start|>", "<|tool_response_end|>")
MODEL_TOKENS = {"templates/LFM2-8B-A1B.jinja": LFM2_TOKENS, "templates/LFM2.5-Instruct.jinja": LFM2_TOKENS}


def cases() -> list[dict[str, Any]]:
    path = PEER / "cases.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []


@functools.cache
def source_of(file: str) -> str:
    return (PEER / file).read_text(encoding="utf-8")


def render_options(case: dict[str, Any]) -> dict[str, Any]:
    """What a server renders the case's prompt with: the tools, the generation prompt or the continued
    message, and the template keyword arguments (``enable_thinking``)."""
    options = case["options"]
    out: dict[str, Any] = {}
    if options.get("tools"):
        out["tools"] = options["tools"]
    if options.get("continue_final_message"):
        out["continue_final_message"] = True
    else:
        out["add_generation_prompt"] = bool(options.get("add_generation_prompt", True))
    return out


def variables_of(case: dict[str, Any]) -> dict[str, Any]:
    return dict(case["options"].get("template_kwargs") or {})


def difference(case: dict[str, Any], parsed: dict[str, Any]) -> str | None:
    """How ``parsed`` differs from the case's expected message (``None``: it reads back). Content and
    reasoning are compared with surrounding whitespace stripped (as llama.cpp compares them), calls by
    name and arguments (their JSON values), and by id where the case expects one."""
    expected = case["expected"]
    got_content = parsed.get("content") or ""
    if not isinstance(got_content, str):
        return f"content is {type(got_content).__name__}"
    if got_content.strip() != (expected.get("content") or "").strip():
        return f"content {got_content.strip()[:120]!r}, expected {(expected.get('content') or '').strip()[:120]!r}"
    got_reasoning = parsed.get("reasoning_content") or ""
    if not isinstance(got_reasoning, str):
        return f"reasoning is {type(got_reasoning).__name__}"
    if got_reasoning.strip() != (expected.get("reasoning_content") or "").strip():
        return (f"reasoning {got_reasoning.strip()[:120]!r}, "
                f"expected {(expected.get('reasoning_content') or '').strip()[:120]!r}")
    want_calls = expected.get("tool_calls") or []
    got_calls = parsed.get("tool_calls") or []
    if not isinstance(got_calls, list) or len(got_calls) != len(want_calls):
        return f"{len(got_calls) if isinstance(got_calls, list) else got_calls!r} tool calls, expected {len(want_calls)}"
    for index, (got, want) in enumerate(zip(got_calls, want_calls)):
        function = got.get("function") if isinstance(got, dict) else None
        if not isinstance(function, dict):
            return f"tool call {index} is {got!r}"
        if function.get("name") != want["name"]:
            return f"tool call {index} names {function.get('name')!r}, expected {want['name']!r}"
        if _arguments(function.get("arguments")) != _arguments(want["arguments"]):
            return f"tool call {index} has arguments {function.get('arguments')!r}, expected {want['arguments']!r}"
        if case["compare"].get("tool_call_ids") and want.get("id") and got.get("id") != want["id"]:
            return f"tool call {index} has id {got.get('id')!r}, expected {want['id']!r}"
    return None


@dataclass(frozen=True)
class Outcome:
    """One case read: ``problem`` is None when it reads back as expected; ``kind`` names the failure class."""

    case: dict[str, Any]
    problem: str | None
    kind: str | None = None

    @property
    def template(self) -> str:
        return Path(self.case["template"]["file"]).stem


def prompt_of(case: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the prompt a server sends for the case, or None with why it does not render).

    Rendered as transformers does, with the case's tools and template keyword arguments. Two
    differences from transformers' own call, both what llama.cpp's server sends, and both named in
    COMPATIBILITY.md: a template that loops over ``tools`` unguarded renders a tool-less request with
    ``tools=[]``; and a continued message keeps the trailing whitespace transformers strips from it
    (``"Hello, "``), which the case's model output continues from (``assume.prefix_endswith``).
    """
    from chatjinja.observation import render_text

    source = source_of(case["template"]["file"])
    options = render_options(case)
    outcome = render_text(source, case["messages"], variables=variables_of(case), **options)
    if not outcome.ok and "tools" not in options:
        outcome = render_text(source, case["messages"], variables=variables_of(case), tools=[], **options)
    if not outcome.ok:
        return None, f"the prompt does not render: {outcome.error}"
    prompt = outcome.text
    wanted = (case["options"].get("assume") or {}).get("prefix_endswith")
    if wanted and not prompt.endswith(wanted) and prompt.endswith(wanted.rstrip()):
        prompt += wanted[len(wanted.rstrip()):]
    return prompt, None


def read(case: dict[str, Any], template: dict[str, Any], prompt: str, parse: Any) -> Outcome:
    """The case's output read with ``template`` after ``prompt`` by ``parse`` (transformers' ``parse_response``);
    a continued message is returned whole (``chatjinja.serving.continued.continued_message``)."""
    from chatjinja.serving.continued import continued_message

    try:
        parsed = parse(case["raw_output"], template, prefix=prompt, tools=case["options"].get("tools"))
    except ValueError as exc:
        return Outcome(case, f"the parser raises: {str(exc).splitlines()[0][:160]}", "parser raises")
    if case["options"].get("continue_final_message"):
        parsed = continued_message(parsed, case["messages"][-1], template)
    problem = difference(case, parsed)
    return Outcome(case, problem, None if problem is None else "read differently")
