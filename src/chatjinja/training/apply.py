"""``apply_chat_template`` with transformers 5.25.0's tokenizing options: the checks in its order, the render, then the encoding."""

from __future__ import annotations

import copy
import re
import threading
from collections import OrderedDict
from typing import Any

from jinja2 import TemplateSyntaxError

from ..runtime.messages import normalize_chat_messages
from ..runtime.render import render_source, warn_once
from .control_tokens import control_tokens, mark_control_tokens, marking_pattern
from .encode import encode_chats
from .tokenizer import ChatTokenizer, load_tokenizer

__all__ = [
    "ASSISTANT_MASKS",
    "BATCH_OPTIONS",
    "NO_GENERATION_WARNING",
    "TOKENIZE_DEFAULTS",
    "batch_tokenizing",
    "derived_source",
    "prepare_batch",
    "tokenized_chat",
    "tokenized_record",
]

_GENERATION_TAG_RE = re.compile(r"\{\%-?\s*generation\s*-?\%\}")

#: transformers' warning (``render_jinja_template``), in its words, for masks asked of a template without tags
NO_GENERATION_WARNING = "return_assistant_tokens_mask==True but chat template does not contain `{% generation %}` keyword."

#: where assistant masks come from: the template's own ``{% generation %}`` tags (transformers), or
#: tags synthesised by :func:`chatjinja.training.generation_tags.add_generation_tags`
ASSISTANT_MASKS = ("template", "derived")

#: apply_chat_template's tokenizing parameters and their defaults (transformers' names; ``tokenize``
#: defaults to False in chatjinja, where the text is the common case and a tokenizer is optional)
TOKENIZE_DEFAULTS: dict[str, Any] = {
    "tokenize": False,
    "return_dict": True,
    "return_assistant_tokens_mask": False,
    "sanitize_control_tokens": False,
    "padding": False,
    "truncation": False,
    "max_length": None,
    "return_tensors": None,
    "tokenizer_kwargs": None,
    "tokenizer": None,
    "assistant_masks": "template",
}

_SANITIZE_ERROR = (
    "`sanitize_control_tokens=True` requires `tokenize=True` and is not compatible with "
    "`return_assistant_tokens_mask=True`."
)


# template source -> its copy with synthesised generation tags, or the refusal (an exception): tagging
# renders the template up to MAX_RENDERS times, so it is done once per source, like compiling
_DERIVED: "OrderedDict[str, str | Exception]" = OrderedDict()
_DERIVED_SIZE = 64
_DERIVED_LOCK = threading.Lock()


def _tagging(source: str) -> str | Exception:
    """The cache entry of ``source``: its tagged copy, or the refusal ``add_generation_tags`` raised."""
    with _DERIVED_LOCK:
        entry = _DERIVED.get(source)
        if entry is not None:
            _DERIVED.move_to_end(source)
            return entry
    from . import generation_tags  # lazy: tagging loads the parser (Lark) and the probe: only derived masks need them

    try:
        entry = generation_tags.add_generation_tags(source)
    except (generation_tags.GenerationTagsRefused, TemplateSyntaxError) as exc:  # the template's, not the moment's: kept
        entry = exc.with_traceback(None)
    _keep(source, entry)
    return entry


def _keep(source: str, entry: str | Exception) -> None:
    with _DERIVED_LOCK:
        _DERIVED[source] = entry
        _DERIVED.move_to_end(source)
        while len(_DERIVED) > _DERIVED_SIZE:
            _DERIVED.popitem(last=False)


def derived_source(source: str) -> str:
    """``add_generation_tags(source)``, tagged once per source per process; a refusal is kept and raised
    again (a fresh copy, the same class and message) for every call that needs it."""
    entry = _tagging(source)
    if isinstance(entry, Exception):
        raise copy.copy(entry)
    return entry


