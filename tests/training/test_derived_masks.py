"""Differential: ``assistant_masks="derived"`` against transformers 5.25.0 given the synthesised tags as its template.

For untagged templates (the bundled ones with mistral-common's real vocabularies, and corpus
templates the issue names with a BPE trained at test time), chatjinja's derived masks equal what
``AutoTokenizer.from_pretrained(folder).apply_chat_template(..., chat_template=add_generation_tags(source))``
computes: same ``input_ids``, ``attention_mask`` and ``assistant_masks``, and the masks mark tokens.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import chatjinja
from chatjinja.observation import probe_conversations
from chatjinja.training.generation_tags import GenerationTagsRefused
from tests.conftest import CORPUS, REPO
from tests.training.conftest import reference_tokenizer

pytestmark = pytest.mark.reference

PROBES = {name: value for name, value in probe_conversations("zq").items() if any(m.get("role") == "assistant" for m in value[0])}
BUNDLED = sorted((REPO / "templates").glob("*.jinja"))
_BUNDLED_VOCABULARY = {"mistral-v1": "sentencepiece_folder", "mistral-v2-v3": "sentencepiece_folder"}
#: untagged corpus templates of the families the issue names (all-zero masks in transformers without tags)
CORPUS_UNTAGGED = [
    "chujiezheng/Llama-3.1-Instruct.jinja",
    "llama.cpp/Qwen-Qwen3-0.6B.jinja",
    "llama.cpp/Qwen-Qwen2.5-7B-Instruct.jinja",
    "llama.cpp/openai-gpt-oss-120b.jinja",
    "trl/qwen3_instruct_2507.jinja",
    "trl/gemma3.jinja",
]
_OPTIONS = {"tokenize": True, "return_dict": True, "return_assistant_tokens_mask": True}


@pytest.fixture(autouse=True)
def _quiet(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)


def _plain(out: Any) -> dict:
    return {key: (value.tolist() if hasattr(value, "tolist") else value) for key, value in dict(out).items()}


def _outcome(call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return _plain(call(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the error (a probe the template rejects) is the outcome compared
        return ("error", type(exc).__name__, str(exc))


def _compare(folder: Path, source: str, name: str) -> int:
    """Every probe with an assistant turn, single and as one padded batch; returns how many tokens the masks mark."""
    reference = reference_tokenizer(folder)
    tagged = chatjinja.add_generation_tags(source)
    assert tagged != source, name
    marked = 0
    runs = [(messages, extra, {}) for messages, extra in PROBES.values()]
    plain = [messages for messages, extra in PROBES.values() if not extra]
    runs.append((plain, {}, {"padding": "longest"}))
    for messages, extra, padding in runs:
        ours = _outcome(chatjinja.apply_chat_template, messages, source, tokenizer=folder, budgets=None,
                        assistant_masks="derived", **extra, **_OPTIONS, **padding)
        theirs = _outcome(reference.apply_chat_template, messages, chat_template=tagged, **extra, **_OPTIONS, **padding)
        assert ours == theirs, (name, messages)
        if isinstance(ours, tuple):
            continue
        masks = ours["assistant_masks"]
        marked += sum(sum(row) for row in masks) if masks and isinstance(masks[0], list) else sum(masks)
    return marked


@pytest.mark.parametrize("path", BUNDLED, ids=lambda path: path.stem)
def test_bundled_templates_derived_masks_equal_transformers_on_the_tagged_copy(path: Path, request: pytest.FixtureRequest) -> None:
    folder = request.getfixturevalue(_BUNDLED_VOCABULARY.get(path.stem, "tekken_folder"))
    assert _compare(folder, path.read_text(encoding="utf-8"), path.stem) > 0


@pytest.mark.corpus
@pytest.mark.parametrize("name", CORPUS_UNTAGGED)
def test_corpus_templates_derived_masks_equal_transformers_on_the_tagged_copy(name: str, bpe_folder: Path) -> None:
    path = CORPUS / "templates" / name
    if not path.is_file():
        pytest.skip(f"{path} not found")
    assert _compare(bpe_folder, path.read_text(encoding="utf-8"), name) > 0


def test_default_masks_stay_transformers_zeros(bpe_folder: Path) -> None:
    """Without the option an untagged template gives transformers' answer: all-zero masks."""
    source = BUNDLED[0].read_text(encoding="utf-8")
    messages, _ = PROBES["assistant"]
    out = chatjinja.apply_chat_template(messages, source, tokenizer=bpe_folder, budgets=None, **_OPTIONS)
    theirs = reference_tokenizer(bpe_folder).apply_chat_template(messages, chat_template=source, **_OPTIONS)
    assert _plain(out) == _plain(theirs) and not any(out["assistant_masks"])


def test_a_refused_template_says_why(bpe_folder: Path) -> None:
    source = "{% for m in messages %}{{ m['role'] }}{% endfor %}"
    messages, _ = PROBES["assistant"]
    with pytest.raises(GenerationTagsRefused, match="renders no assistant message content"):
        chatjinja.apply_chat_template(messages, source, tokenizer=bpe_folder, assistant_masks="derived", **_OPTIONS)
