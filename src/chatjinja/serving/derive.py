"""Derive a transformers ``response_template`` from a chat template by rendering the message suite and reading the markers between the parts.

Each suite case (``serving.suite``) varies one thing in the final assistant message; the text the
template writes around the parts (content, reasoning, each call's name and arguments) gives the
start anchor, the reasoning markers, the tool-call markers and argument encoding, and the content
end. Candidate templates are built from those markers and kept only if transformers' parser reads
every rendered case back to its message; when none does, :class:`ResponseTemplateError` says which
case fails and why. The renders run under the probe's budgets (untrusted templates).
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import ChatJinjaError
from ..loading import template_record
from ..observation import (MARKER, common_prefix, common_suffix, first_marker, first_unit, last_marker, last_unit,
                           marker_end, marker_start,
                           without_partial_marker)
from ..probing import probe
from . import suite
from . import library
from .emit import ReplyFormat, Unexpressible, to_transformers, to_vllm, uncaptured
from .evidence import call_pair, closer_of, prefilled, reasoning_pairs
from .suite import SuiteObservation, SuiteRenders, expected_problem, observe_suite

__all__ = ["TARGETS", "ResponseTemplateError", "derive", "derive_format", "derive_source", "derive_source_format", "reads_back", "reply_problems", "response_template"]

# A reply render longer than this is not searched for markers (the scans below are not linear in it).
MAX_RESPONSE_CHARS = 64_000
_NAME = r"(?P<name>[\w.\-]+)"
_ID = r"(?P<id>[A-Za-z0-9_\-]+)"


class ResponseTemplateError(ChatJinjaError, ValueError):
    """The template gives no way back from a reply to the message: ``reasons`` says, per suite case, why."""

    def __init__(self, message: str, *, reasons: dict[str, str] | None = None, source_name: str | None = None):
        super().__init__(message, source_name=source_name)
        self.reasons = dict(reasons or {})


def _lit(text: str) -> str:
    """A regex matching ``text`` with each run of whitespace (and the ends) as optional whitespace."""
    parts = re.split(r"\s+", text.strip())
    body = r"\s*".join(re.escape(p) for p in parts if p)
    return body


def _digits(pattern: str) -> str:
    """Call counters (``functions.get_weather:0``) differ per call: any number matches."""
    return re.sub(r"\d+", r"\\d+", pattern)


def _middle(a: str, b: str) -> tuple[int, int]:
    """The span of ``a`` that differs from ``b`` (common prefix and suffix removed, cut at marker bounds)."""
    start = marker_start(a, common_prefix(a, b))
    suffix = common_suffix(a, b)
    suffix = min(suffix, len(a) - start, len(b) - start)
    end = marker_end(a, len(a) - suffix)
    return start, end


def _unique(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item is not None and item not in out:
            out.append(item)
    return out


# ----------------------------------------------------------------------------------------------------
# The pieces: anchor, content, reasoning, tool calls


def _anchors(observed: SuiteObservation) -> list[str]:
    """Literal start anchors, shortest first: the generation prompt after the user's text that every mode
    writes, cut at each marker and line end.

    The shortest one that reads the replies back leaves any prefill (``<think>``, an empty thought
    channel) to the fields, so the anchor is found whichever way the prompt ends: the prompt tells the
    parser which mode is on."""
    tails = [m.tail.lstrip() for m in observed.modes if m.user_end >= 0]
    if not tails:
        return []
    shared = tails[0]
    for tail in tails[1:]:
        shared = shared[:common_prefix(shared, tail)]
    out = []
    for tail in (shared, tails[0]):
        cuts = {i for m in MARKER.finditer(tail) for i in (m.start(), m.end())} | {len(tail)}
        cuts |= {i + 1 for i, c in enumerate(tail) if c == "\n"}
        out += [tail[:cut] for cut in sorted(cuts) if tail[:cut].strip() and (tail is shared or cut > len(shared))]
    return _unique(out)


def _body(renders: SuiteRenders, anchor: str, response: str) -> str:
    """What the parser reads for a case: the prefix after the anchor, then the response."""
    start = renders.prefix.rfind(anchor)
    return renders.prefix[start + len(anchor):] + response


def _at(renders: SuiteRenders, case: str, *path: Any) -> tuple[int, int] | None:
    """Where the render of ``case`` printed the value at ``path`` of its message, from the render's
    provenance (a reasoning under any of its names: transformers aliases ``reasoning_content`` as
    ``reasoning`` and gpt-oss prints ``thinking``). A value without an origin (a filter made a new
    string of it, or the traced render failed) is found by its text in the reply."""
    render = renders.renders.get(case)
    if render is None or render.response is None:
        return None
    names = [path] if path != ("reasoning_content",) else [("reasoning_content",), ("reasoning",), ("thinking",)]
    for name in names:
        found = render.at(*name)
        if found is not None:
            return found
    value: Any = suite.CASES[case]
    for key in path:
        value = value[key] if isinstance(value, dict) or isinstance(key, int) else None
        if value is None:
            return None
    at = render.response.find(value) if isinstance(value, str) and value else -1
    return None if at < 0 else (at, at + len(value))


def _content_ends(renders: SuiteRenders) -> list[str]:
    ends = []
    for name in ("content", "reasoning", "content_call"):
        response = renders.rendered().get(name)
        if response is None:
            continue
        where = _at(renders, name, "content")
        if name != "content_call" and where is not None:
            tail = response[where[1]:]
        else:
            tail = ""
        if tail.strip():
            ends.append(tail.strip())
    if "content" not in renders.rendered() and renders.empty is not None and renders.empty.strip():
        ends.append(renders.empty.strip())
    for name in ("call_object", "parallel", "content_call"):
        response = renders.rendered().get(name)
        if response is not None:  # what follows the last call's arguments and its closing marker
            last = max(response.rfind(word) for word in ("Paris", "UTC", "3"))
            tail = response[last:]
            closer = MARKER.search(tail)
            if closer is not None:
                rest = tail[closer.end():].strip()
                # what ends with an end the content already showed holds a call's close (glimmer's
                # </atem:invoke></atem:function_calls><|eot|>): the call reads it; as an end it would
                # cut a content that quotes a call
                if rest and first_marker(rest) and rest not in ends and not any(rest.endswith(e) for e in ends):
                    ends.append(rest)
    return _unique(ends)


def _first_of(end: str, responses: list[str]) -> str:
    """The end of a turn as far as its first marker (or marker-word-marker unit) that no reply writes
    anywhere else: what follows it is discarded anyway, and a model may stop after it
    (``<|END_RESPONSE|>`` without the ``<|END_OF_TURN_TOKEN|>`` the history writes after it); Kimi K3's
    ``<|close|>response<|sep|>`` is followed by the calls, so there the whole end is kept."""
    cuts = sorted({m.end() for m in MARKER.finditer(end)})
    unit = first_unit(end)
    if unit is not None and end.startswith(unit):
        cuts = [len(unit)] + [c for c in cuts if c > len(unit)]
    for cut in cuts:
        head = end[:cut]
        if all(r.find(head) == r.find(end) for r in responses if head in r):
            return head
    return end


def _mirrors(opener: str, closer: str) -> bool:
    """Whether ``closer`` is named like ``opener`` (``<think>``/``</think>``, ``<|open|>response<|sep|>``/``<|close|>response<|sep|>``)."""
    if MARKER.fullmatch(opener) and MARKER.fullmatch(closer):
        return closer_of(opener, [closer]) == closer
    strip = re.compile(r"open|start|begin|close|end|/", re.IGNORECASE)
    return opener != closer and strip.sub("", opener) == strip.sub("", closer)


def _content_fields(renders: SuiteRenders, anchor: str, ends: list[str]) -> list[dict[str, Any]]:
    close: dict[str, Any] = {}
    if ends:
        responses = list(renders.rendered().values())
        ends_re = "|".join(_lit(e) for e in sorted(_unique([_first_of(e, responses) for e in ends]), key=len, reverse=True))
        # the end of the turn and whatever the template writes after it belong to no field
        close = {"close_pattern": r"\s*(?:" + ends_re + r")[\s\S]*"}
    fields = [{**close, "content": "text"}]
    response = renders.rendered().get("content")
    where = _at(renders, "content", "content")
    if response is not None and where is not None:  # a marker before the content (<|START_RESPONSE|>): the content opens with it
        body = _body(renders, anchor, response)
        lead = body[:len(body) - len(response) + where[0]]
        for opener in _unique([last_unit(lead), last_marker(lead), lead.strip() or None]):
            fields.append({"open": opener, **close, "content": "text"})
            tail = response[where[1]:]
            own = first_unit(tail) or first_marker(tail)
            if own is not None and _mirrors(opener, own):
                # the content's own close, named like its open (Kimi K3's <|close|>response<|sep|>): the calls
                # may follow it, and what follows it is in no field
                fields.append({"open": opener, "close_pattern": re.escape(own), "content": "text"})
    return fields


def _empty_block(renders: SuiteRenders, anchor: str) -> list[dict[str, Any]]:
    """An empty open/close pair the template writes before every answer (Kimi's ``<think></think>``): the reasoning field."""
    response = renders.rendered().get("content")
    where = _at(renders, "content", "content")
    if response is None or where is None:
        return []
    body = _body(renders, anchor, response)
    lead = body[:len(body) - len(response) + where[0]].strip()
    tokens = MARKER.findall(lead)
    if len(tokens) == 2 and "".join(tokens) == re.sub(r"\s+", "", lead):
        return [{"open": tokens[0], "close": tokens[1], "content": "text"}]
    return []


def _reasoning_fields(renders: SuiteRenders, anchor: str) -> tuple[list[dict[str, Any]], str | None]:
    response = renders.rendered().get("reasoning")
    if response is None:
        return _empty_block(renders, anchor), None
    body = _body(renders, anchor, response)
    thought, answer = _at(renders, "reasoning", "reasoning_content"), _at(renders, "reasoning", "content")
    if thought is None or answer is None or thought[1] > answer[0]:
        return [], "the reasoning is not written before the content"
    shift = len(body) - len(response)  # the prompt's text after the anchor comes first
    before, after = body[:shift + thought[0]], body[shift + thought[1]:shift + answer[0]]
    if not before.strip():
        return [], "the reasoning is written with no marker before it"
    if not after.strip():
        return [], "the reasoning and the content are not separated by a marker"
    opens = _unique([last_unit(before), last_marker(before), before.strip()])
    closes = _unique([after.strip(), first_unit(after), first_marker(after)])
    return [{"open": o, "close": c, "content": "text"} for o in opens for c in closes], None


def _json_values(text: str) -> Iterator[tuple[int, int, Any]]:
    decoder = json.JSONDecoder()
    i = 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            yield i, end, value
            i = end
        else:
            i += 1


def _call_keys(value: Any, name: str, arguments: dict, call_id: str) -> tuple[str, str, str | None] | None:
    """The keys of a JSON call object holding ``name`` and ``arguments`` (and the id, if written)."""
    if not isinstance(value, dict):
        return None
    key_name = next((k for k, v in value.items() if v == name), None)
    key_args = next((k for k, v in value.items() if v == arguments or (isinstance(v, str) and _loads(v) == arguments)), None)
    key_id = next((k for k, v in value.items() if v == call_id), None)
    if key_id is None:  # an id the template writes itself (Cohere's "tool_call_id": "0"): named as one
        key_id = next((k for k, v in value.items() if k not in (key_name, key_args) and isinstance(v, (str, int))
                       and re.fullmatch(r"(?:\w+_)?id|\w+Id", k)), None)
    if key_name is None or key_args is None:
        return None
    if not all(re.fullmatch(r"\w+", k) for k in (key_name, key_args, key_id or "x")):
        return None
    return key_name, key_args, key_id


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _call_function(name: str, arguments: str, call_id: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        out["id"] = call_id
    return out


@dataclass(frozen=True)
class _Located:
    """Where the call renders printed the first call's name and its ``city`` value (in ``one``) and the
    second call's name and ``zone`` value (in ``two``), from the renders' provenance: -1 when not printed
    as the message's own value (``tojson`` makes a new string), and the analysis then reads the text."""

    name: int = -1
    city: int = -1
    second_name: int = -1
    zone: int = -1

    def with_one(self, renders: SuiteRenders, case: str, start: int) -> "_Located":
        name = renders.renders[case].at("tool_calls", 0, "function", "name")
        city = renders.renders[case].at("tool_calls", 0, "function", "arguments", "city")
        return _Located(name[0] - start if name else -1, city[0] - start if city else -1, self.second_name, self.zone)

    def with_two(self, renders: SuiteRenders, start: int) -> "_Located":
        name = renders.renders["parallel"].at("tool_calls", 1, "function", "name")
        zone = renders.renders["parallel"].at("tool_calls", 1, "function", "arguments", "zone")
        return _Located(self.name, self.city, name[0] - start if name else -1, zone[0] - start if zone else -1)


class _Calls:
    """The single call (``one``) and the two parallel calls (``two``) as the reply writes them."""

    def __init__(self, renders: SuiteRenders, anchor: str):
        rendered = renders.rendered()
        base = renders.empty
        where = _at(renders, "content", "content")
        answered = None
        if "content" in rendered and where is not None:
            answered = rendered["content"][:where[0]] + rendered["content"][where[1]:]
        if answered is not None and (base is None or set(MARKER.findall(base)) - set(MARKER.findall(answered))):
            # the empty reply does not render, or writes an empty call wrapper (DeepSeek R1's
            # <｜tool▁calls▁begin｜><｜tool▁calls▁end｜>): the answer's reply, without the answer
            base = answered
        if base is None:
            base = ""
        self.one = self.two = None
        self.tail = ""
        # one call: with object arguments, or (a template that takes only strings) with string ones
        single = rendered.get("call_object", rendered.get("call_string"))
        if single is None and "content_call" in rendered and "content" in rendered and where is not None:
            # only the call after a text renders (Nemotron Nano 2): read it against that text alone
            single, base = rendered["content_call"], rendered["content"][:where[0]] + suite.LEAD + rendered["content"][where[1]:]
        single_case = next((c for c in ("call_object", "call_string", "content_call") if rendered.get(c) is single), None)
        self.located = _Located()
        if single is not None:
            start, end = _middle(single, base)
            self.one = single[start:end]
            self.tail = single[end:].strip()
            if single_case is not None:
                self.located = self.located.with_one(renders, single_case, start)
        if "parallel" in rendered and base is not None:
            start, end = _middle(rendered["parallel"], base)
            self.two = rendered["parallel"][start:end]
            self.located = self.located.with_two(renders, start)


def _name_keys(head: str, rest: str) -> dict[str, Any]:
    """Calls written as ``[{"name": arguments}, ...]`` after a marker (Apertus): no transform reads a
    key, so each call is its own region: the open reads ``{"name":`` (after the marker and ``[``, or
    after the previous call's ``},``), the region is the arguments, the close is the call's ``}``
    before the list's ``]`` or the next ``{"name": {`` (arguments holding a list of such objects
    would be split there: the parser's delimiters are regular)."""
    close_list = r"\]" + (r"\s*" + _lit(rest) if rest else r"\s*\Z")
    return {"open_pattern": r"(?:" + _lit(head) + r"\s*\[\s*|(?<=\}\s*),\s*)\{\s*\"" + _NAME + r"\"\s*:\s*",
            "close_pattern": r"\s*\}\s*(?:" + close_list + r'|(?=,\s*\{\s*"[\w.\-]+"\s*:\s*[\{"]))',
            "repeats": True, "content": "json", "transform": _call_function("{name}", "{content}", None)}


def _adjacent_objects(written: str, kn: str, ka: str, outer_open: str, close: str) -> list[dict[str, Any]]:
    """Call objects written back to back (llama 4's ``{"name": ...}{"name": ...}``) give the parser no
    place between them for a zero-width close; when the name is written first, the open reads it
    and the arguments' key, the region is the arguments, and the close is the call's own ``}``
    followed by the next call or the end of the turn."""
    head = re.match(r'\{\s*"' + re.escape(kn) + r'"\s*:\s*"[\w.\-]+"\s*,\s*"' + re.escape(ka) + r'"\s*:\s*', written)
    if head is None:
        return []
    open_re = r'\{\s*"' + re.escape(kn) + r'"\s*:\s*"' + _NAME + r'"\s*,\s*"' + re.escape(ka) + r'"\s*:\s*'
    bare = close.split("|", 1)[1]  # the ends of the turn, without the zero-width split
    return [{"open_pattern": _wrapped(open_re, outer_open),
             "close_pattern": r"\}(?:(?=\s*\{\s*\"" + re.escape(kn) + r"\")|" + bare + ")",
             "repeats": True, "content": "json", "transform": _call_function("{name}", "{content}", None)}]


def _close_or_next(close: str, next_open: str, ends: list[str], outer_close: str = "") -> dict[str, str]:
    """A call's close: its own marker (then the wrapper's close, if any), or (none written) the next
    call's open, the wrapper's close or the end of the turn."""
    outer = _lit(outer_close) if outer_close.strip() else ""
    if outer_close.strip() and MARKER.match(outer_close.strip()):
        # the wrapper's own close; what the history writes after it (the end of the turn) only if written
        own = first_unit(outer_close) or MARKER.match(outer_close.strip()).group()
        rest = outer_close.strip()[len(own):]
        outer = re.escape(own) + ("(?:" + _lit(rest) + ")?" if rest.strip() else "")
    for end in sorted((e.strip() for e in ends if e.strip()), key=len, reverse=True):
        if close.strip().endswith(end) and close.strip() != end and not outer:
            close = close.strip()[:-len(end)]  # the end of the turn after the call's own close is the content's
            break
    if close.strip():
        own = _lit(close) + (r"(?:\s*" + outer + ")?" if outer else "")
        # a model that leaves a call unclosed before the next (Kimi K2's <|tool_call_begin|> twice): the next opens it
        return {"close_pattern": own + (r"|(?=\s*" + uncaptured(next_open) + ")" if next_open else "")}
    alternatives = [r"(?=\s*" + uncaptured(next_open) + ")"] if next_open else []
    alternatives += [r"\s*" + outer] if outer else []
    alternatives += [r"\s*(?:" + _lit(e) + r")[\s\S]*" for e in ends] + [r"\s*\Z"]
    return {"close_pattern": "|".join(alternatives)}


def _wrapped(open_re: str, outer: str | None) -> str:
    return r"\s*" + (r"(?:" + _lit(outer) + r"\s*)?" if outer and outer.strip() else "") + open_re


def _split_units(one: str, two: str | None, one_value_end: int, two_value_end: int, two_next: int) -> tuple[str, str, str]:
    """(close of a call, outer open, outer close) from one call and two: the text after call 1 in both."""
    after_one = one[one_value_end:]
    if two is None:
        return after_one, "", ""
    between = two[two_value_end:two_next]  # close of call 1 + separator + open of call 2
    shared = marker_start(after_one, common_prefix(after_one, between))
    return after_one[:shared], between[shared:], after_one[shared:]


_SINGLE_QUOTED = re.compile(r"'([^'\"\\\n]*)'")


def _tool_fields(renders: SuiteRenders, anchor: str, ends: list[str]) -> tuple[list[dict[str, Any]], str | None]:
    """The tool-call fields: the calls as JSON, or as Python's repr of them (arguments a dict printed by
    jinja2: ``{'city': 'Paris'}``), which transformers' json parser reads with ``'`` as a string delimiter."""
    fields, why = _tool_fields_of(renders, anchor, ends, quoted=False)
    if why is None or not any(_SINGLE_QUOTED.search(r) for r in renders.rendered().values()):
        return fields, why
    again, _ = _tool_fields_of(renders, anchor, ends, quoted=True)
    # only calls whose name is a key of the (JSON) call object (phi-4-mini's {"name": ..., "arguments":
    # {'city': ...}}): a name glued to a Python dict (get_weather{'city': ...}) is not a call's markup
    again = [f for f in again if f.get("transform_each") or "{content." in json.dumps(f.get("transform"))]
    if not again:
        return fields, why
    for field in again:
        if field.get("content") == "json":
            field["content_args"] = {**field.get("content_args", {}), "string_delims": [["'", "'"]]}
    return again, None


def _quoted(text: str | None) -> str | None:
    """``text`` with each single-quoted string (no quotes or escapes inside) double-quoted: the same length."""
    return None if text is None else _SINGLE_QUOTED.sub(lambda m: '"' + m.group(1) + '"', text)


def _tool_fields_of(renders: SuiteRenders, anchor: str, ends: list[str], quoted: bool) -> tuple[list[dict[str, Any]], str | None]:
    rendered = renders.rendered()
    if not any(name in rendered for name in ("call_object", "call_string", "parallel", "nested_unicode", "content_call")):
        return [], None
    calls = _Calls(renders, anchor)
    if calls.one is None:
        return [], "a reply with one tool call cannot be told apart from an empty reply"
    one, two = calls.one, calls.two
    if quoted:
        one, two = _quoted(one), _quoted(two)
    name, args, call_id = "get_weather", suite.WEATHER_ARGS, suite.FIRST_ID
    if len(one) > MAX_RESPONSE_CHARS:
        return [], "the tool-call render is too long to read"
    fields: list[dict[str, Any]] = []
    values = list(_json_values(one))
    two_values = list(_json_values(two)) if two is not None else []
    ends_all = _unique(ends + ([calls.tail] if calls.tail else []))
    for start, end, value in values:
        keys = _call_keys(value, name, args, call_id)
        if keys is not None:  # {"name": ..., "arguments": {...}} per call
            kn, ka, kid = keys
            second = next(((s, e) for s, e, v in two_values if _call_keys(v, "get_time", suite.TIME_ARGS, suite.SECOND_ID)), None)
            first_end = next((e for s, e, v in two_values if _call_keys(v, name, args, call_id)), None)
            if second is not None and first_end is not None:
                close, outer_open_sep, outer_close = _split_units(one, two, end, first_end, second[0])
                unit_open = outer_open_sep.strip()
                head = one[:start].strip()
                separator = ""
                if unit_open in (",", ";"):  # bare objects separated by a comma (phi-4-mini's {...},{...})
                    separator, unit_open = unit_open, ""
                if not unit_open:  # bare objects one after another inside one wrapper (<tool_calls>...</tool_calls>)
                    outer_open = head
                else:
                    outer_open = head[:-len(unit_open)] if head.endswith(unit_open) else ""
            else:
                close, unit_open, outer_open, outer_close = one[end:], one[:start].strip(), "", ""
                separator = ""
            open_re = _lit(unit_open) if unit_open else r"(?=\{\s*\"" + re.escape(kn) + ")"
            transform = _call_function("{content." + kn + "}", "{content." + ka + "}", "{content." + kid + "}" if kid else None)
            close_re = _close_or_next(close, _lit(unit_open) if unit_open else "", ends_all, outer_close)
            if not unit_open and not close.strip():  # bare objects: one ends where the next begins
                sep = r"\s*" + re.escape(separator) if separator else ""
                close_re["close_pattern"] = (r"(?<=\})" + sep + r"(?=\s*\{\s*\"" + re.escape(kn) + ")|"
                                             + close_re["close_pattern"])
            fields.append({"open_pattern": _wrapped(open_re, outer_open), **close_re, "repeats": True,
                           "content": "json", "transform": transform})
            if not unit_open and not close.strip() and kid is None:
                fields += _adjacent_objects(one[start:end], kn, ka, outer_open, close_re["close_pattern"])
            return fields, None
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            keys = _call_keys(value[0], name, args, call_id)
            if keys is not None:  # [{"name": ..., "arguments": ...}, ...] for all calls
                kn, ka, kid = keys
                head, rest = one[:start].strip(), one[end:]
                open_field = {"open": head} if head else {"open_pattern": r"(?=\[\s*\{)"}
                transform = _call_function("{" + kn + "}", "{" + ka + "}", "{" + kid + "}" if kid else None)
                fields.append({**open_field, **_close_or_next(rest, "", ends_all), "content": "json",
                               "transform": transform, "transform_each": True})
                return fields, None
            if isinstance(value[0], dict) and list(value[0]) == [name]:
                head, rest = one[:start].strip(), one[end:].strip()
                if not head:
                    return [], "each call is written as {name: arguments} with no marker before the list"
                return [_name_keys(head, rest)], None
        if value == args:  # the name before the arguments: [TOOL_CALLS]name[ARGS]{...}
            return _named_before(one, two, start, end, name, ends_all, "json", {}, calls.located), None
    if "(" in one and re.search(r"\[\s*" + re.escape(name) + r"\(", one):
        start = one.find("[")
        end = one.rfind("]") + 1
        head, rest = one[:start].strip(), one[end:]
        open_field = {"open": head} if head else {"open_pattern": r"(?=\[\s*[A-Za-z_][\w.\-]*\()"}
        fields.append({**open_field, **_close_or_next(rest, "", ends_all), "content": "python-call-list",
                       "transform": _call_function("{name}", "{arguments}", None), "transform_each": True})
        fields.append(_keyword_calls(head))
        return fields, None
    dialect = _json_dialect(one, name, calls.located)
    if dialect is not None:
        start, end, content_args = dialect
        fields = _named_before(one, two, start, end, name, ends_all, "json", content_args, calls.located)
        string_call = rendered.get("call_string")
        if string_call is not None and re.search(re.escape(name) + r"\s*\{\{", string_call):
            fields = [_double_braced(field) for field in fields]
        return fields, None
    tagged = _tagged(one, two, name, ends_all, calls.located)
    if tagged is not None:
        string_call = rendered.get("call_string")
        if string_call is not None and json.dumps(args) in string_call and json.dumps(args) not in one:
            # string arguments written as their JSON text inside the call (tiny aya's <arguments>{...}):
            # its top-level pairs are read as parameters too
            tagged += [{**field, "content_args": {"tag_pattern": field["content_args"]["tag_pattern"] + "|" + _JSON_PAIR}}
                       for field in tagged]
        return tagged, None
    if re.search(r"\{\s*'", one) or "': '" in one:
        return [], "the arguments are written as a Python dict repr (single quotes), which no content parser reads"
    return [], "the arguments are written neither as JSON, nor as a Python call list, nor as tagged parameters"


def _named_before(one: str, two: str | None, start: int, end: int, name: str, ends: list[str],
                  content: str, content_args: dict, located: _Located = _Located()) -> list[dict[str, Any]]:
    """A call whose name (and id) are written before its arguments: the open pattern captures them."""
    head = one[:start]
    at = located.name if 0 <= located.name < start else head.rfind(name)
    before, after = head[:at], head[at + len(name):]
    outer_open = outer_close = ""
    close = one[end:]
    if two is not None:
        second = located.second_name if located.second_name >= 0 else two.find("get_time")
        first_end = _arguments_end(two, start, end, one)
        if second > 0 and first_end is not None:
            close, between_rest, outer_close = _split_units(one, two, end, first_end, second)
            unit_before = between_rest.strip()
            stripped = before.strip()
            # the second call's open has no id or a different one: cut it at the first call's id
            unit_before = unit_before.split(suite.SECOND_ID)[0] if suite.SECOND_ID in unit_before else unit_before
            if unit_before and stripped.startswith(unit_before) is False and unit_before in stripped:
                cut = stripped.rfind(unit_before)
                outer_open, before = stripped[:cut], stripped[cut:]
    id_parts = before.split(suite.FIRST_ID) if suite.FIRST_ID in before else None
    if id_parts is not None and len(id_parts) == 2:
        before_re = _lit(id_parts[0]) + r"\s*" + _ID + r"\s*" + _lit(id_parts[1])
    else:
        before_re = _lit(before)
    id_after = after.split(suite.FIRST_ID) if suite.FIRST_ID in after and id_parts is None else None
    if id_after is not None and len(id_after) == 2:  # [TOOL_CALLS]name[CALL_ID]id[ARGS]
        after_re = _lit(id_after[0]) + r"\s*" + _ID + r"\s*" + _lit(id_after[1])
        id_parts = id_after
    else:
        after_re = _digits(_lit(after))
    unit_open = before_re
    counter = re.match(r"([:_\-])\d+", after)
    word = re.search(r"[\w.\-]*$", before).group()
    if id_parts is None and counter is not None:
        # an id the template counts itself around the name (Kimi K2's functions.get_weather:0): the whole of it
        before_re = _lit(before[:len(before) - len(word)]) + "(?P<id>" + re.escape(word)
        after_re = re.escape(counter.group(1)) + r"\d+)" + (r"\s*" + _lit(after[counter.end():]) if after[counter.end():].strip() else "")
        id_parts = ["", ""]
        open_re = before_re + _NAME + after_re + r"\s*"
    else:
        open_re = before_re + _NAME + (r"\s*" + after_re + r"\s*" if after.strip() else r"\s*")
    close_re = _close_or_next(close, unit_open if before.strip() else "", ends, outer_close)
    field: dict[str, Any] = {"open_pattern": _wrapped(open_re, outer_open), **close_re, "repeats": True,
                             "content": content}
    if content_args:
        field["content_args"] = content_args
    field["transform"] = _call_function("{name}", "{content}", "{id}" if id_parts is not None and len(id_parts) == 2 else None)
    return [field]


_STRING = r'"(?:[^"\\]++|\\.)*+"'


def _nested(depth: int) -> str:
    """A JSON object or list nested at most ``depth`` deep, strings skipped, possessive throughout: no
    recursion and no backtracking, so a hostile unclosed value costs one scan to its next openers."""
    inner = r'(?:[^{}\[\]"]++|' + _STRING + r")*+"
    for _ in range(depth - 1):
        inner = r'(?:[^{}\[\]"]++|' + _STRING + r"|[\{\[]" + inner + r"[\}\]])*+"
    return r"[\{\[]" + inner + r"[\}\]]"


_NESTED = _nested(6)
_SCALAR = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
# One keyword argument whose value cannot be mistaken for another's: a quoted string, a number, a
# constant, or a JSON object or list (balanced, strings skipped). Bare words (``city=Paris``) are not read.
_KEYWORD_VALUE = (r"(?P<key>[A-Za-z_]\w*)\s*=\s*(?:\"(?P<value>(?:[^\"\\]++|\\.)*+)\"|'(?P<value>(?:[^'\\]++|\\.)*+)'"
                  r"|(?P<value>" + _SCALAR + r"|true|false|True|False|None|null)(?![\w.])|(?P<value>" + _NESTED + ")"
                  # a bare word or phrase up to the next argument or the call's end (vLLM's pythonic llama 3.2
                  # prints city=Paris): the last resort, read as text and cast by the tool's schema
                  r"|(?P<value>[^\s,()=\[\]{}\"'][^,()=\[\]{}]*?)(?=\s*(?:,\s*[A-Za-z_]\w*\s*=|\)|\Z)))")
# One top-level pair of a JSON object, read as a tagged parameter (strings without their quotes).
_JSON_PAIR = (r'"(?P<key>(?:[^"\\]++|\\.)*+)"\s*:\s*(?:"(?P<value>(?:[^"\\]++|\\.)*+)"'
              r"|(?P<value>" + _SCALAR + r"|true|false|null)(?![\w.])|(?P<value>" + _NESTED + "))")


def _keyword_calls(head: str) -> dict[str, Any]:
    """A call list whose keyword arguments are not Python (gemma 3's ``[f(city="Paris"days=3)]`` has no
    commas): each call is a region from ``name(`` to its ``)``, its arguments are read pair by pair
    (``tools=`` casts them to their schema types, as for tagged parameters)."""
    first = (_lit(head) + r"\s*" if head else "") + r"\["
    return {"open_pattern": r"(?:" + first + r"|(?<=\)\s*),)\s*" + _NAME + r"\(",
            "close_pattern": r"\)\s*(?:\]|(?=,\s*[A-Za-z_][\w.\-]*\())",
            "repeats": True, "content": "xml-inline", "content_args": {"tag_pattern": _KEYWORD_VALUE},
            "transform": _call_function("{name}", "{content}", None)}


def _double_braced(field: dict[str, Any]) -> dict[str, Any]:
    """Gemma 4 writes string arguments inside one more pair of braces (``call:f{{"city": "Paris"}}``),
    which its object dialect never writes (its keys are bare, so ``{{`` cannot open object arguments):
    the open takes the outer ``{`` when a second follows it, and the close takes the outer ``}`` only
    after such an open (a lookbehind back to it)."""
    opener, closer = field["open_pattern"], field["close_pattern"]
    plain_open = uncaptured(opener)
    # the lookbehind runs only at a "}" the close follows (once per call), so the scan stays linear
    behind = r"\}(?=" + closer + r")(?<=" + plain_open + r"\{\{(?:(?!" + closer + r")[\s\S])*\})"
    return {**field, "open_pattern": opener + r"(?:\{(?=\{))?", "close_pattern": r"(?:" + behind + r")?(?:" + closer + ")"}


def _arguments_end(two: str, start: int, end: int, one: str) -> int | None:
    """Where the first call's arguments end in the two-call render (they are written as in the one-call render)."""
    written = one[start:end]
    at = two.find(written)
    return None if at < 0 else at + len(written)


def _json_dialect(one: str, name: str, located: _Located = _Located()) -> tuple[int, int, dict] | None:
    """Gemma's ``{city:<|"|>Paris<|"|>,days:3}``: bare keys and strings between custom delimiters."""
    at = located.name if located.name >= 0 else one.find(name)
    brace = one.find("{", at + len(name)) if at >= 0 else -1
    key = one.find("city:", brace) if brace >= 0 else -1
    value = (located.city if located.city >= key else one.find("Paris", key)) if key >= 0 else -1
    if min(at, brace, key, value) < 0:
        return None
    opener = one[key + len("city:"):value]
    comma = one.find(",", value)
    closer = one[value + len("Paris"):comma] if comma > 0 else ""
    end = one.rfind("}") + 1
    if not opener or not closer or end <= brace:
        return None
    if opener == '"' and closer == '"':
        return brace, end, {"unquoted_keys": True}
    return brace, end, {"unquoted_keys": True, "string_delims": [[opener, closer]]}


def _optional_space(space: str) -> str:
    """The whitespace a template writes between a tag and its value, matched if present (and no more)."""
    return "(?:" + re.escape(space) + ")?" if space else ""


def _tagged(one: str, two: str | None, name: str, ends: list[str], located: _Located = _Located()) -> list[dict[str, Any]] | None:
    """Arguments as tagged parameters: ``<parameter=city>Paris</parameter>`` or ``<arg_key>city</arg_key>...``.

    The name and the ``city`` value are where the renders printed them (provenance); the keys, which
    no message value prints, and the number are read between them."""
    at = located.name if located.name >= 0 else one.find(name)
    if at < 0:
        return None
    k1 = one.find("city", at + len(name))
    v1 = (located.city if located.city > k1 else one.find("Paris", k1 + 4)) if k1 >= 0 else -1
    k2 = one.find("days", v1 + 5) if v1 >= 0 else -1
    v2 = one.find("3", k2 + 4) if k2 >= 0 else -1
    if min(k1, v1, k2, v2) < 0:
        return None
    to_key1, glue1, inter, glue2, tail = one[at + len(name):k1], one[k1 + 4:v1], one[v1 + 5:k2], one[k2 + 4:v2], one[v2 + 1:]
    keyed = to_key1.endswith("<") and glue1.startswith(">") and "</city>" in inter
    if keyed:
        # parameters tagged with their own name (MiniMax M3's <city>Paris</city>), each tag after the same
        # separator (]<]minimax[>[): the tag's close names the key it opened with
        junk = inter[:inter.find("</city>")]
        if junk.strip() and not to_key1[:-1].endswith(junk):
            return None
        junk_re = "(?:" + re.escape(junk) + ")?" if junk else ""
        tag = junk_re + r"<(?P<key>[A-Za-z_][\w.\-]*)>(?P<value>(?:(?!</(?P=key)>)[\s\S])*?)" + junk_re + r"</(?P=key)>"
        param_close = junk + "</days>"
        name_close = to_key1[:len(to_key1) - 1 - len(junk)]
        call_close = tail[tail.find("</days>") + len("</days>"):]
    suffix = common_suffix(to_key1, inter)
    param_open = inter[len(inter) - suffix:]
    opener = min([i for i in (param_open.find("<"), param_open.find("[")) if i >= 0], default=0)
    if param_open[:opener].strip():  # a shared ">" of the name's marker and the previous parameter's close
        suffix -= opener
        param_open = param_open[opener:]
    if not keyed:
        param_close = without_partial_marker(inter[:common_prefix(inter, tail)])
        if len(param_close) > len(inter) - suffix:  # Kimi K3's <|sep|> both ends a parameter and starts the next
            suffix = len(inter) - len(param_close)
            param_open = inter[len(param_close):]
        # the separator between two parameters is whitespace at most
        sep = inter[len(param_close):len(inter) - suffix]
        if sep.strip() or not param_open.strip():
            return None
        name_close = to_key1[:len(to_key1) - suffix]
        call_close = tail[len(param_close):]
    if keyed:
        glue_re = ""
    elif glue1 != glue2:  # DeepSeek V4: string="true" / string="false"
        shared = common_prefix(glue1, glue2)
        back = common_suffix(glue1, glue2)
        glue_re = _lit(glue1[:shared]) + r"[^<>]*?" + _lit(glue1[len(glue1) - back:])
    else:
        glue_re = _lit(glue1)
    # the value keeps all but the whitespace the template writes around it (Qwen 3.5's "<parameter=code>\n" and
    # "\n</parameter>": one newline each side, as llama.cpp strips them)
    if not keyed:
        if glue1 == glue2:
            glue_re = _lit(glue1) + _optional_space(glue1[len(glue1.rstrip()):])
        tag = (_lit(param_open) + r"\s*(?P<key>[^<>\n\"=]+?)\s*" + glue_re + r"(?P<value>.*?)"
               + _optional_space(param_close[:len(param_close) - len(param_close.lstrip())]) + _lit(param_close))
    head = one[:at]
    outer_open = ""
    close = call_close
    outer_close = ""
    if two is not None:
        second = located.second_name if located.second_name >= 0 else two.find("get_time")
        zone = located.zone if located.zone >= 0 else two.rfind("UTC")
        if second > 0 and zone > 0:
            unit_end = two.rfind(param_close.strip(), 0, second) + len(param_close.strip()) if param_close.strip() else -1
            if unit_end > 0:
                between = two[unit_end:second].lstrip()
                call_close = call_close.lstrip()
                shared = marker_start(call_close, common_prefix(call_close, between))
                close, unit_before, outer_close = call_close[:shared], between[shared:].strip(), call_close[shared:]
                stripped = head.strip()
                if unit_before and stripped.endswith(unit_before) and stripped != unit_before:
                    outer_open, head = stripped[:-len(unit_before)], unit_before
    # the name written a second time (glimmer's ``to=f<|message|><atem:invoke name="f">``) is the same name
    name_re = _NAME + (_digits(_lit(name_close)).replace(re.escape(name), "(?P=name)") if name_close.strip() else "")
    open_re = _lit(head) + name_re
    close_re = _close_or_next(close, _lit(head), ends, outer_close)
    found = list(MARKER.finditer(head))
    own = head[found[-1].end():] if found else ""
    if len(found) >= 1 and own.strip().startswith("<") and head[:found[-1].end()].strip() and not outer_open:
        # the markers before the one that holds the name are optional, and so are those after the call's
        # own close: llama.cpp reads Qwen3 Coder's "<function=f>...</function>" without its <tool_call>
        pre = head[:found[-1].end()]
        open_re = r"(?:" + _lit(pre) + r"\s*)?" + _lit(own) + name_re
        closers = list(MARKER.finditer(close.strip()))
        if len(closers) >= 2 and not outer_close.strip():
            first, rest = close.strip()[:closers[0].end()], close.strip()[closers[0].end():]
            close_re = {"close_pattern": _lit(first) + r"(?:\s*" + _lit(rest) + r")?|(?=\s*" + _lit(own) + ")"}
    return [{"open_pattern": _wrapped(open_re, outer_open), **close_re, "repeats": True, "content": "xml-inline",
             "content_args": {"tag_pattern": tag},
             "transform": _call_function("{name}", "{content}", None)}]


# ----------------------------------------------------------------------------------------------------
# Assembly and the read-back check


def _until_call(content: dict[str, Any], tools: dict[str, Any]) -> dict[str, Any]:
    """An explicit content field whose close also stops before a call's open (the parser watches only
    the open region's close)."""
    opener = tools.get("open_pattern") or re.escape(tools["open"])
    opener = uncaptured(opener)  # captures belong to the call's transform only
    end = content.get("close_pattern", r"\Z")
    return {**content, "close_pattern": "(?=" + opener + ")|" + end}


def _calls_after_the_end(content: dict[str, Any], tools: dict[str, Any] | None,
                         ends: list[str]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Calls written as a message of their own after the content's end marker (GigaChat 3's
    ``answer<|message_sep|>\n\nfunction call<|role_sep|>{...}<|message_sep|>``): the call opens with
    that end marker, the content ends at it only when no call follows, and the call's close takes
    the whitespace after it (else it would open an empty content region that replaces the text)."""
    if tools is None or not ("open_pattern" in tools or "open" in tools) or "close_pattern" not in content or not ends:
        return []
    own_open = tools.get("open_pattern") or re.escape(tools["open"])
    opener = uncaptured(own_open)
    ends_re = "|".join(_lit(e) for e in sorted(ends, key=len, reverse=True))
    close = tools.get("close_pattern") or re.escape(tools["close"])
    moved = {key: value for key, value in tools.items() if key not in ("open", "open_pattern", "close", "close_pattern")}
    # no whitespace before the end marker: a leading \s* makes every search quadratic in a run of spaces
    moved["open_pattern"] = r"(?:(?:" + ends_re + r")\s*+)?" + own_open
    moved["close_pattern"] = r"(?:" + close + r")\s*"
    text = {**content, "close_pattern": r"\s*(?:" + ends_re + r")(?!\s*" + opener + r")[\s\S]*"}
    return [(text, moved)]


def _observation(observed: SuiteObservation | SuiteRenders) -> SuiteObservation:
    return observed if isinstance(observed, SuiteObservation) else SuiteObservation((observed,))


def reads_back(template: dict, observed: SuiteObservation | SuiteRenders, cases: list[str] | None = None) -> dict[str, str]:
    """Parse each rendered case of every mode with transformers' parser: case -> why it does not read back
    (empty: all do). A case of a mode other than the default is named ``case@mode``."""
    chat_parsing = library.parser_module()
    problems: dict[str, str] = {}
    for index, renders in enumerate(_observation(observed).modes):
        for name, response in renders.rendered().items():
            if cases is not None and name not in cases:
                continue
            key = name if index == 0 else f"{name}@{renders.mode}"
            try:
                parsed = chat_parsing.parse_response(response, template, prefix=renders.prefix, tools=suite.TOOLS)
            except Exception as exc:  # noqa: BLE001 - the parser's error is the reason
                problems[key] = f"the parser raises {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
                continue
            problem = expected_problem(name, parsed, response)
            if problem is not None and name == "content_call" and not parsed.get("content") \
                    and (parsed.get("reasoning_content") or "").strip() == suite.LEAD:
                # gpt-oss writes the text before a call in its analysis channel, exactly as it writes
                # reasoning: the reply is read as the template writes it, reasoning
                problem = WRITTEN_AS_REASONING
            if problem is not None:
                problems[key] = problem
        if cases is None and renders.rendered():
            # the prompt alone reads as an empty reply: no text of the template's is left to a field
            try:
                alone = chat_parsing.parse_response("", template, prefix=renders.prefix, tools=suite.TOOLS)
            except Exception as exc:  # noqa: BLE001 - the parser's error is the reason
                alone = {"content": f"(the parser raises {type(exc).__name__})"}
            leftover = [k for k in ("content", "reasoning_content", "tool_calls") if alone.get(k) and str(alone[k]).strip()]
            if leftover:
                problems["prompt" if index == 0 else f"prompt@{renders.mode}"] = \
                    f"the prompt alone reads as {leftover[0]} {str(alone[leftover[0]])[:80]!r}"
    return problems


_TEXT_CASES = ["content", "reasoning"]
# A problem that is the template's own choice, not the derived template's: the content before a call is
# written as the template writes reasoning (gpt-oss's analysis channel), so it is read back as reasoning.
WRITTEN_AS_REASONING = "the template writes the content before a call as it writes reasoning: it reads back as reasoning"


def _failures(problems: dict[str, str]) -> dict[str, str]:
    return {case: why for case, why in problems.items() if why != WRITTEN_AS_REASONING}


def _merged(lists: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for fields in lists:
        for field in fields:
            if field not in out:
                out.append(field)
    return out


def _stray_closes(observed: SuiteObservation, anchor: str, reasoning: dict[str, Any] | None) -> tuple[str, ...]:
    """Close markers a mode's prompt writes alone after the anchor (GLM's ``</think>``), when they close the reasoning."""
    if reasoning is None or "close" not in reasoning:
        return ()
    found = []
    for renders in observed.modes:
        opened, closed = prefilled(_body(renders, anchor, ""))
        if opened is None and closed == reasoning["close"]:
            found.append(closed)
    return tuple(dict.fromkeys(found))


def _reasoning_options(observed: SuiteObservation, anchor: str) -> tuple[list[dict[str, Any]], str | None, bool]:
    """(reasoning fields to try, a structural problem, whether only evidence outside the renders found them)."""
    fields: list[list[dict[str, Any]]] = []
    reason = None
    for renders in observed.modes:
        found, why = _reasoning_fields(renders, anchor)
        if why and "reasoning" in renders.rendered():
            reason = reason or why
        fields.append(found)
    rendered = _merged(fields)
    if rendered:
        return rendered, None, False
    if reason:
        return [], reason, False
    return _evidence_reasoning(observed, anchor), None, True


def _evidence_reasoning(observed: SuiteObservation, anchor: str) -> list[dict[str, Any]]:
    """Reasoning markers no render wrote: an empty region or a lone open a mode's prompt prefills (with its
    close named like it), else a pair named for thinking in the source or the model's tokens."""
    known = [*observed.source_markers, *observed.tokens]
    pairs: list[tuple[str, str]] = []
    bodies = [_body(renders, anchor, "").strip() for renders in observed.modes]
    for renders in observed.modes:
        opened, closed = prefilled(_body(renders, anchor, ""))
        # a prefill is a reasoning region when its name says so, or when another mode does not write it
        # (gemma 4's empty thought channel with thinking off); a turn header (<|start_header_id|>assistant
        # <|end_header_id|>) every mode writes is not one
        thinking = opened is not None and any(w in opened.lower() for w in ("think", "thought", "reason"))
        absent = opened is not None and any(opened.split()[0] not in body for body in bodies)
        if opened is not None and (thinking or absent):
            closer = closed or closer_of(opened.split()[0] if MARKER.fullmatch(opened) else MARKER.match(opened).group(),
                                         known)
            if closer is not None:
                pairs.append((opened, closer))
    pairs += [(p.open, p.close) for p in reasoning_pairs(known)]
    return [{"open": o, "close": c, "content": "text"} for o, c in dict.fromkeys(pairs)]


