"""Real tokenizers without a hub, built at test time: a small BPE trained here, and mistral-common's own vocabularies.

Each is saved as a model folder that both sides load: ``transformers.AutoTokenizer.from_pretrained``
(the reference) and chatjinja. Built once per session.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO, corpus_templates

_CONTROL_RE = re.compile(r"<\|[A-Za-z0-9_.:/-]{1,40}\|>|\[/?[A-Z][A-Z_]{1,30}\]|<(?:start|end)_of_[a-z_]+>|</?s>")
_BASE = ["<unk>", "<s>", "</s>", "<pad>"]
_TRAINING_TEXT = [
    "hello world how are you today", "fine thanks and you", "the quick brown fox jumps over the lazy dog",
    "user assistant system tool function call arguments name content", "done more again next ans",
    '{"type": "function", "function": {"name": "def", "description": "d", "parameters": {}}}',
    "You are a helpful assistant. Today Date: 26 Jul 2024 Knowledge cutoff", "\n\n  \t ",
]


def control_tokens_of(paths: list[Path]) -> list[str]:
    """The control-token-looking literals of these templates (``<|im_start|>``, ``[INST]``, ...), sorted."""
    found: set[str] = set()
    for path in paths:
        found.update(_CONTROL_RE.findall(path.read_text(encoding="utf-8", errors="replace")))
    return sorted(found - set(_BASE))


def _bpe_folder(folder: Path, control: list[str]) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=_BASE + control, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(_TRAINING_TEXT * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>")
    fast.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def bpe_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BPE trained at test time whose special tokens are every control token of the bundled and corpus templates."""
    pytest.importorskip("tokenizers")
    pytest.importorskip("transformers")
    paths = sorted((REPO / "templates").glob("*.jinja")) + corpus_templates()
    return _bpe_folder(tmp_path_factory.mktemp("bpe"), control_tokens_of(paths))


def _mistral_data() -> Path:
    mistral_common = pytest.importorskip("mistral_common")
    return Path(mistral_common.__file__).parent / "data"


@pytest.fixture(scope="session")
def sentencepiece_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mistral-common's v3 SentencePiece vocabulary, converted by transformers (LlamaTokenizer) and saved."""
    spm = pytest.importorskip("sentencepiece")
    pytest.importorskip("transformers")
    from tokenizers import AddedToken
    from transformers import LlamaTokenizer
    from transformers.convert_slow_tokenizer import generate_merges

    processor = spm.SentencePieceProcessor(model_file=str(_mistral_data() / "mistral_instruct_tokenizer_240323.model.v3"))
    vocab = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())}
    control = [processor.id_to_piece(i) for i in range(processor.get_piece_size()) if processor.is_control(i)]
    extra = [AddedToken(token, normalized=False, special=True) for token in control if token not in ("<s>", "</s>")]
    tokenizer = LlamaTokenizer(vocab=vocab, merges=generate_merges(vocab), additional_special_tokens=extra)
    folder = tmp_path_factory.mktemp("spm")
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def tekken_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mistral-common's tekken vocabulary (Devstral's family), converted by transformers' Mistral converter and saved."""
    pytest.importorskip("transformers")
    from transformers.integrations.mistral.tokenizer import convert_tekken_tokenizer

    tokenizer = convert_tekken_tokenizer(str(_mistral_data() / "tekken_240911.json"), chat_template="{{ '' }}")
    folder = tmp_path_factory.mktemp("tekken")
    tokenizer.save_pretrained(str(folder))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder


_REFERENCE: dict[str, object] = {}


def reference_tokenizer(folder: Path) -> object:
    """``AutoTokenizer.from_pretrained(folder)``, once per folder per session."""
    from transformers import AutoTokenizer

    key = str(folder)
    if key not in _REFERENCE:
        _REFERENCE[key] = AutoTokenizer.from_pretrained(key)
    return _REFERENCE[key]
