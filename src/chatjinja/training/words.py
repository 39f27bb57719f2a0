"""The ids of an ASCII piece by a pre-tokenizer in Python's ``re`` and a word cache, for byte-level BPE tokenizers whose split it reproduces exactly.

The ``tokenizers`` library runs a byte-level BPE's pre-tokenizer (the regex split, in Oniguruma) on
every new piece, which costs several times the BPE itself. For a tokenizer without a normalizer whose
pre-tokenizer is ``Sequence[Split(Regex, Isolated), ByteLevel(use_regex=False)]`` or
``ByteLevel(use_regex=True)`` (GPT-2's regex), both without a prefix space, and a BPE model without
dropout, :func:`word_encoder` translates the regex to ``re`` for ASCII input (``\\p{L}`` to
``A-Za-z``, the categories without ASCII members to a non-ASCII range, ``re.ASCII``, every other
construct from a short list that means the same in both engines, or no word encoder). An ASCII piece
is then split like ``Isolated`` (the matches and the gaps between them), each word mapped by
ByteLevel's byte-to-character table and looked up in a bounded cache of word ids; a word not there
goes to the library's own ``model.tokenize``, so the merges stay the library's.
"""

from __future__ import annotations

import re
from itertools import chain
from typing import Any

__all__ = ["WordEncoder", "word_encoder"]

#: the words kept (the cache is emptied when it is full), and the longest word kept
CACHE_WORDS = 1 << 16
CACHE_WORD_CHARS = 128

#: GPT-2's pre-tokenizer regex, which ``ByteLevel(use_regex=True)`` splits by (tokenizers' ``byte_level.rs``)
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

#: the ASCII members of the Unicode general categories; "" for those without any
_NOT_ASCII = "\\u0080-\\U0010ffff"  # inside a class: matches no ASCII character, keeps the class non-empty
_CATEGORIES = {
    "L": "A-Za-z", "Letter": "A-Za-z", "Lu": "A-Z", "Ll": "a-z", "Lt": "", "Lm": "", "Lo": "",
    "M": "", "Mn": "", "Mc": "", "Me": "", "N": "0-9", "Nd": "0-9", "Nl": "", "No": "",
}
#: escapes that mean the same for ASCII text in Oniguruma and in ``re`` with ``re.ASCII``
_SAME_ESCAPES = set("sSdDwWrntf")
#: group openings that mean the same in both
_GROUPS = ("(?:", "(?i:", "(?=", "(?!", "(?<=", "(?<!")


def _byte_table() -> dict[int, str]:
    """ByteLevel's ``bytes_to_unicode`` for the 128 ASCII bytes (code point -> its character)."""
    printable = set(range(ord("!"), ord("~") + 1))
    table, shift = {}, 0
    for byte in range(256):
        if byte in printable or 0xA1 <= byte <= 0xAC or 0xAE <= byte <= 0xFF:
            char = chr(byte)
        else:
            char = chr(256 + shift)
            shift += 1
        if byte < 128:
            table[byte] = char
    return table


_BYTE_TABLE = _byte_table()


def translate(pattern: str) -> str | None:
    """``pattern`` (Oniguruma, as the tokenizers library compiles it) as a ``re`` pattern equal on ASCII text, or ``None``."""
    out: list[str] = []
    index, in_class, length = 0, False, len(pattern)
    while index < length:
        char = pattern[index]
        if char == "\\":
            if index + 1 >= length:
                return None
            escape = pattern[index + 1]
            if escape == "p":
                match = re.match(r"\\p\{(\w+)\}|\\p(\w)", pattern[index:])
                if match is None:
                    return None
                members = _CATEGORIES.get(match.group(1) or match.group(2))
                if members is None:
                    return None
                if in_class:
                    out.append(members or _NOT_ASCII)
                else:
                    out.append(f"[{members or _NOT_ASCII}]")
                index += match.end()
                continue
            if escape in _SAME_ESCAPES or not escape.isalnum():
                out.append(pattern[index:index + 2])
                index += 2
                continue
            if escape == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", pattern[index + 2:index + 4]):
                out.append(pattern[index:index + 4])
                index += 4
                continue
            return None
        if in_class:
            if char == "[" or pattern.startswith("&&", index):
                return None  # a nested class, an intersection: Oniguruma-only
            if char == "]":
                in_class = False
            out.append(char)
            index += 1
            continue
        if char == "[":
            in_class = True
            out.append(char)
            index += 1
            if pattern.startswith("^", index):
                out.append("^")
                index += 1
            if pattern.startswith("]", index):  # a leading ']' is a member in both
                out.append("\\]")
                index += 1
            continue
        if char in "^$":
            return None  # line anchors: Oniguruma's are multi-line
        if char == "(":
            opening = next((group for group in _GROUPS if pattern.startswith(group, index)), None)
            if opening is None:
                if pattern.startswith("(?", index):
                    return None
                opening = "("
            out.append("(?:" if opening == "(" else opening)  # no capturing groups: ``findall`` returns whole matches
            index += len(opening)
            continue
        if char == "}" and index + 1 < length and pattern[index + 1] in "+?*":
            return None  # ``{n}+``: possessive in ``re``, a repeat of a repeat in Oniguruma
        out.append(char)
        index += 1
    if in_class or "(?i" in pattern and not pattern.isascii():
        return None  # Oniguruma folds some non-ASCII letters to ASCII ones (the Kelvin sign to k)
    return "".join(out)


