"""The front door: ``ChatTemplate``, ``apply_chat_template`` (text and tokens) and ``load_template``.

Every public way to render goes through :meth:`ChatTemplate.render`; a template argument is decided
once, by :func:`chatjinja.loading.template_record`, and made a ``ChatTemplate`` here. Below this
module the jobs (``loading``, ``training``, ...) work on plain records and the runtime half renders a
source string with plain inputs (:func:`chatjinja.runtime.render.render_source`).
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping

from .loading import TemplateRecord, template_record
from .loading import load_template as _load_record
from .loading.paths import has_jinja_syntax
from .runtime.budget import DEFAULT_BUDGETS, Budgets, resolve_budgets
from .runtime.environment import compile_template
from .runtime.render import PARAMETER_VARIABLES, render_source, template_variables
from .training.apply import TOKENIZE_DEFAULTS, tokenized_chat

__all__ = [
    "ChatTemplate",
    "PARAMETER_VARIABLES",
    "RENDER_PARAMETERS",
    "apply_chat_template",
    "chat_template_argument",
    "load_template",
    "template_variables",
]

_UNSET: Any = object()

#: the keyword parameters of :meth:`ChatTemplate.render`; any other keyword is a template variable
RENDER_PARAMETERS = (
    "tools",
    "documents",
    "add_generation_prompt",
    "continue_final_message",
    "return_assistant_spans",
    "chat_template",
    *TOKENIZE_DEFAULTS,
    "budgets",
    "strict",
    "variables",
)

def chat_template_argument(template: Any) -> "ChatTemplate":
    """A template argument as a ``ChatTemplate``: :func:`chatjinja.loading.template_record` decides what it is.

    A ``ChatTemplate`` is itself; a ``str`` is the template source (one without ``{{``, ``{%`` or
    ``{#`` that names an existing file or model folder raises ``LoadError`` pointing at ``load_template``);
    a ``pathlib.Path`` (any ``os.PathLike``) or a dict (a ``tokenizer_config.json``-shaped object, or
    named template sources) is loaded with :func:`load_template`.
    """
    if isinstance(template, ChatTemplate):
        return template
    if isinstance(template, str):
        made = _FROM_SOURCE.get(template)
        if made is not None:
            return made
    made = ChatTemplate.of(template_record(template))
    if isinstance(template, str) and has_jinja_syntax(template):  # never a path: kept (a path is looked at each time)
        if len(_FROM_SOURCE) >= _FROM_SOURCE_SIZE:
            _FROM_SOURCE.clear()
        _FROM_SOURCE[template] = made
    return made


# template source -> its ChatTemplate (frozen, so one serves every call that passes the same source; a
# tenth of a small tokenized call went to building it)
_FROM_SOURCE: dict[str, "ChatTemplate"] = {}
_FROM_SOURCE_SIZE = 64


def load_template(
    path_or_name: str | os.PathLike | dict,
    name: str | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    rules: str = "auto",
) -> "ChatTemplate":
    return ChatTemplate.of(_load_record(path_or_name, name, cache_dir=cache_dir, rules=rules))


# the loader's own documentation (one text for both), said of a ChatTemplate
load_template.__doc__ = inspect.cleandoc(_load_record.__doc__ or "").replace(
    "Load a chat template from", "Load a chat template, as a ``ChatTemplate``, from", 1
)


@dataclass(frozen=True)
class ChatTemplate(TemplateRecord):
    """A chat template ready for repeated use: a :class:`~chatjinja.loading.TemplateRecord` that renders.

    ``special_tokens`` (``bos_token``, ``eos_token``, ...) are passed to every render the way
    transformers passes a tokenizer's special-tokens map; keyword arguments to :meth:`render`
    override them. ``origin`` says where the template came from and why it was chosen.
    Picklable: the compiled template is looked up from the process cache, never stored.
    """

    #: resource budgets for every render: ``True`` for the defaults, a ``chatjinja.runtime.budget.Budgets``,
    #: a dict overriding some defaults, or ``None`` for none (see SECURITY.md)
    budgets: Any = field(default=True, compare=False)
    #: raise ``SecurityError`` on any access the sandbox blocks, instead of rendering it as undefined
    strict: bool = field(default=False, compare=False)

    @classmethod
    def of(cls, record: TemplateRecord) -> "ChatTemplate":
        """The ``ChatTemplate`` of a loaded record (itself when it is one)."""
        if isinstance(record, cls):
            return record
        return cls(**{f.name: getattr(record, f.name) for f in fields(TemplateRecord)})

    def render(
        self,
        conversation: Any,
        /,
        tools: list[dict | Callable] | None = None,
        documents: list[dict] | None = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool | str = False,
        return_assistant_spans: bool = False,
        *,
        chat_template: str | None = None,
        tokenize: bool = False,
        return_dict: bool = True,
        return_assistant_tokens_mask: bool = False,
        sanitize_control_tokens: bool = False,
        padding: bool | str = False,
        truncation: bool | str | None = False,
        max_length: int | None = None,
        return_tensors: str | None = None,
        tokenizer_kwargs: dict[str, Any] | None = None,
        tokenizer: Any = None,
        assistant_masks: str = "template",
        budgets: Any = _UNSET,
        strict: bool | None = None,
        variables: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """``apply_chat_template`` with this template and its special tokens (see :func:`chatjinja.apply_chat_template`).

        Keyword arguments are template variables, merged over the special tokens; a variable named
        like a parameter here (``budgets``, ``strict``, ``return_assistant_spans``, ``variables``)
        goes in the ``variables=`` mapping (a name given both ways is a ``TypeError``).
        ``chat_template`` is transformers' argument: the name of one of this template's named
        templates, else the template source to render instead (see :meth:`select_source`).
        ``budgets`` and ``strict`` override this template's fields for one call. The tokenizing
        options (``tokenize``, ``tokenizer``, ``return_assistant_tokens_mask``, ...) are those of
        :func:`chatjinja.apply_chat_template`; a template loaded from a model folder brings its tokenizer.
        """
        merged = template_variables(kwargs, variables)
        budgets = self.budgets if budgets is _UNSET else budgets
        strict = self.strict if strict is None else strict
        if tokenize or return_assistant_tokens_mask or sanitize_control_tokens or tokenizer is not None or assistant_masks != "template":
            return tokenized_chat(
                self,
                conversation,
                tools,
                documents,
                add_generation_prompt,
                continue_final_message,
                return_assistant_spans,
                budgets=budgets,
                strict=strict,
                variables=merged,
                tokenize=tokenize,
                return_dict=return_dict,
                return_assistant_tokens_mask=return_assistant_tokens_mask,
                sanitize_control_tokens=sanitize_control_tokens,
                padding=padding,
                truncation=truncation,
                max_length=max_length,
                return_tensors=return_tensors,
                tokenizer_kwargs=tokenizer_kwargs,
                tokenizer=tokenizer,
                assistant_masks=assistant_masks,
                chat_template=chat_template,
            )
        return render_source(
            conversation,
            self.select_source(tools, chat_template),
            tools,
            documents,
            add_generation_prompt,
            continue_final_message,
            return_assistant_spans,
            budgets=budgets,
            strict=strict,
            variables={**self.special_tokens, **merged} if self.special_tokens else merged,
        )

    def compile(self) -> Any:
        """Compile now (cached by source hash), so a syntax error surfaces before the first render."""
        return compile_template(self.source, resolve_budgets(self.budgets))


def apply_chat_template(
    conversation: Any,
    /,
    chat_template: Any,
    tools: list[dict | Callable] | None = None,
    documents: list[dict] | None = None,
    add_generation_prompt: bool = False,
    continue_final_message: bool | str = False,
    return_assistant_spans: bool = False,
    *,
    tokenize: bool = False,
    return_dict: bool = True,
    return_assistant_tokens_mask: bool = False,
    sanitize_control_tokens: bool = False,
    padding: bool | str = False,
    truncation: bool | str | None = False,
    max_length: int | None = None,
    return_tensors: str | None = None,
    tokenizer_kwargs: dict[str, Any] | None = None,
    tokenizer: Any = None,
    assistant_masks: str = "template",
    budgets: Budgets | dict | bool | None = DEFAULT_BUDGETS,
    strict: bool = False,
    variables: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Render a conversation (or a batch) exactly as ``tokenizer.apply_chat_template(..., tokenize=False)``,
    or tokenize it as ``tokenize=True`` does.

    ``chat_template`` is the template source, a :class:`~chatjinja.ChatTemplate` (its special tokens
    and named templates apply, as in :meth:`~chatjinja.ChatTemplate.render`), a ``pathlib.Path`` or a
    dict (loaded with :func:`~chatjinja.load_template`); a string without Jinja syntax that names an
    existing file raises ``LoadError`` (see :func:`chatjinja.loading.template_record`).

    ``kwargs`` are template variables, as in transformers; pass special tokens (``bos_token=...``)
    this way. A variable named like one of chatjinja's own parameters (``budgets``, ``strict``,
    ``return_assistant_spans``, ``variables``) goes in the ``variables=`` mapping instead; a name in
    both ``variables=`` and ``kwargs`` is a ``TypeError``, and so are ``self`` and ``conversation``,
    with transformers' message (see :func:`template_variables`).

    Returns the text (a list for a batch); with ``return_assistant_spans=True``, a pair
    ``(text, spans)`` where ``spans`` are the ``(start, end)`` character spans of every
    ``{% generation %}`` body (a list of such lists for a batch).

    ``budgets`` limits the render (default :data:`~chatjinja.runtime.budget.DEFAULT_BUDGETS`, a
    ``Budgets``, a dict overriding some defaults, or ``None`` for none); crossing one raises
    :class:`chatjinja.BudgetExceeded`. ``strict=True`` raises ``jinja2.exceptions.SecurityError``
    on any blocked attribute access (the default, like transformers, renders it as undefined).

    ``tokenize=True`` (with ``tokenizer=``: a ``tokenizers.Tokenizer``, a ``tokenizer.json`` path or
    a model folder; a template loaded from a model folder brings its own) returns what transformers'
    ``apply_chat_template`` returns: with ``return_dict=True`` a dict of ``input_ids``,
    ``attention_mask`` and, with ``return_assistant_tokens_mask=True``, ``assistant_masks`` (lists, or
    numpy arrays with ``return_tensors="np"``); ``padding``, ``truncation``, ``max_length``,
    ``sanitize_control_tokens`` and ``tokenizer_kwargs`` mean what they mean there, with the same
    errors. Needs the ``tokenize`` extra. Beyond transformers, ``sanitize_control_tokens=True`` works
    with ``return_assistant_tokens_mask=True``, and ``assistant_masks="derived"`` takes the masks (or
    the spans) from generation tags synthesised by ``add_generation_tags`` instead of the template's
    own. With ``tokenize=False`` these options are never template variables: the ones transformers
    refuses without tokenizing raise its ``ValueError``, the others are ignored, as there.

    Every parameter of transformers' ``apply_chat_template`` is a parameter here, never a template
    variable (in ``variables=`` it is a ``TypeError``); a processor's that chatjinja does not support
    (``processor_kwargs``, ``load_audio_from_video``) raises a ``TypeError`` naming it.
    """
    # every parameter but the two named here is render's, by the same name (kwargs cannot hold one of them)
    options = {name: value for name, value in locals().items() if name not in ("conversation", "chat_template", "kwargs")}
    return chat_template_argument(chat_template).render(conversation, **options, **kwargs)
