"""Read a model's reply with a response template: transformers 5.25's region machine, deciding only what no later text can change, so a reply reads the same in any pieces and costs work linear in its length.

The machine is transformers' ``ResponseParser``: in the field that is open (or, outside every
field, the implicit one), watch the delimiters that can end it (or open another); commit the
earliest match (the longest on a tie, an open before a close, then by field name); route the text
before it to the open field; at the end, route the rest. What differs is how a decision is taken
before the reply has ended: a match is committed only when no continuation of the text can move,
grow or precede it (:mod:`.patterns`: no attempt at or before it reads past the text so far), and
text is routed only up to the first position a continuation could still change. So every decision
a stream takes is the one the whole reply gives, whatever the pieces: ``ResponseStream`` ends
with the message ``parse_response`` gives. (transformers' stream commits a match that more text
could still lengthen, an optional close pattern's shorter form, and then reads differently.)

Linear work: each delimiter's search result is kept until the text it depends on changes (a
search passes over a stretch of the reply once, not once per decision), and a stream that holds
back a long stretch (a run of blanks a delimiter could still start with) reads again only once
the text has grown by half as much, so a reply fed one character at a time is not re-read per
character.

Reading is tolerant unless ``strict=True``: a region whose text cannot be read (malformed call
JSON, a transform key the model did not write, JSON nested too deep) is kept as text in the
content field, delimiters included; a value followed by more text leaves that text to the content;
a tool-call id the model did not write is left out; ``parameters`` stands for ``arguments``; text
written in two regions of a text field is kept whole (transformers keeps the last region's); a
required field that is missing is left out. ``strict=True`` reads as transformers does and raises
:class:`UnreadableReply` where it raises.
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass
from typing import Any

from ..errors import ChatJinjaError
from ..runtime.tools import get_json_schema
from .content import cast_tool_calls, read_field, streamable, tool_parameters, typed
from .patterns import Delimiter, Found, Work
from .spec import Field, ResponseTemplate

__all__ = ["Reader", "ReplyError", "ReplyTooLarge", "UnreadableReply", "truncate_prefix"]

SMALL_HOLD = 64
"""A stream holding back at most this many characters reads again on every piece; past it, once
the text has grown by half of what it holds back."""


class ReplyError(ChatJinjaError, ValueError):
    """A model's reply could not be read: the one exception class reading a reply raises for what the reply holds."""


class ReplyTooLarge(ReplyError):
    """The prefix and reply together exceed :data:`chatjinja.serving.parse.MAX_REPLY_CHARS`."""


class UnreadableReply(ReplyError):
    """The reply is not what the template describes (strict reading: transformers' message, where it raises)."""


def truncate_prefix(template: ResponseTemplate, prefix: str) -> str:
    """The prefix after the last match of the start anchor (all of it when there is none)."""
    last_end = None
    for m in template.start_anchor.finditer(prefix):
        last_end = m.end()
    return prefix if last_end is None else prefix[last_end:]


@dataclass
class _Known:
    """What one delimiter's search (after the anchored position) is known to find from ``base`` on."""

    base: int
    length: int  # the text's length when this was found
    final_text: bool  # found on the whole reply
    found: Found | None  # the leftmost match, when no continuation can change it
    clear: int  # no match starts in [base, clear) whatever follows; len(text) + 1: none anywhere


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (list, dict, str)) and not value)


