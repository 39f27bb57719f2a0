"""GGUF files written by the test with gguf's GGUFWriter (metadata only) round-trip; bad files give one clear error."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from chatjinja import LoadError, TemplateNotFound, load_template
from chatjinja.loading import scan_gguf
from chatjinja.loading.gguf_file import GgufMetadata

gguf = pytest.importorskip("gguf", reason="GGUF loading needs the optional gguf package (pip install 'chatjinja[gguf]')")

TOKENS = ["<unk>", "<s>", "</s>", "<pad>", "hello"]
CONVERSATION = [{"role": "user", "content": "Hi"}]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
DEFAULT = "{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}{{ eos_token }}"
TOOL_USE = "{{ bos_token }}[TOOLS]{{ tools | length }}[/TOOLS]{% for m in messages %}{{ m.content }}{% endfor %}"


def write_gguf(path: Path, fill: Callable[[Any], None], arch: str = "llama") -> Path:
    writer = gguf.GGUFWriter(str(path), arch)
    fill(writer)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def full(writer: Any) -> None:
    writer.add_tokenizer_model("llama")
    writer.add_token_list(TOKENS)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(3)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(True)
    writer.add_chat_template(DEFAULT)
    writer.add_string("tokenizer.chat_template.tool_use", TOOL_USE)
    writer.add_string("tokenizer.chat_template.rag", "RAG {{ documents | length }}")


def test_gguf_round_trip(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "model.gguf", full)
    tset = scan_gguf(path)
    assert {name: entry.source for name, entry in tset.templates.items()} == {
        "default": DEFAULT,
        "tool_use": TOOL_USE,
        "rag": "RAG {{ documents | length }}",
    }
    assert tset.special_tokens == {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}
    assert tset.metadata["add_bos_token"] is False and tset.metadata["add_eos_token"] is True

    template = load_template(path)
    assert template.name == f"{path}#tokenizer.chat_template"
    assert template.render(CONVERSATION) == "<s>[INST] Hi [/INST]</s>"
    assert template.render(CONVERSATION, tools=TOOLS) == "<s>[TOOLS]1[/TOOLS]Hi"  # tool_use, as llama.cpp picks it
    assert "llama.cpp" in template.origin
    named = load_template(path, "rag")
    assert named.name == f"{path}#tokenizer.chat_template.rag"
    assert named.render(CONVERSATION, documents=[{"title": "a", "text": "b"}]) == "RAG 1"


def test_gguf_without_extension_is_found_by_magic(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "model.bin", full)
    assert load_template(path).source == DEFAULT


def test_llama_tokenizer_adds_bos_by_default(tmp_path: Path) -> None:
    def fill(writer: Any) -> None:
        writer.add_tokenizer_model("llama")
        writer.add_token_list(TOKENS)
        writer.add_chat_template("x")

    tset = scan_gguf(write_gguf(tmp_path / "m.gguf", fill))
    assert tset.metadata["add_bos_token"] is True
    assert not tset.named and tset.special_tokens == {}


def _template_array(writer: Any) -> None:
    writer.add_array("tokenizer.chat_template", ["{{ a }}", "{{ b }}"])


def _no_template(writer: Any) -> None:
    writer.add_token_list(TOKENS)


def _bad_token_id(writer: Any) -> None:
    writer.add_token_list(TOKENS)
    writer.add_bos_token_id(99)
    writer.add_chat_template("x")


def _ids_without_tokens(writer: Any) -> None:
    writer.add_eos_token_id(2)
    writer.add_chat_template("x")


def _bool_as_string(writer: Any) -> None:
    writer.add_string("tokenizer.ggml.add_bos_token", "yes")
    writer.add_chat_template("x")


@pytest.mark.parametrize(
    "fill, error, pattern",
    [
        (_template_array, LoadError, r"tokenizer\.chat_template in .*m\.gguf is an array of strings, expected a string"),
        (_no_template, TemplateNotFound, r"no tokenizer\.chat_template in .*m\.gguf"),
        (_bad_token_id, LoadError, r"tokenizer\.ggml\.bos_token_id in .*m\.gguf is 99, outside tokenizer\.ggml\.tokens \(0\.\.4\)"),
        (_ids_without_tokens, LoadError, r"m\.gguf has special token ids but no tokenizer\.ggml\.tokens"),
        (_bool_as_string, LoadError, r"add_bos_token in .*m\.gguf is a string, expected a bool"),
    ],
)
def test_bad_gguf_metadata(tmp_path: Path, fill: Callable, error: type, pattern: str) -> None:
    path = write_gguf(tmp_path / "m.gguf", fill)
    with pytest.raises(error, match=pattern) as info:
        load_template(path)
    assert info.value.source_name == str(path)


@pytest.mark.parametrize("keep", [0, 3, 4, 10, 30, 200, -1])
def test_truncated_gguf(tmp_path: Path, keep: int) -> None:
    data = write_gguf(tmp_path / "full.gguf", full).read_bytes()
    assert keep < len(data)
    keep = keep % len(data)
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:keep])
    with pytest.raises(LoadError, match=r"cut\.gguf (is truncated or damaged|is not a GGUF file)") as info:
        load_template(path)
    assert info.value.source_name == str(path)


def test_not_a_gguf(tmp_path: Path) -> None:
    path = tmp_path / "x.gguf"
    path.write_text("{{ hello }}")
    with pytest.raises(LoadError, match=r"x\.gguf is not a GGUF file"):
        load_template(path)


def test_cli_render_gguf(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import io
    import json

    from chatjinja.cli import main

    path = write_gguf(tmp_path / "model.gguf", full)
    monkey = pytest.MonkeyPatch()
    monkey.setattr("sys.stdin", io.StringIO(json.dumps({"messages": CONVERSATION})))
    try:
        assert main(["render", str(path)]) == 0
    finally:
        monkey.undo()
    assert capsys.readouterr().out == "<s>[INST] Hi [/INST]</s>"
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(path.read_bytes()[:40])
    assert main(["render", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "bad.gguf" in err and err.count("\n") == 1


@pytest.mark.parametrize("endian", ["little", "big"])
def test_metadata_reader_agrees_with_gguf_reader(tmp_path: Path, endian: str) -> None:
    """Every metadata type is decoded to the value gguf's own accessor (``ReaderField.contents``) gives."""

    def fill(writer: Any) -> None:
        full(writer)
        writer.add_uint64("test.u64", 2**40)
        writer.add_int8("test.i8", -3)
        writer.add_float32("test.f32", 0.5)
        writer.add_float64("test.f64", -1.25)
        writer.add_bool("test.flag", True)
        writer.add_array("test.ints", [1, 2, 3])
        writer.add_array("test.floats", [0.25, 0.5])
        writer.add_string("test.unicode", "héllo ✓")

    path = tmp_path / f"{endian}.gguf"
    writer = gguf.GGUFWriter(str(path), "llama", endianess=getattr(gguf.GGUFEndian, endian.upper()))
    fill(writer)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    reader = gguf.GGUFReader(str(path), "r")
    with GgufMetadata(path) as ours:
        expected_keys = [k for k in reader.fields if not k.startswith("GGUF.")]
        assert list(ours.values) == expected_keys
        for key in expected_keys:
            field, value = reader.fields[key], ours.values[key]
            types = [t.name.lower() for t in field.types]
            assert value.type == types[0], key
            if value.type == "array":
                assert value.element_type == types[1] and value.count == len(field.data), key
                if value.element_type == "string":
                    assert [item.decode("utf-8") for item in ours.read(value)] == field.contents(), key
                else:
                    assert ours.read(value) == pytest.approx(field.contents()), key
            elif value.type == "string":
                assert ours.read(value).decode("utf-8") == field.contents(), key
            else:
                assert value.value == pytest.approx(field.contents()), key
    if endian == "big":
        assert load_template(path).render(CONVERSATION) == "<s>[INST] Hi [/INST]</s>"
