"""A reply format, as the analysis of a template's renders describes it, and the emitters that write it for
each parser that reads a response template: transformers' ``parse_response`` and vLLM's generic parser.

:class:`ReplyFormat` holds what the analysis found (``chatjinja.serving.derive``: the start anchor, the
reasoning, content and call fields, and the facts about the reply that tie them together: a close a
mode's prompt writes alone, a reasoning close the history writes before an answer, the role a channel
header names). :func:`to_transformers` is the only place that turns it into the dict transformers'
parser reads: the rules across fields live here, not in the analysis. :func:`to_vllm` writes the same
format under vLLM's field names and rules, or says why it cannot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..observation import MARKER

__all__ = ["ReplyFormat", "Unexpressible", "to_transformers", "to_vllm", "uncaptured"]


@dataclass(frozen=True)
class ReplyFormat:
    """One way a reply may be written: the fields (regions of the reply) and the facts that tie them together."""

    anchor: str  # where the reply starts: the generation prompt every mode writes
    content: dict[str, Any]  # the content field (implicit: anything outside the other fields, or opened by a marker)
    reasoning: dict[str, Any] | None = None
    calls: dict[str, Any] | None = None
    stray_closes: tuple[str, ...] = ()  # close markers a mode's prompt writes alone after the anchor (GLM's </think>)
    lone_close: bool = False  # the history writes the reasoning's close alone before an answer (MiniMax M3)
    role: str = ""  # the role the generation prompt names last: a recipient that is no field's (gpt-oss)
    message_end: bool = False  # the reasoning's close ends a message the content replies never close so (glimmer)


def uncaptured(pattern: str) -> str:
    """``pattern`` without its named groups (and a repeated name, ``(?P=name)``, as any name)."""
    return re.sub(r"\(\?P<\w+>", "(?:", pattern.replace("(?P=name)", r"[\w.\-]+"))


# A search for a pattern that starts with optional whitespace tries every position of a run of spaces
# and scans the rest of the run from each: quadratic in a hostile reply of blank lines. The leftmost
# match of such a pattern starts where the search starts or right after a non-space (a match inside a
# run extends back to the run's start), so this guard, in front, gives the same match, at linear cost.
# (transformers reads patterns with the `regex` module, which has \G: where the search started.)
_RUN_START = r"(?:\G|(?<!\s))"


def _guard_whitespace(value: Any) -> Any:
    """``value`` (a field or the template) with every ``*pattern`` that starts with ``\\s*`` guarded by :data:`_RUN_START`."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key.endswith("pattern") and isinstance(item, str) and item.startswith((r"\s*", r"(?=\s*")):
                item = _RUN_START + item
            out[key] = _guard_whitespace(item)
        return out
    if isinstance(value, list):
        return [_guard_whitespace(item) for item in value]
    return value


def _ends_at_an_open(reasoning: dict[str, Any], others: list[dict[str, Any]]) -> dict[str, Any]:
    """A reasoning region the model never closes ends where a call or an explicit content opens (llama.cpp
    reads ``<think>I'll call it<tool_call>...`` so; Kimi K3 writes ``<|open|>response<|sep|>`` with no
    thinking); a call written inside a reasoning closed later stays reasoning. The lookahead checks the
    text up to the next such open or the close only, so the scan stays linear in the reply."""
    opens = [uncaptured(f.get("open_pattern") or re.escape(f["open"])) for f in others if "open" in f or "open_pattern" in f]
    if not opens or ("close" not in reasoning and "close_pattern" not in reasoning):
        return reasoning
    close = reasoning.get("close_pattern") or re.escape(reasoning["close"])
    opener = "|".join("(?:" + o + ")" for o in opens)
    unclosed = r"(?=(?:" + opener + r")(?:(?!" + opener + r"|" + close + r")[\s\S])*+(?:(?:" + opener + r")|\Z))"
    out = {key: value for key, value in reasoning.items() if key not in ("close", "close_pattern")}
    out["close_pattern"] = r"(?:" + close + r")|" + unclosed
    return out


_UNIT_PARTS = re.compile(r"(" + MARKER.pattern + r")(\w+)(" + MARKER.pattern + r")")


def _channels(role: str, content: dict, reasoning: dict | None, tools: dict | None) -> tuple[dict, dict | None, dict | None]:
    """A header whose one word says which field the message is (gpt-oss's ``<|channel|>analysis<|message|>``
    for reasoning, ``<|channel|>final<|message|>`` for content): the two opens differ in that word only.
    A model writes more in a header than the template does (``<|constrain|>json``, a recipient
    ``to=functions.f`` before or after the channel, another channel for its content): every header
    then reads as far as the header's close on its line, and a header naming a recipient is a call's
    (a recipient other than the role of the turn, ``to=python``, is no field's)."""
    if reasoning is None or "open" not in reasoning or "open" not in content:
        return content, reasoning, tools
    mine, theirs = _UNIT_PARTS.fullmatch(content["open"]), _UNIT_PARTS.fullmatch(reasoning["open"])
    if mine is None or theirs is None or (mine.group(1), mine.group(3)) != (theirs.group(1), theirs.group(3)):
        return content, reasoning, tools
    head, word, close = re.escape(mine.group(1)), re.escape(theirs.group(2)), re.escape(mine.group(3))
    rest = r"(?:(?!" + close + r"|to=)[^\n])*" + close
    no_recipient = r"(?<!to=(?!" + re.escape(role) + r"\b)[\w.\-]{1,64})" if role else ""
    reasoning = {**{k: v for k, v in reasoning.items() if k != "open"}, "open_pattern": no_recipient + head + word + r"\b" + rest}
    content = {**{k: v for k, v in content.items() if k != "open"},
               "open_pattern": no_recipient + head + r"(?!" + word + r"\b)\w+\b" + rest}
    if tools is not None and "open_pattern" in tools and "(?P<name>" in tools["open_pattern"]:
        at = tools["open_pattern"].index("(?P<name>")
        name_end = tools["open_pattern"].index(")", at) + 1
        tools = {**tools, "open_pattern": tools["open_pattern"][:name_end] + r"(?:(?!" + close + r")[^\n])*" + close}
    return content, reasoning, tools


def to_transformers(reply: ReplyFormat) -> dict[str, Any]:
    """``reply`` as transformers' ``response_template``: the fields, and what one field's markers mean for
    another's (a reasoning that ends where a call opens, a stray close that ends the answer, a channel
    header read loosely), every pattern guarded against runs of whitespace."""
    anchor, content, reasoning, tools = reply.anchor, reply.content, reply.reasoning, reply.calls
    stray, lone_close, role, message_end = reply.stray_closes, reply.lone_close, reply.role, reply.message_end
    content, reasoning, tools = _channels(role, content, reasoning, tools)
    if reasoning is not None and message_end and MARKER.fullmatch(reasoning.get("close", "")) \
            and ("open" in content or "open_pattern" in content) and "close_pattern" in content:
        # the end of a reasoning message ends a content message too (glimmer's <|eom|>): what follows is in no field
        content = {**content, "close_pattern": r"\s*" + re.escape(reasoning["close"]) + "|" + content["close_pattern"]}
    elif reasoning is not None and not lone_close and MARKER.fullmatch(reasoning.get("close", "")) \
            and "open" not in content and "open_pattern" not in content:
        # a reasoning close where no reasoning is open ends the answer (gemma 4's "answer<channel|>"):
        # llama.cpp drops such a stray close, and transformers' parser has no field to drop it into
        stray_close = r"\s*" + re.escape(reasoning["close"]) + r"[\s\S]*"
        content = {**content, "close_pattern": stray_close + ("|" + content["close_pattern"] if "close_pattern" in content else "")}
    fields: dict[str, Any] = {}
    if reasoning is not None and lone_close and "open" in reasoning and "close" in reasoning:
        # the history writes the reasoning's close alone before the answer (MiniMax M3 "</mm:think>answer"):
        # at the start of the reply it closes an empty reasoning, not a text of the content
        rest = {k: v for k, v in reasoning.items() if k != "open"}
        reasoning = {"open_pattern": re.escape(reasoning["open"]) + r"|\A\s*+(?=" + re.escape(reasoning["close"]) + ")",
                     **rest}
    if reasoning is not None:
        fields["reasoning_content"] = _ends_at_an_open(reasoning, [f for f in (tools, content) if f is not None])
    if tools is not None:
        fields["tool_calls"] = tools
    fields["content"] = content
    head: dict[str, Any] = {"start_anchor": anchor}
    if stray:
        head = {"start_anchor_pattern": re.escape(anchor) + r"(?:\s*(?:" + "|".join(map(re.escape, stray)) + r"))?"}
    return _guard_whitespace({"defaults": {"role": "assistant"}, **head, "fields": fields})


class Unexpressible(ValueError):
    """A target's parser cannot express a reply format; the message says what in one line."""


# vLLM 0.34's generic parser (--reasoning-parser hf / --tool-call-parser hf) routes three fields only,
# and streams the reasoning and the content as they come, so both must be plain text (no transform, no
# join): vllm/parser/response_template.py, validate_response_template_for_serving. The rest of its
# loader is transformers' (vllm/parser/chat_parsing is a copy of transformers.utils.chat_parsing).
_VLLM_FIELDS = {"reasoning_content": "thinking", "content": "content", "tool_calls": "tool_calls"}
_VLLM_TEXT_FIELDS = ("thinking", "content")


def to_vllm(reply: ReplyFormat) -> dict[str, Any]:
    """``reply`` as the ``response_template`` vLLM 0.34's generic parser reads: transformers' template with
    the reasoning in ``thinking``; raises :class:`Unexpressible` when a field needs what vLLM cannot stream."""
    template = to_transformers(reply)
    fields: dict[str, Any] = {}
    for name, field in template["fields"].items():
        if name not in _VLLM_FIELDS:  # to_transformers writes no other field today: a new one must be mapped here
            raise Unexpressible(f"vLLM reads no {name!r} field (only thinking, content and tool_calls)")
        fields[_VLLM_FIELDS[name]] = field
    for name in _VLLM_TEXT_FIELDS:
        field = fields.get(name)
        if field is None:
            continue
        what = "reasoning" if name == "thinking" else "content"
        if field.get("content", "text") != "text":
            raise Unexpressible(f"vLLM streams the {what} as plain text, and this format reads it as {field['content']}")
        for key in ("transform", "join"):
            if key in field:
                raise Unexpressible(f"vLLM streams the {what} as it comes, and this format's {what} needs a {key}")
    if set(template.get("defaults", {})) - {"role"}:
        raise Unexpressible("vLLM takes only a default role")
    return {**template, "fields": fields}
