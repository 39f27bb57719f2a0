"""Corpus dialects the derived response template reads: each reads a fresh reply (values it was not derived from) back to its message."""

from __future__ import annotations

import json

import pytest

import chatjinja
from chatjinja.serving.suite import CASES as CASES_BY_NAME
from chatjinja.serving.suite import TOOLS, USER_TEXT, render_suite
from tests.conftest import CORPUS, corpus_or_skip

pytestmark = [pytest.mark.corpus, pytest.mark.reference]
pytest.importorskip("transformers.utils.chat_parsing")


def _call(name: str, arguments: dict) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


CASES = [
    # Gemma 4: string arguments inside a second pair of braces, object arguments in its bare-key dialect
    ("vllm/tool_chat_template_gemma4.jinja", '<|tool_call>call:lookup{{"q": "a}b", "n": 2}}<tool_call|>',
     [_call("lookup", {"q": "a}b", "n": 2})]),
    ("vllm/tool_chat_template_gemma4.jinja", '<|tool_call>call:lookup{q:<|"|>x<|"|>,n:{m:1}}<tool_call|>',
     [_call("lookup", {"q": "x", "n": {"m": 1}})]),
    # llama 4 JSON: call objects back to back
    ("vllm/tool_chat_template_llama4_json.jinja",
     '{"name": "a", "parameters": {"x": {"y": 1}}}{"name": "b", "parameters": {}}<|eot|>',
     [_call("a", {"x": {"y": 1}}), _call("b", {})]),
    # gemma 3 pythonic: keyword arguments without commas
    ("vllm/tool_chat_template_gemma3_pythonic.jinja", '[get_time(zone="CET"), search(query={"k": [1, 2]}text="a, b")]<end_of_turn>',
     [_call("get_time", {"zone": "CET"}), _call("search", {"query": {"k": [1, 2]}, "text": "a, b"})]),
    # Apertus: the name is the key
    ("llama.cpp/Apertus-8B-Instruct.jinja", '<|tools_prefix|>[{"get_time": {"zone": "CET"}}, {"search": {"query": {"a": [1]}}}]<|tools_suffix|>',
     [_call("get_time", {"zone": "CET"}), _call("search", {"query": {"a": [1]}})]),
    # GigaChat 3: the call is a message of its own after the content's end marker
    ("llama.cpp/GigaChat3-10B-A1.8B.jinja", 'Checking.<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "get_time", "arguments": {"zone": "CET"}}<|message_sep|>\n\n',
     [_call("get_time", {"zone": "CET"})]),
]


@pytest.mark.parametrize(("name", "reply", "calls"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_reads_a_fresh_reply(name: str, reply: str, calls: list) -> None:
    corpus_or_skip()
    source = (CORPUS / "templates" / name).read_text(encoding="utf-8")
    prompt = chatjinja.apply_chat_template([{"role": "user", "content": USER_TEXT}], source, add_generation_prompt=True)
    message = chatjinja.parse_response(reply, source, prefix=prompt, tools=TOOLS)
    assert message.get("tool_calls") == calls
    assert message.get("content", "") == ("Checking." if reply.startswith("Checking.") else "")


def test_a_reply_whose_history_differs_from_the_prompt_in_whitespace_only() -> None:
    """DeepSeek V3.1 pads ``</think>`` differently in the prompt and in the history: the reply is still the rest."""
    corpus_or_skip()
    source = (CORPUS / "templates" / "vllm/tool_chat_template_deepseekv31.jinja").read_text(encoding="utf-8")
    renders = render_suite(source)
    full = chatjinja.apply_chat_template([{"role": "user", "content": USER_TEXT}, CASES_BY_NAME["content"]], source)
    assert not full.startswith(renders.prefix)
    assert renders.rendered()["content"].strip() == "The answer is 42.<｜end▁of▁sentence｜>"
    assert chatjinja.parse_response(renders.rendered()["content"], source, prefix=renders.prefix)["content"] == "The answer is 42."


@pytest.mark.parametrize("name", sorted({c[0] for c in CASES} | {"trl/tiny_aya_chat_template.jinja"}))
def test_patterns_do_not_recurse(name: str) -> None:
    """A recursive value pattern (``(?&nest)``) made a hostile unclosed value cost seconds per kilobyte:
    the derived patterns nest a bounded depth with possessive repeats instead."""
    corpus_or_skip()
    text = json.dumps(chatjinja.response_template((CORPUS / "templates" / name).read_text(encoding="utf-8")))
    assert "(?&" not in text and "(?R" not in text and "(?1" not in text


@pytest.mark.parametrize("name", ["llama.cpp/Qwen-Qwen3-0.6B.jinja", "trl/qwen3_2507_training.jinja"])
def test_leading_whitespace_is_guarded(name: str) -> None:
    """A pattern starting with optional whitespace, searched over a run of blank lines, retried at every
    position of the run (quadratic: 20,000 spaces took 1.6 s): every such pattern is guarded to start
    where the search starts or after a non-space, which keeps the leftmost match."""
    corpus_or_skip()
    path = CORPUS / "templates" / name
    if not path.is_file():
        pytest.skip(f"{name} is not in this corpus")
    template = chatjinja.response_template(path.read_text(encoding="utf-8"))
    patterns = []

    def collect(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key.endswith("pattern") and isinstance(item, str):
                    patterns.append(item)
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)

    collect(template)
    assert patterns
    assert not [p for p in patterns if p.startswith(("\\s*", "(?=\\s*"))], patterns
