"""The render of a template source with plain inputs: transformers 5.25.0's ``render_jinja_template`` and the text half of
``apply_chat_template``, step for step, on the chatjinja environment (what picks the template is the front door's business)."""

from __future__ import annotations

import inspect
import logging
import re
from inspect import isfunction
from typing import Any, Callable, Hashable, Mapping

from .budget import (
    DEFAULT_BUDGETS,
    BudgetExceeded,
    Budgets,
    check_input_depth,
    guarded_render,
    is_plain_checked,
    resolve_budgets,
)
from ..parameters import PARAMETER_VARIABLES, TOKENIZE_PARAMETERS, TRANSFORMERS_PARAMETERS, UNPASSABLE_VARIABLES
from . import provenance as _provenance
from .environment import compile_template, generation_tracking, template_names
from .messages import REASONING_FIELDS, alias_reasoning_fields, plain_messages, plain_template_data
from .tools import get_json_schema

__all__ = [
    "PARAMETER_VARIABLES",
    "Spans",
    "TOKENIZE_PARAMETERS",
    "TRANSFORMERS_PARAMETERS",
    "UNSUPPORTED_PARAMETERS",
    "render_source",
    "template_variables",
    "unsupported_parameter",
    "warn_once",
]

# No NullHandler: with no logging configured, Python's last-resort handler writes a warning to stderr,
# as transformers' own handler does; an application that configures logging gets it through its handlers.
logger = logging.getLogger("chatjinja")

Spans = list[tuple[int, int]]

_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
_GENERATION_TAG_RE = re.compile(r"\{\%-?\s*generation\s*-?\%\}")


#: the parameters of transformers' ``apply_chat_template`` (a processor's, ``ProcessorMixin``) that chatjinja
#: does not support: a ``TypeError`` naming it, never a template variable, so the option is never silently lost
UNSUPPORTED_PARAMETERS = {
    "processor_kwargs": "a processor's options (images, audio, video): chatjinja renders and tokenizes text",
    "load_audio_from_video": "a processor's option: chatjinja renders and tokenizes text",
}

# Names transformers' apply_chat_template cannot pass to a template, and the TypeError Python raises
# there (verbatim): ``tokenizer.apply_chat_template(conversation, self=...)``
_CALL_ERRORS = {
    name: f"PreTrainedTokenizerBase.apply_chat_template() got multiple values for argument '{name}'"
    for name in UNPASSABLE_VARIABLES if name != "conversations"
}
# ... and ``render_jinja_template(conversations=..., **template_kwargs)`` when a kwarg is named ``conversations``
_CONVERSATIONS_ERROR = (
    "transformers.utils.chat_template_utils.render_jinja_template() got multiple values for keyword argument 'conversations'"
)


def template_variables(kwargs: dict[str, Any], variables: Any = None) -> dict[str, Any]:
    """The template variables of one call: the ``variables=`` mapping, then the keyword variables.

    A name in both is a ``TypeError`` (say it once). ``variables=`` carries any name, chatjinja's own
    parameters included (``budgets``, ``strict``, ...), except those of :data:`TRANSFORMERS_PARAMETERS`
    (pass ``tools=``, ``padding=``, ...). ``self`` and ``conversation``, which transformers' ``apply_chat_template``
    cannot take, raise the ``TypeError`` it raises; a parameter of :data:`UNSUPPORTED_PARAMETERS`, either
    way, raises a ``TypeError`` naming it.
    """
    if variables is None:
        merged = kwargs
    else:
        if not isinstance(variables, Mapping):
            raise TypeError(f"variables must be a mapping of template variable names to values, got {type(variables).__name__}")
        for name in variables:
            if not isinstance(name, str):
                raise TypeError(f"template variable names must be strings, got {type(name).__name__} {name!r}")
            if name in kwargs:
                raise TypeError(f"template variable {name!r} is given both as a keyword argument and in variables=")
            if name in TRANSFORMERS_PARAMETERS:
                raise TypeError(f"{name!r} is a parameter, not only a template variable: pass {name}=..., not variables={{{name!r}: ...}}")
        merged = {**variables, **kwargs}
    if not UNSUPPORTED_PARAMETERS.keys().isdisjoint(merged):
        raise TypeError(unsupported_parameter(next(name for name in merged if name in UNSUPPORTED_PARAMETERS)))
    if "self" in merged or "conversation" in merged:
        raise TypeError(_CALL_ERRORS[next(name for name in merged if name in _CALL_ERRORS)])  # the first, as Python says
    return merged


