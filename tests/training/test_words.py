"""The word-level encode of ASCII pieces (``training/words.py``) splits and encodes exactly as the ``tokenizers`` library does."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import chatjinja
from chatjinja.training.segments import segment_encoder
from chatjinja.training.tokenizer import load_tokenizer
from chatjinja.training.words import (
    _BYTE_TABLE,
    CACHE_WORD_CHARS,
    WordEncoder,
    translate,
    word_encoder,
)
from tests.conftest import corpus_templates
from tests.training.conftest import reference_tokenizer
from tests.training.test_segments import _corpus_texts

tokenizers = pytest.importorskip("tokenizers")

LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# every ASCII code point, and more of what the regexes treat apart: letters of both cases, digit runs,
# contractions, spaces, newlines, the control characters Python's str.isspace() counts (\x1c-\x1f)
_ALPHABET = [chr(code) for code in range(128)] + list("aAzZeEtT  \n\r\t09'/") + ["'s", "'LL", "'Re", " \n", "123456", "\x0b\x0c", "\x1c\x1f"]


def _strings(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 30))) for _ in range(count)]


@pytest.fixture(scope="module")
def llama3_backend():
    """A small BPE trained here with Llama 3's Split regex before a ByteLevel that only maps bytes."""
    from tokenizers import Regex, models, pre_tokenizers, trainers

    backend = tokenizers.Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(["Hello world, it's 2024!\n\nThe QUICK brown fox's 12345 jumps.", "  indented\tcode();\r\n"] * 20, trainer)
    return backend


@pytest.fixture(scope="module")
def tekken_backend(tekken_folder: Path):
    return tokenizers.Tokenizer.from_file(str(tekken_folder / "tokenizer.json"))


def _backend(name: str, request: pytest.FixtureRequest):
    if name == "llama3":
        return request.getfixturevalue("llama3_backend")
    return tokenizers.Tokenizer.from_file(str(request.getfixturevalue(name) / "tokenizer.json"))


@pytest.mark.parametrize("name", ["tekken_folder", "bpe_folder", "llama3"])
def test_split_and_ids_equal_the_library_on_random_ascii(name: str, request: pytest.FixtureRequest) -> None:
    """Tekken's Split regex, GPT-2's (ByteLevel use_regex) and Llama 3's, on 3000 random ASCII strings each."""
    backend = _backend(name, request)
    words = word_encoder(json.loads(backend.to_str()), backend)
    assert isinstance(words, WordEncoder), f"{name}: a byte-level BPE the word path supports"
    failures = []
    for text in _strings(22, 3000) + ["".join(map(chr, range(128))), "don't WE'LL it's  \n\n x", "a\x0b\x0cb\x1c\x1d\x1e\x1fc"]:
        split = [word for word, _ in backend.pre_tokenizer.pre_tokenize_str(text)]
        ours = [word.translate(_BYTE_TABLE) for word in words.split(text)]
        if ours != split:
            failures.append(f"split {text!r}: {ours} != {split}")
        elif words.encode(text) != backend.encode(text, add_special_tokens=False).ids:
            failures.append(f"ids {text!r}")
    assert not failures, f"{len(failures)} differences, first:\n" + "\n".join(failures[:3])
    assert words.misses > 0 and words.hits > 0


@pytest.mark.corpus
@pytest.mark.parametrize("fixture", ["tekken_folder", "bpe_folder"])
def test_corpus_renders_without_offsets_take_the_word_path(fixture: str, request: pytest.FixtureRequest) -> None:
    """Every corpus render through a cold piece cache without offsets (so the word path encodes the ASCII pieces) equals ``encode``."""
    texts = _corpus_texts()
    if len(texts) < 100:
        pytest.skip("../shared/corpus not found")
    backend = _backend(fixture, request)
    encoder = segment_encoder(backend)
    assert encoder is not None and encoder.words is not None
    failures = [text[:80] for text in texts if encoder.encode(text, False)[0] != backend.encode(text, add_special_tokens=False).ids]
    assert not failures, f"{len(failures)} differences, first: {failures[:3]}"
    assert encoder.words.pieces > 100 and encoder.words.misses > 0


