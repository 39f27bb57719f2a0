"""Encoding by added-token pieces with a cache of each piece's ids and offsets, for tokenizers whose pipeline makes that the plain encode.

The ``tokenizers`` library splits its input on the added tokens first (the non-normalized ones in
the raw text, then the normalized ones in the normalized rest) and runs normalizer, pre-tokenizer
and model on each piece left between them on its own; the post-processor, without special tokens,
works token by token. So the encoding of a text is the concatenation of its pieces' encodings, each
piece's offsets shifted by where it starts, and the long pieces chat prompts repeat (system prompts,
tool schemas, earlier turns) need encoding once. The one step that looks beyond its piece is a
Metaspace pre-tokenizer with ``prepend_scheme="first"``: it prepends only to the piece at offset 0,
so every other piece is encoded by a copy whose scheme is ``"never"``.

:func:`segment_encoder` checks the tokenizer's JSON (``to_str()``) and returns ``None`` when any step
is not one of those known to work piece by piece (an unknown normalizer, pre-tokenizer or
post-processor, BPE dropout, an added token with ``lstrip``, ``rstrip`` or ``single_word``, a
normalized added token under a normalizer): the caller then encodes as usual. ``encode.py`` uses it
for unpadded, untruncated chats without ``split_special_tokens`` or token type ids.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import Any

from .library import tokenizers_module
from .words import word_encoder

__all__ = ["SegmentEncoder", "segment_encoder"]

#: pre-tokenizers whose work on a piece depends on that piece alone (Metaspace: unless ``prepend_scheme="first"``)
_LOCAL_PRE_TOKENIZERS = {
    "ByteLevel", "Split", "Whitespace", "WhitespaceSplit", "Punctuation", "Digits", "BertPreTokenizer",
    "UnicodeScripts", "CharDelimiterSplit", "Metaspace", "FixedLength",
}
#: normalizers (each runs on one piece in the tokenizers library)
_LOCAL_NORMALIZERS = {
    "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Strip", "StripAccents", "Replace", "Prepend", "BertNormalizer",
    "Nmt", "Precompiled", "ByteLevel",
}
#: post-processors that, without special tokens, touch each token alone (offset trimming, a type id)
_LOCAL_POST_PROCESSORS = {"ByteLevel", "TemplateProcessing", "BertProcessing", "RobertaProcessing"}

#: the characters of all the pieces kept, and the longest piece kept
CACHE_CHARS = 1 << 20
CACHE_PIECE_CHARS = 1 << 14


def _local(step: Any, known: set[str], children: str) -> bool:
    if step is None:
        return True
    if step.get("type") == "Sequence":
        return all(_local(child, known, children) for child in step.get(children, []))
    return step.get("type") in known


def _metaspace_first(step: Any) -> bool:
    if step is None:
        return False
    if step.get("type") == "Sequence":
        return any(_metaspace_first(child) for child in step.get("pretokenizers", []))
    return step.get("type") == "Metaspace" and step.get("prepend_scheme") == "first"


def _never_prepend(step: Any) -> Any:
    if step is None:
        return None
    if step.get("type") == "Sequence":
        return {**step, "pretokenizers": [_never_prepend(child) for child in step.get("pretokenizers", [])]}
    if step.get("type") == "Metaspace" and step.get("prepend_scheme") == "first":
        return {**step, "prepend_scheme": "never"}
    return step


def _trie(tokens: list[str]) -> str:
    """A regex of ``tokens`` as a trie: at each character it goes on before it stops, so it matches the longest token there."""
    root: dict[str, Any] = {}
    for token in tokens:
        node = root
        for char in token:
            node = node.setdefault(char, {})
        node[""] = True

    def pattern(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + pattern(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        if "" in node:
            return f"(?:{'|'.join(branches)})?"
        return branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"

    return pattern(root)


def _alternation(tokens: list[str]) -> re.Pattern | None:
    """Leftmost-longest over ``tokens`` (the aho-corasick match kind of the tokenizers library)."""
    if not tokens:
        return None
    if max(map(len, tokens)) > 256:  # the trie nests one group per character: a plain alternation, longest first
        return re.compile("(" + "|".join(re.escape(token) for token in sorted(tokens, key=len, reverse=True)) + ")")
    return re.compile(f"({_trie(tokens)})")


class SegmentEncoder:
    """``backend.encode(text, add_special_tokens=False)``'s ids (and offsets) by cached pieces, for a tokenizer that passed the checks.

    ``hits`` and ``misses`` count the pieces found in the cache and those encoded. The cache keeps
    pieces up to ``size`` characters in all and forgets the oldest first (a piece forgotten while
    still in use costs one more encode when it comes back).
    """

    def __init__(self, backend: Any, description: dict[str, Any], size: int = CACHE_CHARS) -> None:
        self.backend = backend
        self.size = size
        self.hits = 0
        self.misses = 0
        self._chars = 0  # the characters of the pieces in the cache
        # a piece's text (a 1-tuple for the piece at offset 0 when the encoding depends on it) -> its ids and offsets
        # an OrderedDict: forgetting the oldest of a plain dict is ``next(iter(d))``, which walks over every slot
        # deleted before it (O(n) per eviction once the cache is full, tens of microseconds per call)
        self._cache: OrderedDict[Any, tuple[list[int], list[tuple[int, int]] | None]] = OrderedDict()
        added = description.get("added_tokens") or []
        self._raw = _alternation([token["content"] for token in added if not token.get("normalized")])
        self._normalized = _alternation([token["content"] for token in added if token.get("normalized")])
        # a piece equal to an added token is that token (the text between tokens never equals one)
        self._added = {token["content"] for token in added}
        self._by_position = _metaspace_first(description.get("pre_tokenizer"))
        self._inner = backend
        # ASCII pieces without offsets split in ``re`` and encoded word by word (words.py), when that is exact
        self.words = word_encoder(description, backend)
        if self._by_position:
            # without the file's own padding and truncation: the caller's backend has them switched off
            inner = {**description, "pre_tokenizer": _never_prepend(description["pre_tokenizer"]), "padding": None, "truncation": None}
            self._inner = tokenizers_module().Tokenizer.from_str(json.dumps(inner))

    def clear(self) -> None:
        self._cache.clear()
        self.hits = self.misses = self._chars = 0
        if self.words is not None:
            self.words.clear()

    def pieces(self, text: str) -> list[str]:
        """``text`` cut as the tokenizers library cuts it: the added tokens and the text between them, empty pieces left out."""
        pieces = [text]
        if self._raw is not None:
            pieces = self._raw.split(text)  # the pattern is one group: text, token, text, ...
        if self._normalized is not None:
            split: list[str] = []
            for index, piece in enumerate(pieces):
                if index % 2:  # an added token of the first pass
                    split.append(piece)
                else:
                    split.extend(self._normalized.split(piece))
            pieces = split
        return [piece for piece in pieces if piece]

    def encode(self, text: str, offsets: bool) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids of ``text`` and, when ``offsets``, each token's character offsets in it."""
        pieces = self.pieces(text)
        keys: list[Any] = pieces
        if self._by_position and pieces:
            keys = [(pieces[0],), *pieces[1:]]
        found: list[Any] = list(map(self._cache.get, keys))
        missing = [index for index, entry in enumerate(found) if entry is None or offsets and entry[1] is None]
        self.hits += len(found) - len(missing)
        if missing:
            self._encode_missing(keys, pieces, found, missing, offsets)
        ids: list[int] = []
        for entry in found:
            ids += entry[0]
        if not offsets:
            return ids, []
        spans: list[tuple[int, int]] = []
        start = 0
        for piece, entry in zip(pieces, found):
            spans += [(a + start, b + start) for a, b in entry[1]] if start else entry[1]
            start += len(piece)
        return ids, spans

    def _encode_missing(self, keys: list[Any], pieces: list[str], found: list[Any], missing: list[int], offsets: bool) -> None:
        """The pieces not in the cache encoded (each distinct one once) and kept."""
        cache = self._cache
        words = self.words if not offsets else None
        done: dict[Any, Any] = {}
        for index in missing:
            key = keys[index]
            entry = done.get(key)
            if entry is None:
                piece = pieces[index]
                if words is not None and piece.isascii() and piece not in self._added:
                    entry = (words.encode(piece), None)
                else:
                    # the piece at offset 0 (a 1-tuple key) by the backend itself, the others without its prefix
                    backend = self._inner if self._by_position and not isinstance(key, tuple) else self.backend
                    # one by one: ``encode_batch`` hands a few short pieces to its thread pool, which costs more CPU than it saves
                    encoding = backend.encode(piece, add_special_tokens=False)
                    entry = (encoding.ids, encoding.offsets if offsets else None)
                self.misses += 1
                done[key] = entry
                if key in cache or len(piece) <= CACHE_PIECE_CHARS:
                    if key not in cache:
                        self._chars += len(piece)
                    cache[key] = entry  # kept, or kept again now with its offsets
            found[index] = entry
        while self._chars > self.size:  # the oldest first
            oldest, _ = cache.popitem(last=False)
            self._chars -= len(oldest[0] if isinstance(oldest, tuple) else oldest)


def segment_encoder(backend: Any) -> SegmentEncoder | None:
    """A :class:`SegmentEncoder` for ``backend``, or ``None`` when its pipeline is not known to encode piece by piece."""
    try:
        description = json.loads(backend.to_str())
    except Exception:  # noqa: BLE001 - a backend that cannot describe itself is encoded as usual
        return None
    model = description.get("model") or {}
    if model.get("dropout") not in (None, 0, 0.0):
        return None
    if not _local(description.get("normalizer"), _LOCAL_NORMALIZERS, "normalizers"):
        return None
    if not _local(description.get("pre_tokenizer"), _LOCAL_PRE_TOKENIZERS, "pretokenizers"):
        return None
    if not _local(description.get("post_processor"), _LOCAL_POST_PROCESSORS, "processors"):
        return None
    for token in description.get("added_tokens") or []:
        if token.get("lstrip") or token.get("rstrip") or token.get("single_word"):
            return None
        if token.get("normalized") and description.get("normalizer") is not None:
            return None
    return SegmentEncoder(backend, description)