def unsupported_parameter(name: str) -> str:
    """The one-line ``TypeError`` message for a parameter of :data:`UNSUPPORTED_PARAMETERS`."""
    return f"{name}= is a parameter of transformers' apply_chat_template that chatjinja does not support ({UNSUPPORTED_PARAMETERS[name]})"


# what a warning was about (a hash: of the message and template source, say): each is said once
_WARNED: set[int] = set()
_WARNED_SIZE = 256


def warn_once(message: str, about: Hashable) -> None:
    """``logger.warning(message)`` the first time for ``about`` in this process (a warning about a template:
    ``(message, source)``, so once per template source; transformers says it once per process, for any
    template). A batch says it once, not once per conversation."""
    key = hash(about)
    if key in _WARNED:
        return
    if len(_WARNED) >= _WARNED_SIZE:
        _WARNED.clear()
    _WARNED.add(key)
    logger.warning(message)


def _tool_schemas(tools: list | None) -> list | None:
    if tools is None:
        return None
    schemas = []
    for tool in tools:
        if isinstance(tool, dict):
            schemas.append(tool)
        elif isfunction(tool) or inspect.ismethod(tool):
            schemas.append(get_json_schema(tool))
        else:
            raise ValueError(
                "Tools should either be a JSON schema, or a callable function with type hints "
                "and a docstring suitable for auto-conversion to a schema."
            )
    return schemas


def _rebuilt(value: Any, max_depth: int | None, what: str, seen: list, start: int = 0, wide: bool = False) -> Any:
    """``plain_template_data(value)`` under the input depth budget (the value itself when it is plain JSON data)."""
    if is_plain_checked(value, max_depth, what, start, seen if max_depth is not None else None, wide):
        return value
    if max_depth is None:
        return plain_template_data(value)
    try:
        value = plain_template_data(value)
    except RecursionError:
        raise BudgetExceeded("max_input_depth", max_depth, f"{what} nests too deep to copy") from None
    check_input_depth(value, max_depth, what, start=start, seen=seen)
    return value


