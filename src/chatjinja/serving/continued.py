"""The whole message when the model continued a prefilled assistant message (``continue_final_message``).

The prompt ends inside the message, so reading the prompt and the reply with the response template gives
back the message with its prefill (``"Hello, "`` + ``"world!"``). What the template does not write into
the prompt cannot be read from it: many templates drop a message's reasoning when it is not the last
turn's, or always (DeepSeek R1, Kimi K2, granite 3.3). The request still holds it; a server returns the
message it continued, so a field the reading leaves empty is the prefilled message's.
"""

from __future__ import annotations

from typing import Any

__all__ = ["continued_message"]

_FIELDS = ("reasoning_content", "content")
_ALIASES = {"reasoning_content": ("reasoning_content", "reasoning", "thinking")}


def continued_message(parsed: dict[str, Any], prefilled: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    """``parsed`` (what ``parse_response`` read after a ``continue_final_message`` prompt) with the text fields
    it left empty taken from ``prefilled``, the assistant message the model continued, where ``template``
    (the response template that read it) has a field for them: a template without reasoning has no
    reasoning to keep (as llama.cpp keeps it). Calls are never taken from the prefill: the model writes
    its own."""
    fields = template.get("fields", {}) if isinstance(template, dict) else {}
    out = dict(parsed)
    for field in _FIELDS:
        if out.get(field) or field not in fields:
            continue
        for name in _ALIASES.get(field, (field,)):
            value = prefilled.get(name)
            if isinstance(value, str) and value:
                out[field] = value
                break
    return out
