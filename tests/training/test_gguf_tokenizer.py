"""GGUF tokenizers against transformers' own GGUF conversion, called at test time.

The reference is ``TokenizersBackend.from_pretrained(folder, gguf_file=name)`` (transformers 5.25.0:
``get_gguf_tokenizer`` + ``convert_gguf_tokenizer`` + the backend's special tokens and post-processor).
Its GGUF metadata reader imports torch at module level but never uses it for the metadata, so the
reader module is imported once with a placeholder ``torch`` module (removed again at once); nothing
else in transformers sees it. The files: llama.cpp's vocabularies in ``../shared/gguf`` and small
llama/SentencePiece and gpt2/BPE vocabularies written here with ``gguf.GGUFWriter``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import chatjinja
from chatjinja import LoadError
from chatjinja.training import gguf_tokenizer
from chatjinja.training.tokenizer import load_tokenizer

from ..conftest import SHARED

pytestmark = pytest.mark.reference

gguf = pytest.importorskip("gguf", reason="GGUF files are written with the gguf package (pip install 'chatjinja[gguf]')")
pytest.importorskip("transformers")

REAL = SHARED / "gguf"
CONTROL, USER_DEFINED, BYTE, NORMAL = 3, 4, 6, 1

TEXTS = [
    "", " ", "  ", "hello world", " hello world", "  hello   world  ", "Hello\n\nworld\t!", "héllo wörld",
    "日本語 😀 ∑", "<s>hello</s>", "<|user|>hi<|end|>\n<|assistant|>", "<|endoftext|>x<|endoftext|>",
    "<think>why</think>", "<0x41>", "▁hello", ">>TITLE<< a >>ABSTRACT<<", "a\u200bb\x00c\x7f", "[PAD32011]",
]


class _Anything:
    """What the placeholder ``torch`` gives for any name: dtypes and annotations at import time."""

    def __getattr__(self, name: str) -> "_Anything":
        return _Anything()

    def __call__(self, *args: Any, **kwargs: Any) -> "_Anything":
        return _Anything()

    def __getitem__(self, key: Any) -> "_Anything":
        return _Anything()

    def __or__(self, other: Any) -> "_Anything":
        return _Anything()

    __ror__ = __or__


@pytest.fixture(scope="module")
def reference() -> Any:
    """``load(path)``: transformers' tokenizer for a GGUF file (see the module docstring for the torch placeholder)."""
    import transformers.integrations.gguf.gguf_tokenizer_mapping  # noqa: F401  (imports transformers itself first)
    from transformers import TokenizersBackend

    if "transformers.integrations.gguf.reader" not in sys.modules:
        placeholder = types.ModuleType("torch")
        placeholder.__getattr__ = lambda name: _Anything()  # type: ignore[attr-defined]
        sys.modules["torch"] = placeholder
        try:
            import transformers.integrations.gguf.reader  # noqa: F401
        finally:
            del sys.modules["torch"]

    def load(path: Path) -> Any:
        return TokenizersBackend.from_pretrained(str(path.parent), gguf_file=path.name)

    return load


# --- files written here ---------------------------------------------------------------------------------


