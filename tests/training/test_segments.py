"""The piece-by-piece cached encode (``training/segments.py``) gives the plain ``tokenizers`` encode, and reuses repeated pieces."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import chatjinja
from chatjinja.observation import probe_conversations
from chatjinja.training.segments import SegmentEncoder, segment_encoder
from chatjinja.training.tokenizer import load_tokenizer
from tests.conftest import corpus_templates

tokenizers = pytest.importorskip("tokenizers")

FOLDERS = ("tekken_folder", "sentencepiece_folder", "bpe_folder")
# every probe conversation of every corpus template, rendered to text once (with BOS and EOS in the text)
_TEXTS: list[str] = []


def _corpus_texts() -> list[str]:
    if not _TEXTS:
        probes = probe_conversations("zq")
        for path in corpus_templates():
            source = path.read_text(encoding="utf-8", errors="replace")
            for messages, extra in probes.values():
                try:
                    _TEXTS.append(chatjinja.apply_chat_template(messages, source, budgets=None, bos_token="<s>", eos_token="</s>", **extra))
                except Exception:  # noqa: BLE001, S112 - a probe the template refuses has no text to encode
                    continue
        # pieces that start with the Metaspace replacement, spaces and tokens at both ends, nothing at all
        _TEXTS.extend(["", " leading", "<s>", "<s> x", "x<s>", " <s>  y </s>\n", "\u2581a", "\u2581hello <s>\u2581", "</s></s>"])
    return _TEXTS


def _backend(folder: Path):
    return tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))


def _differences(backend, encoder: SegmentEncoder, texts: list[str]) -> list[str]:
    found = []
    for text in texts:
        expected = backend.encode(text, add_special_tokens=False)
        for offsets in (True, False):
            ids, spans = encoder.encode(text, offsets)
            if ids != expected.ids or (offsets and spans != expected.offsets):
                found.append(f"{text[:80]!r} (offsets={offsets}):\n  cached {ids[:12]}\n  plain  {expected.ids[:12]}")
    return found


@pytest.mark.corpus
@pytest.mark.parametrize("fixture", FOLDERS)
def test_cached_encode_is_the_plain_encode_on_the_corpus_sweep(fixture: str, request: pytest.FixtureRequest) -> None:
    """Every corpus render through the cache, twice (cold, then from the cache), against ``backend.encode``."""
    texts = _corpus_texts()
    if len(texts) < 100:
        pytest.skip("../shared/corpus not found")
    backend = _backend(request.getfixturevalue(fixture))
    encoder = segment_encoder(backend)
    assert encoder is not None, f"{fixture}: its pipeline works piece by piece, so the cache must be used"
    failures = _differences(backend, encoder, texts)
    assert not failures, f"{len(failures)} differences, first:\n" + "\n".join(failures[:3])
    # the probes share their templates' text and turns: most pieces come from the cache
    assert encoder.hits > 2 * encoder.misses > 0


def test_overlapping_and_normalized_added_tokens_split_as_the_library_splits(bpe_folder: Path) -> None:
    """Leftmost-longest matches, raw tokens before normalized ones (``add_tokens`` adds normalized ones)."""
    backend = _backend(bpe_folder)
    backend.add_special_tokens([tokenizers.AddedToken("<|a|>", special=True, normalized=False),
                                tokenizers.AddedToken("<|a|>b", special=True, normalized=False)])
    backend.add_tokens(["ab", "abc", "b<|", "c a"])
    encoder = segment_encoder(backend)
    assert encoder is not None
    rng = random.Random(7)
    alphabet = ["a", "b", "c", " ", "<|", "|>", "<|a|>", "\n", "hello"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(400)]
    assert not _differences(backend, encoder, texts)


def test_metaspace_first_prepends_only_to_the_piece_at_offset_zero(sentencepiece_folder: Path) -> None:
    """A piece after an added token has no prefix space; the same text at offset 0 has one (so the cache keeps both)."""
    backend = _backend(sentencepiece_folder)
    encoder = segment_encoder(backend)
    assert encoder is not None
    for text in ("hello world", "</s>hello world", "hello world</s>hello world"):
        assert encoder.encode(text, True)[0] == backend.encode(text, add_special_tokens=False).ids
    assert encoder.encode("hello", False)[0] != encoder.encode("</s>hello", False)[0][1:]


def test_a_repeated_system_prompt_is_encoded_once(tekken_folder: Path) -> None:
    """Count-based: the second chat sharing the first's system prompt finds it (and the template's text) in the cache."""
    tokenizer = load_tokenizer(tekken_folder)
    encoder = tokenizer.segment_encoder()
    assert encoder is not None
    source = "{% for m in messages %}[INST]{{ m.content }}[/INST]{% endfor %}"
    system = "You are a careful assistant. " * 40
    reference = tokenizers.Tokenizer.from_file(str(tekken_folder / "tokenizer.json"))
    before = (encoder.hits, encoder.misses)
    for question in ("first question", "second question"):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        ids = chatjinja.apply_chat_template(messages, source, tokenizer=tokenizer, tokenize=True, return_dict=False)
        assert ids == reference.encode(f"[INST]{system}[/INST][INST]{question}[/INST]", add_special_tokens=False).ids
    hits, misses = encoder.hits - before[0], encoder.misses - before[1]
    assert misses <= 5  # at most: [INST], [/INST], the system prompt, and each question once
    assert hits >= 5  # the second chat's system prompt and its four added tokens


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["added_tokens"][0].update(lstrip=True),
        lambda d: d["added_tokens"][0].update(rstrip=True),
        lambda d: d["added_tokens"][0].update(single_word=True),
        lambda d: d["model"].update(dropout=0.1),
        lambda d: d.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "NewKind"}]}),
        lambda d: d.update(post_processor={"type": "NewProcessor"}),
        lambda d: d.update(normalizer={"type": "NewNormalizer"}),
        lambda d: (d.update(normalizer={"type": "Lowercase"}), d["added_tokens"][0].update(normalized=True)),
    ],
    ids=["lstrip", "rstrip", "single_word", "dropout", "unknown-pre-tokenizer", "unknown-post-processor",
         "unknown-normalizer", "normalized-token-under-normalizer"],
)
def test_a_pipeline_not_known_to_work_piece_by_piece_is_encoded_as_usual(bpe_folder: Path, change) -> None:
    description = json.loads(_backend(bpe_folder).to_str())
    assert segment_encoder(tokenizers.Tokenizer.from_str(json.dumps(description))) is not None
    change(description)
    text = json.dumps(description)
    fake = type("Described", (), {"to_str": lambda self: text})()
    assert segment_encoder(fake) is None


def test_the_cache_keeps_at_most_its_size_in_characters(tekken_folder: Path) -> None:
    backend = _backend(tekken_folder)
    encoder = SegmentEncoder(backend, json.loads(backend.to_str()), size=1000)
    for number in range(200):
        encoder.encode(f"[INST]sample number {number} of many[/INST]", False)
    assert encoder.misses >= 200
    assert 0 < encoder._chars <= 1000
    assert encoder._chars == sum(len(key[0] if isinstance(key, tuple) else key) for key in encoder._cache)
