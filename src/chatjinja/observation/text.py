"""Reading rendered text: the one marker lexer and the one common-prefix function of the modules that render to learn."""

from __future__ import annotations

import re

__all__ = [
    "MARKER", "MARKER_START", "common_prefix", "common_suffix", "first_marker", "first_unit", "last_marker",
    "last_unit", "marker_end", "marker_start", "markers", "without_partial_marker",
]

# A control marker as templates write them: ``<|im_start|>``, ``<think>``, ``</tool_call>``,
# ``<｜Assistant｜>``, ``[INST]``, ``[/TOOL_CALLS]``
MARKER = re.compile(r"<[^<>\n]{1,64}>|\[/?[A-Za-z_]{1,32}\]")
# The start of a marker cut off at the end of a text (``<|im_`` or ``[/INS``)
MARKER_START = re.compile(r"<[^<>\n]{0,64}$|\[/?[A-Za-z_]{0,32}$")


def markers(text: str) -> list[str]:
    """The markers in ``text``, in order."""
    return MARKER.findall(text)


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (compared in halves: fast on long texts)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:  # invariant: a[:lo] == b[:lo] and a[:hi+1] != b[:hi+1]... found by bisection
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: str, b: str) -> int:
    """The length of the longest common suffix of ``a`` and ``b``."""
    return common_prefix(a[::-1], b[::-1])


def _marker_around(text: str, i: int) -> "re.Match[str] | None":
    """The marker ``i`` falls strictly inside, if any."""
    for m in MARKER.finditer(text):
        if m.start() < i < m.end():
            return m
        if m.start() >= i:
            break
    return None


def marker_start(text: str, i: int) -> int:
    """``i``, moved back to where the marker it falls inside starts (a ``<`` two different markers share)."""
    m = _marker_around(text, i)
    return m.start() if m is not None else i


def marker_end(text: str, i: int) -> int:
    """``i``, moved on to where the marker it falls inside ends."""
    m = _marker_around(text, i)
    return m.end() if m is not None else i


def last_marker(text: str) -> str | None:
    """The marker ``text`` ends with (trailing whitespace aside), or None."""
    text = text.rstrip()
    found = [m for m in MARKER.finditer(text) if m.end() == len(text)]
    return found[-1].group() if found else None


def first_marker(text: str) -> str | None:
    """The marker ``text`` starts with (leading whitespace aside), or None."""
    m = MARKER.match(text.lstrip())
    return m.group() if m else None


def without_partial_marker(text: str) -> str:
    """``text`` without a marker it ends in the middle of (``</parameter>\\n<`` -> ``</parameter>\\n``)."""
    for opener, closer in (("<", ">"), ("[", "]")):
        at = text.rfind(opener)
        if at >= 0 and closer not in text[at:]:
            text = text[:at]
    return text


# A marker, a word and a marker: one unit of templates that spell their markers out (Kimi K3's
# ``<|open|>think<|sep|>``, ``<|close|>response<|sep|>``)
_UNIT = MARKER.pattern
FIRST_UNIT = re.compile(r"(?:" + _UNIT + r")[\w:.\-]+(?:" + _UNIT + r")")
LAST_UNIT = re.compile(r"(?:" + _UNIT + r")[\w:.\-]+(?:" + _UNIT + r")$")


def first_unit(text: str) -> str | None:
    """The marker-word-marker unit ``text`` starts with (``<|close|>think<|sep|>``), or None."""
    m = FIRST_UNIT.match(text.lstrip())
    return m.group() if m else None


def last_unit(text: str) -> str | None:
    """The marker-word-marker unit ``text`` ends with (``<|open|>response<|sep|>``), or None."""
    m = LAST_UNIT.search(text.rstrip())
    return m.group() if m else None
