"""Rendered chats to ``input_ids``, ``attention_mask`` and ``assistant_masks``, as transformers 5.25.0's tokenizer call gives them.

This is the ``tokenize=True`` tail of ``apply_chat_template``: ``tokenizer(rendered_chat,
padding=..., truncation=..., max_length=..., add_special_tokens=False, return_tensors=...,
sanitize_control_tokens=..., **tokenizer_kwargs)`` on a ``TokenizersBackend``, then the assistant
mask from the generation spans and the tokens' character offsets.
"""

from __future__ import annotations

import warnings
from bisect import bisect_left, bisect_right
from operator import le
from typing import Any

from ..runtime.budget import BudgetExceeded, resolve_budgets
from ..runtime.render import warn_once
from .control_tokens import encode_marked_chat
from .tokenizer import LARGE_INTEGER, ChatTokenizer

__all__ = ["TOKENIZE_BYTES_PER_BYTE", "assistant_mask", "check_tokenize_size", "encode_chats"]

#: what tokenizing one rendered chat may hold in memory, charged against the render memory budget
#: (``max_built_bytes``) before it is encoded: this many bytes a UTF-8 byte of the chat, so 512 KiB of text
#: at the default budget. A byte becomes at most one token of a byte-level vocabulary (a character of 4
#: UTF-8 bytes 4 tokens of tekken), and the tokenizers library's encoding of a long piece, with the ids and
#: offsets read from it, held up to about 500 bytes a token in the worst shape measured (1 MiB of digits,
#: one token each; benchmarks/README.md, "One budget per call")
TOKENIZE_BYTES_PER_BYTE = 512
_CHUNK = 1 << 20  # characters encoded at a time to count UTF-8 bytes


_PADDING = ("longest", "max_length", "do_not_pad")
_TRUNCATION = ("only_first", "only_second", "longest_first", "do_not_truncate")

# the keyword arguments apply_chat_template passes to ``self(...)`` itself: one in tokenizer_kwargs is Python's TypeError there
_CALL_ARGUMENTS = ("text", "padding", "truncation", "max_length", "add_special_tokens", "return_tensors", "sanitize_control_tokens")
# the tokenizer_kwargs this path reads; any other name ``__call__`` ignores, as transformers does
_READ = ("pad_to_multiple_of", "padding_side", "return_attention_mask", "return_token_type_ids", "split_special_tokens", "verbose", "stride")
_UNSUPPORTED = ("return_overflowing_tokens", "return_special_tokens_mask", "return_offsets_mapping", "return_length", "is_split_into_words", "text_pair", "text_target", "text_pair_target")


def _enum(value: Any, choices: tuple[str, ...], name: str) -> str:
    value = getattr(value, "value", value)  # a transformers PaddingStrategy / TruncationStrategy
    if value not in choices:
        # transformers' ExplicitEnum._missing_
        raise ValueError(f"{value} is not a valid {name}, please select one of {list(choices)}")
    return value


def _strategies(tokenizer: ChatTokenizer, padding: Any, truncation: Any, max_length: Any, pad_to_multiple_of: Any, verbose: bool) -> tuple[str, str, int | None]:
    """``_get_padding_truncation_strategies``, word for word."""
    if max_length is not None and padding is False and truncation is None:
        truncation = "longest_first"
    if padding is not False:
        if padding is True:
            if verbose and max_length is not None and (truncation is None or truncation is False or truncation == "do_not_truncate"):
                warnings.warn(
                    "`max_length` is ignored when `padding`=`True` and there is no truncation strategy. "
                    "To pad to max length, use `padding='max_length'`."
                )
            padding_strategy = "longest"
        else:
            padding_strategy = _enum(padding, _PADDING, "PaddingStrategy")
    else:
        padding_strategy = "do_not_pad"
    if truncation is not False and truncation is not None:
        truncation_strategy = "longest_first" if truncation is True else _enum(truncation, _TRUNCATION, "TruncationStrategy")
    else:
        truncation_strategy = "do_not_truncate"
    if max_length is None:
        if padding_strategy == "max_length":
            if tokenizer.model_max_length > LARGE_INTEGER:
                padding_strategy = "do_not_pad"
            else:
                max_length = tokenizer.model_max_length
        if truncation_strategy != "do_not_truncate":
            if tokenizer.model_max_length > LARGE_INTEGER:
                truncation_strategy = "do_not_truncate"
            else:
                max_length = tokenizer.model_max_length
    if padding_strategy != "do_not_pad" and (tokenizer.pad_token is None or (tokenizer.pad_token_id or 0) < 0):
        raise ValueError(
            "Asking to pad but the tokenizer does not have a padding token. "
            "Please select a token to use as `pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)` "
            "or add a new pad token via `tokenizer.add_special_tokens({'pad_token': '[PAD]'})`."
        )
    if (
        truncation_strategy != "do_not_truncate"
        and padding_strategy != "do_not_pad"
        and pad_to_multiple_of is not None
        and max_length is not None
        and max_length % pad_to_multiple_of != 0
    ):
        raise ValueError(
            "Truncation and padding are both activated but "
            f"truncation length ({max_length}) is not a multiple of pad_to_multiple_of ({pad_to_multiple_of})."
        )
    return padding_strategy, truncation_strategy, max_length


