"""GGUF files: the chat template(s) and special tokens in a GGUF's metadata, read without loading the model.

Keys read, as transformers 5.24.0 (``integrations/gguf/gguf_tokenizer_mapping.py``) and llama.cpp name them:
``tokenizer.chat_template`` (the default), ``tokenizer.chat_template.<name>`` (llama.cpp's named
templates, e.g. ``tool_use``; transformers ignores them), ``tokenizer.ggml.tokens`` with
``tokenizer.ggml.{bos,eos,unknown,padding}_token_id`` for the special-token strings, and
``tokenizer.ggml.add_bos_token`` / ``add_eos_token`` (a ``llama`` tokenizer without the flag adds BOS).

The metadata is read here, from a memory map, rather than with ``gguf.GGUFReader``: that reader
materialises every array element and every tensor record, about 7 s for a 150k-token vocabulary,
where this reader skips arrays and reads only the token strings it needs. The tests check it
field by field against ``gguf.GGUFReader`` on files written with ``gguf.GGUFWriter`` (extra ``[gguf]``).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import LoadError, TemplateNotFound
from ..template import ChatTemplate
from .selection import TemplateEntry, TemplateSet, select_template

__all__ = ["GGUF_MAGIC", "GgufMetadata", "GgufValue", "is_gguf_file", "load_gguf", "scan_gguf"]

GGUF_MAGIC = b"GGUF"
TEMPLATE_KEY = "tokenizer.chat_template"
_SPECIAL_TOKEN_IDS = {
    "bos_token": "tokenizer.ggml.bos_token_id",
    "eos_token": "tokenizer.ggml.eos_token_id",
    "unk_token": "tokenizer.ggml.unknown_token_id",
    "pad_token": "tokenizer.ggml.padding_token_id",
}

# GGUF value types (gguf.GGUFValueType): number -> (name, struct format or None)
_TYPES: dict[int, tuple[str, str | None]] = {
    0: ("uint8", "B"), 1: ("int8", "b"), 2: ("uint16", "H"), 3: ("int16", "h"), 4: ("uint32", "I"),
    5: ("int32", "i"), 6: ("float32", "f"), 7: ("bool", "?"), 8: ("string", None), 9: ("array", None),
    10: ("uint64", "Q"), 11: ("int64", "q"), 12: ("float64", "d"),
}
_INTEGERS = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"}


class _Truncated(Exception):
    pass


@dataclass(frozen=True)
class GgufValue:
    """One metadata value: its type name (``string``, ``uint32``, ``array``...), and the value.

    Scalars and strings are decoded; an array keeps its element type, length and byte offset, and
    :meth:`strings` reads its first elements on demand.
    """

    type: str
    value: Any = None
    element_type: str | None = None
    count: int = 0
    offset: int = 0

    def describe(self) -> str:
        if self.type == "array":
            return f"an array of {self.element_type}s"
        return f"{'an' if self.type[0] in 'aeiou' else 'a'} {self.type}"


class _Blob:
    def __init__(self, data: Any, endian: str) -> None:
        self.data, self.endian, self.size = data, endian, len(data)

    def unpack(self, fmt: str, pos: int) -> tuple[Any, int]:
        full = self.endian + fmt
        width = struct.calcsize(full)
        if pos + width > self.size:
            raise _Truncated
        return struct.unpack_from(full, self.data, pos)[0], pos + width

    def string(self, pos: int) -> tuple[bytes, int]:
        length, pos = self.unpack("Q", pos)
        if pos + length > self.size:
            raise _Truncated
        return bytes(self.data[pos : pos + length]), pos + length

    def skip_string(self, pos: int) -> int:
        length, pos = self.unpack("Q", pos)
        if pos + length > self.size:
            raise _Truncated
        return pos + length


def _value(blob: _Blob, kind: int, pos: int, where: str) -> tuple[GgufValue, int]:
    if kind not in _TYPES:
        raise LoadError(f"{where} has unknown GGUF value type {kind}", source_name=where.split(": ")[0])
    name, fmt = _TYPES[kind]
    if fmt is not None:
        value, pos = blob.unpack(fmt, pos)
        return GgufValue(name, value), pos
    if name == "string":
        raw, pos = blob.string(pos)
        return GgufValue("string", raw), pos
    element, pos = blob.unpack("I", pos)
    count, pos = blob.unpack("Q", pos)
    if element not in _TYPES or _TYPES[element][0] == "array":
        raise LoadError(f"{where} is an array of unsupported GGUF type {element}", source_name=where.split(": ")[0])
    element_name, element_fmt = _TYPES[element]
    start = pos
    if element_fmt is not None:
        pos += struct.calcsize(blob.endian + element_fmt) * count
        if pos > blob.size:
            raise _Truncated
    else:
        for _ in range(count):
            pos = blob.skip_string(pos)
    return GgufValue("array", None, element_name, count, start), pos


def _open(path: Path) -> tuple[Any, Any]:
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise LoadError(f"cannot read {path}: {exc.strerror or exc}", source_name=str(path)) from None
    try:
        if path.stat().st_size < 4 or handle.read(4) != GGUF_MAGIC:
            raise LoadError(f"{path} is not a GGUF file (it does not start with 'GGUF')", source_name=str(path))
        return handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except BaseException:
        handle.close()
        raise


class GgufMetadata:
    """Every metadata key of a GGUF file (values decoded except arrays), over a memory map; a context manager.

    Raises :class:`LoadError` for a file that is not GGUF, of an unknown version, or truncated.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._handle, self._data = _open(self.path)
        try:
            self.values = self._read()
        except _Truncated:
            self.close()
            raise LoadError(f"{self.path} is truncated: its metadata ends before the header says", source_name=str(self.path)) from None
        except BaseException:
            self.close()
            raise

    def _read(self) -> dict[str, GgufValue]:
        blob = _Blob(self._data, "<")
        version, pos = blob.unpack("I", 4)
        if version > 0xFFFF:  # a big-endian file (the version reads byte-swapped)
            blob = _Blob(self._data, ">")
            version, pos = blob.unpack("I", 4)
        if version not in (2, 3):
            raise LoadError(f"{self.path} has GGUF version {version}; versions 2 and 3 are supported", source_name=str(self.path))
        self._blob = blob
        _tensors, pos = blob.unpack("Q", pos)
        kv_count, pos = blob.unpack("Q", pos)
        values: dict[str, GgufValue] = {}
        for _ in range(kv_count):
            raw_key, pos = blob.string(pos)
            key = raw_key.decode("utf-8", errors="replace")
            kind, pos = blob.unpack("I", pos)
            values[key], pos = _value(blob, kind, pos, f"{self.path}: {key}")
        return values

    def strings(self, value: GgufValue, upto: int) -> list[str]:
        """The first ``upto`` elements of a string array."""
        out, at = [], value.offset
        try:
            for _ in range(min(upto, value.count)):
                raw, at = self._blob.string(at)
                out.append(raw.decode("utf-8", errors="replace"))
        except _Truncated:
            raise LoadError(f"{self.path} is truncated", source_name=str(self.path)) from None
        return out

    def close(self) -> None:
        self._data.close()
        self._handle.close()

    def __enter__(self) -> "GgufMetadata":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def is_gguf_file(path: Path) -> bool:
    """A ``.gguf`` name, or the GGUF magic in the first four bytes."""
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _string(metadata: dict[str, GgufValue], key: str, path: Path) -> str:
    value = metadata[key]
    if value.type != "string":
        raise LoadError(f"{key} in {path} is {value.describe()}, expected a string", source_name=str(path))
    try:
        return value.value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoadError(f"{key} in {path} is not UTF-8 (byte {exc.start})", source_name=str(path)) from None


