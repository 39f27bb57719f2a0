"""Reading rendered text: the one marker lexer and the one common-prefix function of the modules that render to learn."""

from __future__ import annotations

import re

__all__ = ["MARKER", "MARKER_START", "common_prefix", "markers"]

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