def _tool_options(observed: SuiteObservation, anchor: str, ends: list[str]) -> tuple[list[dict[str, Any]], str | None]:
    """Tool-call fields from the first mode whose renders write calls; else a pair of the model's tokens named for calls."""
    reason = None
    for renders in observed.modes:
        fields, why = _tool_fields(renders, anchor, ends)
        if fields:
            return fields, None
        reason = reason or why
    if reason:
        return [], reason
    pair = call_pair([t for t in observed.tokens if t not in observed.source_markers])
    if pair is not None:  # calls only a model folder's tokens mark: LFM2's Python call list
        return [{"open": pair.open, "close": pair.close, "content": "python-call-list",
                 "transform": _call_function("{name}", "{arguments}", None), "transform_each": True}], None
    return [], None


def derive(observed: SuiteObservation | SuiteRenders, name: str = "<string>", *, strict: bool = True) -> dict[str, Any]:
    """The first candidate response template that reads every rendered case of every mode back.

    With ``strict=False``, when none does, the candidate that reads back the most cases (at least one).
    """
    return to_transformers(derive_format(observed, name, strict=strict))


def derive_format(observed: SuiteObservation | SuiteRenders, name: str = "<string>", *,
                  strict: bool = True) -> ReplyFormat:
    """The reply format :func:`derive` writes for transformers: what every target's emitter reads
    (``emit.to_transformers``, ``emit.to_vllm``), derived once."""
    observed = _observation(observed)
    rendered = [r for renders in observed.modes for r in renders.rendered().values()]
    if not rendered:
        default = observed.default
        reasons = {n: r.why_not or "" for n, r in default.renders.items()}
        raise ResponseTemplateError("no suite message renders as the generation prompt followed by a reply "
                                    f"(content: {reasons.get('content')})", reasons=reasons, source_name=name)
    if any(len(r) > MAX_RESPONSE_CHARS for r in rendered):
        raise ResponseTemplateError(f"a reply render is longer than {MAX_RESPONSE_CHARS} characters", source_name=name)
    anchors = _anchors(observed)
    if not anchors:
        raise ResponseTemplateError("nothing between the user's text and the reply marks where the reply starts",
                                    source_name=name)
    ends = _unique([end for renders in observed.modes for end in _content_ends(renders)])
    # the role the generation prompt names last (gpt-oss's "<|start|>assistant"): a message it addresses to itself
    words = re.findall(r"[A-Za-z_]\w*", MARKER.sub(" ", observed.default.tail))
    role = words[-1] if words else ""
    best: tuple[int, dict[str, str], ReplyFormat] | None = None
    structural: tuple[str, str] | None = None  # the first marker problem, if no anchor gets past one
    # content as the implicit field (anything outside the markers) with every anchor first; a content
    # opened by its own marker (<|START_RESPONSE|>) only when none of those reads back
    for explicit in (False, True):
        for anchor in anchors:
            reasoning_fields, reasoning_reason, evidence_only = _reasoning_options(observed, anchor)
            if reasoning_reason:
                structural = structural or ("reasoning", reasoning_reason)
                continue
            tool_fields, tool_reason = _tool_options(observed, anchor, ends)
            if tool_reason:
                structural = structural or ("call_object", tool_reason)
                continue
            contents = _merged([_content_fields(renders, anchor, ends) for renders in observed.modes])
            for content in contents:
                if ("open" in content) != explicit:
                    continue
                reasoning_options: list[dict[str, Any] | None] = [*reasoning_fields] or [None]
                if evidence_only and reasoning_fields:
                    reasoning_options.append(None)  # markers no render wrote may be wrong: none at all last
                tool_options: list[dict[str, Any] | None] = [*tool_fields] or [None]
                for reasoning in reasoning_options:
                    stray = _stray_closes(observed, anchor, reasoning)
                    lone = reasoning is not None and "close" in reasoning and any(
                        r.lstrip().startswith(reasoning["close"]) for m in observed.modes for r in m.rendered().values())
                    # the reasoning's close ends a message the content replies never write (glimmer's <|eom|>)
                    message_end = reasoning is not None and "close" in reasoning and not any(
                        reasoning["close"] in m.rendered().get(case, "") for m in observed.modes
                        for case in ("content", "content_call", "call_object"))
                    for tools in tool_options:
                        # an explicit content region ends where a call opens
                        text = _until_call(content, tools) if tools is not None and explicit else content
                        for body, calls in [(text, tools), *_calls_after_the_end(text, tools, ends)]:
                            reply = ReplyFormat(anchor, body, reasoning, calls, stray, lone, role, message_end)
                            candidate = to_transformers(reply)
                            try:
                                problems = _failures(reads_back(candidate, observed))
                            except ValueError as exc:  # transformers rejects the template itself
                                problems = {"*": f"invalid response template: {exc}"}
                            if not problems:
                                return reply
                            if best is None or len(problems) < best[0]:
                                best = (len(problems), problems, reply)
    if best is None:
        assert structural is not None
        case, reason = structural
        what = "reasoning" if case == "reasoning" else "tool calls"
        raise ResponseTemplateError(f"{what}: {reason}", reasons={case: reason}, source_name=name)
    problems = best[1]
    if not strict and "*" not in problems and len(problems) < len(rendered):
        return best[2]
    first = next(iter(problems))
    raise ResponseTemplateError(f"no response template reads every reply back: {first}: {problems[first]}",
                                reasons=problems, source_name=name)


