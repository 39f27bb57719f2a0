"""Differential: ``apply_chat_template(..., tokenize=True)`` against transformers 5.25.0 on the same model folder.

Identical ``input_ids``, ``attention_mask``, ``assistant_masks`` and identical errors (class and
message), over the bundled templates (with mistral-common's real vocabularies) and every corpus
template (with a BPE trained at test time), on the probe conversations; with and without
``sanitize_control_tokens``, padding and truncation, single and batched.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import chatjinja
from chatjinja.observation import probe_conversations
from tests.conftest import REPO, corpus_templates
from tests.training.conftest import reference_tokenizer

pytestmark = pytest.mark.reference

PROBES = probe_conversations("zq")
BUNDLED = sorted((REPO / "templates").glob("*.jinja"))
# the vocabulary each bundled template is written for
_BUNDLED_VOCABULARY = {"mistral-v1": "sentencepiece_folder", "mistral-v2-v3": "sentencepiece_folder"}


def _outcome(call: Any) -> Any:
    try:
        out = call()
    except Exception as exc:  # noqa: BLE001 - the error is the outcome compared
        return ("error", type(exc).__name__, str(exc))
    if isinstance(out, str):
        return out
    if isinstance(out, list):
        return out
    return {key: (value.tolist() if hasattr(value, "tolist") else value) for key, value in dict(out).items()}


def both(folder: Path, source: str, conversation: Any, extra: dict[str, Any], **options: Any) -> tuple[Any, Any]:
    reference = reference_tokenizer(folder)
    ours = _outcome(lambda: chatjinja.apply_chat_template(
        conversation, source, tokenizer=folder, budgets=None, **extra, **options))
    theirs = _outcome(lambda: reference.apply_chat_template(conversation, chat_template=source, **extra, **options))
    return ours, theirs


def _compare(failures: list[str], where: str, folder: Path, source: str, conversation: Any, extra: dict, **options: Any) -> bool:
    ours, theirs = both(folder, source, conversation, extra, **options)
    if ours != theirs:
        failures.append(f"{where} / {options}:\n  ours   {ours}\n  theirs {theirs}")
    return isinstance(theirs, tuple)  # an error


_SINGLE = ({"tokenize": True, "return_assistant_tokens_mask": True}, {"tokenize": True, "sanitize_control_tokens": True})
_PADDED = (
    {"tokenize": True, "return_assistant_tokens_mask": True, "padding": "max_length", "truncation": True, "max_length": 24},
    {"tokenize": True, "sanitize_control_tokens": True, "padding": "longest", "truncation": True, "max_length": 20,
     "tokenizer_kwargs": {"padding_side": "left", "pad_to_multiple_of": 4}},
)


def _sweep(folder: Path, source: str, name: str, singles: bool) -> list[str]:
    """Every probe with masks and sanitized, then the probes as padded and truncated batches.

    ``singles=False`` (the corpus sweep) sends the probes without extra arguments as one unpadded
    batch (each row is that conversation's single result) and goes one by one only when the batch
    fails, which costs a fraction of the calls.
    """
    failures: list[str] = []
    plain = {probe: messages for probe, (messages, extra) in PROBES.items() if not extra}
    for options in _SINGLE:
        one_by_one = dict(PROBES)
        if not singles:
            if not _compare(failures, f"{name} / unpadded batch", folder, source, list(plain.values()), {}, **options):
                one_by_one = {probe: value for probe, value in PROBES.items() if value[1]}
        for probe, (messages, extra) in one_by_one.items():
            _compare(failures, f"{name} / {probe}", folder, source, messages, extra, **options)
    for options in _PADDED:
        _compare(failures, f"{name} / padded batch", folder, source, list(plain.values()), {}, **options)
    return failures


@pytest.fixture(autouse=True)
def _quiet(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)  # transformers' and chatjinja's no-generation-tag warnings, once per call


@pytest.mark.parametrize("path", BUNDLED, ids=lambda path: path.stem)
def test_bundled_templates_with_real_vocabularies(path: Path, request: pytest.FixtureRequest) -> None:
    folder = request.getfixturevalue(_BUNDLED_VOCABULARY.get(path.stem, "tekken_folder"))
    failures = _sweep(folder, path.read_text(encoding="utf-8"), path.stem, singles=True)
    assert not failures, "\n".join(failures[:5])


@pytest.mark.corpus
def test_every_corpus_template(bpe_folder: Path) -> None:
    paths = corpus_templates()
    if not paths:
        pytest.skip("../shared/corpus not found")
    failures: list[str] = []
    for path in paths:
        failures += _sweep(bpe_folder, path.read_text(encoding="utf-8", errors="replace"), path.name, singles=False)
    assert not failures, f"{len(failures)} differences, first:\n" + "\n".join(failures[:5])


def test_generation_tags_give_masks_on_the_tagged_turns(bpe_folder: Path) -> None:
    """A guard that the sweep compares non-trivial masks: some corpus templates have tags, and their masks are not all zero."""
    tagged = [path for path in corpus_templates() if "{% generation %}" in path.read_text(encoding="utf-8", errors="replace")]
    if not tagged:
        pytest.skip("../shared/corpus not found")
    messages, _ = PROBES["assistant"]
    out = chatjinja.apply_chat_template(messages, tagged[0].read_text(encoding="utf-8"), tokenizer=bpe_folder, tokenize=True,
                                        return_assistant_tokens_mask=True, budgets=None)
    assert 0 < sum(out["assistant_masks"]) < len(out["input_ids"])
