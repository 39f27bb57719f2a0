"""Writing a response template into a model folder, where transformers and vLLM read a checkpoint's.

transformers 5.25 reads ``response_template`` from ``tokenizer_config.json`` (the tokenizer's init
kwargs: ``PreTrainedTokenizerBase.__init__`` pops it into ``tokenizer.response_template``, and
``save_pretrained`` writes it back there); vLLM 0.34's ``resolve_response_template`` reads
``tokenizer.response_template`` or ``tokenizer.init_kwargs["response_template"]``. Only that key of the
file changes: every other byte stays as it was.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..files import FileError, input_limit, json_text, read_capped, write_atomic

__all__ = ["write_response_template"]

_KEY = "response_template"


def write_response_template(folder: str | os.PathLike, template: dict[str, Any]) -> Path:
    """Set ``response_template`` in ``folder``'s ``tokenizer_config.json`` to ``template``; return the file's path.

    The file is rewritten atomically, byte for byte as it was except the key's value (the key is added
    last when absent). Raises :class:`chatjinja.FileError` when the folder has no ``tokenizer_config.json``
    or it is not a JSON object.
    """
    path = Path(folder) / "tokenizer_config.json"
    if not path.is_file():
        raise FileError(f"{folder} has no tokenizer_config.json: transformers and vLLM read a model's response "
                        "template from there")
    name, raw = read_capped(path, input_limit())
    try:
        text = raw.decode("utf-8")
        config = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FileError(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise FileError(f"{name} is not a JSON object")
    write_atomic(path, _with_key(text, template))
    return path


def _with_key(text: str, value: Any) -> str:
    """``text`` (a JSON object) with the top-level ``response_template`` set to ``value``, every other byte kept."""
    decoder = json.JSONDecoder()
    at = text.index("{") + 1
    spans: list[tuple[int, int, str]] = []  # (value start, value end, the key's line indent)
    last_end, indent = None, "  "
    while True:
        at = _skip_blank(text, at)
        if text[at] == "}":
            break
        if text[at] == ",":
            at += 1
            continue
        key_start = at
        key, at = json.decoder.scanstring(text, at + 1)
        at = _skip_blank(text, at) + 1  # past ':'
        at = _skip_blank(text, at)
        _, end = decoder.raw_decode(text, at)
        line_start = text.rfind("\n", 0, key_start) + 1
        key_indent = text[line_start:key_start] if not text[line_start:key_start].strip() else ""
        if key_indent:
            indent = key_indent
        if key == _KEY:
            spans.append((at, end, key_indent))
        last_end, at = end, end
    if spans:
        for start, end, key_indent in reversed(spans):  # a repeated key: every copy (the last is the one read)
            text = text[:start] + _dumped(value, key_indent) + text[end:]
        return text
    entry = json.dumps(_KEY) + ": " + _dumped(value, indent if "\n" in text.strip() else "")
    if last_end is None:  # {}
        close = text.rindex("}")
        return text[:close] + entry + text[close:]
    separator = ",\n" + indent if "\n" in text.strip() else ", "
    return text[:last_end] + separator + entry + text[last_end:]


def _skip_blank(text: str, at: int) -> int:
    while text[at] in " \t\r\n":
        at += 1
    return at


def _dumped(value: Any, indent: str) -> str:
    """``value`` as JSON, indented as a value of a key written at ``indent`` (one line when the file is one)."""
    if not indent:
        return json_text(value)
    return json_text(value, indent=2).replace("\n", "\n" + indent)