def write_gguf(path: Path, arch: str, kind: str, tokens: list[str], types_: list[int] | None = None, *,
               scores: list[float] | None = None, merges: list[str] | None = None, pre: str | None = None,
               ids: dict[str, int] | None = None, add_bos: bool | None = None, add_eos: bool | None = None,
               template: str | None = None) -> Path:
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_tokenizer_model(kind)
    if pre is not None:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    if types_ is not None:
        writer.add_token_types(types_)
    if scores is not None:
        writer.add_token_scores(scores)
    if merges is not None:
        writer.add_token_merges(merges)
    for name, value in (ids or {}).items():
        writer.add_uint32(f"tokenizer.ggml.{name}_token_id", value)
    if add_bos is not None:
        writer.add_add_bos_token(add_bos)
    if add_eos is not None:
        writer.add_add_eos_token(add_eos)
    if template is not None:
        writer.add_chat_template(template)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def sentencepiece_vocab(bos: str = "<s>") -> tuple[list[str], list[int], list[float]]:
    """A llama vocabulary: control tokens, the 256 byte-fallback tokens, pieces with scores, a user-defined token."""
    tokens = ["<unk>", bos, "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types_ = [CONTROL, CONTROL, CONTROL] + [BYTE] * 256
    pieces = ["▁", "e", "l", "o", "h", "w", "r", "d", "t", "n", "i", "é", "日", "▁h", "ll", "he", "hel", "llo",
              "▁he", "▁hello", "or", "ld", "▁w", "▁wor", "▁world", "▁▁", "▁▁▁", "in", "th", "▁th", "!"]
    tokens += pieces
    types_ += [NORMAL] * len(pieces)
    tokens += ["<|user|>", "<|assistant|>", "<|end|>", "<think>", "</think>", "[PAD32011]"]
    types_ += [CONTROL, CONTROL, CONTROL, USER_DEFINED, USER_DEFINED, 2]
    scores = [0.0] * (3 + 256) + [-float(i) for i in range(len(pieces))] + [0.0] * 6
    return tokens, types_, scores


def byte_level_vocab() -> tuple[list[str], list[int], list[str]]:
    """A gpt2 vocabulary: GPT-2's 256-character byte alphabet, merges, control and user-defined tokens, one raw UTF-8 token."""
    alphabet = list(gguf_tokenizer.bytes_to_unicode().values())
    merges = ["Ġ t", "h e", "Ġ w", "o r", "l d", "Ġt he", "l l", "Ġ h", "e ll", "Ġh ell", "Ġhell o", "Ġw or", "Ġwor ld",
              "Ġ Ġ", "ĠĠ Ġ", "i n", "Ã ©"]
    merged = [merge.replace(" ", "") for merge in merges]
    tokens = alphabet + merged + ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>", "<|▁ctl|>", "日本"]
    types_ = [NORMAL] * (len(alphabet) + len(merged)) + [CONTROL, CONTROL, CONTROL, USER_DEFINED, CONTROL, NORMAL]
    return tokens, types_, merges


def generated_files(folder: Path) -> dict[str, Path]:
    tokens, types_, scores = sentencepiece_vocab()
    bpe_tokens, bpe_types, merges = byte_level_vocab()
    eot = bpe_tokens.index("<|endoftext|>")
    spm_ids = {"bos": 1, "eos": 2, "unknown": 0}
    # a vocabulary without "<s>": LlamaTokenizer's default BOS is added as a new token; EOS is a user-defined token
    odd_tokens, odd_types, odd_scores = sentencepiece_vocab(bos="<|begin|>")
    return {
        "llama": write_gguf(folder / "llama.gguf", "llama", "llama", tokens, types_, scores=scores, ids=spm_ids),
        "llama-eos": write_gguf(folder / "llama-eos.gguf", "llama", "llama", tokens, types_, scores=scores,
                                ids={**spm_ids, "padding": 2}, add_bos=False, add_eos=True),
        "llama-odd": write_gguf(folder / "llama-odd.gguf", "mistral", "llama", odd_tokens, odd_types, scores=odd_scores,
                                ids={"bos": 1, "eos": odd_tokens.index("<think>")}),
        "phi3": write_gguf(folder / "phi3.gguf", "phi3", "llama", tokens, types_, scores=scores, ids=spm_ids, add_bos=True),
        "llama-merges": write_gguf(folder / "llama-merges.gguf", "llama", "llama", tokens, types_,
                                   merges=["▁ h", "h e", "l l", "▁h e", "ll o", "▁he llo", "o r", "▁ w", "▁w or", "l d"], ids=spm_ids),
        "gpt2": write_gguf(folder / "gpt2.gguf", "gpt2", "gpt2", bpe_tokens, bpe_types, merges=merges, pre="gpt-2",
                           ids={"bos": eot, "eos": eot}),
        "gpt2-llama3": write_gguf(folder / "gpt2-llama3.gguf", "llama", "gpt2", bpe_tokens, bpe_types, merges=merges,
                                  pre="llama-bpe", ids={"bos": eot, "eos": eot, "padding": eot + 2}, add_bos=True),
        "gpt2-qwen2": write_gguf(folder / "gpt2-qwen2.gguf", "qwen2", "gpt2", bpe_tokens, None, merges=merges, pre="qwen2",
                                 ids={"eos": eot + 2}),
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    found = generated_files(tmp_path_factory.mktemp("gguf-tokenizers"))
    for name in ("phi-3", "gpt-2", "falcon"):
        path = REAL / f"ggml-vocab-{name}.gguf"
        if path.is_file():
            found[f"shared:{name}"] = path
    return found


# --- the differential test -----------------------------------------------------------------------------


def compare(path: Path, reference: Any) -> list[str]:
    """Every difference between chatjinja's tokenizer for ``path`` and transformers' (empty when equal)."""
    theirs = reference(path)
    ours = load_tokenizer(path)
    problems = []
    if json.loads(ours.backend.to_str()) != json.loads(theirs.backend_tokenizer.to_str()):
        problems.append("the tokenizer.json of the two backends differs")
    if ours.special_tokens != {k: str(v) for k, v in theirs.special_tokens_map.items()}:
        problems.append(f"special tokens {ours.special_tokens} != {theirs.special_tokens_map}")
    if (ours.pad_token, ours.unk_token) != (theirs.pad_token, theirs.unk_token):
        problems.append("pad/unk tokens differ")
    for text in TEXTS:
        for special in (True, False):
            mine = ours.backend.encode(text, add_special_tokens=special).ids
            expected = theirs(text, add_special_tokens=special)["input_ids"]
            if mine != expected:
                problems.append(f"{text!r} (add_special_tokens={special}): {mine} != {expected}")
            for skip in (False, True):
                if ours.backend.decode(mine, skip_special_tokens=skip) != theirs.decode(expected, skip_special_tokens=skip):
                    problems.append(f"decode of {text!r} (skip_special_tokens={skip}) differs")
    return problems


def test_gguf_tokenizers_equal_transformers_conversion(files: dict[str, Path], reference: Any) -> None:
    """Same backend JSON, special tokens, ids (with and without BOS/EOS) and decoding as transformers, file by file."""
    failures = {name: problems for name, path in files.items() if (problems := compare(path, reference))}
    assert not failures, json.dumps(failures, indent=1, ensure_ascii=False)[:4000]
    assert len(files) >= 8


def test_the_shared_files_are_compared(files: dict[str, Path]) -> None:
    if not REAL.is_dir():
        pytest.skip(f"{REAL} (llama.cpp's vocabulary files) is absent")
    assert {"shared:phi-3", "shared:gpt-2", "shared:falcon"} <= set(files)


def test_a_bos_flag_and_llama_default_reach_the_post_processor(files: dict[str, Path]) -> None:
    assert load_tokenizer(files["llama"]).backend.encode("hello").ids[0] == 1  # llama without the flag adds BOS
    assert load_tokenizer(files["llama-eos"]).backend.encode("hello").ids[-1] == 2  # add_eos_token
    assert load_tokenizer(files["gpt2"]).backend.encode("").ids == []


def test_apply_chat_template_tokenizes_with_the_gguf_of_the_template(tmp_path: Path, reference: Any) -> None:
    """A template loaded from a GGUF tokenizes with that file's vocabulary, as transformers' apply_chat_template does."""
    tokens, types_, scores = sentencepiece_vocab()
    source = ("{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
              "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    path = write_gguf(tmp_path / "chat.gguf", "llama", "llama", tokens, types_, scores=scores,
                      ids={"bos": 1, "eos": 2, "unknown": 0}, template=source)
    template = chatjinja.load_template(path)
    assert template.tokenizer == str(path)
    chat = [{"role": "user", "content": "hello <think>world</think>"}, {"role": "assistant", "content": " héllo 日"}]
    ours = chatjinja.apply_chat_template(chat, template, tokenize=True)
    theirs = reference(path).apply_chat_template(chat, tokenize=True, chat_template=source)
    assert dict(ours) == dict(theirs)


def test_cli_render_batch_tokenize_with_a_gguf(tmp_path: Path, reference: Any) -> None:
    tokens, merges = byte_level_vocab()[0], byte_level_vocab()[2]
    source = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}{% generation %}"
              "{{ m.content }}<|im_end|>{% endgeneration %}{% else %}{{ m.content }}<|im_end|>{% endif %}\n{% endfor %}")
    eot = tokens.index("<|endoftext|>")
    path = write_gguf(tmp_path / "model.gguf", "qwen2", "gpt2", tokens, byte_level_vocab()[1], merges=merges, pre="qwen2",
                      ids={"bos": eot, "eos": eot + 2}, template=source)
    chats = [
        [{"role": "user", "content": "hello world"}, {"role": "assistant", "content": " the world  hello"}],
        [{"role": "user", "content": "日本 <tool> <|im_end|>"}, {"role": "assistant", "content": "é"}],
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"messages": chat}) + "\n" for chat in chats), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "chatjinja", "render", str(path), "--batch", str(tmp_path / "in.jsonl"),
                           "--tokenize", "--assistant-masks", "template", "-o", str(tmp_path / "out.jsonl")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    theirs = reference(path)
    expected = [dict(theirs.apply_chat_template(chat, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                                chat_template=source)) for chat in chats]
    assert [row["input_ids"] for row in rows] == [row["input_ids"] for row in expected]
    assert [row["assistant_masks"] for row in rows] == [row["assistant_masks"] for row in expected]
    assert any(any(row["assistant_masks"]) for row in rows)