def derive_source(source: str, name: str = "<string>", *, strict: bool = True,
                  tokens: tuple[str, ...] = ()) -> tuple[SuiteObservation, dict[str, Any]]:
    """(the observation the response template was derived from, the transformers response template)."""
    observed, reply = derive_source_format(source, name, strict=strict, tokens=tokens)
    return observed, to_transformers(reply)


def derive_source_format(source: str, name: str = "<string>", *, strict: bool = True,
                         tokens: tuple[str, ...] = ()) -> tuple[SuiteObservation, ReplyFormat]:
    """(the observation the reply format was derived from, the reply format): the suite in every mode with
    tools given, else (a template that writes its calls otherwise when tools are given: vLLM's pythonic
    llama 3.2 writes values unquoted after a tools system prompt) without them."""
    try:
        observed = observe_suite(source, tokens)
    except suite.RenderRefused as exc:  # the prefix render failing is the template's error
        raise ResponseTemplateError(f"the generation prompt does not render: {str(exc)[:220]}",
                                    source_name=name) from None
    try:
        return observed, derive_format(observed, name, strict=strict)
    except ResponseTemplateError as refused:
        if not refused.reasons or not any(m.tools for m in observed.modes):
            raise  # a size limit, or no tools were given: nothing to try again
        try:
            plain = observe_suite(source, tokens, tools=False)
        except suite.RenderRefused:  # the template needs its tools
            raise refused from None
        if plain == observed:
            raise
        try:
            return plain, derive_format(plain, name, strict=strict)
        except ResponseTemplateError:
            raise refused from None