class Reader:
    """One reply read with one response template: ``feed`` text (events back), ``finish`` for the message."""

    def __init__(self, template: ResponseTemplate, *, tools: list | None = None, strict: bool = False):
        self._spec = template
        self._strict = strict
        self._tool_params = tool_parameters(tools, get_json_schema)
        self._buf = ""  # the text from ``_base`` on, as of the last read
        self._base = 0
        self._pending: list[str] = []  # text fed since the last read
        self._length = 0  # all the text so far
        self._pos = 0  # positions count from the start of all the text
        self._seen = 0  # the text's length at the last read
        self._output: dict[str, Any] = deepcopy(template.defaults)
        self._implicit = template.implicit
        self._current: str | None = self._implicit
        self._captures: dict[str, str] = {}
        self._body: list[str] = []
        self._opened = False
        self._region_start = 0  # where the open region's open delimiter starts
        self._open_text = self._close_text = ""  # its delimiters, as written
        self._last_match = 0  # where the last committed delimiter match starts
        self._finished = False
        self._known: dict[int, _Known] = {}
        self._texts: dict[str, list[str]] = {}  # tolerant: each text field's raw text, region by region
        self._joined: dict[str, list[str]] = {}  # fields with ``join``: their values, joined at the end
        self._sink = self._text_sink()
        self._reply_start = 0  # where the model's text begins (after the prefix)
        self._from_reply = False  # the open region holds text the model wrote
        self.work = Work()
        reaches = [d.lookback for f in template.fields.values() for d in (f.open, f.close) if d is not None]
        # how much text before the position a search can read: a stream keeps that much (see _window)
        self._lookback: int | None = None if None in reaches else max(reaches, default=1)

    def _text_sink(self) -> str | None:
        """Where text that cannot be read goes: the implicit field, or a field named ``content``, if it reads text."""
        for name in (self._implicit, "content"):
            field = self._spec.fields.get(name) if name is not None else None
            if field is not None and field.content == "text" and field.transform is None and not field.repeats:
                return name
        return None

    # ------------------------------------------------------------------------------------------------
    # Text in

    def append(self, text: str) -> None:
        """Text read only by ``finish`` (or the next ``feed`` that reads)."""
        if text:
            self._pending.append(text)
            self._length += len(text)

    def start(self, prefix: str, *, read: bool = True) -> list[dict]:
        """The prompt the model continued, cut after the start anchor's last match (``read``: read it now)."""
        self.append(truncate_prefix(self._spec, prefix))
        self._reply_start = self._length
        if not read:
            return []
        return self.feed("")

    def feed(self, text: str) -> list[dict]:
        if self._finished:
            raise RuntimeError("the reply was already finished")
        self.append(text)
        events: list[dict] = []
        # a read copies the text kept since the window's start and searches from the position: it
        # runs when that is short, or once the text has grown by half of it (linear in all)
        held, grown = self._seen - self._base, self._length - self._seen
        if held <= SMALL_HOLD + (self._lookback or 0) or 2 * grown >= held:
            self._read(events, final_text=False)
        return events

    def _window(self) -> int:
        """Where the text a read needs begins: what a lookbehind can read before the position.

        Bounded lookbehinds (all but two derived templates) keep their reach. A lookbehind with no
        bound (Gemma 4's string-argument close looks back to its call's open; Apertus' next-call open
        to the previous call's ``}``) keeps the open region from its open delimiter and the last
        delimiter match, and :data:`SMALL_HOLD` characters."""
        if self._lookback is not None:
            return max(0, self._pos - self._lookback)
        start = min(self._pos - SMALL_HOLD, self._last_match)
        if self._current is not None and self._current != self._implicit:
            start = min(start, self._region_start)
        return max(0, start)

    def _read(self, events: list[dict], final_text: bool) -> None:
        base = max(self._base, min(self._window(), self._pos))
        if self._pending or base != self._base:
            self._buf = self._buf[base - self._base:] + "".join(self._pending)
            self.work.chars += len(self._buf)  # the copy
            self._base, self._pending = base, []
        self._process(events, final_text)
        self._seen = self._length

    def finish(self) -> tuple[dict, list[dict]]:
        if self._finished:
            raise RuntimeError("the reply was already finished")
        events: list[dict] = []
        self._read(events, final_text=True)
        self._finished = True
        for name, parts in self._joined.items():
            self._output[name] = self._spec.fields[name].join.join(parts)
        for name, parts in self._texts.items():
            self._output[name] = read_field("".join(parts), self._spec.fields[name], {}, False)[0]
        missing = [n for n, f in self._spec.fields.items() if not f.optional and n not in self._output]
        if missing and self._strict:
            raise UnreadableReply(f"Required response_template fields missing from parsed output: {missing}")
        defaults = self._spec.defaults
        message = {k: v for k, v in self._output.items() if k in defaults or not _is_empty(v)}
        return message, events

    # ------------------------------------------------------------------------------------------------
    # Decisions

    def _process(self, events: list[dict], final_text: bool) -> None:
        while True:
            best, hold = self._decide(final_text)
            if best is not None:
                kind, field, found = best
                if found.start > self._pos:
                    self._accumulate(events, self._text(self._pos, found.start))
                self._last_match = found.start
                self._pos = found.end
                if kind == "open":
                    self._close_current(events)
                    self._open_explicit(events, field, found)
                else:
                    had_content = self._opened
                    self._captures.update({k: v for k, v in found.groups.items() if v is not None})
                    self._close_text = self._text(found.start, found.end)
                    self._close_current(events)
                    if not had_content and found.start == found.end:  # an empty close of an empty region
                        break
                continue
            if final_text:
                if self._pos < self._length:
                    self._accumulate(events, self._text(self._pos, self._length))
                    self._pos = self._length
                self._close_current(events)
                break
            if hold > self._pos:  # route what no continuation can claim for a delimiter
                self._accumulate(events, self._text(self._pos, hold))
                self._pos = hold
            break

    def _text(self, start: int, end: int) -> str:
        return self._buf[start - self._base:end - self._base]

    def _watchlist(self) -> list[tuple[str, Field]]:
        fields = self._spec.fields
        if self._current is not None and self._current != self._implicit:
            field = fields[self._current]
            return [("close", field)] if field.close is not None else []
        watch = [("open", field) for field in fields.values() if field.open is not None]
        if self._implicit is not None and fields[self._implicit].close is not None:
            watch.append(("close", fields[self._implicit]))
        return watch

    def _decide(self, final_text: bool) -> tuple[tuple[str, Field, Found] | None, int]:
        """The match to commit now (or None), and where the text that may still belong to a delimiter begins."""
        hold = self._length
        best_key: tuple | None = None
        best: tuple[str, Field, Found] | None = None
        for kind, field in self._watchlist():
            delimiter = field.open if kind == "open" else field.close
            found, pending = self._leftmost(delimiter, final_text)
            hold = min(hold, pending)
            if found is not None:
                key = (found.start, -(found.end - found.start), 0 if kind == "open" else 1, field.name)
                if best_key is None or key < best_key:
                    best_key, best = key, (kind, field, found)
        if best is not None and best[2].start >= hold:  # something earlier may still turn out to be the match
            best = None
        return best, hold

    def _leftmost(self, delimiter: Delimiter, final_text: bool) -> tuple[Found | None, int]:
        """(the delimiter's leftmost match from the position, if no continuation can change it;
        the first position from which a continuation could change what it finds)."""
        text, offset, pos, length = self._buf, self._base, self._pos, self._length
        start = pos
        if delimiter.anchored is not None:  # the search start alone: \\G holds there, and no guard applies
            found, changeable = delimiter.at(text, offset, pos, self.work, final_text)
            if changeable:
                return None, pos
            if found is not None:
                return found, length + 1
            start = pos + 1
        known = self._known.get(id(delimiter))
        base = search_from = start
        if known is not None and known.base <= start and delimiter.fixed_start:
            if known.found is not None:
                if known.found.start >= start:
                    return known.found, length + 1
            elif known.final_text or (known.length == length and not final_text):
                if start <= known.clear:
                    return None, known.clear
            else:  # more text (or the end): what was clear stays clear
                search_from = max(start, known.clear)
        found, edge = delimiter.after(text, offset, search_from, self.work, final_text)
        settled = found is not None and found.start < edge
        clear = found.start if settled else min(edge, found.start if found is not None else edge)
        self._known[id(delimiter)] = _Known(base, length, final_text, found if settled else None, clear)
        if settled:
            return found, length + 1
        return None, clear

    # ------------------------------------------------------------------------------------------------
    # Regions

    def _accumulate(self, events: list[dict], text: str) -> None:
        if not text or self._current is None:
            return
        field = self._spec.fields[self._current]
        if not self._opened:
            events.append({"type": "region_open", "field": self._current})
            self._opened = True
            self._region_start = self._pos
        if self._pos + len(text) > self._reply_start:
            self._from_reply = True
        self._body.append(text)
        events.append({"type": "region_chunk", "field": self._current, "text": text, "dirty": not streamable(field.content)})

    def _open_explicit(self, events: list[dict], field: Field, found: Found) -> None:
        self._current = field.name
        self._captures = {k: v for k, v in found.groups.items() if v is not None}
        self._body = []
        self._opened = True
        self._region_start = found.start
        self._open_text = self._text(found.start, found.end)
        events.append({"type": "region_open", "field": field.name})

    def _reset_to_implicit(self) -> None:
        self._current = self._implicit
        self._captures = {}
        self._body = []
        self._opened = False
        self._from_reply = False
        self._open_text = self._close_text = ""

    def _close_current(self, events: list[dict]) -> None:
        if self._current is None or not self._opened:
            self._reset_to_implicit()
            return
        name = self._current
        field = self._spec.fields[name]
        body = "".join(self._body)
        self.work.chars += len(body)  # what the content parser reads
        tolerant = not self._strict and self._sink is not None
        try:
            value, rest = read_field(body, field, self._captures, tolerant)
            # with `value_parser_by` the model's own output says how to read each value: no schema undoes it
            if self._tool_params and "value_parser_by" not in field.content_args:
                value = cast_tool_calls(value, self._tool_params, typed=typed(field.content))
            if field.join is not None and not isinstance(value, str):
                raise ValueError(f"Field '{field.name}': 'join' requires each match to parse to a string, "
                                 f"got {type(value).__name__}.")
        except (ValueError, KeyError) as exc:
            message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
            if not tolerant or name == self._sink:
                raise UnreadableReply(message) from None
            # the region as the model wrote it, delimiters included, is text of the content
            raw = self._open_text + body + self._close_text if name != self._implicit else body
            events.append({"type": "region_close", "field": name, "value": None, "error": message})
            self._reset_to_implicit()
            self._to_sink(events, raw)
            return
        self._store(field, value, body if not rest else body[:len(body) - len(rest)], self._from_reply)
        events.append({"type": "region_close", "field": name, "value": value})
        self._reset_to_implicit()
        if rest:
            self._to_sink(events, rest)

    def _store(self, field: Field, value: Any, body: str, from_reply: bool) -> None:
        name = field.name
        if field.join is not None:
            parts = self._joined.get(name)
            if parts is None:
                previous = self._output.get(name)
                parts = self._joined[name] = [previous] if isinstance(previous, str) else []
            parts.append(value)
            self._output[name] = value
        elif field.repeats:
            self._output.setdefault(name, []).append(value)
        else:
            self._output[name] = value
            # every region of text the model wrote, not only the last (the template's own text, closed
            # before the reply, is replaced as transformers replaces it)
            if not self._strict and name == self._sink and from_reply:
                self._texts.setdefault(name, []).append(body)

    def _to_sink(self, events: list[dict], text: str) -> None:
        """Text that is not a call or reasoning: into the content, where the model wrote it."""
        sink = self._sink
        if sink == self._implicit:
            self._accumulate(events, text)
            return
        field = self._spec.fields[sink]
        value = read_field(text, field, {}, False)[0]
        events += [{"type": "region_open", "field": sink},
                   {"type": "region_chunk", "field": sink, "text": text, "dirty": False},
                   {"type": "region_close", "field": sink, "value": value}]
        self._store(field, value, text, True)
