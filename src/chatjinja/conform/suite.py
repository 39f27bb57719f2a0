"""The conversation suite a template is checked on: the built-in cases, or cases read from a user's JSON."""

from __future__ import annotations

import base64
import copy
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from ..loading import bundled_manifest

__all__ = ["ConversationCase", "builtin_suite", "cases_from_json", "documented_conversation"]


@dataclass(frozen=True)
class ConversationCase:
    """One conversation (OpenAI/HF-style message dicts) with optional tools, and what it exercises."""

    name: str
    messages: list[dict]
    tools: list[dict] | None = None
    features: tuple[str, ...] = ()
    description: str = ""

    def copy_messages(self) -> list[dict]:
        return copy.deepcopy(self.messages)

    def copy_tools(self) -> list[dict] | None:
        return copy.deepcopy(self.tools)


def documented_conversation() -> list[dict]:
    """The four-turn ``example_conversation`` of ``templates/manifest.json`` (the Mistral document's example)."""

    return copy.deepcopy(bundled_manifest()["example_conversation"])


def _tiny_png() -> str:
    """A 2x2 white PNG as a data URL, built here so no image file is needed."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xff\xff\xff" * 2 for _ in range(2))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


_WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name."}},
            "required": ["city"],
        },
    },
}


def _tool_call(call_id: str, city: str, arguments: Any = None) -> dict:
    args = arguments if arguments is not None else '{"city": "%s"}' % city
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": args}}


def builtin_suite(images: bool = True) -> list[ConversationCase]:
    """The built-in cases: plain turns, system prompts, multi-turn, whitespace, merging, chunks, tools, images.

    Image cases are included only when ``images`` is true (the reference version supports images).
    """
    u = lambda text: {"role": "user", "content": text}  # noqa: E731
    a = lambda text: {"role": "assistant", "content": text}  # noqa: E731
    s = lambda text: {"role": "system", "content": text}  # noqa: E731
    cases = [
        ConversationCase("documented-conversation", documented_conversation(), features=("plain", "multi-turn", "ends-assistant"),
                         description="the document's four-turn example"),
        ConversationCase("single-user", [u("Hello, how are you?")], features=("plain",)),
        ConversationCase("ends-on-user", [u("Hello, how are you?"), a("Fine, and you?"), u("I'm doing great!")],
                         features=("plain", "multi-turn")),
        ConversationCase(
            "long-multi-turn",
            [u("One?"), a("One."), u("Two?"), a("Two."), u("Three?"), a("Three."), u("Four?")],
            features=("plain", "multi-turn"),
        ),
        ConversationCase("unicode-and-newlines", [u("Grüße 👋\nzweite Zeile"), a("Bonjour\n\n— ça va ?"), u("日本語")],
                         features=("plain", "multi-turn")),
        ConversationCase("leading-space-content", [u("  indented"), a("ok"), u("x")], features=("plain", "whitespace")),
        ConversationCase("assistant-trailing-space", [u("Hi"), a("Hello there.  "), u("Again")],
                         features=("plain", "whitespace")),
        ConversationCase("consecutive-user", [u("First part."), u("Second part.")], features=("plain", "same-role")),
        ConversationCase("consecutive-assistant", [u("Hi"), a("Part one."), a("Part two."), u("Go on")],
                         features=("plain", "same-role")),
        ConversationCase("system-prompt", [s("You are terse."), u("Hello")], features=("system",)),
        ConversationCase("system-multi-turn", [s("You are terse."), u("Hello"), a("Hi."), u("Bye")],
                         features=("system", "multi-turn")),
        ConversationCase(
            "text-chunks",
            [{"role": "user", "content": [{"type": "text", "text": "Chunk one."}, {"type": "text", "text": "Chunk two."}]}],
            features=("chunks",),
        ),
        ConversationCase("tools-available", [u("What is the weather in Paris?")], tools=[_WEATHER_TOOL], features=("tools",)),
        ConversationCase(
            "tool-call-and-result",
            [
                u("What is the weather in Paris?"),
                {"role": "assistant", "tool_calls": [_tool_call("call00001", "Paris")]},
                {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "22°C, sunny"},
                a("It is 22°C and sunny in Paris."),
                u("Thanks"),
            ],
            tools=[_WEATHER_TOOL],
            features=("tools", "tool-calls", "tool-results"),
        ),
        ConversationCase(
            "tool-call-content-none",
            [
                u("Weather in Paris?"),
                {"role": "assistant", "content": None, "tool_calls": [_tool_call("call00002", "Paris")]},
                {"role": "tool", "tool_call_id": "call00002", "name": "get_weather", "content": "22°C"},
            ],
            tools=[_WEATHER_TOOL],
            features=("tools", "tool-calls", "tool-results", "content-none"),
        ),
        ConversationCase(
            "tool-call-with-content",
            [
                u("Weather in Paris?"),
                {"role": "assistant", "content": "Let me check.", "tool_calls": [_tool_call("call00003", "Paris")]},
                {"role": "tool", "tool_call_id": "call00003", "name": "get_weather", "content": "22°C"},
            ],
            tools=[_WEATHER_TOOL],
            features=("tools", "tool-calls", "tool-results"),
        ),
        ConversationCase(
            "tool-call-dict-arguments",
            [
                u("Weather in Paris?"),
                {"role": "assistant", "tool_calls": [_tool_call("call00004", "Paris", arguments={"city": "Paris"})]},
                {"role": "tool", "tool_call_id": "call00004", "name": "get_weather", "content": "22°C"},
            ],
            tools=[_WEATHER_TOOL],
            features=("tools", "tool-calls", "tool-results"),
        ),
        ConversationCase(
            "parallel-tool-calls",
            [
                u("Weather in Paris and Rome?"),
                {"role": "assistant", "tool_calls": [_tool_call("call00005", "Paris"), _tool_call("call00006", "Rome")]},
                {"role": "tool", "tool_call_id": "call00005", "name": "get_weather", "content": "22°C"},
                {"role": "tool", "tool_call_id": "call00006", "name": "get_weather", "content": "25°C"},
            ],
            tools=[_WEATHER_TOOL],
            features=("tools", "tool-calls", "tool-results"),
        ),
        ConversationCase(
            "user-after-tool-result",
            [
                u("Weather in Paris?"),
                {"role": "assistant", "tool_calls": [_tool_call("call00007", "Paris")]},
                {"role": "tool", "tool_call_id": "call00007", "name": "get_weather", "content": "22°C"},
                u("And tomorrow?"),
            ],
            tools=[_WEATHER_TOOL],
            features=("tools", "tool-calls", "tool-results"),
        ),
        ConversationCase("system-text-chunks",
                         [{"role": "system", "content": [{"type": "text", "text": "Be terse."}, {"type": "text", "text": "Be kind."}]},
                          u("Hello")],
                         features=("system", "chunks")),
        ConversationCase("system-mid-conversation", [u("Hello"), a("Hi."), s("Now answer in French."), u("Bye")],
                         features=("system", "multi-turn")),
    ]
    if images:
        url = _tiny_png()
        image = {"type": "image_url", "image_url": {"url": url}}
        text = lambda t: {"type": "text", "text": t}  # noqa: E731
        cases += [
            ConversationCase("image-then-text", [{"role": "user", "content": [image, text("What is this?")]}],
                             features=("images",)),
            ConversationCase("text-then-image", [{"role": "user", "content": [text("What is this?"), image]}],
                             features=("images",)),
            ConversationCase(
                "two-images",
                [{"role": "user", "content": [text("Compare"), image, text("with"), copy.deepcopy(image)]}],
                features=("images",),
            ),
            ConversationCase("image-without-data", [{"role": "user", "content": [{"type": "image"}, text("What is this?")]}],
                             features=("images",), description="Hugging Face style image chunk with no image attached"),
        ]
    return cases


def cases_from_json(data: Any, source: str = "<conversations>") -> list[ConversationCase]:
    """Cases from a user's JSON: a list of ``{"name", "messages", "tools"}`` objects or bare message lists,
    or one such object."""
    if isinstance(data, dict):
        data = data["cases"] if isinstance(data.get("cases"), list) else [data]
    if not isinstance(data, list):
        raise ValueError(f"{source}: expected a list of conversations, got {type(data).__name__}")
    if data and all(isinstance(item, dict) and "role" in item for item in data):
        data = [data]  # one bare list of messages
    cases = []
    for index, item in enumerate(data, 1):
        if isinstance(item, list):
            item = {"messages": item}
        if not isinstance(item, dict) or not isinstance(item.get("messages"), list):
            raise ValueError(f"{source}: conversation {index} must be an object with a 'messages' list")
        for number, message in enumerate(item["messages"], 1):
            if not isinstance(message, dict) or "role" not in message:
                raise ValueError(f"{source}: conversation {index}, message {number} must be an object with a 'role'")
        tools = item.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise ValueError(f"{source}: conversation {index}: 'tools' must be a list")
        cases.append(
            ConversationCase(
                name=str(item.get("name") or f"case-{index}"),
                messages=item["messages"],
                tools=tools,
                features=tuple(item.get("features") or ()),
                description=str(item.get("description") or ""),
            )
        )
    return cases
