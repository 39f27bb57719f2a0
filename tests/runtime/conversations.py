"""Conversation suites for the differential tests: (case id, conversation, apply_chat_template kwargs)."""

from __future__ import annotations

import dataclasses
from typing import Any


def get_weather(location: str, unit: str = "celsius"):
    """
    Get the current weather in a location.

    Args:
        location: The city and country, e.g. "Paris, France"
        unit: The temperature unit (choices: ["celsius", "fahrenheit"])

    Returns:
        The temperature as a string.
    """
    return "20"


def multiply(x: float, y: list[int] | None = None) -> float:
    """
    Multiply numbers.

    Args:
        x: The first number
        y: More numbers,
            spread over two lines
    """
    return x


@dataclasses.dataclass
class DataMessage:
    role: str
    content: Any


class Conversation:
    """An object with ``.messages`` (what transformers calls a Conversation)."""

    def __init__(self, messages: list[dict]):
        self.messages = messages


U = {"role": "user", "content": "Hello, how are you?"}
A = {"role": "assistant", "content": "Fine, and you?"}
U2 = {"role": "user", "content": "I'm doing great!"}
A2 = {"role": "assistant", "content": "Glad to hear!"}
SYS = {"role": "system", "content": "You are a helpful assistant."}

TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather <for> a 'city' & more",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string", "description": "City"}},
            "required": ["location"],
        },
    },
}


def _call(name: str, arguments: Any, call_id: str | None = "call_1") -> dict:
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
    return call


CALL_OBJ = _call("get_weather", {"location": "Paris", "unit": "celsius"})
CALL_STR = _call("get_weather", '{"location": "Paris"}')
CALL_ODD = _call("get_a&b's", {"q": "<b>&'\""}, "call_odd")
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "20 degrees"}


def bundled_cases() -> list[tuple[str, Any, dict]]:
    """At least 40 conversations exercising every feature a chat API sends."""
    cases: list[tuple[str, Any, dict]] = [
        ("basic-four-turn", [U, A, U2, A2], {}),
        ("single-user", [U], {}),
        ("single-user-genprompt", [U], {"add_generation_prompt": True}),
        ("two-turn-genprompt", [U, A, U2], {"add_generation_prompt": True}),
        ("system-first", [SYS, U, A], {}),
        ("system-late", [U, A, SYS, U2], {}),
        ("system-only", [SYS], {}),
        ("system-text-chunks", [{"role": "system", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]}, U], {}),
        ("system-image-chunk", [{"role": "system", "content": [{"type": "image", "url": "x"}]}, U], {}),
        ("user-text-chunk", [{"role": "user", "content": [{"type": "text", "text": "Describe."}]}], {}),
        ("user-text-image", [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, {"type": "image", "url": "http://x/y.png"}]}], {}),
        ("user-image-text", [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "And this?"}]}], {}),
        ("user-image-url", [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}, {"type": "text", "text": "Look"}]}], {}),
        ("user-three-chunks", [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}], {}),
        ("user-audio-chunk", [{"role": "user", "content": [{"type": "text", "text": "hear"}, {"type": "audio", "url": "a.wav"}]}], {}),
        ("user-empty-chunks", [{"role": "user", "content": []}], {}),
        ("assistant-text-chunks", [U, {"role": "assistant", "content": [{"type": "text", "text": "Chunked answer"}]}], {}),
        ("tools-defined", [U], {"tools": [TOOL_SCHEMA]}),
        ("tools-empty-list", [U], {"tools": []}),
        ("tools-callable", [U], {"tools": [get_weather, multiply]}),
        ("tool-call-object-args", [U, {"role": "assistant", "content": "", "tool_calls": [CALL_OBJ]}, TOOL_RESULT, {"role": "assistant", "content": "It is 20."}], {"tools": [TOOL_SCHEMA]}),
        ("tool-call-string-args", [U, {"role": "assistant", "content": "", "tool_calls": [CALL_STR]}, TOOL_RESULT], {}),
        ("tool-call-empty-string-args", [U, {"role": "assistant", "content": "", "tool_calls": [_call("ping", "")]}], {}),
        ("tool-call-content-none", [U, {"role": "assistant", "content": None, "tool_calls": [CALL_OBJ]}, TOOL_RESULT], {}),
        ("tool-call-no-content-key", [U, {"role": "assistant", "tool_calls": [CALL_OBJ]}], {}),
        ("tool-call-html-chars", [U, {"role": "assistant", "content": "", "tool_calls": [CALL_ODD]}], {}),
        ("parallel-tool-calls", [U, {"role": "assistant", "content": "", "tool_calls": [CALL_OBJ, _call("get_time", {"tz": "CET"}, "call_2")]}, TOOL_RESULT, {"role": "tool", "tool_call_id": "call_2", "name": "get_time", "content": "12:00"}, {"role": "assistant", "content": "Done."}], {}),
        ("tool-result-object-content", [U, {"role": "assistant", "content": "", "tool_calls": [CALL_OBJ]}, {"role": "tool", "tool_call_id": "call_1", "content": {"temp": 20}}], {}),
        ("tool-call-then-user", [U, {"role": "assistant", "content": "Let me check.", "tool_calls": [CALL_OBJ]}, TOOL_RESULT, {"role": "assistant", "content": "20."}, U2], {}),
        ("reasoning-content", [U, {"role": "assistant", "content": "ans", "reasoning_content": "I think..."}], {}),
        ("reasoning-thinking-alias", [U, {"role": "assistant", "content": "ans", "thinking": "hmm"}, U2], {}),
        ("reasoning-alias", [U, {"role": "assistant", "content": "ans", "reasoning": "because"}], {}),
        ("documents", [U], {"documents": [{"title": "Doc", "text": "Paris is in France."}]}),
        ("documents-bad", [U], {"documents": ["not a dict"]}),
        ("continue-final-message", [U, {"role": "assistant", "content": "The answer is"}], {"continue_final_message": True}),
        ("continue-final-trailing-space", [U, {"role": "assistant", "content": "The answer is "}], {"continue_final_message": True}),
        ("continue-final-chunks", [U, {"role": "assistant", "content": [{"type": "text", "text": "The answer is"}]}], {"continue_final_message": True}),
        ("continue-final-field-name", [U, {"role": "assistant", "content": "x", "reasoning_content": "thinking so"}], {"continue_final_message": "reasoning_content"}),
        ("continue-and-genprompt", [U, A], {"continue_final_message": True, "add_generation_prompt": True}),
        ("continue-on-user", [U], {"continue_final_message": True}),
        ("batch", [[U, A], [U2]], {}),
        ("batch-conversation-objects", [Conversation([U]), Conversation([U, A, U2])], {}),
        ("dataclass-messages", [DataMessage("user", "hi from a dataclass"), DataMessage("assistant", "ok")], {}),
        ("unicode", [{"role": "user", "content": "héllo 你好 🌍 \u200b zero-width"}, {"role": "assistant", "content": "Ça va — très bien ✓"}], {}),
        ("control-tokens-in-content", [{"role": "user", "content": "[INST] ignore [/INST]</s><s>[TOOL_CALLS]<|im_start|>"}], {}),
        ("newlines-and-spaces", [{"role": "user", "content": "  line one\n\nline two  \t"}, {"role": "assistant", "content": "\n"}], {}),
        ("html-chars", [{"role": "user", "content": "<b>bold</b> & 'quotes' \"double\""}], {}),
        ("unknown-role", [{"role": "critic", "content": "bad"}], {}),
        ("developer-role", [{"role": "developer", "content": "dev note"}, U], {}),
        ("tool-role-first", [TOOL_RESULT], {}),
        ("consecutive-users", [U, U2], {}),
        ("assistant-first", [A, U], {}),
        ("empty-conversation", [], {}),
        ("empty-assistant", [U, {"role": "assistant", "content": ""}], {}),
        ("non-dict-message", ["just a string"], {}),
        ("missing-content", [{"role": "user"}], {}),
        ("extra-kwargs", [U], {"custom_flag": True, "date_string": "26 Jul 2024"}),
        ("override-bos", [U, A], {"bos_token": "<BOS>", "eos_token": "<EOS>"}),
        ("numeric-content", [{"role": "user", "content": 42}], {}),
        ("long-conversation", [U, A] * 20 + [U2], {}),
    ]
    return cases


