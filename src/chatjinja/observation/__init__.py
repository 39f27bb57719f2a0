"""One way to observe a template: the conversation space (``space``) rendered by one guarded render
helper (``render``), with provenance when asked for, read with one marker lexer and one common-prefix
function (``text``). Everything that renders a template to learn what it does draws from here."""

from __future__ import annotations

from .render import OUTPUT_LIMIT, PROBE_BUDGETS, SPECIAL_TOKENS, Outcome, observe, render_text
from .space import CLIENT_SHAPES, MODE_SHAPES, PROBE_SHAPES, Member, Space, build_space, needle_for, probe_conversations
from .text import (MARKER, MARKER_START, common_prefix, common_suffix, first_marker, first_unit, last_marker,
                   last_unit, marker_end, marker_start, markers, without_partial_marker)

__all__ = [
    "CLIENT_SHAPES", "MARKER", "MARKER_START", "MODE_SHAPES", "Member", "OUTPUT_LIMIT", "Outcome", "PROBE_BUDGETS",
    "PROBE_SHAPES", "SPECIAL_TOKENS", "Space", "build_space", "common_prefix", "common_suffix", "first_marker",
    "first_unit", "last_marker", "last_unit", "marker_end", "marker_start", "markers", "needle_for", "observe", "probe_conversations",
    "render_text", "space_of", "without_partial_marker",
]


def space_of(source: str, *, modes: bool = True) -> Space:
    """The conversation space of a template source, with the modes the analyser finds (none when it cannot parse it)."""
    found: tuple = ()
    if modes:
        from ..analysis import modes_of  # lazy: the analyser's parser (Lark) is loaded only when modes are asked for

        found = modes_of(source)
    return build_space(source, found)
