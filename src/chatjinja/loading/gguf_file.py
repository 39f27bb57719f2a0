"""GGUF files: the chat template(s) and special tokens in a GGUF's metadata, read without loading the model.

Keys read, as transformers 5.25.0 (``integrations/gguf/gguf_tokenizer_mapping.py``) and llama.cpp name them:
``tokenizer.chat_template`` (the default), ``tokenizer.chat_template.<name>`` (llama.cpp's named
templates, e.g. ``tool_use``; transformers ignores them), ``tokenizer.ggml.tokens`` with
``tokenizer.ggml.{bos,eos,unknown,padding}_token_id`` for the special-token strings, and
``tokenizer.ggml.add_bos_token`` / ``add_eos_token`` (a ``llama`` tokenizer without the flag adds BOS).
A file with a vocabulary (``tokenizer.ggml.model`` and ``tokens``) names itself as the template's
tokenizer (``metadata["tokenizer"]``), which ``chatjinja.training.gguf_tokenizer`` builds.

The reader is this module's own (no ``gguf`` package needed): it reads the header, walks the
key/value pairs and the tensor records in one forward pass through a chunk buffer, skips arrays by
their declared sizes (a string array by its length prefixes only, remembering where every 1024th
element starts) and never reads tensor data. Plain reads, not mmap: as fast here, and a file cut
short while it is read is an error rather than a SIGBUS. Every count and length is checked against
the bytes left in the file before anything is read or allocated, so a hostile or damaged file is one
:class:`LoadError` naming the file and the byte offset. It accepts no file that ``gguf.GGUFReader``
refuses (the test suite checks that, and that both read every value alike).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import LoadError, TemplateNotFound
from .record import TemplateRecord
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

# GGUF value types (gguf-py ``GGUFValueType``): code -> (name, struct format) for the fixed-size ones.
_SCALARS = {
    0: ("uint8", "B"), 1: ("int8", "b"), 2: ("uint16", "H"), 3: ("int16", "h"), 4: ("uint32", "I"),
    5: ("int32", "i"), 6: ("float32", "f"), 7: ("bool", "B"), 10: ("uint64", "Q"), 11: ("int64", "q"),
    12: ("float64", "d"),
}
_STRING, _ARRAY = 8, 9
_TYPE_NAMES = {**{code: name for code, (name, _fmt) in _SCALARS.items()}, _STRING: "string", _ARRAY: "array"}
_MIN_SIZE = {**{code: struct.calcsize(fmt) for code, (_name, fmt) in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}

# ggml tensor types: code -> (elements per block, bytes per block), as gguf-py 0.19's GGML_QUANT_SIZES
# (a test compares the two). The codes numpy reads natively may be 0-dimensional; the others not.
_TENSOR_TYPES = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 40),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
    23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18),
}
_SCALAR_TENSOR_TYPES = {0, 1, 24, 25, 26, 27, 28}  # F32, F16, I8, I16, I32, I64, F64

_CHUNK = 1 << 18  # bytes per read
_CHECKPOINT = 1024  # a string array remembers the offset of every 1024th element
_MAX_NAME = 65535  # the GGUF spec's bound on key lengths, also applied to tensor names
_MAX_NESTING = 8  # arrays of arrays of ... (llama.cpp writes none)
_MAX_DIMS = 4  # ggml's GGML_MAX_DIMS
_KEEP_STRING = 1 << 12  # string values longer than this (and not a template) are read on demand
_RESERVED_KEYS = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"}  # gguf.GGUFReader's own fields


@dataclass(frozen=True)
class GgufValue:
    """One metadata value: its type name (``string``, ``uint32``, ``array``...), and the value.

    Scalars are Python values and strings raw bytes (``None`` for a long string that is not a
    template: :meth:`GgufMetadata.read` reads it). An array keeps its element type, length and
    where its elements start; :meth:`GgufMetadata.element` and :meth:`GgufMetadata.read` read them.
    """

    type: str
    value: Any = None
    element_type: str | None = None
    count: int = 0
    offset: int = 0
    checkpoints: tuple[int, ...] = field(default=(), repr=False, compare=False)

    def describe(self) -> str:
        if self.type == "array":
            return f"an array of {self.element_type}s"
        return f"{'an' if self.type[0] in 'ai' else 'a'} {self.type}"  # a uint8, an int8


class _Reader:
    """Reads one open file forward through a chunk buffer, checking every length against the file size."""

    def __init__(self, handle: BinaryIO, size: int, path: Path) -> None:
        self.handle, self.size, self.path = handle, size, path
        self.buf, self.base, self.pos = b"", 0, 0
        self.byte_order("<")

    def byte_order(self, order: str) -> None:
        self.order = order
        self.u32, self.u64 = struct.Struct(order + "I"), struct.Struct(order + "Q")

    def fail(self, at: int, detail: str) -> LoadError:
        # key names come from the file: a control character in one is escaped, so the message stays one line
        detail = "".join(c if c.isprintable() else repr(c)[1:-1] for c in detail)
        return LoadError(f"{self.path} is truncated or damaged at byte {at}: {detail}", source_name=str(self.path))

    def _fill(self, n: int) -> None:
        self.handle.seek(self.pos)
        data = self.handle.read(min(max(n, _CHUNK), self.size - self.pos))
        if len(data) < n:  # the file shrank while it was read
            raise self.fail(self.pos + len(data), "the file ends here")
        self.buf, self.base = data, self.pos

    def take(self, n: int, what: str) -> bytes:
        at = self.pos
        if n > self.size - at:
            raise self.fail(at, f"{what} needs {n} bytes, the file has {self.size - at} left")
        rel = at - self.base
        if rel < 0 or rel + n > len(self.buf):
            if n > _CHUNK:
                self.handle.seek(at)
                data = self.handle.read(n)
                if len(data) < n:
                    raise self.fail(at + len(data), "the file ends here")
                self.pos = at + n
                return data
            self._fill(n)
            rel = 0
        self.pos = at + n
        return self.buf[rel : rel + n]

    def skip(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            raise self.fail(self.pos, f"{what} needs {n} bytes, the file has {self.size - self.pos} left")
        self.pos += n

    def uint32(self, what: str) -> int:
        return int(self.u32.unpack(self.take(4, what))[0])

    def uint64(self, what: str) -> int:
        return int(self.u64.unpack(self.take(8, what))[0])

    def name(self, what: str) -> str:
        """A key or tensor name: a length-prefixed UTF-8 string of at most 65535 bytes."""
        at = self.pos
        length = self.uint64(what)
        if length > _MAX_NAME:
            raise self.fail(at, f"{what} is {length} bytes long (at most {_MAX_NAME})")
        try:
            return self.take(length, what).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(at + 8 + exc.start, f"{what} is not UTF-8") from None

    def scalar(self, code: int, what: str) -> Any:
        name, fmt = _SCALARS[code]
        at = self.pos
        (value,) = struct.unpack(self.order + fmt, self.take(_MIN_SIZE[code], what))
        if name == "bool":
            if value > 1:
                raise self.fail(at, f"{what} is a bool stored as {value}, not 0 or 1")
            return bool(value)
        return value

    def value_type(self, what: str) -> int:
        at = self.pos
        code = self.uint32(f"the type of {what}")
        if code not in _TYPE_NAMES:
            raise self.fail(at, f"{what} has value type {code}, which GGUF does not define")
        return code

    def skip_strings(self, count: int, what: str) -> tuple[int, ...]:
        """Walk ``count`` length-prefixed strings without decoding them; the start of every 1024th."""
        checkpoints: list[int] = []
        unpack, size, done = self.u64.unpack_from, self.size, 0
        while done < count:
            if size - self.pos < 8:
                raise self.fail(self.pos, f"element {done} of {what} needs 8 bytes, the file has {size - self.pos} left")
            rel = self.pos - self.base
            if rel < 0 or rel + 8 > len(self.buf):
                self._fill(8)
                rel = 0
            buf, base, limit, length = self.buf, self.base, len(self.buf) - 8, 0
            while rel <= limit and done < count:
                if not done % _CHECKPOINT:
                    checkpoints.append(base + rel)
                length = unpack(buf, rel)[0]
                rel += 8 + length
                done += 1
            self.pos = base + rel
            if self.pos > size:
                start = self.pos - 8 - length
                raise self.fail(start, f"element {done - 1} of {what} is {length} bytes long, past the end of the file")
        return tuple(checkpoints)

    def skip_array(self, code: int, count: int, what: str, depth: int) -> tuple[int, ...]:
        """Step over the elements of an array whose header was just read; string arrays give checkpoints."""
        if count > (self.size - self.pos) // _MIN_SIZE[code]:
            raise self.fail(self.pos - 8, f"{what} declares {count} elements of type {_TYPE_NAMES[code]}, "
                                          f"more than the {self.size - self.pos} bytes left can hold")
        if code == _STRING:
            return self.skip_strings(count, what)
        if code == _ARRAY:
            if depth >= _MAX_NESTING:
                raise self.fail(self.pos, f"{what} nests arrays more than {_MAX_NESTING} deep")
            for index in range(count):
                inner = self.value_type(f"element {index} of {what}")
                self.skip_array(inner, self.uint64(f"the length of element {index} of {what}"), f"element {index} of {what}", depth + 1)
            return ()
        self.skip(count * _MIN_SIZE[code], what)
        return ()


class GgufMetadata:
    """Every metadata key of a GGUF file (versions 2 and 3, either byte order); a context manager.

    Raises :class:`LoadError` for a file that is not GGUF, of another version, or truncated or
    damaged anywhere up to the tensor data (whose extent is checked against the file size, unread).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        where = str(self.path)
        try:
            self._handle: BinaryIO | None = open(self.path, "rb")
            size = self.path.stat().st_size
        except OSError as exc:
            raise LoadError(f"cannot read {self.path}: {exc.strerror or exc}", source_name=where) from None
        try:
            self._reader = _Reader(self._handle, size, self.path)
            self.version, self.byte_order = self._header()
            self.values: dict[str, GgufValue] = self._key_values()
            self._tensors()
        except BaseException:
            self.close()
            raise

    def _header(self) -> tuple[int, str]:
        r = self._reader
        if r.size < 4 or r.take(4, "the magic") != GGUF_MAGIC:
            raise LoadError(f"{self.path} is not a GGUF file (it does not start with 'GGUF')", source_name=str(self.path))
        raw = r.take(4, "the version")
        version, order = struct.unpack("<I", raw)[0], "little"
        if not version & 0xFFFF:  # as gguf.GGUFReader: a version that only fits swapped is a big-endian file
            version, order = struct.unpack(">I", raw)[0], "big"
            r.byte_order(">")
        if version == 1:
            raise LoadError(f"{self.path} is GGUF version 1 (the 2023 draft with 32-bit lengths), which chatjinja "
                            "does not read: convert the model again with a current llama.cpp", source_name=str(self.path))
        if version not in (2, 3):
            raise LoadError(f"{self.path} is GGUF version {version}; chatjinja reads versions 2 and 3", source_name=str(self.path))
        self._tensor_count = r.uint64("the tensor count")
        self._kv_count = r.uint64("the key/value count")
        return version, order

    def _key_values(self) -> dict[str, GgufValue]:
        r, values = self._reader, {}
        if self._kv_count > (r.size - r.pos) // 13:  # the smallest entry: empty key, type, one byte
            raise r.fail(16, f"the header declares {self._kv_count} metadata entries, more than the file can hold")
        for index in range(self._kv_count):
            at = r.pos
            key = r.name(f"metadata key {index}")
            if key in values or key in _RESERVED_KEYS:
                raise r.fail(at, f"metadata key {key!r} appears twice" if key in values else f"metadata key {key!r} is reserved")
            code = r.value_type(key)
            values[key] = self._value(code, key)
        return values

    def _value(self, code: int, key: str) -> GgufValue:
        r = self._reader
        if code in _SCALARS:
            return GgufValue(_TYPE_NAMES[code], r.scalar(code, key))
        if code == _STRING:
            at = r.pos
            length = r.uint64(f"the length of {key}")
            if length > r.size - r.pos:
                raise r.fail(at, f"{key} is a string of {length} bytes, past the end of the file")
            if length <= _KEEP_STRING or key == TEMPLATE_KEY or key.startswith(TEMPLATE_KEY + "."):
                return GgufValue("string", r.take(length, key), count=length, offset=r.pos - length)
            r.skip(length, key)
            return GgufValue("string", None, count=length, offset=r.pos - length)
        element = r.value_type(f"the elements of {key}")
        count = r.uint64(f"the length of {key}")
        offset = r.pos
        checkpoints = r.skip_array(element, count, key, 0)
        return GgufValue("array", None, _TYPE_NAMES[element], count, offset, checkpoints)

    def _tensors(self) -> None:
        """Check the tensor records and that every tensor's data lies inside the file, without reading it."""
        r = self._reader
        if self._tensor_count > (r.size - r.pos) // 24:  # the smallest record: empty name, 0 dims, type, offset
            raise r.fail(8, f"the header declares {self._tensor_count} tensors, more than the file can hold")
        records, names = [], set()
        for index in range(self._tensor_count):
            at = r.pos
            name = r.name(f"the name of tensor {index}")
            if name in names:
                raise r.fail(at, f"tensor {name!r} appears twice")
            names.add(name)
            n_dims = r.uint32(f"the dimension count of tensor {name!r}")
            if n_dims > _MAX_DIMS:
                raise r.fail(r.pos - 4, f"tensor {name!r} has {n_dims} dimensions (ggml allows {_MAX_DIMS})")
            dims = [r.uint64(f"the dimensions of tensor {name!r}") for _ in range(n_dims)]
            kind = r.uint32(f"the type of tensor {name!r}")
            offset = r.uint64(f"the data offset of tensor {name!r}")
            records.append((at, name, dims, kind, offset))
        alignment = 32
        if "general.alignment" in self.values:
            value = self.values["general.alignment"]
            if value.type != "uint32" or not value.value or value.value & (value.value - 1):
                raise LoadError(f"general.alignment in {self.path} is {value.describe()} {value.value!r}, "
                                "expected a uint32 power of two", source_name=str(self.path))
            alignment = value.value
        start = r.pos + -r.pos % alignment
        for at, name, dims, kind, offset in records:
            if kind not in _TENSOR_TYPES:
                raise r.fail(at, f"tensor {name!r} has ggml type {kind}, which chatjinja does not know")
            block, block_bytes = _TENSOR_TYPES[kind]
            if kind not in _SCALAR_TENSOR_TYPES and (not dims or dims[0] % block):
                raise r.fail(at, f"tensor {name!r} of ggml type {kind} has shape {dims}, not whole blocks of {block}")
            elements = 1
            for dim in dims:
                elements *= dim
            end = start + offset + elements // block * block_bytes
            if any(dim >= 1 << 63 for dim in dims) or start + offset > r.size or end > r.size:
                raise r.fail(at, f"the data of tensor {name!r} (bytes {start + offset} to {end}) lies past the end of the file ({r.size} bytes)")

    def element(self, value: GgufValue, index: int) -> Any:
        """Element ``index`` of an array of scalars or strings (strings as bytes), read from the file."""
        r, code = self._reader, _type_code(value.element_type)
        if code in _SCALARS:
            r.pos = value.offset + index * _MIN_SIZE[code]
            return r.scalar(code, "an array element")
        r.pos = value.checkpoints[index // _CHECKPOINT]
        for _ in range(index % _CHECKPOINT):
            r.skip(r.uint64("a string length"), "a string")
        return r.take(r.uint64("a string length"), "a string")

    def read(self, value: GgufValue) -> Any:
        """The whole value: a scalar, the bytes of a string, or a list (nested for arrays of arrays)."""
        r = self._reader
        if value.type == "string":
            if value.value is not None:
                return value.value
            r.pos = value.offset
            return r.take(value.count, "a string")
        if value.type != "array":
            return value.value
        r.pos = value.offset
        return self._elements(_type_code(value.element_type), value.count)

    def _elements(self, code: int, count: int) -> list[Any]:
        r = self._reader
        if code in _SCALARS:
            return [r.scalar(code, "an array element") for _ in range(count)]
        if code == _STRING:
            return [r.take(r.uint64("a string length"), "a string") for _ in range(count)]
        items = []
        for _ in range(count):
            inner = r.value_type("an array element")
            items.append(self._elements(inner, r.uint64("an array length")))
        return items

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> "GgufMetadata":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _type_code(name: str | None) -> int:
    return next(code for code, known in _TYPE_NAMES.items() if known == name)


def is_gguf_file(path: Path) -> bool:
    """A ``.gguf`` name, or the GGUF magic in the first four bytes."""
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _string(gguf: GgufMetadata, key: str, path: Path) -> str:
    value = gguf.values[key]
    if value.type != "string":
        raise LoadError(f"{key} in {path} is {value.describe()}, expected a string", source_name=str(path))
    try:
        return gguf.read(value).decode("utf-8")
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
        templates["default"] = TemplateEntry("default", _string(gguf, TEMPLATE_KEY, path), path, TEMPLATE_KEY)
    for key in metadata:
        if key.startswith(TEMPLATE_KEY + "."):
            name = key[len(TEMPLATE_KEY) + 1 :]
            templates[name] = TemplateEntry(name, _string(gguf, key, path), path, key)

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
        special = {name: gguf.element(tokens, token_id).decode("utf-8", errors="replace") for name, token_id in ids.items()}

    flags: dict[str, Any] = {"add_bos_token": None, "add_eos_token": None}
    tokenizer_model = _string(gguf, "tokenizer.ggml.model", path) if "tokenizer.ggml.model" in metadata else None
    for flag in ("add_bos_token", "add_eos_token"):
        key = f"tokenizer.ggml.{flag}"
        if key in metadata:
            flags[flag] = _scalar(metadata, key, path, "bool")
    if tokenizer_model == "llama" and flags["add_bos_token"] is None:
        flags["add_bos_token"] = True  # transformers and llama.cpp: a sentencepiece vocabulary adds BOS unless it says not
    elif tokenizer_model == "gemma4":
        flags["add_bos_token"] = False  # transformers: the template writes <bos> itself
    flags["tokenizer_model"] = tokenizer_model
    if tokenizer_model is not None and "tokenizer.ggml.tokens" in metadata:
        flags["tokenizer"] = str(path)  # apply_chat_template(tokenize=True) tokenizes with the file's own vocabulary

    named = not (len(templates) == 1 and "default" in templates)
    rule = "GGUF metadata (tokenizer.chat_template" + (", named tokenizer.chat_template.<name> as llama.cpp reads them)" if named else ")")
    notes: tuple[str, ...] = ()
    if named and templates:
        notes = ("transformers' GGUF loader reads only tokenizer.chat_template; the named templates follow llama.cpp",)
    return TemplateSet(
        location=path, templates=templates, named=named, rule=rule, special_tokens=special, notes=notes, metadata=flags
    )


def load_gguf(path: str | Path, name: str | None = None) -> TemplateRecord:
    """The chat template of a GGUF file (``name`` picks ``tokenizer.chat_template.<name>``; ``default`` is the plain key)."""
    tset = scan_gguf(path)
    if not tset.templates:
        raise TemplateNotFound(f"no {TEMPLATE_KEY} in {path}", source_name=str(path))
    return select_template(tset, name)
