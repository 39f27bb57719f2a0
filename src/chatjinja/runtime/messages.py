"""What a template sees: messages, tools and kwargs rebuilt from plain JSON types, as transformers 5.25.0 does."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

from .budget import check_input_depth, is_plain_checked

__all__ = [
    "REASONING_FIELDS",
    "alias_reasoning_fields",
    "message_objects_to_dicts",
    "normalize_chat_messages",
    "plain_messages",
    "plain_template_data",
]

# Names a message's reasoning is passed under. The first is the standard one that chat templates read.
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")

# Exact types every function here returns unchanged (the fast paths below test ``type(x) in``, so
# subclasses still take the general path).
_ATOMS = frozenset({str, int, float, bool, type(None)})


def alias_reasoning_fields(chat: list, seen: list | None = None) -> list:
    """Fill ``reasoning_content`` from older names for it, and ``thinking`` (read by gpt-oss templates).

    The new list (and any new message dict) is added to ``seen``: it holds the caller's data only.
    """
    aliased_chat = []
    for message in chat:
        if type(message) is dict and "reasoning_content" not in message and "thinking" not in message and "reasoning" not in message:
            pass  # fast path: a plain dict without any reasoning key is left as it is
        elif isinstance(message, dict):
            reasoning = next((message[key] for key in REASONING_FIELDS if message.get(key) is not None), None)
            if reasoning is not None:
                message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
                if seen is not None:
                    seen.append(message)
        aliased_chat.append(message)
    if seen is not None:
        seen.append(aliased_chat)
    return aliased_chat


def message_objects_to_dicts(value: Any) -> Any:
    """Dataclasses and pydantic models (and those nested in them) to dicts; everything else as it is."""
    tp = type(value)
    # fast paths for plain JSON data, same result as the general branches below
    if tp is dict:
        return {key: item if type(item) in _ATOMS else message_objects_to_dicts(item) for key, item in value.items()}
    elif tp is list:
        return [item if type(item) in _ATOMS else message_objects_to_dicts(item) for item in value]
    elif tp in _ATOMS:
        return value
    elif isinstance(value, Mapping):
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
    messages = getattr(conversation, "messages", conversation)
    if type(messages) is list and all(type(message) is dict for message in messages):
        # fast path, same result as below in one pass: convert each value, then drop it if it is None
        normalized_messages = []
        for message in messages:
            normalized = {}
            for key, value in message.items():
                if type(value) not in _ATOMS:
                    value = message_objects_to_dicts(value)
                if value is not None:
                    normalized[key] = value
            normalized_messages.append(normalized)
        return normalized_messages
    messages = message_objects_to_dicts(messages)
    normalized_messages = []
    for message in messages:
        if not isinstance(message, dict):
            raise TypeError(f"Chat messages should be dicts, dataclasses or pydantic models, but got {message!r}.")
        normalized_messages.append({key: value for key, value in message.items() if value is not None})
    return normalized_messages


def plain_messages(conversation: Any, max_input_depth: int | None = None, seen: list | None = None) -> list:
    """``plain_template_data(normalize_chat_messages(conversation))``, in one pass when the messages are plain dicts.

    What ``apply_chat_template`` hands the template: a new dict per message, holding the caller's
    values themselves where they are plain JSON data (the sandbox cannot mutate them) and plain
    copies of anything else. With ``max_input_depth``, the input depth budget is checked on the way
    (the message list is level 1, as in ``check_input_depth(..., start=-1)`` over a batch), and the
    containers the template gets are added to the list ``seen``.
    """
    messages = getattr(conversation, "messages", conversation)
    if (
        type(messages) is list
        and all(type(message) is dict for message in messages)
        and (max_input_depth is None or max_input_depth > 2)
    ):
        plain_messages = []
        for message in messages:
            plain = {}
            for key, value in message.items():
                if type(value) not in _ATOMS and not is_plain_checked(value, max_input_depth, "conversation", 2, seen):
                    if max_input_depth is not None:  # before copying: the copy recurses
                        check_input_depth(value, max_input_depth, "conversation", start=2)
                    value = plain_template_data(value)  # None exactly when normalising gives None
                if value is not None:
                    plain[key if type(key) is str else plain_template_data(key)] = value
            plain_messages.append(plain)
        if seen is not None:
            seen += plain_messages
            seen.append(plain_messages)
        return plain_messages
    if max_input_depth is not None:
        check_input_depth(conversation, max_input_depth, "conversation", start=0)
    return plain_template_data(normalize_chat_messages(conversation))


def _is_numpy_scalar(value: Any) -> bool:
    # numpy is not a dependency: a numpy scalar can only exist if the caller imported numpy
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.generic)


def plain_template_data(value: Any) -> Any:
    """Rebuild a value out of plain JSON types; anything else becomes an inert ``"<TypeName>"`` placeholder.

    Subclasses of str/int/float (enums, numpy scalars, ...) are stripped back to the base type, so
    no method of a caller's object is ever reachable from a template.
    """
    tp = type(value)
    if tp in _ATOMS:
        return value
    # fast paths for plain JSON data, same result as the general branches below
    elif tp is dict:
        return {
            key if type(key) is str else plain_template_data(key): item if type(item) in _ATOMS else plain_template_data(item)
            for key, item in value.items()
        }
    elif tp is list:
        return [item if type(item) in _ATOMS else plain_template_data(item) for item in value]
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
