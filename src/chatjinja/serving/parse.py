"""Read a model's reply with a response template: transformers' own ``chat_parsing`` parser, behind size limits.

The parser is the installed transformers' (``transformers.utils.chat_parsing``, 5.24 or 5.25: the
``chatjinja[parse]`` extra), not a second implementation: what chatjinja reads is what transformers
reads. It is imported on first use (about 0.8 s and 50 MB, no torch; benchmarks/README.md), so
``import chatjinja`` stays cheap.
"""

from __future__ import annotations

from typing import Any

from ..errors import ChatJinjaError
from .derive import response_template
from . import library
from .library import ParseExtraMissing

__all__ = ["MAX_REPLY_CHARS", "ParseExtraMissing", "ReplyTooLarge", "ResponseStream", "parse_response"]

# The most characters of model output (prefix included) one parser reads: model output is untrusted.
MAX_REPLY_CHARS = 4_000_000


class ReplyTooLarge(ChatJinjaError, ValueError):
    """The prefix and reply together exceed :data:`MAX_REPLY_CHARS`."""


def _template_dict(template: Any) -> dict:
    if isinstance(template, dict):
        return template
    return response_template(template)


def _check_size(count: int) -> None:
    if count > MAX_REPLY_CHARS:
        raise ReplyTooLarge(f"the reply is {count} characters, more than the {MAX_REPLY_CHARS} a parser reads")


def parse_response(text: str, template: Any, *, prefix: str | None = None, tools: list | None = None) -> dict:
    """The message (``content``, ``reasoning_content``, ``tool_calls``) a model's reply ``text`` holds.

    ``template`` is a response template (a dict in transformers' format) or a chat template
    (``ChatTemplate``, ``Source`` or its text), whose response template :func:`response_template`
    derives. ``prefix`` is the prompt the model continued (``None`` for none: the reply is read from
    its start); ``tools`` (as ``apply_chat_template`` takes them) cast arguments to their schema types.
    The result equals ``transformers.utils.chat_parsing.parse_response`` with the same arguments.
    """
    stream = ResponseStream(template, prefix=prefix, tools=tools)
    stream.feed_whole(text)
    message, _ = stream.finalize()
    return message


class ResponseStream:
    """Streaming reader: ``feed(chunk)`` returns region events as text arrives; ``finalize()`` returns the message.

    Events are transformers' (``region_open``, ``region_chunk``, ``region_close``); ``initial_events``
    holds those the prefix produced (a prefilled ``<think>``, say).
    """

    def __init__(self, template: Any, *, prefix: str | None = None, tools: list | None = None):
        prefix = "" if prefix is None else prefix
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a string, got {type(prefix).__name__}")
        self._size = len(prefix)
        _check_size(self._size)
        spec = _template_dict(template)
        self._parser = library.parser_module().ResponseParser(spec, prefix=prefix, tools=tools)
        self.initial_events: list[dict] = self._parser.initial_events

    def feed(self, text: str) -> list[dict]:
        if not isinstance(text, str):
            raise TypeError(f"feed() takes a string, got {type(text).__name__}")
        self._size += len(text)
        _check_size(self._size)
        return self._parser.feed(text)

    def feed_whole(self, text: str) -> None:
        """The whole rest of the reply, read at the end of the stream only (no events).

        ``feed`` runs transformers' partial matching, which in the ``regex`` module costs time quadratic
        in a run of whitespace (80,000 spaces: 1 s; the 4,000,000 characters allowed: far longer).
        The message is the same: partial matching only holds back what could still grow, and at the end
        of the stream nothing can. (It appends to ``ResponseParser._buffer``: transformers 5.24.x and 5.25.x.)
        """
        if not isinstance(text, str):
            raise TypeError(f"feed() takes a string, got {type(text).__name__}")
        self._size += len(text)
        _check_size(self._size)
        self._parser._buffer += text

    def finalize(self) -> tuple[dict, list[dict]]:
        return self._parser.finalize()