def assistant_mask(offsets: list[tuple[int, int]], spans: list[tuple[int, int]], length: int) -> list[int]:
    """transformers' mask: 1 for every token overlapping a generation span (its one pass, by bisection when the offsets are in order).

    transformers walks the tokens: a token belongs to the first span that ends after the token
    starts, and is masked when it ends after that span starts. With token starts, token ends and
    span ends each in order (an unpadded encoding), the tokens belonging to one span are a run,
    and the masked ones the end of that run, found by bisection; else the walk itself.
    """
    mask = [0] * length
    if not spans or not offsets:
        return mask
    starts, ends = zip(*offsets)
    span_ends = [end for _, end in spans]
    if not (all(map(le, starts, starts[1:])) and all(map(le, ends, ends[1:])) and all(map(le, span_ends, span_ends[1:]))):
        return _walked_mask(mask, offsets, spans)
    low = 0
    for span_start, span_end in spans:
        high = bisect_left(starts, span_end, low)  # the tokens from ``low`` starting before the span ends belong to it
        first = bisect_right(ends, span_start, low, high)  # ... and those ending after it starts are masked
        if first < high:
            mask[first:high] = [1] * (high - first)
        low = high
    return mask


def _walked_mask(mask: list[int], offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[int]:
    """transformers' walk over the tokens, word for word."""
    span_index = 0
    count = len(spans)
    for index, (start, end) in enumerate(offsets):
        while span_index < count and start >= spans[span_index][1]:
            span_index += 1
        if span_index == count:
            break
        if end > spans[span_index][0]:
            mask[index] = 1
    return mask


def _pad_row(row: dict[str, list], offsets: list, target: int | None, side: str, pad_id: int, with_mask: bool) -> None:
    """``_pad`` of one row (its offsets padded with ``(0, 0)``, as the tokenizers library pads them)."""
    ids = row["input_ids"]
    if with_mask and "attention_mask" not in row:
        row["attention_mask"] = [1] * len(ids)
    if target is None or len(ids) == target:
        return
    difference = target - len(ids)
    if side == "right":
        if with_mask:
            row["attention_mask"] = row["attention_mask"] + [0] * difference
        row["input_ids"] = ids + [pad_id] * difference
        offsets.extend([(0, 0)] * difference)
    elif side == "left":
        if with_mask:
            row["attention_mask"] = [0] * difference + row["attention_mask"]
        row["input_ids"] = [pad_id] * difference + ids
        offsets[:0] = [(0, 0)] * difference
    else:
        raise ValueError(f"Invalid padding strategy:{side}")


def _sanitized(tokenizer: ChatTokenizer, chats: list[str], padding: str, truncation: str, max_length: int | None,
               options: dict[str, Any], want_offsets: bool, single: bool) -> tuple[list[dict[str, list]], list[list]]:
    """The ``sanitize_control_tokens`` path: marked chats encoded piece by piece, truncated by slicing, then ``pad``."""
    backend = tokenizer.backend
    backend.no_padding()
    backend.no_truncation()
    backend.encode_special_tokens = tokenizer.split_special_tokens  # what each inner ``encode`` sets
    rows: list[dict[str, list]] = []
    all_offsets: list[list] = []
    for chat in chats:
        ids, offsets = encode_marked_chat(tokenizer, chat, want_offsets)
        if truncation != "do_not_truncate" and max_length is not None:
            if tokenizer.truncation_side == "right":
                ids, offsets = ids[:max_length], offsets[:max_length]
            else:
                ids, offsets = ids[-max_length:], offsets[-max_length:] if offsets else offsets
        rows.append({"input_ids": ids})
        all_offsets.append(offsets)
    # ``pad`` resolves its strategy again: only padding and max_length reach it
    target = max_length
    if padding == "longest":
        target = max(len(row["input_ids"]) for row in rows) if rows else 0
    if padding == "max_length" and max_length is None:
        padding, target = ("do_not_pad", None) if tokenizer.model_max_length > LARGE_INTEGER else ("max_length", tokenizer.model_max_length)
    multiple = options.get("pad_to_multiple_of")
    if padding != "do_not_pad" and target is not None and multiple is not None and target % multiple != 0:
        target = (target // multiple + 1) * multiple
    with_mask = options.get("return_attention_mask")
    if single and not rows[0]["input_ids"]:  # ``pad`` returns an empty input as it is
        if with_mask:
            rows[0]["attention_mask"] = []
        return rows, all_offsets
    if with_mask is None:
        with_mask = "attention_mask" in tokenizer.model_input_names
    side = options.get("padding_side") or tokenizer.padding_side
    for row, offsets in zip(rows, all_offsets):
        _pad_row(row, offsets if want_offsets else [], target if padding != "do_not_pad" else None, side, tokenizer.pad_token_id, with_mask)
    return rows, all_offsets


def _backend_rows(tokenizer: ChatTokenizer, chats: list[str], padding: str, truncation: str, max_length: int | None,
                  options: dict[str, Any], offsets: bool) -> tuple[list[dict[str, list]], list[list]]:
    """``set_truncation_and_padding`` then ``encode_batch``, converted as ``_convert_encoding`` converts."""
    backend = tokenizer.backend
    if truncation == "do_not_truncate":
        backend.no_truncation()
    else:
        backend.enable_truncation(max_length, stride=options.get("stride", 0) or 0, strategy=truncation, direction=tokenizer.truncation_side)
    if padding == "do_not_pad":
        backend.no_padding()
    else:
        backend.enable_padding(
            direction=options.get("padding_side") or tokenizer.padding_side,
            pad_id=tokenizer.pad_token_id,
            pad_type_id=tokenizer.pad_token_type_id,
            pad_token=tokenizer.pad_token,
            length=max_length if padding == "max_length" else None,
            pad_to_multiple_of=options.get("pad_to_multiple_of"),
        )
    split = options.get("split_special_tokens", tokenizer.split_special_tokens)
    backend.encode_special_tokens = bool(split)
    with_types = options.get("return_token_type_ids")
    if with_types is None:
        with_types = "token_type_ids" in tokenizer.model_input_names
    with_mask = options.get("return_attention_mask")
    if with_mask is None:
        with_mask = "attention_mask" in tokenizer.model_input_names
    segments = tokenizer.segment_encoder() if padding == "do_not_pad" and truncation == "do_not_truncate" and not split and not with_types else None
    if segments is not None:
        # the same ids and offsets, piece by piece with the repeated pieces cached (segments.py says when that holds)
        rows, all_offsets = [], []
        for chat in chats:
            ids, chat_offsets = segments.encode(chat, offsets)
            rows.append({"input_ids": ids, "attention_mask": [1] * len(ids)} if with_mask else {"input_ids": ids})
            all_offsets.append(chat_offsets)
        _warn_if_long(tokenizer, rows, options, max_length)
        return rows, all_offsets
    # the same ids, masks and padding three ways: without offsets when no assistant mask needs them
    # (``encode_batch_fast``, tokenizers >= 0.21), else one chat through ``encode`` (no trip through the
    # thread pool), else ``encode_batch`` as transformers calls it
    if not offsets and hasattr(backend, "encode_batch_fast"):
        encodings = backend.encode_batch_fast(chats, add_special_tokens=False)
    elif len(chats) == 1:
        encodings = [backend.encode(chats[0], add_special_tokens=False)]
    else:
        encodings = backend.encode_batch(chats, add_special_tokens=False)
    rows = []
    for encoding in encodings:
        row: dict[str, list] = {"input_ids": encoding.ids}
        if with_types:
            row["token_type_ids"] = encoding.type_ids
        if with_mask:
            row["attention_mask"] = encoding.attention_mask
        rows.append(row)
    _warn_if_long(tokenizer, rows, options, max_length)
    return rows, [encoding.offsets for encoding in encodings]


def _warn_if_long(tokenizer: ChatTokenizer, rows: list[dict[str, list]], options: dict[str, Any], max_length: int | None) -> None:
    """``_eventual_warn_about_too_long_sequence``: once per tokenizer, as transformers says it once per tokenizer object."""
    if options.get("verbose", True) and max_length is None and tokenizer.model_max_length != 0:
        for row in rows:
            if len(row["input_ids"]) > tokenizer.model_max_length:
                warn_once(
                    "Token indices sequence length is longer than the specified maximum sequence length "
                    f"for this model ({len(row['input_ids'])} > {tokenizer.model_max_length}). Running this sequence "
                    "through the model will result in indexing errors",
                    ("model_max_length", id(tokenizer)),
                )
                break


def _utf8_bytes(text: str) -> int:
    """The UTF-8 length of ``text`` (a lone surrogate 3 bytes), a megabyte at a time."""
    if text.isascii():
        return len(text)
    return sum(len(text[at:at + _CHUNK].encode("utf-8", "surrogatepass")) for at in range(0, len(text), _CHUNK))


def check_tokenize_size(chats: list[str], budgets: Any) -> None:
    """Refuse (``BudgetExceeded``, ``max_built_bytes``) a chat whose tokenizing could need more memory than
    the render memory budget: :data:`TOKENIZE_BYTES_PER_BYTE` bytes a UTF-8 byte. No limit with budgets off."""
    budgets = resolve_budgets(budgets)
    limit = None if budgets is None else budgets.max_built_bytes
    if limit is None:
        return
    room = int(limit) // TOKENIZE_BYTES_PER_BYTE
    for chat in chats:
        if len(chat) <= room // 4:  # (at most 4 bytes a character)
            continue
        if len(chat) > room or _utf8_bytes(chat) > room:
            raise BudgetExceeded(
                "max_built_bytes", limit,
                f"tokenizing a rendered chat of {len(chat)} characters, more than the {room} UTF-8 bytes that fit "
                f"(tokenizing may hold {TOKENIZE_BYTES_PER_BYTE} bytes a byte)")


def _tensor(value: list) -> Any:
    """``BatchEncoding.convert_to_tensors("np")`` of one value (a ragged batch is an object array of rows)."""
    import numpy as np  # lazy: numpy only for return_tensors="np" (not a dependency)

    if value and isinstance(value[0], (list, tuple)) and len({len(row) for row in value}) > 1:
        return np.asarray([np.asarray(row) for row in value], dtype=object)
    if not value or (isinstance(value[0], (list, tuple)) and all(len(row) == 0 for row in value)):
        return np.asarray(value, dtype=np.int64)
    return np.asarray(value)


def encode_chats(
    tokenizer: ChatTokenizer,
    chats: list[str],
    spans: list[list[tuple[int, int]]] | None,
    *,
    batched: bool,
    padding: Any = False,
    truncation: Any = False,
    max_length: int | None = None,
    return_tensors: str | None = None,
    sanitize_control_tokens: bool = False,
    tokenizer_kwargs: dict[str, Any] | None = None,
    budgets: Any = None,
) -> dict[str, Any]:
    """The ``BatchEncoding`` of ``apply_chat_template(..., tokenize=True, return_dict=True)`` as a dict.

    ``spans`` (one list of generation spans per chat) adds ``assistant_masks``. Unbatched without
    ``return_tensors``, each value is one list; ``return_tensors="np"`` gives numpy arrays.
    ``budgets`` (those of the render) bound what each chat may tokenize to: :func:`check_tokenize_size`.
    """
    check_tokenize_size(chats, budgets)
    if (not tokenizer_kwargs and padding is False and (truncation is False or truncation is None) and max_length is None
            and return_tensors is None and not sanitize_control_tokens):
        # the common call (a training set's chats, one at a time): what the checks below resolve it to
        with tokenizer.lock:
            rows, offsets = _backend_rows(tokenizer, chats, "do_not_pad", "do_not_truncate", None, {}, spans is not None)
        if spans is not None:
            for row, row_offsets, row_spans in zip(rows, offsets, spans):
                row["assistant_masks"] = assistant_mask(row_offsets, row_spans, len(row["input_ids"]))
        if not batched:
            return rows[0]
        return {key: [row[key] for row in rows] for key in rows[0]}
    options = dict(tokenizer_kwargs or {})
    for name in _CALL_ARGUMENTS:
        if name in options:
            # Python names the tokenizer object by its repr there (its whole vocabulary of added tokens)
            raise TypeError(f"tokenizer() got multiple values for keyword argument '{name}'")
    for name in _UNSUPPORTED:
        if options.get(name):
            raise ValueError(f"tokenizer_kwargs {name!r} is not supported by chatjinja's apply_chat_template (transformers' {name} output has no place here)")
    if return_tensors is not None and getattr(return_tensors, "value", return_tensors) != "np":
        raise ValueError(f"return_tensors must be None or 'np' in chatjinja (no torch or mlx output), got {return_tensors!r}")
    padding_strategy, truncation_strategy, max_length = _strategies(
        tokenizer, padding, truncation, max_length, options.get("pad_to_multiple_of"), options.get("verbose", True)
    )
    with tokenizer.lock:
        if sanitize_control_tokens:
            rows, offsets = _sanitized(
                tokenizer, chats, padding_strategy, truncation_strategy, max_length, options, spans is not None,
                single=not batched and return_tensors is None,
            )
        else:
            rows, offsets = _backend_rows(tokenizer, chats, padding_strategy, truncation_strategy, max_length, options, spans is not None)
    if spans is not None:
        for row, row_offsets, row_spans in zip(rows, offsets, spans):
            row["assistant_masks"] = assistant_mask(row_offsets, row_spans, len(row["input_ids"]))
    keys = list(rows[0]) if rows else ["input_ids"]
    result: dict[str, Any] = {key: [row[key] for row in rows] for key in keys}
    if return_tensors is not None:
        return {key: _tensor(value) for key, value in result.items()}
    if not batched:
        return {key: value[0] for key, value in result.items()}
    return result