def _render_chats(
    chats: list,
    chat_template: str,
    tools: list[dict | Callable] | None,
    documents: list[dict] | None,
    return_assistant_spans: bool,
    continue_final_message: bool | str,
    add_generation_prompt: bool,
    budgets: Budgets | None,
    strict: bool,
    inputs: list,
    kwargs: dict[str, Any],
    traced: list | None = None,
) -> tuple[list[str], list[Spans]]:
    """transformers' ``render_jinja_template``: render each conversation (plain, its depth checked); spans only when asked for.

    ``kwargs`` are the template variables; ``inputs`` collects the containers the template gets, whose
    printing is not size-checked again.
    """
    if "conversations" in kwargs:
        raise TypeError(_CONVERSATIONS_ERROR)
    max_input_depth = None if budgets is None else budgets.max_input_depth
    if return_assistant_spans and not _GENERATION_TAG_RE.search(chat_template):
        message = "return_assistant_spans is set but the chat template does not contain a {% generation %} tag."
        warn_once(message, (message, chat_template))

    if traced is None:
        compiled = compile_template(chat_template, budgets)
    else:
        compiled, sites = _provenance.compile_traced(chat_template, budgets)
    tool_schemas = _tool_schemas(tools)

    if documents is not None:
        for document in documents:
            if not isinstance(document, dict):
                raise TypeError("Documents should be a list of dicts with 'title' and 'text' keys!")

    # Rebuilt first (a RecursionError there is the depth budget too), then walked iteratively for
    # the depth budget, remembering the rebuilt containers: printing them is not size-checked again.
    # tools and documents a template never names cannot reach it (and cannot change its output): not
    # walked or rebuilt, which for a template without tools is most of the work of a small render
    names = template_names(compiled)
    if "tools" in names:
        tool_schemas = _rebuilt(tool_schemas, max_input_depth, "tools", inputs, wide=True)
    if "documents" in names:
        documents = _rebuilt(documents, max_input_depth, "documents", inputs, wide=True)
    kwargs = _rebuilt(kwargs, max_input_depth, "template variables", inputs, start=-1)

    rendered: list[str] = []
    all_spans: list[Spans] = []
    for chat in chats:
        for message in chat:
            if not isinstance(message, dict):
                raise TypeError(f"Chat messages should be dicts, dataclasses or pydantic models, but got {message!r}.")
        extra: list | None = [] if max_input_depth is not None else None  # this render's own copies of the caller's data
        chat = alias_reasoning_fields(chat, extra)
        if continue_final_message:
            if not chat:
                raise ValueError("continue_final_message is set but the conversation is empty!")
            continue_final_message = continue_final_message if isinstance(continue_final_message, str) else "content"

            if (final_message := chat[-1].get(continue_final_message)) is None:
                raise ValueError(
                    f'continue_final_message is set but the final message has no "{continue_final_message}" to continue!'
                )
            continue_fields = [continue_final_message]
            if continue_final_message in REASONING_FIELDS:
                continue_fields = [field for field in REASONING_FIELDS if chat[-1].get(field) == final_message]
            if not any(field in chat_template for field in continue_fields):
                raise ValueError(
                    f'continue_final_message is set to "{continue_final_message}" but this is not an accepted field in the chat_template'
                )
            elif isinstance(final_message, (list, tuple)):
                # the blocks may be the caller's own (plain values are not copied): edit a copy
                copied = plain_template_data(final_message)
                for field, value in chat[-1].items():
                    if value is final_message:
                        chat[-1][field] = copied
                final_message = copied
                for content_block in reversed(final_message):
                    if "text" in content_block:
                        final_message = content_block["text"]
                        content_block["text"] = content_block["text"] + _CONTINUE_TAG
                        break
                else:
                    raise ValueError(
                        "continue_final_message is set but we could not find any text to continue in the final message!"
                    )
            else:
                for field in continue_fields:
                    chat[-1][field] = chat[-1][field] + _CONTINUE_TAG

        # Called exactly as transformers calls it, so a kwarg named like a fixed variable fails the same way
        with guarded_render(budgets, strict, inputs, extra) as meter:
            if return_assistant_spans:
                blocks: list[str] = []
                spans: Spans = []
                with generation_tracking(compiled, blocks, spans):
                    parts = compiled.generate(
                        messages=chat,
                        tools=tool_schemas,
                        documents=documents,
                        add_generation_prompt=add_generation_prompt,
                        **kwargs,
                    )
                    # the tracker reads ``blocks`` while the render runs: collected part by part
                    # (counted as ``concat`` counts the output, thrown into the generator when over)
                    metered = meter is not None
                    for block in parts:
                        blocks.append(block)
                        if metered:
                            try:
                                meter.output_parts(len(block), 1)
                            except BudgetExceeded as error:
                                parts.throw(error)
                    rendered_chat = "".join(blocks)
                all_spans.append(spans)
            elif traced is not None:
                segments: list = []
                with _provenance.collecting(segments):
                    rendered_chat = compiled.render(
                        messages=_provenance.traced_data(chat, ("messages",)),
                        tools=tool_schemas,
                        documents=documents,
                        add_generation_prompt=add_generation_prompt,
                        **kwargs,
                    )
            else:
                rendered_chat = compiled.render(
                    messages=chat,
                    tools=tool_schemas,
                    documents=documents,
                    add_generation_prompt=add_generation_prompt,
                    **kwargs,
                )

        if continue_final_message:
            if (final_message.strip() not in rendered_chat) or (_CONTINUE_TAG.strip() not in rendered_chat):
                raise ValueError(
                    "continue_final_message is set but the final message does not appear in the chat after "
                    "applying the chat template! This can happen if the chat template deletes portions of "
                    "the final message. Please verify the chat template and final message in your chat to "
                    "ensure they are compatible."
                    f"Final message to continue: {final_message.strip()}\nRendered chat:\n{rendered_chat}"
                )
            tag_loc = rendered_chat.rindex(_CONTINUE_TAG.strip())
            if rendered_chat[tag_loc : tag_loc + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
                rendered_chat = rendered_chat[:tag_loc]
            else:
                rendered_chat = rendered_chat[:tag_loc].rstrip()
        if traced is not None:
            rendered_chat = str.__str__(rendered_chat)
            traced.append(_provenance.finished(rendered_chat, segments, sites))
        rendered.append(rendered_chat)

    return rendered, all_spans


def render_source(
    conversation: Any,
    chat_template: str,
    tools: list[dict | Callable] | None = None,
    documents: list[dict] | None = None,
    add_generation_prompt: bool = False,
    continue_final_message: bool | str = False,
    return_assistant_spans: bool = False,
    *,
    budgets: Budgets | dict | bool | None = DEFAULT_BUDGETS,
    strict: bool = False,
    variables: Mapping[str, Any] | None = None,
    traced: bool = False,
) -> Any:
    """Render a conversation (or a batch) with the template source ``chat_template``, as transformers'
    ``apply_chat_template(..., tokenize=False)`` does once it has picked the template.

    ``variables`` are the template variables (special tokens merged in; the front door's
    ``template_variables`` checked the caller's names). ``budgets`` (default
    :data:`~chatjinja.runtime.budget.DEFAULT_BUDGETS`; ``None`` for none) limit each render and raise
    ``BudgetExceeded``; ``strict=True`` raises ``SecurityError`` on any access the sandbox blocks
    instead of yielding undefined. Returns the text (a list for a batch), with the generation spans
    when ``return_assistant_spans`` is set (see :func:`chatjinja.apply_chat_template`).
    ``traced=True`` returns a :class:`~chatjinja.runtime.provenance.Provenance` (a list for a batch)
    in place of the text: the same text, with where each character came from.
    """
    if isinstance(conversation, (list, tuple)) and len(conversation) == 0:
        raise ValueError("Cannot apply chat template to an empty conversation. Provide at least one message.")

    if isinstance(conversation, (list, tuple)) and (
        isinstance(conversation[0], (list, tuple)) or hasattr(conversation[0], "messages")
    ):
        conversations = conversation
        is_batched = True
    else:
        conversations = [conversation]
        is_batched = False

    budgets = resolve_budgets(budgets)
    # normalised and plain (one shallow copy of each message; plain values are not copied), with the
    # input depth budget checked on the way and the containers the template gets collected
    max_input_depth = None if budgets is None else budgets.max_input_depth
    inputs: list | None = None if max_input_depth is None else []
    conversations = [plain_messages(chat, max_input_depth, inputs) for chat in conversations]

    if continue_final_message:
        if add_generation_prompt:
            raise ValueError(
                "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when you want the model to continue the final message, and add_generation_prompt when you want to add a header that will prompt it to start a new assistant message instead."
            )
        if return_assistant_spans:
            raise ValueError("continue_final_message is not compatible with return_assistant_spans.")

    if traced and return_assistant_spans:
        raise ValueError("traced renders do not return assistant spans")
    provenances: list | None = [] if traced else None
    rendered, spans = _render_chats(
        conversations,
        chat_template,
        tools,
        documents,
        return_assistant_spans,
        continue_final_message,
        add_generation_prompt,
        budgets,
        strict,
        [] if inputs is None else inputs,
        dict(variables or {}),
        provenances,
    )
    if provenances is not None:
        return provenances if is_batched else provenances[0]
    if not is_batched:
        if return_assistant_spans:
            return rendered[0], spans[0]
        return rendered[0]
    if return_assistant_spans:
        return rendered, spans
    return rendered