def tokenized_chat(
    template: Any,
    conversation: Any,
    tools: list | None,
    documents: list | None,
    add_generation_prompt: bool,
    continue_final_message: bool | str,
    return_assistant_spans: bool,
    *,
    budgets: Any,
    strict: bool,
    variables: dict[str, Any],
    tokenize: bool = False,
    return_dict: bool = True,
    return_assistant_tokens_mask: bool = False,
    sanitize_control_tokens: bool = False,
    padding: Any = False,
    truncation: Any = False,
    max_length: int | None = None,
    return_tensors: Any = None,
    tokenizer_kwargs: dict[str, Any] | None = None,
    tokenizer: Any = None,
    assistant_masks: str = "template",
    chat_template: str | None = None,
) -> Any:
    """What ``tokenizer.apply_chat_template(conversation, ...)`` returns, for a ``ChatTemplate`` and a tokenizer.

    ``variables`` are the caller's template variables (``kwargs`` of transformers), without the
    special tokens. Beyond transformers: ``sanitize_control_tokens=True`` works with
    ``return_assistant_tokens_mask=True``, and ``assistant_masks="derived"`` takes the masks (or,
    with ``tokenize=False``, the ``return_assistant_spans``) from synthesised generation tags.
    """
    if not tokenize:
        return_dict = False
    if return_assistant_tokens_mask and not (return_dict and tokenize):
        raise ValueError("`return_assistant_tokens_mask=True` requires `return_dict=True` and `tokenize=True`")
    if return_assistant_spans and tokenize:
        raise ValueError("return_assistant_spans goes with tokenize=False; with tokenize=True ask for return_assistant_tokens_mask=True")
    if assistant_masks not in ASSISTANT_MASKS:
        raise ValueError(f"assistant_masks must be one of {list(ASSISTANT_MASKS)}, got {assistant_masks!r}")

    source = template.select_source(tools, chat_template)
    if isinstance(conversation, (list, tuple)) and len(conversation) == 0:
        raise ValueError("Cannot apply chat template to an empty conversation. Provide at least one message.")
    if isinstance(conversation, (list, tuple)) and (
        isinstance(conversation[0], (list, tuple)) or hasattr(conversation[0], "messages")
    ):
        conversations, batched = list(conversation), True
    else:
        conversations, batched = [conversation], False
    conversations = [normalize_chat_messages(chat) for chat in conversations]
    if continue_final_message:
        if add_generation_prompt:
            raise ValueError(
                "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when you want the model to continue the final message, and add_generation_prompt when you want to add a header that will prompt it to start a new assistant message instead."
            )
        if return_assistant_tokens_mask:
            raise ValueError("continue_final_message is not compatible with return_assistant_tokens_mask.")
    if sanitize_control_tokens and not tokenize:
        raise ValueError(_SANITIZE_ERROR)

    if tokenizer is None:
        tokenizer = getattr(template, "tokenizer", None)
    if tokenize and tokenizer is None:
        raise ValueError(
            "tokenize=True needs a tokenizer: pass tokenizer= (a tokenizers.Tokenizer, a tokenizer.json path "
            "or a model folder), or load the template from a model folder that has a tokenizer.json"
        )
    chat_tokenizer: ChatTokenizer | None = load_tokenizer(tokenizer) if tokenizer is not None else None

    want_spans = return_assistant_tokens_mask or return_assistant_spans
    if want_spans and assistant_masks == "derived":
        source = derived_source(source)
    if sanitize_control_tokens:
        tokens_re, _ = marking_pattern(control_tokens(chat_tokenizer, source))
        conversations = [mark_control_tokens(chat, tokens_re) for chat in conversations]
        tools = mark_control_tokens(tools, tokens_re)
        documents = mark_control_tokens(documents, tokens_re)
        variables = mark_control_tokens(variables, tokens_re)
    special = template.special_tokens or (chat_tokenizer.special_tokens if chat_tokenizer is not None else {})
    tagged = return_assistant_tokens_mask and bool(_GENERATION_TAG_RE.search(source))
    if return_assistant_tokens_mask and not tagged:
        warn_once(NO_GENERATION_WARNING, (NO_GENERATION_WARNING, source))  # once per source, not per conversation

    rendered = render_source(
        conversations if batched else conversations[0],
        source,
        tools,
        documents,
        add_generation_prompt,
        continue_final_message,
        return_assistant_spans or tagged,
        budgets=budgets,
        strict=strict,
        variables={**special, **variables} if special else variables,
    )
    if not tokenize:
        return rendered
    spans = None
    if return_assistant_tokens_mask:
        if tagged:
            rendered, spans = rendered
            spans = spans if batched else [spans]
        else:
            spans = [[] for _ in conversations]
    chats = rendered if batched else [rendered]
    out = encode_chats(
        chat_tokenizer,
        chats,
        spans,
        batched=batched,
        padding=padding,
        truncation=truncation,
        max_length=max_length,
        return_tensors=return_tensors,
        sanitize_control_tokens=sanitize_control_tokens,
        tokenizer_kwargs=tokenizer_kwargs,
        budgets=budgets,
    )
    return out if return_dict else out["input_ids"]