_CACHE_SIZE = 256
_cache: OrderedDict[tuple[str, bool, tuple[str, ...]], ReplyFormat] = OrderedDict()
_cache_lock = threading.Lock()

TARGETS = ("transformers", "vllm")


def response_template(template: Any, *, strict: bool = True, tokens: Any = (),
                      target: str = "transformers") -> dict[str, Any]:
    """A ``response_template`` (the dict transformers' ``parse_response`` takes) derived from a chat template.

    ``template`` is a :class:`chatjinja.ChatTemplate`, a :class:`chatjinja.Source` or the source
    text. The template is rendered in every mode it has (``enable_thinking``, ...) with tools given, and
    the one response template reads the replies of every mode: the prompt passed as ``prefix`` at parse
    time tells which mode is on. ``tokens`` are a model folder's added and special tokens (the contents
    of ``added_tokens_decoder``), markers the model writes that a template may never render (LFM2's
    ``<|tool_call_start|>``). ``target`` is the parser that reads it: ``"transformers"`` (``parse_response``,
    the reasoning in ``reasoning_content``) or ``"vllm"`` (vLLM 0.34's ``--reasoning-parser hf`` /
    ``--tool-call-parser hf``: the reasoning in ``thinking``, reasoning and content plain text); both are
    written from one derivation. Raises :class:`ResponseTemplateError` (with ``reasons``) when the template
    writes a reply that cannot be read back: calls printed as a Python repr, reasoning run into the
    content, etc., or when the target cannot express the reply format. With ``strict=False`` it returns,
    instead of raising, the template that reads back the most message shapes (``reads_back`` says which do
    not); it still raises when none reads any back. Needs transformers' parser (``chatjinja[parse]``):
    every derived template is checked with it. Results are cached per source and tokens for the process
    (the last 256).
    """
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}: one of {', '.join(TARGETS)}")
    record = template_record(template)
    source, name = record.source, record.name
    tokens = tuple(dict.fromkeys(str(t) for t in tokens or ()))
    key = (source, strict, tokens)
    with _cache_lock:
        reply = _cache.get(key)
    if reply is None:
        _, reply = derive_source_format(source, name, strict=strict, tokens=tokens)
        with _cache_lock:
            _cache[key] = reply
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    if target == "transformers":
        return to_transformers(reply)  # a new dict every call: the format's own dicts are copied, never shared
    try:
        return to_vllm(reply)
    except Unexpressible as exc:
        raise ResponseTemplateError(f"the {target} target cannot express this reply format: {exc}",
                                    source_name=name) from None


def reply_problems(source: str) -> list[tuple[str, str]]:
    """``[(code, message)]`` for a template that renders tool calls or reasoning; empty when every reply reads back.

    Raises ``chatjinja.serving.library.ParseExtraMissing`` when transformers is not installed.
    """
    capabilities = probe(source)
    if not (capabilities.tool_calls or capabilities.reasoning):
        return []
    library.parser_module()
    try:
        response_template(source)
    except ResponseTemplateError as exc:
        case = next(iter(exc.reasons), None)
        shape = f" (message shape: {case})" if case else ""
        return [("RP001", f"a reply cannot be read back{shape}: {exc.message}")]
    return []
