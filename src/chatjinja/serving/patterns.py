"""A response template's delimiter patterns, prepared once for a reader whose searches pass over each character of a reply a bounded number of times.

Response templates write their delimiters for the ``regex`` module (transformers' parser uses it:
``\\G``, possessive repeats, variable-width lookbehind). A small reader of that syntax finds what
makes a search cost more than the text it passes over, and rewrites it into a pattern with the
same leftmost match:

- a top-level alternative that starts with optional whitespace (``\\s*</s>``) is retried at every
  position of a run of blanks, each retry scanning the rest of the run (quadratic); its leftmost
  match never starts inside a run (a match there extends back to the run's start), so it is
  guarded to start after a non-space (:data:`_GUARD`), and the search start, where the original
  may start after a blank, is tried alone with the original pattern (``anchored``);
- a tail that takes the rest of the reply (``[\\s\\S]*`` at the end of an alternative) is replaced
  by an empty marker group: the match is the same, its end is the end of the text, and finding it
  no longer passes over the rest of the reply;
- ``\\G`` (where the search started) is true only in the anchored attempt;
- end-of-text assertions (``\\Z``, ``$``, ``\\b``, ``\\B``) are written as lookaheads that read a
  character, so that partial matching sees them (:func:`Delimiter.touch`).

A stream must know whether a match found in the text so far is final. ``(?>P)(?!)`` searched with
``partial=True`` returns the leftmost position where finding P's first match reads past the end of
the text so far (the atomic group stops at P's first match, ``(?!)`` fails it, so no full match is
ever reported): before that position, every attempt's outcome is the same on any continuation.

A pattern this reader does not know (inline flags, conditionals, recursion, verbs) is used as
written, and its searches cost what the pattern costs.
"""

from __future__ import annotations

import functools
import re as _re
from dataclasses import dataclass, field
from typing import Any

try:
    import regex
except ImportError:  # the parse extra is not installed: Delimiter.prepare raises ParseExtraMissing
    regex = None

from .library import ParseExtraMissing

__all__ = ["Delimiter", "Found", "Work", "prepare", "literal_pattern", "required_suffix"]

_FLAGS = 0  # set below when regex is present: DOTALL, as transformers compiles delimiters
_TAIL = "_cjtail"
_GUARD = r"(?<!\s)"
_END_ASSERTIONS = {
    r"\Z": r"(?![\s\S])",
    "$": r"(?=\n?(?![\s\S]))",
    r"\b": r"(?:(?<=\w)(?!\w)|(?<!\w)(?=\w))",
    r"\B": r"(?:(?<=\w)(?=\w)|(?<!\w)(?!\w))",
}
_TAIL_ATOMS = {r"[\s\S]", r"[\S\s]", "."}
_ESCAPE = _re.compile(r"\\(?:x\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}"
                      r"|[pP]\{[^}]*\}|g<[^>]*>|0[0-7]{0,2}|[1-9][0-9]{0,2}|[\s\S])")
_QUANTIFIER = _re.compile(r"(?:[*+?]|\{(?:\d+(?:,\d*)?|,\d+)\})[?+]?")
_NAMED = _re.compile(r"\(\?P?<([A-Za-z_]\w*)>")


class _Opaque(Exception):
    """A construct the reader does not rewrite around."""


@dataclass
class _Atom:
    text: str


@dataclass
class _Group:
    opener: str  # "(", "(?:", "(?P<name>", "(?=", "(?!", "(?<=", "(?<!", "(?>"
    branches: list[list[Any]]


@dataclass
class _Item:
    node: Any  # _Atom | _Group
    quantifier: str = ""


