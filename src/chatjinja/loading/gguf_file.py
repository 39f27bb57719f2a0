"""GGUF files: the chat template(s) and special tokens in a GGUF's metadata, read with the ``gguf`` package (extra ``[gguf]``).

Keys read, as transformers 5.24.0 (``integrations/gguf/gguf_tokenizer_mapping.py``) and llama.cpp name them:
``tokenizer.chat_template`` (the default), ``tokenizer.chat_template.<name>`` (llama.cpp's named
templates, e.g. ``tool_use``; transformers ignores them), ``tokenizer.ggml.tokens`` with
``tokenizer.ggml.{bos,eos,unknown,padding}_token_id`` for the special-token strings, and
``tokenizer.ggml.add_bos_token`` / ``add_eos_token`` (a ``llama`` tokenizer without the flag adds BOS).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import LoadError, TemplateNotFound
from ..template import ChatTemplate
from .selection import TemplateEntry, TemplateSet, select_template

__all__ = ["GGUF_MAGIC", "is_gguf_file", "load_gguf", "scan_gguf"]

GGUF_MAGIC = b"GGUF"
TEMPLATE_KEY = "tokenizer.chat_template"
_SPECIAL_TOKEN_IDS = {
    "bos_token": "tokenizer.ggml.bos_token_id",
    "eos_token": "tokenizer.ggml.eos_token_id",
    "unk_token": "tokenizer.ggml.unknown_token_id",
    "pad_token": "tokenizer.ggml.padding_token_id",
}


def is_gguf_file(path: Path) -> bool:
    """A ``.gguf`` name, or the GGUF magic in the first four bytes."""
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _reader(path: Path) -> Any:
    try:
        import gguf
    except ImportError:
        raise LoadError(
            f"reading {path} needs the gguf package: pip install 'chatjinja[gguf]'", source_name=str(path)
        ) from None
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise LoadError(f"cannot read {path}: {exc.strerror or exc}", source_name=str(path)) from None
    if magic != GGUF_MAGIC:
        raise LoadError(f"{path} is not a GGUF file (it does not start with 'GGUF')", source_name=str(path))
    try:
        return gguf.GGUFReader(path, "r")
    except Exception as exc:  # noqa: BLE001 - gguf raises ValueError, IndexError, numpy errors... on a bad file
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LoadError(f"{path} is truncated or not a valid GGUF file ({reason})", source_name=str(path)) from None


def _type_name(field: Any) -> str:
    names = [t.name.lower() for t in field.types]
    if names and names[0] == "array":
        return f"an array of {names[1] + 's' if len(names) > 1 else 'values'}"
    return f"a {names[0]}" if names else "an empty value"


def _string(field: Any, path: Path) -> str:
    import gguf

    if field.types != [gguf.GGUFValueType.STRING]:
        raise LoadError(f"{field.name} in {path} is {_type_name(field)}, expected a string", source_name=str(path))
    try:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoadError(f"{field.name} in {path} is not UTF-8 (byte {exc.start})", source_name=str(path)) from None


def _scalar(field: Any, path: Path, kind: str) -> Any:
    import gguf

    integer = {
        gguf.GGUFValueType.UINT8, gguf.GGUFValueType.INT8, gguf.GGUFValueType.UINT16, gguf.GGUFValueType.INT16,
        gguf.GGUFValueType.UINT32, gguf.GGUFValueType.INT32, gguf.GGUFValueType.UINT64, gguf.GGUFValueType.INT64,
    }
    ok = field.types == [gguf.GGUFValueType.BOOL] if kind == "bool" else (len(field.types) == 1 and field.types[0] in integer)
    if not ok:
        raise LoadError(f"{field.name} in {path} is {_type_name(field)}, expected {'a bool' if kind == 'bool' else 'an integer'}",
                        source_name=str(path))
    value = field.parts[field.data[0]][0]
    return bool(value) if kind == "bool" else int(value)


def _tokens(field: Any, path: Path) -> list[str]:
    import gguf

    if field.types != [gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.STRING]:
        raise LoadError(f"{field.name} in {path} is {_type_name(field)}, expected an array of strings", source_name=str(path))
    return [bytes(field.parts[i]).decode("utf-8", errors="replace") for i in field.data]


def scan_gguf(path: str | Path) -> TemplateSet:
    """The chat template(s), special tokens and BOS/EOS flags in a GGUF file's metadata."""
    path = Path(path)
    reader = _reader(path)
    fields = reader.fields
    templates: dict[str, TemplateEntry] = {}
    if TEMPLATE_KEY in fields:
        templates["default"] = TemplateEntry("default", _string(fields[TEMPLATE_KEY], path), path, TEMPLATE_KEY)
    for key in fields:
        if key.startswith(TEMPLATE_KEY + "."):
            name = key[len(TEMPLATE_KEY) + 1 :]
            templates[name] = TemplateEntry(name, _string(fields[key], path), path, key)

    special: dict[str, str] = {}
    token_ids = {name: fields[key] for name, key in _SPECIAL_TOKEN_IDS.items() if key in fields}
    if token_ids:
        if "tokenizer.ggml.tokens" not in fields:
            raise LoadError(f"{path} has special token ids but no tokenizer.ggml.tokens", source_name=str(path))
        tokens = _tokens(fields["tokenizer.ggml.tokens"], path)
        for name, field in token_ids.items():
            token_id = _scalar(field, path, "int")
            if not 0 <= token_id < len(tokens):
                raise LoadError(
                    f"{field.name} in {path} is {token_id}, outside tokenizer.ggml.tokens (0..{len(tokens) - 1})",
                    source_name=str(path),
                )
            special[name] = tokens[token_id]

    metadata: dict[str, Any] = {"add_bos_token": None, "add_eos_token": None}
    tokenizer_model = _string(fields["tokenizer.ggml.model"], path) if "tokenizer.ggml.model" in fields else None
    for flag in ("add_bos_token", "add_eos_token"):
        key = f"tokenizer.ggml.{flag}"
        if key in fields:
            metadata[flag] = _scalar(fields[key], path, "bool")
    if tokenizer_model == "llama" and metadata["add_bos_token"] is None:
        metadata["add_bos_token"] = True  # transformers and llama.cpp: a sentencepiece vocabulary adds BOS unless it says not
    elif tokenizer_model == "gemma4":
        metadata["add_bos_token"] = False  # transformers: the template writes <bos> itself
    metadata["tokenizer_model"] = tokenizer_model

    named = _named(templates)
    rule = "GGUF metadata (tokenizer.chat_template" + (", named tokenizer.chat_template.<name> as llama.cpp reads them)" if named else ")")
    notes = ()
    if named:
        notes = ("transformers' GGUF loader reads only tokenizer.chat_template; the named templates follow llama.cpp",)
    return TemplateSet(
        location=path, templates=templates, named=named, rule=rule, special_tokens=special, notes=notes, metadata=metadata
    )


def _named(templates: dict[str, TemplateEntry]) -> bool:
    return not (len(templates) == 1 and "default" in templates)


def load_gguf(path: str | Path, name: str | None = None) -> ChatTemplate:
    """The chat template of a GGUF file (``name`` picks ``tokenizer.chat_template.<name>``; ``default`` is the plain key)."""
    tset = scan_gguf(path)
    if not tset.templates:
        raise TemplateNotFound(f"no {TEMPLATE_KEY} in {path}", source_name=str(path))
    return select_template(tset, name)
