"""How the template renders a case and why a case differs: re-render with mistral-common's own normalisations until the template agrees, else name the missing feature."""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass
from typing import Callable

from ..loading import TemplateRecord
from ..runtime.render import render_source
from .compare import whitespace_only
from .reference import Reference
from .report import CaseResult
from .suite import ConversationCase

__all__ = ["NORMALISATIONS", "Normalisation", "explain_case", "render_case"]

Messages = list[dict]
DEFAULT_SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}


@dataclass(frozen=True)
class Normalisation:
    """Something mistral-common does to a conversation before encoding it, redone on the template's input."""

    name: str
    cause: str
    apply: Callable[[Messages], Messages]
    versions: tuple[str, ...] | None = None  # None: every version


def _text_of(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(c, dict) and c.get("type") == "text" for c in content):
        return "\n\n".join(str(c.get("text", "")) for c in content)
    return None


def _merge_same_role(messages: Messages) -> Messages:
    out: Messages = []
    for message in messages:
        previous = out[-1] if out else None
        if (
            previous is not None
            and message.get("role") in ("user", "assistant")
            and previous.get("role") == message.get("role")
            and not previous.get("tool_calls")
            and not message.get("tool_calls")
            and _text_of(previous.get("content")) is not None
            and _text_of(message.get("content")) is not None
        ):
            previous["content"] = _text_of(previous["content"]) + "\n\n" + _text_of(message["content"])
            continue
        out.append(dict(message))
    return out


def _join_text_chunks(messages: Messages) -> Messages:
    out = []
    for message in messages:
        message = dict(message)
        content = message.get("content")
        if isinstance(content, list):
            joined = _text_of(content)
            if joined is not None:
                message["content"] = joined
            else:  # join runs of adjacent text chunks, keep the others
                chunks: list[dict] = []
                for chunk in content:
                    if chunk.get("type") == "text" and chunks and chunks[-1].get("type") == "text":
                        chunks[-1] = {"type": "text", "text": chunks[-1]["text"] + "\n\n" + chunk["text"]}
                    else:
                        chunks.append(dict(chunk))
                message["content"] = chunks
        out.append(message)
    return out


def _strip_assistant_trailing(messages: Messages) -> Messages:
    out = []
    for message in messages:
        message = dict(message)
        if message.get("role") == "assistant" and isinstance(message.get("content"), str):
            message["content"] = message["content"].rstrip()
        out.append(message)
    return out


def _system_into_user(which: str) -> Callable[[Messages], Messages]:
    def apply(messages: Messages) -> Messages:
        systems = [_text_of(m.get("content")) or "" for m in messages if m.get("role") == "system"]
        rest = [dict(m) for m in messages if m.get("role") != "system"]
        users = [i for i, m in enumerate(rest) if m.get("role") == "user" and isinstance(m.get("content"), str)]
        if not systems or not users:
            return messages
        index = users[0] if which == "first" else users[-1]
        rest[index]["content"] = "\n\n".join(systems) + "\n\n" + rest[index]["content"]
        return rest

    return apply


NORMALISATIONS: tuple[Normalisation, ...] = (
    Normalisation(
        "merge-same-role",
        "mistral-common merges consecutive messages of the same role (text joined with \\n\\n); the template does not",
        _merge_same_role,
    ),
    Normalisation(
        "join-text-chunks",
        "mistral-common joins a message's text chunks with \\n\\n; the template does not (it concatenates them or rejects chunk lists)",
        _join_text_chunks,
    ),
    Normalisation(
        "strip-assistant-trailing-whitespace",
        "mistral-common (from v2 on) strips trailing whitespace from assistant content; the template keeps it",
        _strip_assistant_trailing,
        versions=("v2", "v3", "v3-tekken", "v7"),
    ),
    Normalisation(
        "system-in-first-user",
        "mistral-common V1 puts the system prompt (joined with \\n\\n) at the start of the first user turn; the template does not handle a system message",
        _system_into_user("first"),
        versions=("v1",),
    ),
    Normalisation(
        "system-in-last-user",
        "mistral-common V2/V3 put the system prompt (joined with \\n\\n) at the start of the last user turn; the template does not handle a system message",
        _system_into_user("last"),
        versions=("v2", "v3", "v3-tekken"),
    ),
)

WHITESPACE_CAUSE = "whitespace only: the texts are equal once whitespace is removed (template layout whitespace)"

_FEATURE_TOKENS = (
    ("[AVAILABLE_TOOLS]", "no-tool-definitions", "the template does not render the tool definitions ([AVAILABLE_TOOLS])"),
    ("[TOOL_CALLS]", "no-tool-calls", "the template does not render assistant tool calls ([TOOL_CALLS])"),
    ("[TOOL_RESULTS]", "no-tool-results", "the template does not render tool results ([TOOL_RESULTS])"),
    ("[IMG]", "no-images", "the template does not render image chunks ([IMG])"),
    ("[SYSTEM_PROMPT]", "no-system-prompt", "the template does not render the system prompt ([SYSTEM_PROMPT])"),
    ("[MODEL_SETTINGS]", "no-model-settings", "the template does not render the model settings ([MODEL_SETTINGS])"),
)

