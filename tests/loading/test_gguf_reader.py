"""chatjinja's GGUF metadata reader against gguf.GGUFReader (the oracle): real and generated files, damaged copies, fuzzing.

The rule for every file: either chatjinja refuses it with one ``LoadError`` line naming the file (and,
for a damaged file, the byte offset), or GGUFReader reads it too and every value agrees.
"""

from __future__ import annotations

import math
import random
import re
import struct
import sys
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatjinja import LoadError, load_template
from chatjinja.loading import gguf_file, scan_gguf
from chatjinja.loading.gguf_file import GgufMetadata

from ..conftest import SHARED

gguf = pytest.importorskip("gguf", reason="the differential GGUF tests need the gguf package as the oracle (pip install 'chatjinja[gguf]')")
np = pytest.importorskip("numpy", reason="gguf needs numpy")

REAL = SHARED / "gguf"
RESERVED = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"}


# --- the oracle --------------------------------------------------------------------------------------


def _flat(items: Any) -> list[Any]:
    if isinstance(items, list):
        return [leaf for item in items for leaf in _flat(item)]
    return [items]


def _same(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, float) and isinstance(theirs, float) and math.isnan(ours):
        return math.isnan(theirs)
    return type(ours) is type(theirs) and ours == theirs


def _theirs(reader_field: Any) -> Any:
    """A field's value from GGUFReader's parts: scalars as Python values, strings as bytes, arrays flat."""
    if reader_field.types[0] == gguf.GGUFValueType.STRING:
        return bytes(reader_field.parts[-1])
    if reader_field.types[0] != gguf.GGUFValueType.ARRAY:
        return reader_field.parts[-1].tolist()[0]
    if reader_field.types[-1] == gguf.GGUFValueType.STRING:
        return [bytes(reader_field.parts[index]) for index in reader_field.data]
    return [reader_field.parts[index].tolist()[0] for index in reader_field.data]


