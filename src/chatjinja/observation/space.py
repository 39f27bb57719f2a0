"""The conversation space: every conversation chatjinja renders a template with to learn what it does.

Each member has a stable name and is one conversation with its render options. Two families:

- **Probe shapes** (``PROBE_SHAPES``): the conversations of docs/CAPABILITIES.md, each varying one thing,
  with the template's needle string in the place the fact reads (``probe`` reads the twelve facts off
  them; the analyser runs the same shapes symbolically).
- **Client shapes** (``CLIENT_SHAPES``): conversations as OpenAI-compatible clients send them:
  assistant ``content: null`` beside ``tool_calls``; arguments as a JSON string and as an object,
  holding ``null``, booleans, numbers, nested objects and arrays, quotes and unicode; content as a list
  of text parts; several calls in one turn; tool results with ``tool_call_id`` and/or ``name``;
  ``reasoning_content`` and its ``reasoning`` alias on the last and on earlier assistant turns; system
  and developer messages; markup-like and CRLF text; tools with nested object, array and enum
  properties; a final assistant message continued (``continue_final_message``).

and the template's **modes** (:mod:`chatjinja.analysis.modes`): every probe and client shape in the
default mode (every mode variable unset), and in each mode variant (one variable set to one value) the
shapes where modes show (``MODE_SHAPES``). At most ``MAX_MODE_VARIANTS`` variants (the rest are named in
``Space.cut``): a covering set, not the product, so the number of members of any template is at most
``len(PROBE_SHAPES) + len(CLIENT_SHAPES) + MAX_MODE_VARIANTS * len(MODE_SHAPES)``.

The space is deterministic: the same source gives the same members in the same order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..analysis.modes import MAX_MODE_VARIANTS, MODE_SHAPES, mode_variants, variant_name

__all__ = [
    "CLIENT_SHAPES", "MEDIA_CHUNKS", "MODE_SHAPES", "Member", "PROBE_SHAPES", "Space",
    "client_tools", "needle_for", "probe_conversations",
]

NEEDLE_CANDIDATES = ("Zq7needle", "Xk3marker", "Wv9sentinel", "Jf5probe")

MEDIA_CHUNKS: dict[str, dict[str, Any]] = {
    "image": {"type": "image", "url": "https://example.com/picture.png"},
    "image_url": {"type": "image_url", "image_url": {"url": "https://example.com/picture.png"}},
    "video": {"type": "video", "url": "https://example.com/clip.mp4"},
    "audio": {"type": "audio", "url": "https://example.com/sound.wav"},
    "input_audio": {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
}


def needle_for(source: str) -> str:
    """A string the template source does not hold: what the probe shapes put where a fact reads."""
    for candidate in NEEDLE_CANDIDATES:
        if candidate not in source:
            return candidate
    return "Qq" + str(abs(hash(source)))[:8] + "needle"


@dataclass(frozen=True)
class Member:
    """One conversation of the space: ``options`` are render parameters (``tools``, ``documents``,
    ``add_generation_prompt``, ``continue_final_message``), ``variables`` the mode's template variables."""

    name: str
    shape: str
    messages: list
    options: dict[str, Any]
    variables: tuple[tuple[str, Any], ...] = ()

    @property
    def mode(self) -> str:
        """``enable_thinking=true``, or ``default``."""
        return variant_name(self.variables) if self.variables else "default"


# ---- probe shapes -------------------------------------------------------------------------------