def _parse(source: str) -> list[list[_Item]]:
    """The pattern's top-level alternatives, each a list of items; raises _Opaque for unknown syntax."""
    pos = 0
    stack: list[tuple[_Group | None, list[list[_Item]]]] = [(None, [[]])]
    while pos < len(source):
        char = source[pos]
        branches = stack[-1][1]
        if char == "\\":
            m = _ESCAPE.match(source, pos)
            if m is None:
                raise _Opaque("a trailing backslash")
            node: Any = _Atom(m.group())
            pos = m.end()
        elif char == "[":
            end = pos + 1
            if source.startswith("^", end):
                end += 1
            if source.startswith("]", end):
                end += 1
            while True:
                if end >= len(source):
                    raise _Opaque("an unclosed set")
                if source[end] == "\\":
                    end += 2
                elif source.startswith("[:", end):
                    close = source.find(":]", end + 2)
                    end = close + 2 if close >= 0 else end + 1
                elif source[end] == "[":
                    raise _Opaque("a nested set")
                elif source[end] == "]":
                    end += 1
                    break
                else:
                    end += 1
            node = _Atom(source[pos:end])
            pos = end
        elif char == "(":
            rest = source[pos:pos + 4]
            named = _NAMED.match(source, pos)
            if source.startswith("(?P=", pos):
                close = source.find(")", pos)
                if close < 0:
                    raise _Opaque("an unclosed backreference")
                node = _Atom(source[pos:close + 1])
                pos = close + 1
            elif named is not None:
                group = _Group(named.group(), [[]])
                stack.append((group, group.branches))
                pos = named.end()
                continue
            else:
                for opener in ("(?<=", "(?<!", "(?:", "(?=", "(?!", "(?>"):
                    if rest.startswith(opener):
                        break
                else:
                    if rest.startswith("(?") or rest.startswith("(*"):
                        raise _Opaque(f"the group {rest!r}")
                    opener = "("
                group = _Group(opener, [[]])
                stack.append((group, group.branches))
                pos += len(opener)
                continue
        elif char == ")":
            group, _ = stack.pop()
            if group is None or not stack:
                raise _Opaque("an unbalanced ')'")
            node = group
            pos += 1
        elif char == "|":
            branches.append([])
            pos += 1
            continue
        elif char in "*+?" or (char == "{" and _QUANTIFIER.match(source, pos)):
            raise _Opaque("a repeat with nothing to repeat")
        else:
            node = _Atom(char)
            pos += 1
        quantifier = _QUANTIFIER.match(source, pos)
        item = _Item(node, quantifier.group() if quantifier else "")
        if quantifier:
            pos = quantifier.end()
        stack[-1][1][-1].append(item)
    if len(stack) != 1:
        raise _Opaque("an unclosed group")
    return stack[0][1]


def _emit(branches: list[list[_Item]]) -> str:
    return "|".join("".join(_emit_item(item) for item in branch) for branch in branches)


def _emit_item(item: _Item) -> str:
    node = item.node
    if isinstance(node, _Atom):
        return node.text + item.quantifier
    return node.opener + _emit(node.branches) + ")" + item.quantifier


def _walk(branches: list[list[_Item]]):
    for branch in branches:
        for item in branch:
            yield item
            if isinstance(item.node, _Group):
                yield from _walk(item.node.branches)


def _absorbs_blanks(branch: list[_Item]) -> bool:
    """Whether a match of ``branch`` at ``i`` after a blank is also one at ``i - 1`` (it starts with ``\\s*``, ``\\s+``)."""
    if not branch:
        return False
    first = branch[0]
    node = first.node
    if isinstance(node, _Atom):
        return node.text == r"\s" and first.quantifier in ("*", "+", "*+", "++", "*?", "+?")
    if first.quantifier:
        return False
    if node.opener == "(?:":
        return all(_absorbs_blanks(b) for b in node.branches)
    if node.opener == "(?=" and len(branch) == 1:  # a zero-width alternative (?=\s*X)
        return all(_absorbs_blanks(b) for b in node.branches)
    return False


def _always_empty_at_end(item: _Item) -> bool:
    return isinstance(item.node, _Atom) and item.node.text == r"\s" and item.quantifier in ("*", "*+")


def _replace_tails(branches: list[list[_Item]]) -> bool:
    """Replace each ``[\\s\\S]*`` that ends an alternative (only ``\\s*`` after it) by the empty marker group."""
    replaced = False
    for branch in branches:
        index = len(branch) - 1
        while index >= 0 and _always_empty_at_end(branch[index]):
            index -= 1
        if index < 0:
            continue
        item = branch[index]
        node = item.node
        if isinstance(node, _Atom) and node.text in _TAIL_ATOMS and item.quantifier in ("*", "*+"):
            branch[index] = _Item(_Group(f"(?P<{_TAIL}>", [[]]))
            replaced = True
        elif isinstance(node, _Group) and node.opener == "(?:" and not item.quantifier:
            replaced = _replace_tails(node.branches) or replaced
    return replaced


def _rewrite_assertions(branches: list[list[_Item]], keep_g: bool) -> None:
    for item in _walk(branches):
        node = item.node
        if isinstance(node, _Atom):
            if node.text in _END_ASSERTIONS and not item.quantifier:
                node.text = _END_ASSERTIONS[node.text]
            elif node.text == r"\G" and not keep_g:
                node.text = "(?!)"
            elif node.text in (r"\m", r"\M", r"\K") or (node.text == "^" and item.quantifier):
                raise _Opaque(f"the escape {node.text}")


