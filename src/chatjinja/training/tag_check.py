"""The check of a tagged copy's spans on one render: each assistant message's text inside a generation span, the role
header and every other message's text outside.

Two readings of the same render, both of the original template (whose text the copy must equal):

- **provenance** (:func:`misplaced_origins`): the traced render says which message and field printed each character
  (``("messages", 2, "reasoning_content")``, through ``+``, ``~``, trim, split, slicing, macros and captures). Every
  character an assistant message's reasoning, content or calls printed must be inside a span at least once (a template
  may print a call's name again in the tool result's block: that copy is the result's); its ``role`` (the role header)
  and every character of any other message must be outside every span. This needs no special strings, so it reads
  the conversation space as clients send it (``"hello"``, ``"done"``) in every mode.
- **needles** (:func:`misplaced_needles`): conversations whose message texts are unique strings (``Nd12q611z``) are
  also read by searching the text, which finds what provenance loses (a value printed through ``tojson``,
  ``replace``, or another filter), and one span never holds two assistant messages.

and the **role header** (:func:`header_in_span`): the text ``add_generation_prompt=True`` writes in that mode (before a
``<think>`` it opens) is the prompt's, never the model's: no span may overlap it where the render prints it.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["ASSISTANT_OUTSIDE", "HEADER_INSIDE", "NEEDLE_PREFIX", "Needles", "OTHER_INSIDE", "Problem", "SHARED_SPAN",
           "header_in_span", "message_needles", "misplaced_needles", "misplaced_origins",
           "random_conversation"]

#: what every needle starts with (``message_needles`` reads only those)
NEEDLE_PREFIX = "Nd"
#: the fields of an assistant message that are not the model's text: its role (the header prints it) and its name
_NOT_TRAINED = ("role", "name")
_TEXT_FIELDS = ("content", "reasoning_content", "reasoning", "thinking")


#: the kinds of :class:`Problem`
ASSISTANT_OUTSIDE = "assistant text outside"
OTHER_INSIDE = "another message inside"
HEADER_INSIDE = "role header inside"
SHARED_SPAN = "two messages in one span"


class Problem(str):
    """What is wrong with a tagged copy on one render: the text says it, ``kind`` is which check found it (callers
    decide on the kind, never on the words)."""

    kind: str

    def __new__(cls, kind: str, text: str) -> "Problem":
        self = str.__new__(cls, text)
        self.kind = kind
        return self

    def __reduce__(self) -> tuple:
        return Problem, (self.kind, str(self))


class Needles:
    """Unique strings that the template's source does not contain."""

    def __init__(self, source: str):
        self.source = source
        self.count = 0

    def new(self) -> str:
        while True:
            self.count += 1
            needle = f"{NEEDLE_PREFIX}{self.count}q{self.count * 7919 % 997}z"
            if needle not in self.source:
                return needle


def message_needles(message: dict) -> list[str]:
    """The needles of one message: its text fields (a list of text parts by its first part) and its calls' names."""
    found = []
    for key in _TEXT_FIELDS:
        value = message.get(key)
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value = value[0].get("text")
        if isinstance(value, str) and value.startswith(NEEDLE_PREFIX):
            found.append(value)
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, dict) else {}
        name = function.get("name")
        if isinstance(name, str) and name.startswith(NEEDLE_PREFIX):
            found.append(name)
    return found


def _inside(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(a <= start and end <= b for a, b in spans)


def _touches(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(start < b and a < end for a, b in spans)


def misplaced_origins(text: str, spans: list[tuple[int, int]], messages: list, provenance: Any) -> str | None:
    """What the traced render of the original (``provenance``, the same ``text``) says is on the wrong side of ``spans``."""
    held: dict[tuple, set[int]] = {}
    outside: list[tuple[tuple, int, int]] = []
    for start, end, path, offset in provenance.origins():
        if len(path) < 3 or path[0] != "messages" or not isinstance(path[1], int) or path[1] >= len(messages):
            continue
        index, field = path[1], path[2]
        message = messages[index]
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant" and field not in _NOT_TRAINED:
            for at in range(start, end):
                if text[at].isspace():
                    continue
                if _inside(spans, at, at + 1):
                    held.setdefault(path, set()).add(offset + at - start)
                else:
                    outside.append((path, offset + at - start, at))
        elif text[start:end].strip() and _touches(spans, start, end):
            what = "role header" if role == "assistant" else f"{role} message's {field}"
            return Problem(HEADER_INSIDE if role == "assistant" else OTHER_INSIDE,
                           f"the {what} inside a generation span (message {index}, {text[start:end][:40]!r})")
    for path, offset, at in outside:
        if offset not in held.get(path, ()):
            return Problem(ASSISTANT_OUTSIDE, f"assistant {path[2]} outside every generation span (message {path[1]}, "
                                              f"{text[max(0, at - 10):at + 30]!r} at offset {at})")
    return None


def header_in_span(text: str, spans: list[tuple[int, int]], header: str) -> str | None:
    """A span that overlaps the role header ``header`` (stripped; "" when the prompt writes none) where it is printed,
    unless the header lies strictly inside the span: the model's text before and after it (gpt-oss writes
    ``<|start|>assistant`` again between its analysis and its final message)."""
    if not header.strip():
        return None
    joined: list[list[int]] = []  # adjacent spans are one stretch of the mask
    for a, b in sorted(spans):
        if a == b:
            continue  # an empty span marks nothing
        if joined and a <= joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], b)
        else:
            joined.append([a, b])
    spans = [(a, b) for a, b in joined]
    at = text.find(header)
    while at >= 0:
        end = at + len(header)
        if any(at < b and a < end and not (a < at and end < b) for a, b in spans):
            return Problem(HEADER_INSIDE, f"the role header {header!r} inside a generation span (offset {at})")
        at = text.find(header, at + 1)
    return None


