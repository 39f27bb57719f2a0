"""``ChatTemplate``: a template's source, name and metadata, rendered on demand through the runtime half."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["ChatTemplate", "RENDER_PARAMETERS", "chat_template_argument"]

_UNSET: Any = object()

#: the keyword parameters of :meth:`ChatTemplate.render`; any other keyword is a template variable
RENDER_PARAMETERS = (
    "tools",
    "documents",
    "add_generation_prompt",
    "continue_final_message",
    "return_assistant_spans",
    "chat_template",
    "budgets",
    "strict",
    "variables",
)


def _refuse_path(text: str, what: str) -> None:
    """A string with no Jinja syntax that names an existing file (or model folder) is a mistaken path, never template text."""
    if "{{" in text or "{%" in text or "{#" in text or not os.path.exists(text):
        return
    if os.path.isfile(text):
        kind = "file"
    else:
        from pathlib import Path

        from .loading.folder import is_model_folder

        if not is_model_folder(Path(text)):  # "." or "/" is template text that happens to name a folder
            return
        kind = "model folder"
    from .errors import LoadError

    raise LoadError(
        f"{what} {text!r} names an existing {kind} but a string is template source: load it with "
        f"chatjinja.load_template({text!r}) (or pass a pathlib.Path)",
        source_name=text,
    )


def chat_template_argument(template: Any) -> "ChatTemplate":
    """What a template argument (of ``apply_chat_template``, ``render_batch``, ``render_jsonl``, Dask) is, as a ``ChatTemplate``.

    A ``ChatTemplate`` is itself; a ``str`` is the template source (one without ``{{``, ``{%`` or
    ``{#`` that names an existing file or model folder raises ``LoadError`` pointing at ``load_template``);
    a ``pathlib.Path`` (any ``os.PathLike``) or a dict (a ``tokenizer_config.json``-shaped object, or
    named template sources) is loaded with :func:`chatjinja.load_template`.
    """
    if isinstance(template, ChatTemplate):
        return template
    if isinstance(template, str):
        made = _FROM_SOURCE.get(template)
        if made is None:
            _refuse_path(template, "the template")
            made = ChatTemplate(template)
            if "{{" in template or "{%" in template or "{#" in template:  # never a path: kept (a path is looked at each time)
                if len(_FROM_SOURCE) >= _FROM_SOURCE_SIZE:
                    _FROM_SOURCE.clear()
                _FROM_SOURCE[template] = made
        return made
    if isinstance(template, (os.PathLike, dict)):
        from .loading.resolve import load_template

        return load_template(template)
    raise TypeError(
        "template must be a ChatTemplate, the template source, a pathlib.Path or a dict, got "
        f"{type(template).__name__}"
    )


# template source -> its ChatTemplate (frozen, so one serves every call that passes the same source; a
# tenth of a small tokenized call went to building it)
_FROM_SOURCE: dict[str, "ChatTemplate"] = {}
_FROM_SOURCE_SIZE = 64


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template ready for repeated use.

    ``special_tokens`` (``bos_token``, ``eos_token``, ...) are passed to every render the way
    transformers passes a tokenizer's special-tokens map; keyword arguments to :meth:`render`
    override them. ``origin`` says where the template came from and why it was chosen.
    Picklable: the compiled template is looked up from the process cache, never stored.
    """

    source: str
    name: str = "<string>"
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)
    special_tokens: dict[str, str] = field(default_factory=dict)
    origin: str | None = field(default=None, compare=False)
    #: resource budgets for every render: ``True`` for the defaults, a ``chatjinja.runtime.budget.Budgets``,
    #: a dict overriding some defaults, or ``None`` for none (see SECURITY.md)
    budgets: Any = field(default=True, compare=False)
    #: raise ``SecurityError`` on any access the sandbox blocks, instead of rendering it as undefined
    strict: bool = field(default=False, compare=False)

    @property
    def path(self) -> str | None:
        return self.metadata.get("path")

    @property
    def tokenizer(self) -> str | None:
        """The model folder whose ``tokenizer.json`` tokenizes for this template (loaded from such a folder), else ``None``."""
        return self.metadata.get("tokenizer")

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
        ``budgets`` and ``strict`` override this template's fields for one call.
        """
        from .runtime.render import render_source, template_variables

        merged = template_variables(kwargs, variables)
        return render_source(
            conversation,
            self.select_source(tools, chat_template),
            tools,
            documents,
            add_generation_prompt,
            continue_final_message,
            return_assistant_spans,
            budgets=self.budgets if budgets is _UNSET else budgets,
            strict=self.strict if strict is None else strict,
            variables={**self.special_tokens, **merged} if self.special_tokens else merged,
        )

    def select_source(self, tools: list | None = None, chat_template: str | None = None) -> str:
        """The template text transformers' ``get_chat_template(chat_template, tools)`` picks.

        A template loaded from a model folder, GGUF or dict with several named templates (and no
        name asked for) keeps them in ``metadata["chat_templates"]``. ``chat_template`` names one of
        them; any other string is the template source itself (as in transformers, so one with no
        Jinja syntax that names an existing file raises ``LoadError`` rather than render as text).
        Without it: ``tool_use`` when tools are given and it exists, else ``default``, else
        transformers' ValueError; a single template is ``source``.
        """
        named = self.metadata.get("chat_templates")
        if chat_template is not None:
            if not isinstance(chat_template, str):
                raise TypeError(f"chat_template must be a template name or the template source, got {type(chat_template).__name__}")
            if named and chat_template in named:
                return named[chat_template]
            _refuse_path(chat_template, "chat_template")
            return chat_template
        if not named:
            return self.source
        if tools is not None and "tool_use" in named:
            return named["tool_use"]
        if "default" in named:
            return named["default"]
        raise ValueError(
            "This model has multiple chat templates with no default specified! Please either pass a chat "
            "template or the name of the template you wish to use to the `chat_template` argument. Available "
            f"template names are {sorted(named)}."
        )

    def compile(self) -> Any:
        """Compile now (cached by source hash), so a syntax error surfaces before the first render."""
        from .runtime.budget import resolve_budgets
        from .runtime.environment import compile_template

        return compile_template(self.source, resolve_budgets(self.budgets))