#: the tokenizing options a batch takes (each record is one unpadded sequence with its assistant mask)
BATCH_OPTIONS = ("tokenize", "tokenizer", "sanitize_control_tokens", "assistant_masks")


def batch_tokenizing(options: dict[str, Any]) -> dict[str, Any] | None:
    """The tokenizing options of a batch call (popped from ``options``), the tokenizer loaded; ``None`` for text."""
    given = {name: options.pop(name) for name in list(options) if name in TOKENIZE_DEFAULTS}
    if not given.get("tokenize"):
        if given:
            raise ValueError(f"{sorted(given)[0]} goes with tokenize=True in a batch")
        return None
    for name in given:
        if name not in BATCH_OPTIONS:
            raise ValueError(
                f"a tokenized batch writes one unpadded sequence per record: {name} is not a batch option "
                f"(the batch options are {', '.join(BATCH_OPTIONS)})"
            )
    if given.get("tokenizer") is not None:
        given["tokenizer"] = load_tokenizer(given["tokenizer"])  # once here; pickled as its path, loaded once per worker
    if given.get("assistant_masks", "template") not in ASSISTANT_MASKS:
        raise ValueError(f"assistant_masks must be one of {list(ASSISTANT_MASKS)}, got {given['assistant_masks']!r}")
    return given


# the key of a batch's tokenizing options that carries the tagging done before the run (never an option)
_TAGGED = "tagged"


def prepare_batch(template: Any, parameters: dict[str, Any], tokenizing: dict[str, Any]) -> dict[str, Any]:
    """A tokenized batch's options with the work of the run done once, before any worker starts.

    With ``assistant_masks="derived"``, the template (as the caller's ``tools`` / ``chat_template``
    select it) is tagged here and the copy, or the refusal, travels with the options, so no worker and
    no record tags it again; with the template's own masks, transformers' warning for a template without
    ``{% generation %}`` is said here, once. A record that selects another source tags it in its worker
    (once per source there).
    """
    try:
        source = template.select_source(parameters.get("tools"), parameters.get("chat_template"))
    except Exception:  # noqa: BLE001 - each record raises it in its place
        return tokenizing
    if tokenizing.get("assistant_masks", "template") == "derived":
        return {**tokenizing, _TAGGED: (source, _tagging(source))}
    if not _GENERATION_TAG_RE.search(source):
        warn_once(NO_GENERATION_WARNING, (NO_GENERATION_WARNING, source))
    return tokenizing


def tokenized_record(template: Any, messages: list, parameters: dict[str, Any], tokenizing: dict[str, Any]) -> dict[str, list[int]]:
    """One batch record tokenized: ``{"input_ids": [...], "assistant_masks": [...]}`` (``ChatTemplate.render`` parameters in)."""
    if _TAGGED in tokenizing:
        tokenizing = dict(tokenizing)
        source, entry = tokenizing.pop(_TAGGED)
        if _DERIVED.get(source) is not entry:  # a worker of another process start, or a cache that moved on
            _keep(source, entry)
    parameters = dict(parameters)
    budgets = parameters.pop("budgets", template.budgets)
    strict = parameters.pop("strict", template.strict)
    out = tokenized_chat(
        template,
        messages,
        parameters.pop("tools", None),
        parameters.pop("documents", None),
        parameters.pop("add_generation_prompt", False),
        parameters.pop("continue_final_message", False),
        parameters.pop("return_assistant_spans", False),
        budgets=budgets,
        strict=strict,
        variables=parameters.pop("variables", None) or {},
        chat_template=parameters.pop("chat_template", None),
        return_assistant_tokens_mask=True,
        **tokenizing,
    )
    return {"input_ids": out["input_ids"], "assistant_masks": out["assistant_masks"]}
