"""What a template sees: messages, tools and kwargs rebuilt from plain JSON types, as transformers 5.24.0 does."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "REASONING_FIELDS",
    "alias_reasoning_fields",
    "message_objects_to_dicts",
    "normalize_chat_messages",
    "plain_template_data",
]

# Names a message's reasoning is passed under. The first is the standard one that chat templates read.
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def alias_reasoning_fields(chat: list) -> list:
    """Fill ``reasoning_content`` from older names for it, and ``thinking`` (read by gpt-oss templates)."""
    aliased_chat = []
    for message in chat:
        if isinstance(message, dict):
            reasoning = next((message[key] for key in REASONING_FIELDS if message.get(key) is not None), None)
            if reasoning is not None:
                message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        aliased_chat.append(message)
    return aliased_chat


def message_objects_to_dicts(value: Any) -> Any:
    """Dataclasses and pydantic models (and those nested in them) to dicts; everything else as it is."""
    if isinstance(value, Mapping):
        return {key: message_objects_to_dicts(item) for key, item in value.items()}
    elif isinstance(value, list):
        return [message_objects_to_dicts(item) for item in value]
    elif isinstance(value, tuple):
        return tuple(message_objects_to_dicts(item) for item in value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: message_objects_to_dicts(getattr(value, field.name)) for field in dataclasses.fields(value)}
    elif callable(getattr(value, "model_dump", None)):
        return message_objects_to_dicts(value.model_dump())
    else:
        return value


def normalize_chat_messages(conversation: Any) -> list[dict]:
    """Messages as dicts, with the keys whose value is ``None`` dropped (``content=None`` from OpenAI APIs)."""
    messages = message_objects_to_dicts(getattr(conversation, "messages", conversation))
    normalized_messages = []
    for message in messages:
        if not isinstance(message, dict):
            raise TypeError(f"Chat messages should be dicts, dataclasses or pydantic models, but got {message!r}.")
        normalized_messages.append({key: value for key, value in message.items() if value is not None})
    return normalized_messages


def _is_numpy_scalar(value: Any) -> bool:
    # numpy is not a dependency: a numpy scalar can only exist if the caller imported numpy
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.generic)


def plain_template_data(value: Any) -> Any:
    """Rebuild a value out of plain JSON types; anything else becomes an inert ``"<TypeName>"`` placeholder.

    Subclasses of str/int/float (enums, numpy scalars, ...) are stripped back to the base type, so
    no method of a caller's object is ever reachable from a template.
    """
    if value is None or type(value) in (str, int, float, bool):
        return value
    elif isinstance(value, str):
        return str.__str__(value)
    elif isinstance(value, int):
        return int.__int__(value)
    elif isinstance(value, float):
        return float.__float__(value)
    elif isinstance(value, Mapping):
        return {plain_template_data(key): plain_template_data(item) for key, item in value.items()}
    elif isinstance(value, list):
        return [plain_template_data(item) for item in value]
    elif isinstance(value, tuple):
        return tuple(plain_template_data(item) for item in value)
    elif _is_numpy_scalar(value):
        return plain_template_data(value.item())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: plain_template_data(getattr(value, field.name)) for field in dataclasses.fields(value)}
    elif callable(getattr(value, "model_dump", None)):
        return plain_template_data(value.model_dump())
    else:
        return f"<{type(value).__name__}>"