# --- refusals -------------------------------------------------------------------------------------------


def _one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_unsupported_vocabulary_types_are_refused_naming_the_type(tmp_path: Path, reference: Any) -> None:
    tokens, types_, scores = sentencepiece_vocab()
    cases = {
        "t5": write_gguf(tmp_path / "t5.gguf", "t5", "t5", tokens, types_, scores=scores),
        "rwkv": write_gguf(tmp_path / "rwkv.gguf", "rwkv6", "rwkv", tokens, types_),
        "gemma2": write_gguf(tmp_path / "gemma.gguf", "gemma2", "llama", tokens, types_, scores=scores),
    }
    if (REAL / "ggml-vocab-bert-bge.gguf").is_file():
        cases["bert"] = REAL / "ggml-vocab-bert-bge.gguf"
    for kind, path in cases.items():
        with pytest.raises(LoadError) as exc:
            load_tokenizer(path)
        assert repr(kind) in _one_line(exc) and str(path) in str(exc.value)
    with pytest.raises(ValueError, match="'rwkv'"):  # transformers cannot either
        reference(cases["rwkv"])


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"merges": ["▁ h", "a b c"]}, r"element 1 of tokenizer\.ggml\.merges is 'a b c'"),
        ({"ids": {"bos": 10_000}}, r"bos_token id 10000 lies outside"),
        ({"scores": None}, r"needs tokenizer\.ggml\.scores"),
        ({"scores": [0.0]}, r"tokenizer\.ggml\.scores has 1 entries for 296 tokens"),
        ({"tokens": ["x" * 5000]}, r"element 0 of tokenizer\.ggml\.tokens is 5000 bytes long"),
    ],
    ids=["merge-of-three", "bos-outside", "no-scores", "short-scores", "long-token"],
)
def test_bad_tokenizer_metadata_is_one_line(tmp_path: Path, change: dict[str, Any], pattern: str) -> None:
    tokens, types_, scores = sentencepiece_vocab()
    options: dict[str, Any] = {"scores": scores, "ids": {"bos": 1}, "tokens": tokens, **change}
    if options["tokens"] is not tokens:
        types_ = [NORMAL] * len(options["tokens"])
    path = write_gguf(tmp_path / "bad.gguf", "llama", "llama", options.pop("tokens"), types_, **options)
    with pytest.raises(LoadError, match=pattern) as exc:
        load_tokenizer(path)
    _one_line(exc)


def test_vocabulary_and_merge_work_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokens, types_, scores = sentencepiece_vocab()
    path = write_gguf(tmp_path / "big.gguf", "llama", "llama", tokens, types_, scores=scores)
    monkeypatch.setattr(gguf_tokenizer, "MAX_VOCABULARY", 100)
    with pytest.raises(LoadError, match=r"tokenizer\.ggml\.tokens has 296 entries; chatjinja reads at most 100"):
        load_tokenizer(path)
    monkeypatch.setattr(gguf_tokenizer, "MAX_VOCABULARY", 1 << 20)
    monkeypatch.setattr(gguf_tokenizer, "MAX_MERGE_WORK", 1000)
    with pytest.raises(LoadError, match=r"recovering the merges of this vocabulary would slice \d+ characters \(at most 1000\)"):
        load_tokenizer(path)


def test_the_pre_tokenizer_splits_are_transformers_table() -> None:
    """Every ``tokenizer.ggml.pre`` transformers gives a split regex gets the same one here (only two are exercised above)."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS

    assert gguf_tokenizer.SPLITS == GGUF_PRE_TOKENIZER_SPLITS
