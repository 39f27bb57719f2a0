"""Read a model's reply with a response template, whole (``parse_response``) or as it streams (``ResponseStream``), behind a size limit.

The reader is chatjinja's own (:mod:`.reader`): transformers 5.25's format and region machine,
with work linear in the reply and the same message for any chunking; ``strict=True`` reads as
transformers' ``parse_response`` does (tests compare the two at test time). It needs the ``regex``
module (``chatjinja[parse]``), not transformers: only deriving a response template from a chat
template checks it with transformers' parser.
"""

from __future__ import annotations

from typing import Any

from .derive import response_template
from .library import ParseExtraMissing
from .patterns import Work
from .reader import Reader, ReplyError, ReplyTooLarge, UnreadableReply
from .spec import load

__all__ = ["MAX_REPLY_CHARS", "ParseExtraMissing", "ReplyError", "ReplyTooLarge", "ResponseStream", "UnreadableReply",
           "parse_response"]

# The most characters of model output (prefix included) one reader reads: model output is untrusted.
MAX_REPLY_CHARS = 4_000_000


def _template(template: Any) -> Any:
    if isinstance(template, dict):
        return load(template)
    return load(response_template(template))


def _check_size(count: int) -> None:
    if count > MAX_REPLY_CHARS:
        raise ReplyTooLarge(f"the reply is {count} characters, more than the {MAX_REPLY_CHARS} a parser reads")


def _prefix(prefix: str | None) -> str:
    prefix = "" if prefix is None else prefix
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a string, got {type(prefix).__name__}")
    _check_size(len(prefix))
    return prefix


def parse_response(text: str, template: Any, *, prefix: str | None = None, tools: list | None = None,
                   strict: bool = False) -> dict:
    """The message (``content``, ``reasoning_content``, ``tool_calls``) a model's reply ``text`` holds.

    ``template`` is a response template (a dict in transformers' format) or a chat template
    (``ChatTemplate``, ``Source`` or its text), whose response template :func:`response_template`
    derives. ``prefix`` is the prompt the model continued (``None`` for none: the reply is read from
    its start); ``tools`` (as ``apply_chat_template`` takes them) cast arguments to their schema types.

    Tolerant by default: what cannot be read as a call or reasoning stays in ``content``, and nothing
    is raised for what the reply holds. ``strict=True`` gives what transformers' ``parse_response``
    gives and raises :class:`UnreadableReply` where it raises. Either way a reply causes no exception
    but a :class:`ReplyError` (a ``ValueError``); more than :data:`MAX_REPLY_CHARS` characters, prefix
    included, raise :class:`ReplyTooLarge`.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    prefix = _prefix(prefix)
    _check_size(len(prefix) + len(text))
    spec = _template(template)
    reader = Reader(spec, tools=tools, strict=strict)
    reader.start(prefix, read=False)
    reader.append(text)
    message, _ = reader.finish()
    return message


class ResponseStream:
    """Streaming reader: ``feed(chunk)`` returns region events as text arrives; ``finalize()`` returns the message and the last events.

    Events are transformers' (``region_open``, ``region_chunk``, ``region_close``); ``initial_events``
    holds those the prefix produced (a prefilled ``<think>``, say). Whatever the chunks, the message
    is the one :func:`parse_response` gives for the whole reply (``strict`` as there). A chunk's
    events hold what no later text can change: text that could still be the start of a delimiter
    is held back until it is decided, and while more than 64 characters are held back (a run of
    blanks a delimiter may start with), the stream reads again only when the text has grown by half
    as much. An unreadable region, in tolerant reading, closes with ``"value": None`` and an
    ``"error"``, and its text follows as content. ``work`` counts the searches (:class:`~.patterns.Work`).
    """

    def __init__(self, template: Any, *, prefix: str | None = None, tools: list | None = None, strict: bool = False):
        prefix = _prefix(prefix)
        self._size = len(prefix)
        spec = _template(template)
        self._reader = Reader(spec, tools=tools, strict=strict)
        self.initial_events: list[dict] = self._reader.start(prefix)

    @property
    def work(self) -> Work:
        return self._reader.work

    def feed(self, text: str) -> list[dict]:
        if not isinstance(text, str):
            raise TypeError(f"feed() takes a string, got {type(text).__name__}")
        self._size += len(text)
        _check_size(self._size)
        return self._reader.feed(text)

    def finalize(self) -> tuple[dict, list[dict]]:
        return self._reader.finish()