def misplaced_needles(text: str, spans: list[tuple[int, int]], messages: list, header: str = "") -> str | None:
    """Each assistant needle in a span (one message per span); no other message's needle in any span."""
    owners: dict[int, int] = {}
    for index, message in enumerate(messages):
        for needle in message_needles(message):
            at, placed = text.find(needle), False
            present = at >= 0
            while at >= 0:
                inside = [k for k, (a, b) in enumerate(spans) if a <= at and at + len(needle) <= b]
                if inside and message["role"] != "assistant":
                    return Problem(OTHER_INSIDE, f"{message['role']} text inside a generation span (message {index})")
                for k in inside:
                    placed = True
                    if owners.setdefault(k, index) != index:
                        return Problem(SHARED_SPAN, "one generation span holds two assistant messages")
                at = text.find(needle, at + 1)
            if present and message["role"] == "assistant" and not placed and not _shared(needle, messages, index):
                return Problem(ASSISTANT_OUTSIDE, f"assistant text outside every generation span (message {index})")
    return _stray(text, spans, messages, header)


def _stray(text: str, spans: list[tuple[int, int]], messages: list, header: str) -> str | None:
    """A span that holds no needle and follows another message's text (that turn's end marker) before the role header
    of the assistant message after it (if any), when every assistant message printed its own: template text of another
    role's turn marked as the model's."""
    placed: list[tuple[int, int]] = []  # (needle position, message index)
    for index, message in enumerate(messages):
        needles = message_needles(message)
        found = [text.find(x) for x in needles]
        if message["role"] == "assistant" and (not needles or min(found) < 0):
            return None  # an assistant message that prints nothing of its own: its marker may follow anything
        placed.extend((at, index) for at in found)
    placed.sort()
    for a, b in spans:
        if not text[a:b].strip() or any(a <= at < b for at, _ in placed):
            continue
        before = [(at, index) for at, index in placed if at < a]
        after = [(at, index) for at, index in placed if at >= b]
        if after and messages[after[0][1]]["role"] == "assistant":
            # before an assistant's text: the span is that turn's when it starts after its role header (the first
            # after the text before: functionary prints the header again before each call)
            gap_start = before[-1][0] if before else 0
            at = text.find(header, gap_start, after[0][0]) if header else -1
            if at < 0 or a >= at + len(header):
                continue
        before = [index for _, index in before]
        if before and messages[before[-1]]["role"] != "assistant":
            return Problem(OTHER_INSIDE, f"{messages[before[-1]]['role']} turn's text inside a generation span "
                                         f"(after message {before[-1]})")
    return None


def _shared(needle: str, messages: list, index: int) -> bool:
    """Whether another message holds ``needle`` too (a tool result names the call it answers)."""
    return any(needle in (m.get("name"), m.get("content")) for k, m in enumerate(messages) if k != index)


def random_conversation(rng: random.Random, needles: Needles) -> list:
    """A seeded random conversation of needles: system or not, one to three rounds, calls (their arguments a JSON string
    or an object, their content empty, null or text, reasoning before them or not), answers with reasoning or not."""
    messages: list[dict] = []
    if rng.random() < 0.4:
        messages.append({"role": "system", "content": needles.new()})
    for turn in range(rng.randint(1, 3)):
        messages.append({"role": "user", "content": needles.new()})
        if rng.random() < 0.3:
            name = needles.new()
            arguments: Any = {"x": turn}
            if rng.random() < 0.5:
                arguments = '{"x": %d}' % turn
            call: dict[str, Any] = {"role": "assistant", "content": rng.choice(["", None, needles.new()]), "tool_calls": [
                {"id": f"call{turn}", "type": "function", "function": {"name": name, "arguments": arguments}}]}
            if rng.random() < 0.4:
                call["reasoning_content"] = needles.new()
            messages.append(call)
            messages.append({"role": "tool", "tool_call_id": f"call{turn}", "name": name, "content": needles.new()})
        assistant = {"role": "assistant", "content": needles.new()}
        if rng.random() < 0.5:
            assistant["reasoning_content"] = needles.new()
        messages.append(assistant)
    if rng.random() < 0.5:
        messages.append({"role": "user", "content": needles.new()})
    return messages