def _call(name: str, call_id: str, args: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def probe_conversations(n: str) -> dict[str, tuple[list, dict[str, Any]]]:
    """Every probe shape: name -> (messages, render options), with the needle ``n``."""
    u = {"role": "user", "content": "hello"}
    arguments = {"arg_" + n: "v"}

    def round_trip(args: Any) -> list:
        return [
            u,
            {"role": "assistant", "content": "", "tool_calls": [_call("tool_" + n, "call9id9", args)]},
            {"role": "tool", "tool_call_id": "call9id9", "name": "tool_" + n, "content": n + "t"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "more"},
        ]

    def parallel(first: Any, second: Any) -> list:
        return [
            u,
            {"role": "assistant", "content": "", "tool_calls": [
                _call("tool_" + n, "call9id9", first), _call("second_" + n, "call8id8", second)]},
            {"role": "tool", "tool_call_id": "call9id9", "name": "tool_" + n, "content": "r1"},
            {"role": "tool", "tool_call_id": "call8id8", "name": "second_" + n, "content": "r2"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "more"},
        ]

    tools = [{"type": "function", "function": {"name": "def_" + n, "description": "d",
                                                "parameters": {"type": "object", "properties": {}}}}]
    text_chunk = {"type": "text", "text": n}
    probes: dict[str, tuple[list, dict[str, Any]]] = {
        "user": ([{"role": "user", "content": n}], {}),
        "assistant": ([u, {"role": "assistant", "content": n}, {"role": "user", "content": "next"}], {}),
        "assistant_last": ([u, {"role": "assistant", "content": n}], {}),
        "system": ([{"role": "system", "content": n}, u], {}),
        "developer": ([{"role": "developer", "content": n}, u], {}),
        "chunk_text": ([{"role": "user", "content": [text_chunk]}], {}),
        "tool_definitions": ([u], {"tools": tools}),
        "round_trip": (round_trip(arguments), {}),
        "round_trip_string": (round_trip(json.dumps(arguments)), {}),
        "parallel": (parallel(arguments, {"x": 1}), {}),
        "parallel_string": (parallel(json.dumps(arguments), json.dumps({"x": 1})), {}),
        "generation_prompt_off": ([u], {"add_generation_prompt": False}),
        "generation_prompt_on": ([u], {"add_generation_prompt": True}),
        "reasoning": ([u, {"role": "assistant", "content": "ans", "reasoning_content": n}], {}),
        "documents": ([u], {"documents": [{"title": "t", "text": n}]}),
        "alternating": ([u, {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}], {}),
        "repeated_user": ([u, {"role": "user", "content": "again"}], {}),
    }
    for kind, chunk in MEDIA_CHUNKS.items():
        probes["chunk_" + kind] = ([{"role": "user", "content": [text_chunk, chunk]}], {})
    return probes


PROBE_SHAPES = tuple(probe_conversations("n"))


# ---- client shapes ------------------------------------------------------------------------------

def client_tools() -> list[dict[str, Any]]:
    """Tool definitions as clients send them: nested objects, arrays, enums, required fields."""
    return [
        {"type": "function", "function": {
            "name": "get_weather", "description": "Weather \"now\" for a city.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
            }, "required": ["city"]}}},
        {"type": "function", "function": {
            "name": "search", "description": "Search with filters.",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "object", "properties": {
                    "text": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}},
                "limit": {"type": ["integer", "null"]},
                "exact": {"type": "boolean"},
            }}}},
    ]


# Arguments with every JSON kind a model writes: null, booleans, numbers, nesting, quotes, unicode
CLIENT_ARGUMENTS = {"query": {"text": "caf\u00e9 \"quoted\" \u65e5\u672c \U0001F389", "tags": ["a", "b"]},
                    "limit": None, "exact": True, "ratio": 0.5, "count": 3}


def _client_call(call_id: str, name: str, args: Any, as_string: bool) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if as_string else args}}


def _calls_turn(as_string: bool, content: Any = None) -> list:
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Weather in Paris, and search the caf\u00e9 list."},
        {"role": "assistant", "content": content, "tool_calls": [
            _client_call("call_1", "get_weather", {"city": "Paris", "unit": "celsius", "days": 2}, as_string),
            _client_call("call_2", "search", CLIENT_ARGUMENTS, as_string)]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21}"},
        {"role": "tool", "tool_call_id": "call_2", "content": "[\"Caf\u00e9 de Flore\"]"},
        {"role": "assistant", "content": "It is 21 degrees; the caf\u00e9 is Caf\u00e9 de Flore."},
        {"role": "user", "content": "Thanks!"},
    ]