def test_ineligible_tokenizers_never_use_the_word_path(sentencepiece_folder: Path) -> None:
    """A Metaspace (SentencePiece-converted) tokenizer has no word encoder; its chats still equal transformers'."""
    tokenizer = load_tokenizer(sentencepiece_folder)
    encoder = tokenizer.segment_encoder()
    assert encoder is not None and encoder.words is None
    source = "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}"
    chat = [{"role": "user", "content": "hello world, it's 2024"}]
    ours = chatjinja.apply_chat_template(chat, source, tokenizer=sentencepiece_folder, tokenize=True, return_dict=False)
    assert ours == reference_tokenizer(sentencepiece_folder).apply_chat_template(chat, chat_template=source, tokenize=True, return_dict=False)


@pytest.mark.reference
def test_tokenized_corpus_chats_equal_transformers_through_the_word_path(tekken_folder: Path) -> None:
    """End to end against transformers 5.25.0, without masks (the word path), every 8th corpus template on the tekken vocabulary."""
    paths = corpus_templates()[::8]
    if len(paths) < 10:
        pytest.skip("../shared/corpus not found")
    tokenizer = load_tokenizer(tekken_folder)
    encoder = tokenizer.segment_encoder()
    encoder.clear()
    reference = reference_tokenizer(tekken_folder)
    chat = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What's 12+30? Answer:\n\n  42?"},
            {"role": "assistant", "content": "It's 42.\tDone."}, {"role": "user", "content": ""}]
    compared, failures = 0, []
    for number, path in enumerate(paths):
        source = path.read_text(encoding="utf-8", errors="replace")
        chat[-1]["content"] = f"Thanks! (sample {number})"  # a new piece for every template
        try:
            theirs = reference.apply_chat_template(chat, chat_template=source, tokenize=True, return_dict=False)
        except Exception:  # noqa: BLE001, S112 - a template that refuses this chat is the reference test's business
            continue
        ours = chatjinja.apply_chat_template(chat, source, tokenizer=tokenizer, tokenize=True, return_dict=False, budgets=None)
        compared += 1
        if ours != theirs:
            failures.append(path.name)
    assert compared >= 10 and not failures, failures
    assert encoder.words.pieces >= compared  # each template's new last turn at least


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(normalizer={"type": "NFC"}),
        lambda d: d["model"].update(dropout=0.1),
        lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(behavior="Removed"),
        lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(invert=True),
        lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(pattern={"String": " "}),
        lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": r"\p{Han}+|\s+"}),
        lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": r"\P{L}+|\s+"}),
        lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": r"^\s+|\w+"}),
        lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": r"(?i)k+|\s+"}),
        lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": r"\s*"}),
        lambda d: d["pre_tokenizer"]["pretokenizers"][1].update(add_prefix_space=True),
        lambda d: d.update(pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}),
    ],
    ids=["normalizer", "dropout", "removed", "invert", "string-pattern", "unknown-category", "negated-category",
         "line-anchor", "global-flag", "empty-match", "prefix-space", "metaspace"],
)
def test_a_split_not_reproduced_in_re_has_no_word_encoder(tekken_backend, change) -> None:
    backend = tekken_backend
    description = json.loads(backend.to_str())
    assert word_encoder(description, backend) is not None
    change(description)
    assert word_encoder(description, backend) is None


def test_translation_keeps_ascii_members_only() -> None:
    assert translate(r"[^\r\n\p{L}\p{N}]?\p{Lu}+") == r"[^\r\nA-Za-z0-9]?[A-Z]+"
    assert translate(r"[\p{Ll}\p{Lm}]+|(a)") == "[a-z\\u0080-\\U0010ffff]+|(?:a)"
    assert translate(r"\p{Lo}") == "[\\u0080-\\U0010ffff]"
    assert translate(r"a{2}+") is None


def test_the_word_cache_is_bounded(tekken_backend) -> None:
    backend = tekken_backend
    words = word_encoder(json.loads(backend.to_str()), backend)
    words.size = 50
    for number in range(400):
        text = "w" + "".join(chr(97 + int(digit)) for digit in str(number)) + " again"  # a new word each time
        assert words.encode(text) == backend.encode(text, add_special_tokens=False).ids
        assert len(words._cache) <= 50
    assert words.misses >= 400
    long = "=" * 5000  # one word (a punctuation run): encoded, not kept
    assert words.encode(long) == backend.encode(long, add_special_tokens=False).ids
    assert long not in words._cache and all(len(word) <= CACHE_WORD_CHARS for word in words._cache)