@dataclass(frozen=True)
class Found:
    """One match: where it starts and ends, its named groups, and whether it takes the rest of the text."""

    start: int
    end: int
    groups: dict = field(default_factory=dict)
    tail: bool = False


@dataclass
class Work:
    """What the searches of one reader cost: regex calls, and the characters between where each call
    started and where its answer ends (the end of the text when it found nothing)."""

    calls: int = 0
    chars: int = 0

    def add(self, chars: int) -> None:
        self.calls += 1
        self.chars += max(chars, 1)


@dataclass(frozen=True)
class Delimiter:
    """A delimiter pattern ready for leftmost and partial searches (see the module docstring).

    The search methods take a window of the text (``text``, whose first character is at
    ``offset``) and positions counted from the start of the whole text, and return such positions.
    """

    source: str
    search: Any  # positions after the search start (all positions when ``anchored`` is None)
    anchored: Any  # the search start alone: the original pattern (\\G holds there), or None
    search_touch: Any  # (?>search)(?!), for partial matching; None: never final before the end
    anchored_touch: Any
    fixed_start: bool  # whether ``search``'s matches are the same whatever position a search starts from
    lookback: int | None  # how far before a position its lookbehinds read (None: no bound)

    def _found(self, m: Any, offset: int, length: int) -> Found:
        groups = m.groupdict()
        tail = groups.pop(_TAIL, None) is not None
        return Found(offset + m.start(), offset + (length if tail else m.end()), groups, tail)

    def at(self, text: str, offset: int, pos: int, work: Work, final_text: bool) -> tuple[Found | None, bool]:
        """The anchored attempt at ``pos``: (its match, whether more text could change it).

        The ``regex`` module checks, before an anchored attempt, that a literal the pattern requires
        occurs somewhere after the position: a scan to the end of the text when it does not, once
        per decision. So the attempt is made on a window that grows fourfold until the attempt reads
        nothing past its end (then the window's outcome is the text's)."""
        rel, length = pos - offset, len(text)
        if self.anchored_touch is not None:
            window = 256
            while rel + window < length:
                end = rel + window
                touched = self.anchored_touch.match(text, rel, end, partial=True) is not None
                work.add(window if touched else 1)
                if not touched:
                    m = self.anchored.match(text, rel, end)
                    work.add(m.end() - rel if m else 1)
                    found = None if m is None else self._found(m, offset, length)
                    return found, not final_text and found is not None and found.tail
                window *= 4
        m = self.anchored.match(text, rel)
        work.add(m.end() - rel if m else 1)
        found = None if m is None else self._found(m, offset, length)
        if final_text:
            return found, False
        if self.anchored_touch is None:
            return found, True
        touched = self.anchored_touch.match(text, rel, partial=True) is not None
        work.add(length - rel if touched else 1)
        return found, touched or (found is not None and found.tail)

    def after(self, text: str, offset: int, pos: int, work: Work, final_text: bool) -> tuple[Found | None, int]:
        """(leftmost match of ``search`` from ``pos``, the leftmost position where more text could
        change an attempt: one past the end at the end of the stream)."""
        rel, length = pos - offset, len(text)
        if rel > length:
            return None, offset + length + 1
        m = self.search.search(text, rel)
        work.add((m.end() if m else length) - rel)
        found = None if m is None else self._found(m, offset, length)
        if final_text:
            return found, offset + length + 1
        if self.search_touch is None:
            return found, pos
        touch = self.search_touch.search(text, rel, partial=True)
        work.add(length - rel)
        edge = offset + (touch.start() if touch is not None else length)
        if found is not None and found.tail:
            edge = min(edge, found.start)
        return found, edge


_ZERO_WIDTH = {r"\A", r"\Z", r"\G", "^", "$", r"\b", r"\B"}


def _width(branches: list[list[_Item]]) -> int | None:
    """The most characters a match of ``branches`` consumes (None: no bound)."""
    most = 0
    for branch in branches:
        total = 0
        for item in branch:
            node = item.node
            if isinstance(node, _Group):
                if node.opener in ("(?=", "(?!", "(?<=", "(?<!"):
                    continue
                width = _width(node.branches)
            elif node.text in _ZERO_WIDTH or node.text.startswith("(?"):
                width = 0  # an assertion (the rewritten ones are lookarounds, with their own reach)
            elif node.text.startswith("(?P="):
                width = None
            else:
                width = 1
            quantifier = item.quantifier
            if len(quantifier) > 1 and quantifier[-1] in "?+":  # lazy or possessive: the same reach
                quantifier = quantifier[:-1]
            if width is None:
                return None
            if quantifier in ("*", "+") or quantifier.endswith(",}"):
                if width:
                    return None
            elif quantifier.startswith("{"):
                width *= int(quantifier.strip("{}").split(",")[-1])
            total += width
        most = max(most, total)
    return most