def _client_conversations() -> dict[str, tuple[list, dict[str, Any]]]:
    tools = {"tools": client_tools()}
    return {
        # OpenAI chat completions: content null beside the calls, arguments a JSON string
        "client_calls_null_content": (_calls_turn(True), tools),
        "client_calls_object_arguments": (_calls_turn(False, ""), tools),
        "client_call_with_text": ([
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [
                _client_call("call_9", "get_weather", {"city": "Paris", "days": None}, True)]},
            {"role": "tool", "tool_call_id": "call_9", "content": "sunny"},
        ], {**tools, "add_generation_prompt": True}),
        "client_text_parts": ([
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Answer in parts."}]},
            {"role": "user", "content": [{"type": "text", "text": "Again."}]},
        ], {"add_generation_prompt": True}),
        "client_reasoning_history": ([
            {"role": "user", "content": "First question"},
            {"role": "assistant", "content": "First answer", "reasoning_content": "Earlier reasoning"},
            {"role": "user", "content": "Second question"},
            {"role": "assistant", "content": "Second answer", "reasoning": "Last reasoning"},
        ], {}),
        "client_reasoning_before_call": ([
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "reasoning_content": "I should call the tool.", "tool_calls": [
                _client_call("call_3", "get_weather", {"city": "Paris"}, True)]},
            {"role": "tool", "tool_call_id": "call_3", "name": "get_weather", "content": "sunny"},
            {"role": "assistant", "content": "It is sunny.", "reasoning_content": "The tool said sunny."},
        ], tools),
        "client_system_developer": ([
            {"role": "system", "content": "System rules."},
            {"role": "developer", "content": "Developer rules."},
            {"role": "user", "content": "Hi"},
        ], {"add_generation_prompt": True}),
        "client_markup_crlf": ([
            {"role": "user", "content": "Line one\r\nLine two <b>bold</b> {{ not a tag }} {% raw %} </s> [INST]"},
            {"role": "assistant", "content": "Reply\r\nwith <think>literal</think> markup & \"quotes\""},
            {"role": "user", "content": "Tab\there, trailing spaces   "},
        ], {"add_generation_prompt": True}),
        "client_continue_final": ([
            {"role": "user", "content": "Write a haiku."},
            {"role": "assistant", "content": "Autumn moonlight -"},
        ], {"continue_final_message": True}),
    }


CLIENT_SHAPES = tuple(_client_conversations())

def _all_shapes(needle: str) -> dict[str, tuple[list, dict[str, Any]]]:
    return {**probe_conversations(needle), **_client_conversations()}


@dataclass(frozen=True)
class Space:
    """The members of one template's space, in order, and the mode variants left out (``cut``)."""

    needle: str
    members: tuple[Member, ...]
    modes: tuple[Any, ...] = ()
    cut: tuple[str, ...] = field(default=())

    def __iter__(self) -> Iterator[Member]:
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)

    def named(self, name: str) -> Member:
        for member in self.members:
            if member.name == name:
                return member
        raise KeyError(name)


def build_space(source: str, modes: tuple[Any, ...] = (), shapes: Callable[[str], dict] | None = None,
                max_variants: int | None = None) -> Space:
    """The space of ``source`` with its ``modes`` (``chatjinja.analysis.modes.Mode``; none: the default mode only)."""
    limit = MAX_MODE_VARIANTS if max_variants is None else max_variants
    needle = needle_for(source)
    built = (shapes or _all_shapes)(needle)
    members = [Member(name, name, messages, options) for name, (messages, options) in built.items()]
    variants = mode_variants(modes)
    for variables in variants[:limit]:
        label = variant_name(variables)
        fresh = (shapes or _all_shapes)(needle)  # (each member its own dicts: renders may not share them)
        for name in MODE_SHAPES:
            if name in fresh:
                messages, options = fresh[name]
                members.append(Member(f"{name}@{label}", name, messages, options, variables))
    return Space(needle, tuple(members), tuple(modes), tuple(variant_name(v) for v in variants[limit:]))
