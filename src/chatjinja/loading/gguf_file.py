"""GGUF files: the chat template(s) and special tokens in a GGUF's metadata, read without loading the model.

Keys read, as transformers 5.24.0 (``integrations/gguf/gguf_tokenizer_mapping.py``) and llama.cpp name them:
``tokenizer.chat_template`` (the default), ``tokenizer.chat_template.<name>`` (llama.cpp's named
templates, e.g. ``tool_use``; transformers ignores them), ``tokenizer.ggml.tokens`` with
``tokenizer.ggml.{bos,eos,unknown,padding}_token_id`` for the special-token strings, and
``tokenizer.ggml.add_bos_token`` / ``add_eos_token`` (a ``llama`` tokenizer without the flag adds BOS).

The metadata is read with the ``gguf`` package's ``GGUFReader`` (extra ``[gguf]``), imported only
when a GGUF file is loaded. It memory-maps the file but decodes every metadata array and tensor
record up front, so a model with a 150k-token vocabulary takes seconds to open; see the note in
COMPATIBILITY.md ("Loading").
"""

from __future__ import annotations

from dataclasses import dataclass, field
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

_INTEGERS = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"}


@dataclass(frozen=True)
class GgufValue:
    """One metadata value: its type name (``string``, ``uint32``, ``array``...), and the value.

    Scalars are Python values and strings raw bytes; an array keeps its element type and length,
    and :meth:`GgufMetadata.strings` reads its first elements on demand.
    """

    type: str
    value: Any = None
    element_type: str | None = None
    count: int = 0
    field: Any = field(default=None, repr=False, compare=False)

    def describe(self) -> str:
        if self.type == "array":
            return f"an array of {self.element_type}s"
        return f"{'an' if self.type[0] in 'aeiou' else 'a'} {self.type}"


def _complete(reader_field: Any) -> bool:
    """Whether every part of a field is as long as its header says.

    ``GGUFReader`` slices a memory map, and a slice past the end of a truncated file is silently
    shorter, so a cut-off string would read as a shorter string.
    """
    parts, types = reader_field.parts, reader_field.types

    def string_ok(at: int) -> bool:
        return at + 1 < len(parts) and parts[at].size == 1 and len(parts[at + 1]) == int(parts[at][0])

    if not string_ok(0) or len(parts) < 4 or not types:
        return False
    if types[0].name == "STRING":
        return len(parts) == 5 and string_ok(3)
    if types[0].name != "ARRAY":
        return len(parts) == 4 and parts[3].size == 1
    if len(parts) < 5 or parts[4].size != 1:
        return False
    count, items = int(parts[4][0]), parts[5:]
    if types[-1].name == "STRING":
        return len(items) == 2 * count and all(string_ok(5 + 2 * i) for i in range(count))
    return len(items) == count and all(item.size == 1 for item in items)


def _value(reader_field: Any) -> GgufValue:
    types = [t.name.lower() for t in reader_field.types]
    if not types:
        return GgufValue("unknown")
    if types[0] == "array":
        return GgufValue("array", None, types[-1], len(reader_field.data), reader_field)
    if types[0] == "string":
        return GgufValue("string", bytes(reader_field.parts[-1]))
    return GgufValue(types[0], reader_field.parts[-1].tolist()[0])


class GgufMetadata:
    """Every metadata key of a GGUF file, read with ``gguf.GGUFReader``; a context manager.

    Raises :class:`LoadError` for a file that is not GGUF, that ``gguf`` cannot read (truncated,
    unknown version), or when the ``gguf`` package is not installed.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        where = str(self.path)
        try:
            with open(self.path, "rb") as handle:
                magic = handle.read(4)
        except OSError as exc:
            raise LoadError(f"cannot read {self.path}: {exc.strerror or exc}", source_name=where) from None
        if magic != GGUF_MAGIC:
            raise LoadError(f"{self.path} is not a GGUF file (it does not start with 'GGUF')", source_name=where)
        try:
            from gguf import GGUFReader
        except ImportError:
            raise LoadError(
                f"reading {self.path} needs the gguf package: pip install 'chatjinja[gguf]'", source_name=where
            ) from None
        try:
            self._reader: Any = GGUFReader(where, "r")
        except Exception as exc:  # noqa: BLE001 - gguf raises ValueError, IndexError, struct errors...
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise LoadError(f"{self.path} is truncated or damaged: gguf cannot read it ({detail})", source_name=where) from None
        fields = [(key, f) for key, f in self._reader.fields.items() if not key.startswith("GGUF.")]
        declared = int(self._reader.fields["GGUF.kv_count"].parts[-1][0])
        if len(fields) != declared or not all(_complete(f) for _key, f in fields):
            raise LoadError(f"{self.path} is truncated or damaged: its metadata ends before the header says", source_name=where)
        self.values = {key: _value(f) for key, f in fields}

    def strings(self, value: GgufValue, upto: int) -> list[str]:
        """The first ``upto`` elements of a string array."""
        reader_field = value.field
        indices = reader_field.data[: min(upto, value.count)]
        return [bytes(reader_field.parts[index]).decode("utf-8", errors="replace") for index in indices]

    def close(self) -> None:
        self._reader = None

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
