"""``sanitize_control_tokens``: mark the control tokens in user input, then encode them as text (transformers 5.25.0).

transformers wraps every control token found in a caller's string with two private-use characters
before rendering (``mark_control_tokens``), then encodes the rendered chat piece by piece: a marked
token as plain text, the rest as usual (``encode_marked_chat``). This module does the same with the
``tokenizers`` library, and also returns each token's character offsets in the rendered chat, which
transformers does not have on this path (so chatjinja can compute assistant masks here too).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import jinja2.nodes

from ..runtime.environment import compile_template
from .library import tokenizers_module
from .tokenizer import ChatTokenizer

__all__ = ["control_tokens", "encode_marked_chat", "mark_control_tokens", "marking_pattern"]

_START = "\U000f0000"
_END = "\U000f0001"


@lru_cache(maxsize=64)
def _template_literal_text(source: str) -> str:
    """transformers' ``_get_template_literal_text``: the template's raw text and string constants, NUL-joined."""
    ast = compile_template(source).environment.parse(source)
    literals = {node.data for node in ast.find_all(jinja2.nodes.TemplateData)}
    literals |= {node.value for node in ast.find_all(jinja2.nodes.Const) if isinstance(node.value, str)}
    return "\0".join(literals)


def control_tokens(tokenizer: ChatTokenizer, source: str) -> tuple[str, ...]:
    """``_get_control_tokens``: special added tokens, plus ``chat_control_tokens`` or the added tokens the template contains."""
    added = tokenizer.added_tokens()
    if tokenizer.chat_control_tokens is not None:
        listed = set(tokenizer.chat_control_tokens)
        return tuple(token.content for token in added if token.special or token.content in listed)
    text = _template_literal_text(source)
    return tuple(token.content for token in added if token.special or (token.content in text and not token.content.isspace()))


@lru_cache(maxsize=64)
def marking_pattern(tokens: tuple[str, ...]) -> tuple[re.Pattern, re.Pattern]:
    """``_get_control_token_patterns``: any of ``tokens`` (longest first), and a marked token or a lone marker."""
    longest_first = sorted(tokens, key=len, reverse=True)
    tokens_re = re.compile("|".join(map(re.escape, longest_first)) or "(?!)")
    markers_re = re.compile(f"{_START}({tokens_re.pattern}){_END}|[{_START}{_END}]")
    return tokens_re, markers_re


def mark_control_tokens(value: Any, tokens_re: re.Pattern) -> Any:
    """Wrap the control tokens in every string of ``value`` (lists and dict values, not keys) with the markers."""
    if isinstance(value, str):
        value = value.replace(_START, "").replace(_END, "")
        return tokens_re.sub(f"{_START}\\g<0>{_END}", value)
    if isinstance(value, dict):
        return {key: mark_control_tokens(item, tokens_re) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [mark_control_tokens(item, tokens_re) for item in value]
    return value


def _encode(tokenizer: ChatTokenizer, text: str, as_text: bool, offsets: bool) -> tuple[list[int], list[tuple[int, int]]]:
    """``tokenizer.encode(text, add_special_tokens=False)``, or ``_encode_without_added_tokens`` when ``as_text``."""
    backend = tokenizer.backend
    if not as_text:
        encoding = backend.encode(text, add_special_tokens=False)
        return encoding.ids, (encoding.offsets if offsets else [])
    # the backend's pipeline without its added tokens: normalizer, pre-tokenizer, model
    normalized = backend.normalizer.normalize_str(text) if backend.normalizer is not None else text
    splits = [normalized]
    if backend.pre_tokenizer is not None:
        splits = [split for split, _ in backend.pre_tokenizer.pre_tokenize_str(normalized)]
    ids = [token.id for split in splits for token in backend.model.tokenize(split)]
    if not offsets:
        return ids, []
    return ids, _plain_offsets(backend, text, len(ids))


def _plain_offsets(backend: Any, text: str, count: int) -> list[tuple[int, int]]:
    """The character offsets in ``text`` of the tokens ``_encode_without_added_tokens`` gives (same pipeline, offsets kept)."""
    pretokenized = tokenizers_module().PreTokenizedString(text)
    if backend.normalizer is not None:
        normalizer = backend.normalizer
        pretokenized.normalize(lambda normalized: normalizer.normalize(normalized))
    if backend.pre_tokenizer is not None:
        backend.pre_tokenizer.pre_tokenize(pretokenized)
    model = backend.model
    pretokenized.tokenize(lambda piece: model.tokenize(str(piece)))
    found = pretokenized.to_encoding().offsets
    if len(found) != count:  # one pipeline both times: cannot happen, and never a wrong mask if it does
        raise RuntimeError(f"token offsets of {text!r} do not match its {count} tokens")
    return [tuple(pair) for pair in found]


def _piece(tokenizer: ChatTokenizer, piece: str, as_text: bool, newline_ids: list[int], offsets: bool) -> tuple[list[int], list[tuple[int, int]]]:
    """``_encode_chat_piece``: encoded after a newline (no SentencePiece prefix space), the newline dropped again."""
    ids, spans = _encode(tokenizer, "\n" + piece, as_text, offsets)
    if ids[: len(newline_ids)] == newline_ids:
        cut = len(newline_ids)
        return ids[cut:], [(max(start - 1, 0), max(end - 1, 0)) for start, end in spans[cut:]]
    return _encode(tokenizer, piece, as_text, offsets)


def encode_marked_chat(tokenizer: ChatTokenizer, chat: str, offsets: bool = False) -> tuple[list[int], list[tuple[int, int]]]:
    """``encode_marked_chat``: the ids of a chat rendered from marked input, and (when asked) each token's offsets in ``chat``.

    A marked token is encoded as plain text without its markers; a lone marker is dropped but still
    breaks the text. ``ValueError`` when a marked token comes back as itself (as transformers raises).
    """
    backend = tokenizer.backend
    _, markers_re = marking_pattern(tuple(token.content for token in tokenizer.added_tokens()))
    newline_ids = backend.encode("\n", add_special_tokens=False).ids
    ids: list[int] = []
    spans: list[tuple[int, int]] = []

    def add(piece_ids: list[int], piece_spans: list[tuple[int, int]], start: int) -> None:
        ids.extend(piece_ids)
        if offsets:
            spans.extend((a + start, b + start) for a, b in piece_spans)

    position = 0
    first = True
    for match in markers_re.finditer(chat):
        text = chat[position : match.start()]
        if first:
            add(*_encode(tokenizer, text, False, offsets), position)
            first = False
        elif text:
            add(*_piece(tokenizer, text, False, newline_ids, offsets), position)
        token = match.group(1)
        if token:
            piece_ids, piece_spans = _piece(tokenizer, token, True, newline_ids, offsets)
            if tokenizer.token_to_id(token) in piece_ids:
                raise ValueError(f"Can't sanitize {token!r}: the tokenizer produces it from plain text")
            add(piece_ids, piece_spans, match.start(1))
        position = match.end()
    text = chat[position:]
    if first:
        add(*_encode(tokenizer, text, False, offsets), position)
    elif text:
        add(*_piece(tokenizer, text, False, newline_ids, offsets), position)
    return ids, spans