NEEDLE = "Zq7needle"
PU = {"role": "user", "content": "hello"}


def probe_cases() -> list[tuple[str, Any, dict]]:
    """The probe set for every corpus template (the CAPABILITIES.md probes plus common shapes)."""
    round_trip_args = {"arg_" + NEEDLE: "v"}
    call = {"id": "call9id9", "type": "function", "function": {"name": "tool_" + NEEDLE, "arguments": round_trip_args}}
    tool_msg = {"role": "tool", "tool_call_id": "call9id9", "name": "tool_" + NEEDLE, "content": NEEDLE + "t"}
    return [
        ("user", [{"role": "user", "content": NEEDLE}], {}),
        ("user-genprompt", [PU], {"add_generation_prompt": True}),
        ("multi-turn", [PU, {"role": "assistant", "content": NEEDLE}, {"role": "user", "content": "next"}], {}),
        ("system", [{"role": "system", "content": NEEDLE}, PU], {"add_generation_prompt": True}),
        ("developer", [{"role": "developer", "content": NEEDLE}, PU], {}),
        ("text-chunks", [{"role": "user", "content": [{"type": "text", "text": NEEDLE}]}], {}),
        ("image-chunk", [{"role": "user", "content": [{"type": "text", "text": NEEDLE}, {"type": "image", "url": "x"}]}], {}),
        ("tools", [PU], {"tools": [{"type": "function", "function": {"name": "def_" + NEEDLE, "description": "d", "parameters": {"type": "object", "properties": {}}}}]}),
        ("tool-round-trip", [PU, {"role": "assistant", "content": "", "tool_calls": [call]}, tool_msg, {"role": "assistant", "content": "done"}, {"role": "user", "content": "more"}], {}),
        ("tool-round-trip-string-args", [PU, {"role": "assistant", "content": "", "tool_calls": [{**call, "function": {"name": "tool_" + NEEDLE, "arguments": '{"arg_' + NEEDLE + '": "v"}'}}]}, tool_msg], {}),
        ("reasoning", [PU, {"role": "assistant", "content": "ans", "reasoning_content": NEEDLE}], {}),
        ("documents", [PU], {"documents": [{"title": "t", "text": NEEDLE}]}),
        ("not-alternating", [PU, {"role": "user", "content": "again"}], {}),
        ("continue-final", [PU, {"role": "assistant", "content": "Partial answer"}], {"continue_final_message": True}),
        ("batch", [[PU], [PU, {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]], {}),
    ]
