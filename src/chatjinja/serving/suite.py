"""The message suite: final assistant messages varied one shape at a time, rendered after one user turn, and what reading each back must give."""

from __future__ import annotations

import json
import re
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

from ..observation import MARKER, MARKER_START, common_prefix, common_suffix, last_marker, render_text
from .evidence import closer_of

__all__ = ["CASES", "TOOLS", "USER_TEXT", "Render", "SuiteObservation", "SuiteRenders", "expected_problem", "observe_suite",
           "render_suite"]

USER_TEXT = "What is the weather in Paris, Zq7?"
ANSWER = "The answer is 42."
REASONING = "The user wants the weather; I should call the tool."
LEAD = "Let me check the weather."
# Mistral templates insist on ids of nine letters or digits
FIRST_ID, SECOND_ID = "a1b2c3d4e", "f5g6h7i8j"
WEATHER_ARGS = {"city": "Paris", "days": 3}
TIME_ARGS = {"zone": "UTC"}
NESTED_ARGS = {"query": {"filters": ["a", {"b": 1}], "limit": 2}, "text": "café – 日本 🎉"}


def _call(name: str, call_id: str, arguments: dict, as_string: bool = False) -> dict[str, Any]:
    args: Any = json.dumps(arguments, ensure_ascii=False) if as_string else arguments
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _assistant(content: str = "", reasoning: str | None = None, calls: list | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    return message


# name -> the final assistant message (the suite: one shape varied at a time)
CASES: dict[str, dict[str, Any]] = {
    "content": _assistant(ANSWER),
    "reasoning": _assistant(ANSWER, REASONING),
    "call_object": _assistant(calls=[_call("get_weather", FIRST_ID, WEATHER_ARGS)]),
    "call_string": _assistant(calls=[_call("get_weather", FIRST_ID, WEATHER_ARGS, as_string=True)]),
    "parallel": _assistant(calls=[_call("get_weather", FIRST_ID, WEATHER_ARGS), _call("get_time", SECOND_ID, TIME_ARGS)]),
    "nested_unicode": _assistant(calls=[_call("search", FIRST_ID, NESTED_ARGS)]),
    "content_call": _assistant(LEAD, calls=[_call("get_weather", FIRST_ID, WEATHER_ARGS)]),
}
# Not a suite case: where the tool-call region of a reply starts and ends is read against it.
EMPTY = _assistant()


def _tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    """A tool as clients send one: every property described (Command R+ prints each description), the first required."""
    described = {key: {**schema, "description": f"The {key}."} for key, schema in properties.items()}
    return {"type": "function", "function": {"name": name, "description": name.replace("_", " "),
                                             "parameters": {"type": "object", "properties": described,
                                                            "required": list(properties)[:1]}}}


# The schemas the parser casts arguments with (tagged-parameter formats write every value as text).
TOOLS = [
    _tool("get_weather", {"city": {"type": "string"}, "days": {"type": "integer"}}),
    _tool("get_time", {"zone": {"type": "string"}}),
    _tool("search", {"query": {"type": "object", "additionalProperties": {}}, "text": {"type": "string"}}),
]


@dataclass(frozen=True)
class Render:
    """One suite case rendered: ``response`` is the full render minus the prefix, or ``None`` with why.

    ``values`` says where the render printed the message's own values, from the render's provenance
    (``chatjinja.runtime.provenance``): an input path (``("content",)``, ``("reasoning_content",)``,
    ``("tool_calls", 0, "function", "name")``, ``("tool_calls", 0, "function", "arguments", "city")``)
    -> the ``(start, end)`` of its first printing in ``response``. The analysis reads the reply's
    parts there, never by searching the reply for the suite's strings."""

    case: str
    response: str | None
    why_not: str | None = None
    values: dict[tuple, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)

    def at(self, *path: Any) -> tuple[int, int] | None:
        """Where the value at ``path`` of the message is printed in ``response`` (None: not printed as such)."""
        return self.values.get(path)


@dataclass(frozen=True)
class SuiteRenders:
    """One mode's renders: the prefix (the conversation before the reply, with the generation prompt) and
    every case's response, rendered with ``variables`` (the mode) and the suite's tools when ``tools``."""

    prefix: str
    user_end: int  # where the user's text ends in ``prefix``
    renders: dict[str, Render]
    empty: str | None  # the response of an assistant message with no content and no calls
    variables: tuple[tuple[str, Any], ...] = ()
    tools: bool = False

    def rendered(self) -> dict[str, str]:
        return {name: r.response for name, r in self.renders.items() if r.response is not None}

    @property
    def mode(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.variables) or "default"

    @property
    def tail(self) -> str:
        """The generation prompt: what the prefix writes after the user's text."""
        return self.prefix[self.user_end:] if self.user_end >= 0 else ""


@dataclass(frozen=True)
class SuiteObservation:
    """The suite in every mode that changes the reply (the default mode first), and the markers no render
    has to show: those in the template source and a model folder's tokens (``tokens``)."""

    modes: tuple[SuiteRenders, ...]
    source_markers: tuple[str, ...] = ()
    tokens: tuple[str, ...] = ()

    @property
    def default(self) -> SuiteRenders:
        return self.modes[0]


class RenderRefused(Exception):
    """A render the template refuses: ``str()`` is the guarded render's ``"Type: message"``."""


def _printed(provenance: Any, full: str, response: str, index: int = 1) -> dict[tuple, tuple[int, int]]:
    """The values of message ``index`` (the suite's final message) as the render printed them, moved into
    ``response`` (the full render's end, or that end after a close the reply is given first)."""
    if provenance is None or not response:
        return {}
    kept = common_suffix(full, response)
    shift = (len(response) - kept) - (len(full) - kept)  # full position + shift = response position
    found: dict[tuple, tuple[int, int]] = {}
    for start, end, _site, origin in provenance.segments:
        if origin is None:
            continue
        path, offset = origin
        if len(path) < 3 or path[:2] != ("messages", index) or offset != 0:
            continue
        if tuple(path[2:]) not in found and start + shift >= 0:
            found[tuple(path[2:])] = (start + shift, end + shift)
    return found


def _render(source: str, messages: list, **kwargs: Any) -> str:
    """The text of one render; ``kwargs`` are render parameters (``tools=``, ``add_generation_prompt=``, ...).

    A reply the template refuses to render only because it calls a list's own ``append`` (Kimi K2 keeps
    its call ids so; transformers' sandbox refuses) is rendered again with such calls allowed, as
    llama.cpp's engine renders it: what the template writes for a call is what the model writes."""
    outcome = render_text(source, messages, **kwargs)
    if not outcome.ok and _MUTATION_REFUSED.match(outcome.error or ""):
        outcome = render_text(source, deepcopy(messages), mutable=True, **kwargs)
    if not outcome.ok:
        raise RenderRefused(outcome.error)
    return outcome.text


def _render_traced(source: str, messages: list, **kwargs: Any) -> tuple[str, Any]:
    """``_render`` with the render's provenance (None when only the plain render succeeds)."""
    outcome = render_text(source, messages, traced=True, **kwargs)
    if not outcome.ok and _MUTATION_REFUSED.match(outcome.error or ""):
        outcome = render_text(source, deepcopy(messages), traced=True, mutable=True, **kwargs)
    if outcome.ok:
        return outcome.text, outcome.provenance
    return _render(source, messages, **kwargs), None


_MUTATION_REFUSED = re.compile(r"SecurityError: access to attribute '(?:append|extend|insert|pop|remove|update|setdefault)' "
                               r"of '(?:list|dict)' object is unsafe")


def _words(value: Any) -> list[str]:
    """The keys and string leaves of arguments (what a faithful render writes somehow)."""
    if isinstance(value, dict):
        return [w for k, v in value.items() for w in (k, *_words(v))]
    if isinstance(value, list):
        return [w for v in value for w in _words(v)]
    return [value] if isinstance(value, str) else []


def _python_repr(message: dict[str, Any], response: str) -> str | None:
    """A nested argument printed with Python's ``repr`` (``{'filters': [...]}``: jinja2 printing a dict),
    while the call itself is written otherwise: a value no content parser of transformers reads."""
    for call in message.get("tool_calls", ()):
        args = call["function"]["arguments"]
        args = json.loads(args) if isinstance(args, str) else args
        for key, value in args.items():
            if isinstance(value, (dict, list)) and repr(value) in response and repr(args) not in response:
                return f"a nested argument is printed as a Python repr ({repr(value)[:40]}), which no content parser reads"
            if isinstance(value, dict) and any(re.search("<" + re.escape(k) + r"\b", response) for k in value) \
                    and re.search("<" + re.escape(key) + r"\b", response):
                return "a nested argument is written as nested tags, which transformers' xml-inline parser reads as text"
    return None


def _missing(message: dict[str, Any], response: str) -> str | None:
    if message["content"] and message["content"] not in response:
        return "the content is not rendered"
    if message.get("reasoning_content") and message["reasoning_content"] not in response:
        return "the reasoning is not rendered"
    for call in message.get("tool_calls", ()):
        function = call["function"]
        if function["name"] not in response:
            return f"the call to {function['name']} is not rendered"
        args = function["arguments"]
        args = json.loads(args) if isinstance(args, str) else args
        for word in _words(args):
            if word not in response and json.dumps(word)[1:-1] not in response:
                return f"the arguments of {function['name']} are not rendered ({word!r} is missing)"
    return None


def render_suite(source: str, variables: dict[str, Any] | None = None, *, tools: bool = True) -> SuiteRenders:
    """Render the prefix and every suite case in one mode (``variables``), with the suite's tools given as a
    server gives them (without, when the prompt does not render with them); a case whose render does not
    start with the prefix has no response."""
    user = {"role": "user", "content": USER_TEXT}
    variables = dict(variables or {})
    given: dict[str, Any] = {"tools": TOOLS} if tools else {}
    try:
        prefix = _render(source, [user], add_generation_prompt=True, variables=variables, **given)
    except RenderRefused as refused:
        if not tools or str(refused).startswith(("BudgetExceeded", "OutputLimit")):
            raise
        return render_suite(source, variables, tools=False)
    user_end = prefix.rfind(USER_TEXT)
    user_end = -1 if user_end < 0 else user_end + len(USER_TEXT)
    markers = tuple(dict.fromkeys(_source_markers(source)))
    renders: dict[str, Render] = {}
    for name, message in CASES.items():
        try:
            full, provenance = _render_traced(source, [user, deepcopy(message)], variables=variables, **given)
        except RenderRefused as refused:  # a case the template refuses is a case it cannot render
            renders[name] = Render(name, None, f"the render raises {str(refused)[:180]}")
            continue
        response = _reply(prefix, full, user_end, markers)
        if response is None:
            renders[name] = Render(name, None, "the render does not start with the generation prompt")
            continue
        missing = _missing(message, response) or _python_repr(message, response)
        renders[name] = Render(name, None, missing) if missing else \
            Render(name, response, values=_printed(provenance, full, response))
    try:
        empty = _reply(prefix, _render(source, [user, deepcopy(EMPTY)], variables=variables, **given), user_end, markers)
    except RenderRefused:
        empty = None
    return SuiteRenders(prefix, user_end, renders, empty, tuple(variables.items()), tools)


# The mode variants observed besides the default (a covering set: one variable set to one value each);
# those whose names speak of thinking or reasoning first.
MAX_MODES = 6
_THINKING_NAMES = ("think", "reason", "effort")


def observe_suite(source: str, tokens: tuple[str, ...] | list[str] = (), *, tools: bool = True) -> SuiteObservation:
    """The suite in the default mode and in each mode variant the analyser finds whose generation prompt or
    replies differ from every mode kept before it."""
    from ..analysis import modes_of  # lazy: the analyser's parser (Lark) is loaded only for a derivation
    from ..analysis.modes import mode_variants  # lazy: with modes_of (the analysis package loads the parser)

    default = render_suite(source, tools=tools)
    kept = [default]
    variants = mode_variants(modes_of(source))
    variants.sort(key=lambda v: not any(word in v[0][0].lower() for word in _THINKING_NAMES))
    for variant in variants[:MAX_MODES]:
        try:
            renders = render_suite(source, dict(variant), tools=tools)
        except RenderRefused:
            continue
        if any(_same_mode(renders, other) for other in kept):
            continue
        kept.append(renders)
    return SuiteObservation(tuple(kept), tuple(dict.fromkeys(_source_markers(source))), tuple(tokens))


def _same_mode(a: SuiteRenders, b: SuiteRenders) -> bool:
    return a.tail == b.tail and a.rendered() == b.rendered() and a.empty == b.empty


def _source_markers(source: str) -> list[str]:
    """The markers the template source writes or compares against (string constants and literal text)."""
    return [m for m in MARKER.findall(source) if not m.startswith(("{%", "{{", "<!--"))]


def _reply(prefix: str, full: str, user_end: int, known: tuple[str, ...] = ()) -> str | None:
    """The reply in a full render: what follows the prompt (whitespace runs aside, ``_loose_reply``),
    or, when the prompt ends with a closed region the template does not write into the assistant's
    turn (an empty thought channel), what follows the part of the prompt the full render shares,
    past the user's turn, as long as it does not write that prefill itself. When the prompt opens a
    region the history never writes (DeepSeek R1's and QwQ's prefilled ``<think>``, their reasoning
    dropped from the history), the reply is that region's close, named like its open among the source's
    markers ``known``, then the history's turn: the model closes what the prompt opened, then answers."""
    if full.startswith(prefix):
        return full[len(prefix):]
    loose = _loose_reply(prefix, full)
    if loose is not None:
        return loose
    shared = common_prefix(prefix, full)
    partial = MARKER_START.search(full[:shared])  # the shared text ends inside a marker: back to its start
    if partial is not None:
        shared = partial.start()
    if user_end < 0 or shared <= user_end or not prefix[user_end:shared].strip():
        return None
    # the prefill must be a closed region (an empty thought channel) the reply does not write itself;
    # otherwise the render is not a reply to this prompt
    prefill = prefix[shared:].strip()
    if not prefill:  # only whitespace after the prompt's turn header (granite's "ASSISTANT: \n")
        return full[shared:]
    rest = full[shared:].lstrip()
    closer = last_marker(prefill)
    if closer is not None and rest.startswith(closer) and MARKER.match(prefill) is not None \
            and len(MARKER.findall(prefill)) >= 2:
        # the prompt prefills a closed region (``<think></think>``) whose close the history writes alone
        # (DeepSeek V3.2 ``</think>answer``): the reply is what follows that close
        return rest[len(closer):]
    markers = MARKER.findall(prefill)
    if len(markers) == 1 and prefill == markers[0] and not rest.startswith(prefill):
        closer = closer_of(prefill, known)
        return None if closer is None or closer in full[shared:] else closer + "\n\n" + rest
    if len(markers) < 2:  # an opened region (a lone <think>) whose close the source does not name
        return None
    words = MARKER.sub(" ", prefill).split()
    if len(words) > 1:  # a region with text in it (Seed's thinking budget note): the history writes another
        return None
    if markers[0] in full[shared:]:
        return None
    return full[shared:]


_SPACE_RUNS = re.compile(r"(\s+)")


def _loose_reply(prefix: str, full: str) -> str | None:
    """What follows the prompt in ``full`` when the two differ only in the length of their runs of
    whitespace (Nemotron 3 indents its history turns, DeepSeek V3.1 pads ``</think>``): each run of
    whitespace in the prompt matches any run (or none) in the full render; the rest of the prompt
    must come back exactly and in order, so a prefilled ``<think>`` the render writes too
    (``<think></think>answer``) starts the reply after it."""
    if len(prefix) > MAX_LOOSE_CHARS:
        return None
    i = 0
    for piece in _SPACE_RUNS.split(prefix):
        if not piece:
            continue
        if piece.isspace():
            while i < len(full) and full[i].isspace():
                i += 1
        elif full.startswith(piece, i):
            i += len(piece)
        else:
            return None
    return full[i:]


# Prompts longer than this are only matched exactly (the loose match is linear, but not free).
MAX_LOOSE_CHARS = 200_000


def _arguments(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def expected_problem(case: str, parsed: dict[str, Any], response: str) -> str | None:
    """How ``parsed`` differs from the case's message (``None``: it reads back). Ids count where the response has them."""
    message = CASES[case]
    want_content = message["content"]
    got_content = parsed.get("content") or ""
    if got_content != want_content:
        return f"content {got_content!r}, expected {want_content!r}"
    want_reasoning = message.get("reasoning_content") or ""
    got_reasoning = parsed.get("reasoning_content") or ""
    if got_reasoning != want_reasoning:
        return f"reasoning_content {got_reasoning!r}, expected {want_reasoning!r}"
    want_calls = message.get("tool_calls", [])
    got_calls = parsed.get("tool_calls") or []
    if not isinstance(got_calls, list) or len(got_calls) != len(want_calls):
        count = len(got_calls) if isinstance(got_calls, list) else got_calls
        return f"{count} tool calls, expected {len(want_calls)}"
    for index, (got, want) in enumerate(zip(got_calls, want_calls)):
        function = got.get("function") if isinstance(got, dict) else None
        if not isinstance(function, dict):
            return f"tool call {index} is {got!r}, not a function call"
        if function.get("name") != want["function"]["name"]:
            return f"tool call {index} names {function.get('name')!r}, expected {want['function']['name']!r}"
        if _arguments(function.get("arguments")) != _arguments(want["function"]["arguments"]):
            return f"tool call {index} has arguments {function.get('arguments')!r}, expected {_arguments(want['function']['arguments'])!r}"
        if want["id"] in response and got.get("id") != want["id"]:
            return f"tool call {index} has id {got.get('id')!r}, expected {want['id']!r}"
    return None
