"""What a path names: the files of a model folder, and the refusal of template text that is a path."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import LoadError

__all__ = [
    "CHAT_TEMPLATE_DIR",
    "CHAT_TEMPLATE_FILE",
    "PROCESSOR_CHAT_TEMPLATE_FILE",
    "PROCESSOR_CONFIG_FILE",
    "SPECIAL_TOKENS_MAP_FILE",
    "TOKENIZER_CONFIG_FILE",
    "TOKENIZER_FILE",
    "has_jinja_syntax",
    "is_model_folder",
    "refuse_path",
]

CHAT_TEMPLATE_FILE = "chat_template.jinja"
CHAT_TEMPLATE_DIR = "additional_chat_templates"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
TOKENIZER_FILE = "tokenizer.json"
PROCESSOR_CHAT_TEMPLATE_FILE = "chat_template.json"
PROCESSOR_CONFIG_FILE = "processor_config.json"

_FOLDER_MARKERS = (CHAT_TEMPLATE_FILE, CHAT_TEMPLATE_DIR, TOKENIZER_CONFIG_FILE, PROCESSOR_CHAT_TEMPLATE_FILE, TOKENIZER_FILE)


def is_model_folder(path: Path) -> bool:
    return path.is_dir() and any((path / marker).exists() for marker in _FOLDER_MARKERS)


def has_jinja_syntax(text: str) -> bool:
    """Whether ``text`` holds ``{{``, ``{%`` or ``{#``: such a string is template source, never a path."""
    return "{{" in text or "{%" in text or "{#" in text


def refuse_path(text: str, what: str) -> None:
    """A string with no Jinja syntax that names an existing file (or model folder) is a mistaken path, never template text."""
    if has_jinja_syntax(text) or not os.path.exists(text):
        return
    if os.path.isfile(text):
        kind = "file"
    elif is_model_folder(Path(text)):
        kind = "model folder"
    else:  # "." or "/" is template text that happens to name a folder
        return
    raise LoadError(
        f"{what} {text!r} names an existing {kind} but a string is template source: load it with "
        f"chatjinja.load_template({text!r}) (or pass a pathlib.Path)",
        source_name=text,
    )