def _isolated(pattern: re.Pattern, text: str) -> list[str]:
    """``text`` cut into ``pattern``'s matches and the gaps between them, empty ones left out."""
    found = pattern.findall(text)
    if sum(map(len, found)) != len(text):  # gaps between the matches
        found, start = [], 0
        for match in pattern.finditer(text):
            found += [text[start:match.start()], match.group()]
            start = match.end()
        found.append(text[start:])
    elif "" not in found:
        return found
    return [word for word in found if word]


class WordEncoder:
    """The BPE ids of an ASCII piece, word by word, for a tokenizer :func:`word_encoder` accepted.

    ``pieces`` counts the pieces encoded here, ``hits`` and ``misses`` the words found in the cache
    and those handed to the model.
    """

    def __init__(self, model: Any, patterns: list[re.Pattern], size: int = CACHE_WORDS) -> None:
        self._tokenize = model.tokenize
        self._patterns = patterns
        self.size = size
        self._cache: dict[str, list[int]] = {}
        self.pieces = self.hits = self.misses = 0

    def clear(self) -> None:
        self._cache.clear()
        self.pieces = self.hits = self.misses = 0

    def split(self, piece: str) -> list[str]:
        """``piece``'s words: each pattern's matches and the text between them, as ``Split(behavior="Isolated")`` cuts."""
        words = [piece]
        for pattern in self._patterns:
            if len(words) == 1:
                words = _isolated(pattern, words[0])
            else:
                words = [part for word in words for part in _isolated(pattern, word)]
        return words

    def encode(self, piece: str) -> list[int]:
        """The ids of the ASCII ``piece`` (``backend.encode(piece, add_special_tokens=False).ids``)."""
        self.pieces += 1
        cache = self._cache
        words = self.split(piece)
        found: list[Any] = list(map(cache.get, words))  # None for a word not in the cache, filled below
        missing = found.count(None)
        self.hits += len(found) - missing
        if missing:
            self.misses += missing
            for index, word in enumerate(words):
                if found[index] is None:
                    ids = cache.get(word)  # a word twice in the piece: encoded at its first place
                    if ids is None:
                        ids = [token.id for token in self._tokenize(word.translate(_BYTE_TABLE))]
                        if len(word) <= CACHE_WORD_CHARS:
                            if len(cache) >= self.size:
                                cache.clear()
                            cache[word] = ids
                    found[index] = ids
        return list(chain.from_iterable(found))


def _pattern(step: dict[str, Any]) -> str | None:
    """The regex a pre-tokenizer step splits by (``Isolated``), ``""`` for a ByteLevel that only maps bytes, or ``None``."""
    kind = step.get("type")
    if kind == "Split":
        regex = (step.get("pattern") or {}).get("Regex")
        if regex is None or step.get("behavior") != "Isolated" or step.get("invert"):
            return None
        return regex
    if kind == "ByteLevel" and not step.get("add_prefix_space"):
        return GPT2_PATTERN if step.get("use_regex", True) else ""
    return None


def word_encoder(description: dict[str, Any], backend: Any) -> WordEncoder | None:
    """A :class:`WordEncoder` for the tokenizer ``description`` (its ``to_str()`` JSON) describes, or ``None`` when its split is not reproduced here."""
    model = description.get("model") or {}
    if description.get("normalizer") is not None or model.get("type") != "BPE" or model.get("dropout") not in (None, 0, 0.0):
        return None
    step = description.get("pre_tokenizer") or {}
    steps = step.get("pretokenizers") or [] if step.get("type") == "Sequence" else [step]
    if not steps or steps[-1].get("type") != "ByteLevel" or any(s.get("type") != "Split" for s in steps[:-1]):
        return None  # byte-level last (it maps the bytes), splits before it
    patterns = []
    for step in steps:
        source = _pattern(step)
        if source is None:
            return None
        if not source:
            continue
        translated = translate(source)
        if translated is None:
            return None
        try:
            compiled = re.compile(translated, re.ASCII)
        except re.error:
            return None
        if compiled.search("") is not None:
            return None  # empty matches: the two engines step over them differently
        patterns.append(compiled)
    return WordEncoder(backend.model, patterns)