def read_all(path: Path) -> dict[str, Any]:
    """Everything chatjinja reads from a GGUF, in the oracle's shape (raises LoadError for a bad file)."""
    with GgufMetadata(path) as ours:
        values = {}
        for key, value in ours.values.items():
            if value.type == "array":
                items = ours.read(value)
                assert len(items) == value.count, key
                if value.element_type != "array":
                    for index in sorted({0, 1, 1023, 1024, 1025, 4097, value.count // 2, value.count - 1}):
                        if 0 <= index < value.count:
                            assert _same(ours.element(value, index), items[index]), (key, index)
                values[key] = ("array", value.element_type if value.count else None, _flat(items))
            else:
                values[key] = (value.type, None, ours.read(value))
        return {"version": ours.version, "byte_order": ours.byte_order, "values": values}


def oracle(path: Path) -> dict[str, Any]:
    """The same from gguf.GGUFReader (raises whatever it raises)."""
    reader = gguf.GGUFReader(str(path), "r")
    values = {}
    for key, reader_field in reader.fields.items():
        if key in RESERVED:
            continue
        types = [t.name.lower() for t in reader_field.types]
        element = (types[1] if len(types) > 1 else None) if types[0] == "array" else None
        values[key] = (types[0], element, _theirs(reader_field))
    return {"version": int(reader.fields["GGUF.version"].parts[0][0]), "byte_order": reader.endianess.name.lower(), "values": values}


def assert_agrees(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert ours["version"] == theirs["version"] and ours["byte_order"] == theirs["byte_order"]
    assert list(ours["values"]) == list(theirs["values"])
    for key, (kind, element, value) in ours["values"].items():
        their_kind, their_element, their_value = theirs["values"][key]
        assert kind == their_kind, key
        if their_element is not None:  # GGUFReader loses the element type of an empty array
            assert element == their_element, key
        if kind == "array":
            assert len(value) == len(their_value) and all(_same(a, b) for a, b in zip(value, their_value)), key
        else:
            assert _same(value, their_value), key


def assert_refused(path: Path, error: LoadError, offset: bool = True) -> None:
    message = str(error)
    assert "\n" not in message and str(path) in message and error.source_name == str(path), message
    if offset:
        assert re.search(r" at byte \d+: ", message) or "is not a GGUF file" in message or "GGUF version" in message, message


def check(path: Path) -> str:
    """The rule: refused with one clear line, or accepted and agreeing with the oracle. Says which."""
    try:
        ours = read_all(path)
    except LoadError as error:
        assert_refused(path, error, offset="general.alignment" not in str(error))
        return "refused"
    theirs = oracle(path)  # must not raise: chatjinja accepted the file
    assert_agrees(ours, theirs)
    return "agreed"


# --- files -------------------------------------------------------------------------------------------


def write(path: Path, fill: Callable[[Any], None], tensors: Callable[[Any], None] | None = None,
          endian: str = "little", arch: str = "llama") -> Path:
    writer = gguf.GGUFWriter(str(path), arch, endianess=getattr(gguf.GGUFEndian, endian.upper()))
    fill(writer)
    if tensors is not None:
        tensors(writer)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    if tensors is not None:
        writer.write_tensors_to_file()
    writer.close()
    return path


def every_type(writer: Any) -> None:
    writer.add_tokenizer_model("llama")
    writer.add_token_list(["<unk>", "<s>", "</s>", "", "héllo", "✓ 中文 🙂", "a" * 5000])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_uint8("t.u8", 255)
    writer.add_int8("t.i8", -128)
    writer.add_uint16("t.u16", 65535)
    writer.add_int16("t.i16", -32768)
    writer.add_uint32("t.u32", 2**32 - 1)
    writer.add_int32("t.i32", -(2**31))
    writer.add_uint64("t.u64", 2**64 - 1)
    writer.add_int64("t.i64", -(2**63))
    writer.add_float32("t.f32", 0.1)
    writer.add_float64("t.f64", -1e300)
    writer.add_float32("t.nan", float("nan"))
    writer.add_float64("t.inf", float("inf"))
    writer.add_bool("t.true", True)
    writer.add_bool("t.false", False)
    writer.add_string("t.empty", "")
    writer.add_string("t.long", "x" * 10_000)  # longer than what is kept: read on demand
    writer.add_string("t.ключ", "значение")
    for name, kind in [("u8", gguf.GGUFValueType.UINT8), ("i16", gguf.GGUFValueType.INT16), ("u32", gguf.GGUFValueType.UINT32),
                       ("i64", gguf.GGUFValueType.INT64), ("f32", gguf.GGUFValueType.FLOAT32), ("f64", gguf.GGUFValueType.FLOAT64)]:
        writer.add_key_value(f"t.array.{name}", [1, 2, 3, 120], gguf.GGUFValueType.ARRAY, sub_type=kind)
    writer.add_array("t.array.bool", [True, False, True])
    writer.add_array("t.array.ints", list(range(3000)))
    writer.add_array("t.array.nested", [[1, 2], [3, 4, 5], [6]])
    writer.add_array("t.array.nested_strings", [["a", "bc"], ["", "✓"]])
    writer.add_chat_template([
        {"name": "default", "template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"},
        {"name": "tool_use", "template": "[TOOLS]{{ tools | length }}"},
        {"name": "rag", "template": "RAG ✓ {{ documents | length }}"},
    ])


def some_tensors(writer: Any) -> None:
    writer.add_tensor("f32", np.arange(6, dtype=np.float32).reshape(2, 3))
    writer.add_tensor("f16", np.ones((4,), dtype=np.float16))
    writer.add_tensor("i8.scalar", np.array(7, dtype=np.int8))
    writer.add_tensor("q8_0", np.zeros((2, 34), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q8_0)


def small(writer: Any) -> None:
    writer.add_tokenizer_model("llama")
    writer.add_token_list(["<unk>", "<s>", "</s>", "hi"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_bool("tokenizer.ggml.add_bos_token", True)
    writer.add_float32("t.f32", 1.5)
    writer.add_array("t.ints", [1, 2, 3])
    writer.add_chat_template("{{ bos_token }}{{ messages[0].content }}")
    writer.add_string("tokenizer.chat_template.tool_use", "T")


def big_vocabulary(count: int) -> Callable[[Any], None]:
    def fill(writer: Any) -> None:
        writer.add_tokenizer_model("gpt2")
        writer.add_token_list(["<unk>", "<s>", "</s>"] + [f"tok{i}✓" for i in range(count - 4)] + ["<|im_end|>"])
        writer.add_token_types([1] * count)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(count - 1)
        writer.add_unk_token_id(0)
        writer.add_pad_token_id(count - 2)
        writer.add_chat_template("{% for m in messages %}<|im_start|>{{ m.content }}{{ eos_token }}{% endfor %}")

    return fill


@pytest.fixture(scope="module")
def vocab_150k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("gguf") / "vocab150k.gguf", big_vocabulary(150_000))


# --- agreement on good files -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ggml-vocab-bert-bge.gguf", "ggml-vocab-falcon.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-phi-3.gguf"])
def test_real_vocabulary_files(name: str) -> None:
    path = REAL / name
    if not path.is_file():
        pytest.skip(f"{path} not found: these tests need ../shared/gguf beside the checkout")
    assert check(path) == "agreed"
    reader = gguf.GGUFReader(str(path), "r")
    tokens = reader.fields["tokenizer.ggml.tokens"]
    expected = {}
    for name_, key in gguf_file._SPECIAL_TOKEN_IDS.items():
        if key in reader.fields:
            expected[name_] = tokens.contents(int(reader.fields[key].contents()))
    assert scan_gguf(path).special_tokens == expected and expected


@pytest.mark.parametrize("endian", ["little", "big"])
def test_every_value_type(tmp_path: Path, endian: str) -> None:
    path = write(tmp_path / "m.gguf", every_type, some_tensors, endian=endian)
    assert check(path) == "agreed"
    tset = scan_gguf(path)
    assert sorted(tset.templates) == ["default", "rag", "tool_use"]
    assert tset.templates["rag"].source == "RAG ✓ {{ documents | length }}"
    assert tset.special_tokens == {"bos_token": "<s>", "eos_token": "</s>"}


def test_150k_vocabulary(vocab_150k: Path) -> None:
    assert check(vocab_150k) == "agreed"
    assert scan_gguf(vocab_150k).special_tokens == {
        "bos_token": "<s>", "eos_token": "<|im_end|>", "unk_token": "<unk>", "pad_token": "tok149995✓"}


def test_version_2(tmp_path: Path) -> None:
    data = bytearray(write(tmp_path / "v3.gguf", small).read_bytes())
    data[4:8] = struct.pack("<I", 2)
    path = tmp_path / "v2.gguf"
    path.write_bytes(bytes(data))
    assert check(path) == "agreed"
    assert read_all(path)["version"] == 2


def test_works_without_the_gguf_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "m.gguf", small)
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf now raises ImportError
    assert load_template(path).render([{"role": "user", "content": "x"}]) == "<s>x"


def test_tensor_type_table_is_ggufs() -> None:
    assert gguf_file._TENSOR_TYPES == {int(kind): sizes for kind, sizes in gguf.GGML_QUANT_SIZES.items()}
    assert {name: code for code, name in gguf_file._TYPE_NAMES.items()} == {t.name.lower(): int(t) for t in gguf.GGUFValueType}


# --- damaged files -----------------------------------------------------------------------------------


def test_every_truncation(tmp_path: Path) -> None:
    full = write(tmp_path / "full.gguf", small, some_tensors).read_bytes()
    data_start = gguf.GGUFReader(str(tmp_path / "full.gguf")).data_offset
    path = tmp_path / "cut.gguf"
    outcomes = []
    for keep in range(len(full)):
        path.write_bytes(full[:keep])
        outcome = check(path)
        if keep < data_start + 6 * 4:  # the first tensor's data
            assert outcome == "refused", keep
        outcomes.append(outcome)
    assert outcomes.count("agreed") < 32  # only cuts into the last tensor's padding are still whole files


@pytest.mark.parametrize("byte", [0x00, 0xFF, 0x09])
def test_every_single_byte_corruption(tmp_path: Path, byte: int) -> None:
    full = write(tmp_path / "full.gguf", small, some_tensors).read_bytes()
    path = tmp_path / "bad.gguf"
    outcomes = set()
    for at in range(len(full)):
        if full[at] != byte:
            path.write_bytes(full[:at] + bytes([byte]) + full[at + 1 :])
            outcomes.add(check(path))
    assert outcomes == {"refused", "agreed"}


def _kv(key: bytes, code: int, payload: bytes) -> bytes:
    return struct.pack("<Q", len(key)) + key + struct.pack("<I", code) + payload


def _file(kvs: list[bytes], tensor_records: bytes = b"", tensors: int = 0, version: int = 3, kv_count: int | None = None) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, tensors, len(kvs) if kv_count is None else kv_count) + b"".join(kvs) + tensor_records


TEMPLATE = _kv(b"tokenizer.chat_template", 8, struct.pack("<Q", 5) + b"hello")
HOSTILE = {
    "huge key/value count": (_file([TEMPLATE], kv_count=2**64 - 1), r"at byte 16: the header declares 18446744073709551615 metadata entries"),
    "huge tensor count": (_file([TEMPLATE], tensors=2**63), r"at byte 8: the header declares 9223372036854775808 tensors"),
    "more entries than written": (_file([TEMPLATE], kv_count=2), r"at byte 72: metadata key 1 needs 8 bytes, the file has 0 left"),
    "huge string": (_file([_kv(b"k", 8, struct.pack("<Q", 2**63))]), r"at byte 37: k is a string of 9223372036854775808 bytes, past the end"),
    "huge key": (_file([struct.pack("<Q", 2**40) + b"k" * 20]), r"at byte 24: metadata key 0 is 1099511627776 bytes long"),
    "huge array": (_file([_kv(b"a", 9, struct.pack("<IQ", 0, 2**62) + b"x" * 10)]),
                   r"at byte 41: a declares 4611686018427387904 elements of type uint8, more than the 10 bytes left"),
    "huge string array": (_file([_kv(b"a", 9, struct.pack("<IQ", 8, 10**9) + b"\0" * 64)]), r"declares 1000000000 elements of type string"),
    "string in an array past the end": (_file([_kv(b"a", 9, struct.pack("<IQ", 8, 2) + struct.pack("<Q", 1) + b"x" + struct.pack("<Q", 10**12))]),
                                        r"at byte 58: element 1 of a is 1000000000000 bytes long, past the end of the file"),
    "unknown value type": (_file([_kv(b"k", 13, b"\0" * 8)]), r"at byte 33: k has value type 13, which GGUF does not define"),
    "unknown element type": (_file([_kv(b"k", 9, struct.pack("<IQ", 99, 0))]), r"the elements of k has value type 99"),
    "nested too deep": (_file([_kv(b"n", 9, struct.pack("<IQ", 9, 1) * 20_000)]), r"n nests arrays more than 8 deep"),
    "nested arrays past the end": (_file([_kv(b"n", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 0, 2**40))]),
                                   r"element 0 of n declares 1099511627776 elements"),
    "bool that is 2": (_file([_kv(b"b", 7, b"\x02")]), r"at byte 37: b is a bool stored as 2, not 0 or 1"),
    "duplicate key": (_file([TEMPLATE, TEMPLATE]), r"at byte 72: metadata key 'tokenizer.chat_template' appears twice"),
    "reserved key": (_file([_kv(b"GGUF.kv_count", 4, b"\0" * 4)]), r"metadata key 'GGUF.kv_count' is reserved"),
    "key not UTF-8": (_file([_kv(b"\xff", 4, b"\0" * 4)]), r"at byte 32: metadata key 0 is not UTF-8"),
    "cut scalar": (_file([_kv(b"k", 4, b"\0\0")]), r"at byte 37: k needs 4 bytes, the file has 2 left"),
    "version 1": (b"GGUF" + struct.pack("<III", 1, 0, 0), r"is GGUF version 1 \(the 2023 draft with 32-bit lengths\)"),
    "version 4": (_file([TEMPLATE], version=4), r"is GGUF version 4; chatjinja reads versions 2 and 3"),
    "not GGUF": (b"GGUX" + b"\0" * 20, r"is not a GGUF file"),
    "empty": (b"", r"is not a GGUF file"),
    "unknown tensor type": (_file([TEMPLATE], struct.pack("<Q", 1) + b"t" + struct.pack("<IQIQ", 1, 1, 77, 0), tensors=1) + b"\0" * 64,
                            r"tensor 't' has ggml type 77, which chatjinja does not know"),
    "tensor past the end": (_file([TEMPLATE], struct.pack("<Q", 1) + b"t" + struct.pack("<IQIQ", 1, 2**40, 0, 0), tensors=1),
                            r"the data of tensor 't' \(bytes 128 to 4398046511232\) lies past the end of the file \(105 bytes\)"),
    "tensor dimensions overflow": (_file([TEMPLATE], struct.pack("<Q", 1) + b"t" + struct.pack("<IQQQQIQ", 4, 2**63, 2**63, 0, 1, 0, 0),
                                         tensors=1), r"the data of tensor 't'"),
    "too many dimensions": (_file([TEMPLATE], struct.pack("<Q", 1) + b"t" + struct.pack("<I", 5) + b"\0" * 60, tensors=1),
                            r"tensor 't' has 5 dimensions \(ggml allows 4\)"),
    "duplicate tensor": (_file([TEMPLATE], (struct.pack("<Q", 1) + b"t" + struct.pack("<IQIQ", 1, 0, 0, 0)) * 2, tensors=2),
                         r"tensor 't' appears twice"),
    "row not whole blocks": (_file([TEMPLATE], struct.pack("<Q", 1) + b"t" + struct.pack("<IQIQ", 1, 33, 8, 0), tensors=1) + b"\0" * 96,
                             r"tensor 't' of ggml type 8 has shape \[33\], not whole blocks of 32"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_files(tmp_path: Path, case: str) -> None:
    data, pattern = HOSTILE[case]
    path = tmp_path / "hostile.gguf"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        with pytest.raises(LoadError, match=pattern) as info:
            load_template(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_refused(path, info.value)
    assert peak < 2_000_000  # GGUFReader is not run on these: some make it loop for 2**62 elements


def test_bad_alignment(tmp_path: Path) -> None:
    path = tmp_path / "a.gguf"
    path.write_bytes(_file([TEMPLATE, _kv(b"general.alignment", 4, struct.pack("<I", 3))]))
    with pytest.raises(LoadError, match=r"general\.alignment in .*a\.gguf is a uint32 3, expected a uint32 power of two"):
        load_template(path)
    with pytest.raises(ValueError):
        gguf.GGUFReader(str(path))


# --- fuzzing -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_base(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = write(tmp_path_factory.mktemp("fuzz") / "base.gguf", small, some_tensors)
    assert check(path) == "agreed"  # else a reader that refuses everything would pass the fuzzing
    return path.read_bytes()


def test_a_key_name_with_a_line_break_is_escaped_in_the_message(fuzz_base: bytes, tmp_path: Path) -> None:
    """A key name is the file's text: a damaged key that also holds a newline still gives a one-line message
    (the fuzzing found a key ``\nokenizer.ggml.model`` with an undefined value type)."""
    key = b"general.architecture"
    at = fuzz_base.index(key)
    damaged = bytearray(fuzz_base)
    damaged[at] = ord("\n")
    damaged[at + len(key):at + len(key) + 4] = (4294967048).to_bytes(4, "little")  # no GGUF value type
    path = tmp_path / "f.gguf"
    path.write_bytes(bytes(damaged))
    with pytest.raises(LoadError) as refused:
        read_all(path)
    assert_refused(path, refused.value)
    assert "\\neneral.architecture has value type 4294967048" in str(refused.value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.none() | st.integers(0, 10**6),
    seed=st.integers(0, 2**32 - 1),
)
def test_fuzz_mutated_bytes(fuzz_base: bytes, tmp_path_factory: pytest.TempPathFactory, edits: list, cut: int | None, seed: int) -> None:
    data = bytearray(fuzz_base)
    for at, byte in edits:
        data[at % len(data)] = byte
    if random.Random(seed).random() < 0.2:  # widen a length or count: the corruptions that hurt readers most
        at = random.Random(seed).randrange(len(data) - 8)
        data[at : at + 8] = struct.pack("<Q", random.Random(seed).choice([2**64 - 1, 2**32, 10**6]))
    if cut is not None:
        del data[cut % len(data) :]
    path = tmp_path_factory.mktemp("fuzzed") / "f.gguf"
    path.write_bytes(bytes(data))
    tracemalloc.start()
    try:
        try:
            read_all(path)
        except LoadError:
            pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_500_000
    check(path)


# --- cost --------------------------------------------------------------------------------------------


class _CountingFile:
    def __init__(self, handle: Any, log: list[int]) -> None:
        self._handle, self._log = handle, log

    def read(self, n: int = -1) -> bytes:
        data = self._handle.read(n)
        self._log.append(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def __enter__(self) -> "_CountingFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._handle.close()


def _counting_open(log: list[int]) -> Callable[..., Any]:
    import builtins

    def opener(*args: Any, **kwargs: Any) -> Any:
        return _CountingFile(builtins.open(*args, **kwargs), log)

    return opener


def test_150k_vocabulary_cost(vocab_150k: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading walks the metadata once in 256 KiB reads and builds no Python object per token."""
    reads: list[int] = []
    monkeypatch.setattr(gguf_file, "open", _counting_open(reads), raising=False)
    tracemalloc.start()
    try:
        template = load_template(vocab_150k)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert template.special_tokens["eos_token"] == "<|im_end|>"
    size = vocab_150k.stat().st_size
    assert size > 2_500_000
    assert peak < 3_000_000  # GGUFReader: several hundred MB
    assert sum(reads) < size + 4 * 2**18 and len(reads) < size // 2**18 + 12


def test_tensor_data_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model with 1 GiB of tensor data (a sparse file): the metadata is read, and at most one read chunk after it."""
    path = tmp_path / "model.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    small(writer)
    writer.add_tensor_info("weights", [2**28], np.dtype(np.float32), 2**30)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    metadata_size = path.stat().st_size
    data_start = metadata_size + -metadata_size % 32
    with open(path, "r+b") as handle:
        handle.truncate(data_start + 2**30)
    assert check(path) == "agreed"
    reads: list[int] = []
    monkeypatch.setattr(gguf_file, "open", _counting_open(reads), raising=False)
    assert load_template(path).source == "{{ bos_token }}{{ messages[0].content }}"
    assert sum(reads) <= metadata_size + 2**18 and len(reads) <= 2
    with open(path, "r+b") as handle:
        handle.truncate(data_start + 2**30 - 1)
    with pytest.raises(LoadError, match=r"the data of tensor 'weights' .* lies past the end of the file"):
        load_template(path)
