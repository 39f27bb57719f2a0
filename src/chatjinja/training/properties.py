"""The properties trainers check before they trust a template's training data, measured by rendering.

* **prefix-preserving** (TRL ``is_chat_template_prefix_preserving``): adding a message never changes the
  text rendered for the messages before it (multi-turn RL and KV-cache reuse extend a render in place).
  Measured on a small suite of conversations: for every shape and every position ``k``, the render of
  the first ``k`` messages must be a prefix of the render of the first ``k + 1``, with and without the
  generation prompt. The first shape and position where it is not is the fact.
* **end-of-turn trained** (TRL ``is_chat_template_stop_token_trained``): rendered with the template's
  ``{% generation %}`` tags, the last non-whitespace text inside the assistant's spans (an assistant
  turn followed by a user message) is an end-of-turn token, so the model learns to stop.
* **only the assistant trained**: no character of a system, user or tool message's content lies
  inside a generation span.

The last two need generation tags; a template without them has no assistant mask at all and gets
``None`` (not applicable). The facts are text-level (no tokenizer needed): the "end-of-turn token" is
one of ``stop_tokens`` when the caller has them (a tokenizer's added tokens: TRL's definition), else
any text the template writes after the assistant's content, inside the span. ``chatjinja check`` reports them as the
TR codes (``training/rules.py``). They are not ``Capabilities``: those are the facts the static
analyser predicts, and these need renders.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..observation import SPECIAL_TOKENS, render_text
from .encode import encode_chats
from .tokenizer import ChatTokenizer, load_tokenizer

__all__ = ["PrefixBreak", "TrainingProperties", "measure", "extends", "property_problems", "PREFIX_SHAPES"]

_CALL = {"type": "function", "function": {"name": "dummy", "arguments": {}}}
_CALL_STRING = {"type": "function", "function": {"name": "dummy", "arguments": "{}"}}


def _tool_shape(call: dict[str, Any]) -> list[dict[str, Any]]:
    # TRL's own pair is this shape's first three messages (position 2 + the tool message, with the generation prompt)
    return [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "dummy", "content": "dummy"}, {"role": "assistant", "content": "done"},
            {"role": "user", "content": "more"}]


#: shape -> the conversation whose every prefix is rendered
PREFIX_SHAPES: dict[str, list[dict[str, Any]]] = {
    "chat": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"},
             {"role": "user", "content": "again"}, {"role": "assistant", "content": "done"}],
    "system": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"},
               {"role": "assistant", "content": "hi"}, {"role": "user", "content": "again"}],
    "tool_call": _tool_shape(_CALL),
    "reasoning": [{"role": "user", "content": "hello"},
                  {"role": "assistant", "content": "ans", "reasoning_content": "think"},
                  {"role": "user", "content": "again"}, {"role": "assistant", "content": "done"}],
}

_SENTINELS = {"system": "Sys7sentinel", "user": "Usr7sentinel", "tool": "Tol7sentinel"}
_MASK_CONVERSATIONS = (
    [{"role": "system", "content": _SENTINELS["system"]}, {"role": "user", "content": _SENTINELS["user"]},
     {"role": "assistant", "content": "dummy"}, {"role": "user", "content": _SENTINELS["user"]}],
    [{"role": "user", "content": _SENTINELS["user"]}, {"role": "assistant", "content": "", "tool_calls": [_CALL]},
     {"role": "tool", "name": "dummy", "content": _SENTINELS["tool"]}, {"role": "assistant", "content": "dummy"},
     {"role": "user", "content": _SENTINELS["user"]}],
)
# TRL's conversation for the stop token: an assistant turn followed by a user message
_STOP_CONVERSATION = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "dummy"},
                      {"role": "user", "content": "dummy"}]


# (a template without the tag renders no spans: not rendered for them, so the runtime's warning about it is not logged)
_GENERATION_TAG = re.compile(r"\{%[-+]?\s*generation\b")


@dataclass(frozen=True, slots=True)
class PrefixBreak:
    """Where adding a message changed earlier text: ``shape`` with ``position`` messages, then one more."""

    shape: str
    position: int  # messages rendered before the added one
    added_role: str
    add_generation_prompt: bool  # of the longer render
    offset: int  # first character where the two renders differ
    before: str  # the shorter render from ``offset`` (a few characters; its last ones when ``tokens_only``)
    after: str  # the longer render from ``offset``
    tokens_only: bool = False  # the text is a prefix, its token ids are not (a merge across the end)

    def message(self) -> str:
        prompt = " with the generation prompt" if self.add_generation_prompt else ""
        head = f"adding a {self.added_role} message after {self.position} message(s) of the '{self.shape}' conversation{prompt}"
        if self.tokens_only:
            return (f"{head} changes the tokens before it: the text goes on from {self.before[-10:]!r} with "
                    f"{self.after[:20]!r} and the tokenizer merges across that boundary")
        return f"{head} changes the text before it: at character {self.offset} it was {self.before!r}, now {self.after!r}"


@dataclass(frozen=True, slots=True)
class TrainingProperties:
    """The measured properties (``None``: could not be measured, or not applicable)."""

    prefix_preserving: bool | None  # None: no prefix pair rendered
    prefix_break: PrefixBreak | None
    generation_tags: bool  # the stop-token render has a non-empty generation span
    stop_token_trained: bool | None  # None without generation tags (or when the render raised)
    last_trained: str | None  # the last non-whitespace text of the spans (its final 20 characters)
    trained_roles: tuple[str, ...] | None  # roles whose content lies inside a span; None without tags

    def as_dict(self) -> dict[str, Any]:
        brk = self.prefix_break
        return {"prefix_preserving": self.prefix_preserving,
                "prefix_break": None if brk is None else {
                    "shape": brk.shape, "position": brk.position, "added_role": brk.added_role,
                    "add_generation_prompt": brk.add_generation_prompt, "offset": brk.offset},
                "generation_tags": self.generation_tags, "stop_token_trained": self.stop_token_trained,
                "trained_roles": None if self.trained_roles is None else list(self.trained_roles)}


def _render(source: str, messages: list, variables: dict[str, str], add_generation_prompt: bool = False,
            spans: bool = False) -> Any:
    """The render (text, or (text, spans)), or ``None`` when it raises (any error: not measured)."""
    outcome = render_text(source, [dict(m) for m in messages], variables=variables,
                          add_generation_prompt=add_generation_prompt, spans=spans)
    if not outcome.ok:
        return None
    return (outcome.text, outcome.spans) if spans else outcome.text


def _type_error(source: str, messages: list, variables: dict[str, str]) -> bool:
    outcome = render_text(source, [dict(m) for m in messages], variables=variables)
    return outcome.error is not None and outcome.error.startswith("TypeError")


def _first_difference(a: str, b: str) -> int:
    i = 0
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def _ids(tokenizer: ChatTokenizer, text: str) -> list[int]:
    return encode_chats(tokenizer, [text], None, batched=False)["input_ids"]


def _starts(longer: str, shorter: str, tokenizer: ChatTokenizer | None) -> bool:
    """``longer`` extends ``shorter``: as text, and (with a tokenizer) as token ids, where a merge across the end can break it."""
    if not longer.startswith(shorter):
        return False
    if tokenizer is None:
        return True
    short = _ids(tokenizer, shorter)
    return _ids(tokenizer, longer)[:len(short)] == short


def extends(source: str, shorter: list, longer: list, add_generation_prompt: bool,
            special_tokens: dict[str, str] | None = None, tokenizer: Any = None) -> bool | None:
    """Whether the render of ``shorter`` is a prefix of the render of ``longer`` (``None``: a render raised).

    With a ``tokenizer``, also as token ids: TRL's ``is_chat_template_prefix_preserving`` is this on
    its one pair.
    """
    variables = dict(SPECIAL_TOKENS if special_tokens is None else special_tokens)
    a = _render(source, shorter, variables)
    b = _render(source, longer, variables, add_generation_prompt)
    chat_tokenizer = None if tokenizer is None else load_tokenizer(tokenizer)
    return None if a is None or b is None else _starts(b, a, chat_tokenizer)


def _prefix(source: str, variables: dict[str, str], tokenizer: ChatTokenizer | None) -> tuple[bool | None, PrefixBreak | None]:
    measured = False
    for shape, messages in PREFIX_SHAPES.items():
        if shape == "tool_call" and _type_error(source, messages[:2], variables):
            messages = _tool_shape(_CALL_STRING)  # as TRL: templates that reject dict arguments get a string
        renders = [_render(source, messages[:k], variables) for k in range(1, len(messages) + 1)]
        for k in range(1, len(messages)):
            shorter = renders[k - 1]
            if shorter is None:
                continue
            for prompt in (False, True):
                longer = renders[k] if not prompt else _render(source, messages[:k + 1], variables, True)
                if longer is None:
                    continue
                measured = True
                if not _starts(longer, shorter, tokenizer):
                    if longer.startswith(shorter):  # the token ids break, the text does not
                        at = len(shorter)
                        return False, PrefixBreak(shape, k, messages[k]["role"], prompt, at, shorter[-30:], longer[at:at + 30], True)
                    at = _first_difference(shorter, longer)
                    return False, PrefixBreak(shape, k, messages[k]["role"], prompt, at, shorter[at:at + 30], longer[at:at + 30])
    return (True if measured else None), None


def _spans_text(text: str, spans: list) -> str:
    return "".join(text[start:end] for start, end in sorted(spans))


def measure(source: str, special_tokens: dict[str, str] | None = None, stop_tokens: Iterable[str] | None = None,
            tokenizer: Any = None) -> TrainingProperties:
    """Render the property conversations with the template ``source`` and read the three properties off them.

    ``special_tokens`` are the template variables (default: probing's ``<s>``/``</s>``/``<unk>``).
    ``stop_tokens``: the texts that count as an end-of-turn token (a tokenizer's added tokens: TRL's
    definition); without them, the trained text must end with text the template writes after the
    assistant's content (not with the content itself), which needs no tokenizer. A ``tokenizer``
    (anything ``load_tokenizer`` takes) makes both TRL's: prefixes compared as token ids too (a
    merge across the end of the shorter render breaks them), its added tokens the stop tokens.
    """
    variables = dict(SPECIAL_TOKENS if special_tokens is None else special_tokens)
    chat_tokenizer = None if tokenizer is None else load_tokenizer(tokenizer)
    if stop_tokens is None and chat_tokenizer is not None:
        stop_tokens = [token.content for token in chat_tokenizer.added_tokens()]
    preserving, brk = _prefix(source, variables, chat_tokenizer)
    stops = None if stop_tokens is None else tuple(t for t in stop_tokens if t.strip())

    generation_tags, stop_trained, last = False, None, None
    rendered = _render(source, _STOP_CONVERSATION, variables, spans=True) if _GENERATION_TAG.search(source) else None
    if rendered is not None:
        text, spans = rendered
        trained = _spans_text(text, spans).rstrip()
        if trained:
            generation_tags = True
            last = trained[-20:]
            content = _STOP_CONVERSATION[1]["content"]
            stop_trained = (not trained.endswith(content)) if stops is None else any(map(trained.endswith, stops))
    roles: tuple[str, ...] | None = None
    if generation_tags:
        inside: set[str] = set()
        for conversation in _MASK_CONVERSATIONS:
            rendered = _render(source, conversation, variables, spans=True)
            if rendered is None:
                continue
            text, spans = rendered
            trained = _spans_text(text, spans)
            inside.update(role for role, sentinel in _SENTINELS.items() if sentinel in trained)
        roles = tuple(sorted(inside))
    return TrainingProperties(preserving, brk, generation_tags, stop_trained, last, roles)


def property_problems(source: str, special_tokens: dict[str, str] | None = None, tokenizer: Any = None) -> list[tuple[str, str]]:
    """``[(code, message)]``: the TR codes (``training/rules.py``) this template shows.

    ``tokenizer`` (a model folder with a tokenizer.json, say) makes the checks TRL's, on token ids; when
    it cannot be loaded (no tokenize extra, a broken file) they stay text-level.
    """
    if tokenizer is not None:
        try:
            tokenizer = load_tokenizer(tokenizer)
        except Exception:  # noqa: BLE001 - the text-level checks need no tokenizer
            tokenizer = None
    found = measure(source, special_tokens, tokenizer=tokenizer)
    problems: list[tuple[str, str]] = []
    if found.prefix_break is not None:
        problems.append(("TR001", found.prefix_break.message()))
    if found.stop_token_trained is False:
        problems.append(("TR002", f"the assistant's trained text ends with {found.last_trained!r}, not an end-of-turn "
                                  "token: the model is never trained to stop"))
    if found.trained_roles:
        problems.append(("TR003", f"the assistant mask covers the content of {', '.join(found.trained_roles)} messages"))
    return problems
