"""Property (hypothesis): in a tagged copy, every assistant message's text lies in a generation span and no other message's does."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatjinja
from chatjinja.training.generation_tags import add_generation_tags
from tests.conftest import CORPUS, corpus_or_skip

# accepted templates of different shapes: ChatML with branches, one expression for every role, Mistral, Llama 3.1
# with tools, Qwen3 with reasoning, Gemma, Phi-3, Kimi-K2-Thinking (a second loop, text after stripping tags)
TEMPLATES = [
    "trl/qwen3_instruct_2507.jinja",
    "chujiezheng/chatml.jinja",
    "mistral-common/v11.jinja",
    "vllm/qwen3.jinja",
    "trl/gemma3.jinja",
    "chujiezheng/Llama-3.1-Instruct.jinja",
    "chujiezheng/zephyr.jinja",
    "llama.cpp/Kimi-K2-Thinking.jinja",
]
ROLES = st.sampled_from(["system", "user", "assistant", "tool"])


@st.composite
def conversations(draw: st.DrawFn) -> list[dict]:
    count = draw(st.integers(1, 6))
    messages = [{"role": "user", "content": "Nu0x"}]
    for index in range(1, count + 1):
        role = "assistant" if messages[-1]["role"] != "assistant" and draw(st.booleans()) else draw(ROLES)
        message = {"role": role, "content": f"N{role[0]}{index}x"}
        if role == "assistant" and draw(st.integers(0, 3)) == 0:
            message["reasoning_content"] = f"Nr{index}x"
        messages.append(message)
    return messages


@pytest.fixture(scope="module")
def tagged() -> dict[str, tuple[str, str]]:
    corpus_or_skip()
    found = {}
    for name in TEMPLATES:
        path = CORPUS / "templates" / name
        if path.is_file():
            source = path.read_text(encoding="utf-8")
            found[name] = (source, add_generation_tags(source))
    assert len(found) >= 5
    return found


@pytest.mark.parametrize("name", TEMPLATES)
@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=conversations())
def test_each_assistant_text_inside_a_span_and_no_other(tagged: dict, name: str, messages: list[dict]) -> None:
    if name not in tagged:
        pytest.skip(f"{name} is not in the corpus")
    source, copy = tagged[name]
    try:
        expected = chatjinja.apply_chat_template(messages, source)
    except Exception as exc:  # noqa: BLE001 - the template rejects this conversation: the copy must reject it alike
        with pytest.raises(type(exc)):
            chatjinja.apply_chat_template(messages, copy)
        return
    text, spans = chatjinja.apply_chat_template(messages, copy, return_assistant_spans=True)
    assert text == expected
    for message in messages:
        for key in ("content", "reasoning_content"):
            needle = message.get(key)
            if not needle or needle not in text:
                continue
            at = text.index(needle)
            inside = any(a <= at and at + len(needle) <= b for a, b in spans)
            assert inside == (message["role"] == "assistant"), (message, text, spans)
