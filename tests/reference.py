"""The reference: transformers' ``apply_chat_template(..., tokenize=False)`` on a tiny in-memory tokenizer.

Both sides are called through ``outcome()`` so a test compares (kind, text-or-error) pairs:
``("text", rendered)`` or ``("error", ExceptionClassName, message)``.
"""

from __future__ import annotations

import copy
import functools
import os
from typing import Any, Callable

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


@functools.cache
def hf_tokenizer() -> Any:
    """A PreTrainedTokenizerFast with ``<s>``, ``</s>``, ``<unk>`` and nothing else: only its template code matters."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2}, unk_token="<unk>"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL_TOKENS)


def outcome(fn: Callable[[], Any]) -> tuple:
    try:
        return ("text", fn())
    except Exception as exc:  # noqa: BLE001 - the class is what we compare
        return ("error", type(exc).__name__, str(exc))


def hf_outcome(template: str, conversation: Any, **kwargs: Any) -> tuple:
    conversation = copy.deepcopy(conversation)
    return outcome(lambda: hf_tokenizer().apply_chat_template(conversation, chat_template=template, tokenize=False, **kwargs))


def our_outcome(template: str, conversation: Any, **kwargs: Any) -> tuple:
    from chatjinja import apply_chat_template

    conversation = copy.deepcopy(conversation)
    variables = {**SPECIAL_TOKENS, **kwargs}
    return outcome(lambda: apply_chat_template(conversation, template, **variables))