def _scalar(metadata: dict[str, GgufValue], key: str, path: Path, kind: str) -> Any:
    value = metadata[key]
    ok = value.type == "bool" if kind == "bool" else value.type in _INTEGERS
    if not ok:
        raise LoadError(f"{key} in {path} is {value.describe()}, expected {'a bool' if kind == 'bool' else 'an integer'}",
                        source_name=str(path))
    return bool(value.value) if kind == "bool" else int(value.value)


def scan_gguf(path: str | Path) -> TemplateSet:
    """The chat template(s), special tokens and BOS/EOS flags in a GGUF file's metadata."""
    path = Path(path)
    with GgufMetadata(path) as gguf:
        return _scan(path, gguf)


def _scan(path: Path, gguf: GgufMetadata) -> TemplateSet:
    metadata = gguf.values
    templates: dict[str, TemplateEntry] = {}
    if TEMPLATE_KEY in metadata:
        templates["default"] = TemplateEntry("default", _string(metadata, TEMPLATE_KEY, path), path, TEMPLATE_KEY)
    for key in metadata:
        if key.startswith(TEMPLATE_KEY + "."):
            name = key[len(TEMPLATE_KEY) + 1 :]
            templates[name] = TemplateEntry(name, _string(metadata, key, path), path, key)

    special: dict[str, str] = {}
    token_ids = {name: key for name, key in _SPECIAL_TOKEN_IDS.items() if key in metadata}
    if token_ids:
        if "tokenizer.ggml.tokens" not in metadata:
            raise LoadError(f"{path} has special token ids but no tokenizer.ggml.tokens", source_name=str(path))
        tokens = metadata["tokenizer.ggml.tokens"]
        if tokens.type != "array" or tokens.element_type != "string":
            raise LoadError(f"tokenizer.ggml.tokens in {path} is {tokens.describe()}, expected an array of strings",
                            source_name=str(path))
        ids = {name: _scalar(metadata, key, path, "int") for name, key in token_ids.items()}
        for name, token_id in ids.items():
            if not 0 <= token_id < tokens.count:
                raise LoadError(
                    f"{token_ids[name]} in {path} is {token_id}, outside tokenizer.ggml.tokens (0..{tokens.count - 1})",
                    source_name=str(path),
                )
        vocabulary = gguf.strings(tokens, max(ids.values()) + 1)
        special = {name: vocabulary[token_id] for name, token_id in ids.items()}

    flags: dict[str, Any] = {"add_bos_token": None, "add_eos_token": None}
    tokenizer_model = _string(metadata, "tokenizer.ggml.model", path) if "tokenizer.ggml.model" in metadata else None
    for flag in ("add_bos_token", "add_eos_token"):
        key = f"tokenizer.ggml.{flag}"
        if key in metadata:
            flags[flag] = _scalar(metadata, key, path, "bool")
    if tokenizer_model == "llama" and flags["add_bos_token"] is None:
        flags["add_bos_token"] = True  # transformers and llama.cpp: a sentencepiece vocabulary adds BOS unless it says not
    elif tokenizer_model == "gemma4":
        flags["add_bos_token"] = False  # transformers: the template writes <bos> itself
    flags["tokenizer_model"] = tokenizer_model

    named = not (len(templates) == 1 and "default" in templates)
    rule = "GGUF metadata (tokenizer.chat_template" + (", named tokenizer.chat_template.<name> as llama.cpp reads them)" if named else ")")
    notes: tuple[str, ...] = ()
    if named and templates:
        notes = ("transformers' GGUF loader reads only tokenizer.chat_template; the named templates follow llama.cpp",)
    return TemplateSet(
        location=path, templates=templates, named=named, rule=rule, special_tokens=special, notes=notes, metadata=flags
    )


def load_gguf(path: str | Path, name: str | None = None) -> ChatTemplate:
    """The chat template of a GGUF file (``name`` picks ``tokenizer.chat_template.<name>``; ``default`` is the plain key)."""
    tset = scan_gguf(path)
    if not tset.templates:
        raise TemplateNotFound(f"no {TEMPLATE_KEY} in {path}", source_name=str(path))
    return select_template(tset, name)