# The control token that opens the section a difference falls in, and what a difference there means.
_SECTION_CAUSES = {
    "[TOOL_CALLS]": ("tool-call-format", "the template writes tool calls in another format than this version "
                     "(mistral-common's v2/v3 write a JSON list with ids; v11 name[CALL_ID]id[ARGS]; v13 name[ARGS])"),
    "[TOOL_RESULTS]": ("tool-result-format", "the template writes tool results in another format than this version "
                       "(v3: JSON with call_id; v7-v11: [TOOL_CONTENT]; v13: the bare content)"),
    "[AVAILABLE_TOOLS]": ("tool-definition-format", "the template writes the tool definitions differently from this version"),
}
_CONTROL_TOKEN = re.compile(r"\[/?[A-Z_]+\]")


def render_case(template: TemplateRecord, messages: list[dict], tools: list[dict] | None) -> tuple[str | None, str | None]:
    """(text, None) or (None, error line): the template's rendering, as ``ChatTemplate.render`` gives it."""
    variables = {**DEFAULT_SPECIAL_TOKENS, **template.special_tokens}
    try:
        text = render_source(messages, template.source, tools, variables=variables)
    except Exception as exc:  # noqa: BLE001 - a raising template is a result, not a crash
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return None, f"{type(exc).__name__}: {message}"
    return text, None


def _render(template: TemplateRecord, messages: Messages, tools: list | None) -> str | None:
    text, _ = render_case(template, copy.deepcopy(messages), copy.deepcopy(tools))
    return text


def explain_case(template: TemplateRecord, reference: Reference, case: ConversationCase, result: CaseResult) -> list[tuple[str, str]]:
    """The causes of a disagreement as (code, sentence) pairs, most specific first."""
    if result.status == "reference-rejected":
        return [("reference-rejects", f"mistral-common rejects this conversation, the template renders it ({result.reference_error})")]
    target = result.reference_text
    assert target is not None
    if result.status == "mismatch" and result.template_text == target:
        return [("token-split", "same text, different tokens: the template's text tokenizes differently from mistral-common's per-message encoding")]

    applicable = []
    for normalisation in NORMALISATIONS:
        if normalisation.versions is not None and reference.version not in normalisation.versions:
            continue
        if normalisation.apply(copy.deepcopy(case.messages)) != case.messages:
            applicable.append(normalisation)
    renderings = []
    for size in range(1, len(applicable) + 1):
        for combination in itertools.combinations(applicable, size):
            messages = copy.deepcopy(case.messages)
            for normalisation in combination:
                messages = normalisation.apply(messages)
            text = _render(template, messages, case.tools)
            if text == target:
                return [(n.name, n.cause) for n in combination]
            renderings.append((combination, text))
    # Exact agreement after a normalisation is the most specific cause; then whitespace alone; then both.
    if result.template_text is not None and whitespace_only(result.template_text, target):
        return [("whitespace", WHITESPACE_CAUSE)]
    for combination, text in renderings:
        if text is not None and whitespace_only(text, target):
            return [(n.name, n.cause) for n in combination] + [("whitespace", WHITESPACE_CAUSE)]

    causes = []
    if result.template_text is not None:
        for token, code, cause in _FEATURE_TOKENS:
            if target.count(token) > result.template_text.count(token):
                causes.append((code, cause))
        tools = "[AVAILABLE_TOOLS]"
        if not causes and tools in target and tools in result.template_text:
            if target.count("[INST]", 0, target.index(tools)) != result.template_text.count("[INST]", 0, result.template_text.index(tools)):
                causes.append(("tool-definition-placement", "mistral-common puts [AVAILABLE_TOOLS] before another "
                               "user turn than the template does (v2-v11: before the last user message)"))
        if not causes and result.difference is not None and result.difference.offset >= 0:
            opened = _CONTROL_TOKEN.findall(target[: result.difference.offset])
            if opened and opened[-1] in _SECTION_CAUSES:
                causes.append(_SECTION_CAUSES[opened[-1]])
    else:
        error = result.template_error or ""
        if "alternate" in error:
            causes.append(("role-alternation", "the template's role-alternation check rejects a message order mistral-common accepts"))
        else:
            features = f" ({', '.join(case.features)})" if case.features else ""
            causes.append(("template-raises", f"the template raises on a conversation mistral-common accepts{features}"))
    if not causes:
        causes.append(("unexplained", "unexplained difference (no known mistral-common normalisation accounts for it)"))
    return causes
