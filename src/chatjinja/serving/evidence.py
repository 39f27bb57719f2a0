"""Markers a model writes that no render of the suite shows: what each mode's generation prompt prefills,
what the template source strips or only describes, and a model folder's added tokens.

Templates often drop the reasoning from the history (``content.split('</think>')``), describe the format
in a system prompt (``[THINK]...[/THINK]``, ``<think></think>``) or leave calls to the tokenizer
(LFM2 writes ``<|tool_call_start|>[f(x=1)]<|tool_call_end|>`` and its template never renders a call).
The markers come in pairs named alike (``<x>``/``</x>``, ``[X]``/``[/X]``, ``<|x_start|>``/``<|x_end|>``,
``<|START_X|>``/``<|END_X|>``, ``<|x>``/``<x|>``); which pair holds reasoning or calls is read from the
name (``think``, ``thought``, ``reason``; ``tool_call``) only when no render wrote it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..observation import MARKER, last_marker

__all__ = ["Pair", "call_pair", "closer_of", "marker_pairs", "prefilled", "reasoning_pairs"]

_OPEN_WORDS = ("start", "begin", "open")
_CLOSE_WORDS = ("end", "close")
_REASONING_WORDS = ("think", "thought", "reason")
_CALL_WORDS = ("tool_call", "toolcall", "function_call")
_NOT_CALL_WORDS = ("response", "result", "output", "list", "def", "declare")


@dataclass(frozen=True)
class Pair:
    """An open marker and the close marker named like it."""

    open: str
    close: str

    @property
    def name(self) -> str:
        return _shape(self.open)[0]


def _shape(marker: str) -> tuple[str, str | None]:
    """(the marker's base name, ``"open"``/``"close"`` or None): ``<|tool_call_end|>`` -> (``tool_call``, close)."""
    inner = marker[1:-1]
    role: str | None = None
    if inner.startswith("/"):
        role, inner = "close", inner[1:]
    elif marker.startswith("<|") and marker.endswith(">") and not marker.endswith("|>"):
        role = "open"  # gemma's <|channel> ... <channel|>
    elif marker.endswith("|>") and not marker.startswith("<|"):
        role = "close"
    name = re.sub(r"[|｜]", "", inner).split()[0] if inner.strip("|｜ ") else ""
    name = name.replace("▁", "_").lower()
    parts = [p for p in re.split(r"_", name) if p]
    for words, kind in ((_OPEN_WORDS, "open"), (_CLOSE_WORDS, "close")):
        if parts and parts[-1] in words and len(parts) > 1:
            role, parts = role or kind, parts[:-1]
        elif parts and parts[0] in words and len(parts) > 1:
            role, parts = role or kind, parts[1:]
    return "_".join(parts), role


def marker_pairs(found: list[str] | tuple[str, ...]) -> list[Pair]:
    """The open/close pairs among ``found`` (in order of the open's first appearance)."""
    shapes = {m: _shape(m) for m in dict.fromkeys(found) if MARKER.fullmatch(m)}
    pairs = []
    for marker, (name, role) in shapes.items():
        if role == "close" or not name:
            continue
        for other, (other_name, other_role) in shapes.items():
            if other != marker and other_name == name and other_role == "close" and _same_kind(marker, other):
                pairs.append(Pair(marker.split()[0] + (">" if " " in marker else ""), other))
                break
    return pairs


def _same_kind(a: str, b: str) -> bool:
    return a[0] == b[0] and ("|" in a) == ("|" in b) and ("｜" in a) == ("｜" in b)


def closer_of(opener: str, found: list[str] | tuple[str, ...]) -> str | None:
    """The close marker among ``found`` named like ``opener``."""
    for pair in marker_pairs([opener, *found]):
        if pair.open == opener:
            return pair.close
    return None


def reasoning_pairs(found: list[str] | tuple[str, ...]) -> list[Pair]:
    """Pairs whose name speaks of thinking (``<think>``/``</think>``, ``[THINK]``/``[/THINK]``)."""
    return [p for p in marker_pairs(found) if any(word in p.name for word in _REASONING_WORDS)]


def call_pair(found: list[str] | tuple[str, ...]) -> Pair | None:
    """The pair whose name says it holds one or more calls (``<|tool_call_start|>``/``<|tool_call_end|>``)."""
    for pair in marker_pairs(found):
        if any(word in pair.name for word in _CALL_WORDS) and not any(word in pair.name for word in _NOT_CALL_WORDS):
            return pair
    return None


def prefilled(rest: str) -> tuple[str | None, str | None]:
    """What a generation prompt writes after the start anchor, read as a reasoning region: (its open, its
    close). ``<think>`` opens one (the model writes the reasoning); ``<think></think>`` or
    ``<|channel>thought\\n<channel|>`` is an empty one (both markers known); ``</think>`` alone closes one."""
    rest = rest.strip()
    found = MARKER.findall(rest)
    if not found:
        return None, None
    if len(found) == 1:
        marker = found[0]
        if not rest.startswith(marker) or rest[len(marker):].strip():
            return None, None
        return (None, marker) if _shape(marker)[1] == "close" else (marker, None)
    close = last_marker(rest)
    head = rest[: len(rest) - len(close)].strip() if close else ""
    if close and rest.startswith(found[0]) and len(MARKER.findall(head)) == 1 and "\n" not in head.strip() \
            and closer_of(found[0], [close]) == close:
        return head, close
    return None, None