def _lookback(branches: list[list[_Item]]) -> int | None:
    """How far before the position it is tried at a match can read: the widest lookbehind, plus one."""
    reach = 1  # \\b and (?<!\\s) read one character back
    for item in _walk(branches):
        node = item.node
        if isinstance(node, _Group) and node.opener in ("(?<=", "(?<!"):
            if any(isinstance(i.node, _Group) and i.node.opener.startswith("(?<") and i.node.opener in ("(?<=", "(?<!")
                   for i in _walk(node.branches)):
                return None  # a lookbehind inside a lookbehind
            width = _width(node.branches)
            if width is None:
                return None
            reach = max(reach, width + 1)
    return reach


def _compile(text: str) -> Any:
    return regex.compile(text, _FLAGS)


def _touch(text: str) -> Any:
    try:
        return regex.compile("(?>" + text + ")(?!)", _FLAGS)
    except regex.error:
        return None


@functools.lru_cache(maxsize=1024)
def prepare(source: str) -> Delimiter:
    """The :class:`Delimiter` for a pattern (``regex`` syntax, compiled with DOTALL as transformers does).

    Raises ``regex.error`` for a pattern the ``regex`` module rejects, and
    :class:`~chatjinja.serving.library.ParseExtraMissing` when ``regex`` is not installed.
    """
    if regex is None:
        raise ParseExtraMissing("reading replies needs the regex module: pip install 'chatjinja[parse]'")
    original = _compile(source)  # the pattern's own errors first, as transformers reports them
    try:
        branches = _parse(source)
        if _TAIL in original.groupindex:
            raise _Opaque("the marker's name is taken")
        uses_g = any(isinstance(i.node, _Atom) and i.node.text == r"\G" for i in _walk(branches))
        _replace_tails(branches)
        anchored_branches = _parse(_emit(branches))
        _rewrite_assertions(branches, keep_g=False)
        _rewrite_assertions(anchored_branches, keep_g=True)
        guarded = False
        for branch in branches:
            if _absorbs_blanks(branch):
                branch.insert(0, _Item(_Atom(_GUARD)))
                guarded = True
        search_text, anchored_text = _emit(branches), _emit(anchored_branches)
        lookback = _lookback(branches)
    except _Opaque:
        fixed = r"\G" not in source
        return Delimiter(source, original, None, _touch(source), None, fixed, None)
    search = _compile(search_text)
    if not (uses_g or guarded):
        return Delimiter(source, search, None, _touch(search_text), None, True, lookback)
    return Delimiter(source, search, _compile(anchored_text), _touch(search_text), _touch(anchored_text), True, lookback)


def literal_pattern(literals: list[str]) -> str:
    """The pattern of a list of literal delimiters: the longest first, so an alternation prefers it (as transformers)."""
    return "|".join(regex.escape(s) for s in sorted(literals, key=len, reverse=True)) if regex else ""


@functools.lru_cache(maxsize=256)
def required_suffix(source: str) -> str | None:
    """The literal every match of ``source`` ends with, when the pattern has no alternation at its top
    level and no lookaround anywhere (so no attempt can depend on text after the last occurrence of it)."""
    try:
        branches = _parse(source)
    except _Opaque:
        return None
    if len(branches) != 1:
        return None
    for item in _walk(branches):
        node = item.node
        if isinstance(node, _Group) and node.opener in ("(?=", "(?!", "(?<=", "(?<!"):
            return None
        if isinstance(node, _Atom) and (node.text in _END_ASSERTIONS or node.text in (r"\G", r"\A", "^")):
            return None
    suffix: list[str] = []
    for item in reversed(branches[0]):
        node = item.node
        if item.quantifier or not isinstance(node, _Atom):
            break
        text = node.text
        if len(text) == 1 and text not in ".^$":
            suffix.append(text)
        elif len(text) == 2 and text[0] == "\\" and not text[1].isalnum():
            suffix.append(text[1])
        else:
            break
    return "".join(reversed(suffix)) or None


if regex is not None:
    _FLAGS = regex.DOTALL
