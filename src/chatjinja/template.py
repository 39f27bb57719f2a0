"""``ChatTemplate``: a template's source, name and metadata, rendered on demand through the runtime half."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["ChatTemplate"]

_UNSET: Any = object()


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

    def render(
        self,
        conversation: Any,
        tools: list[dict | Callable] | None = None,
        documents: list[dict] | None = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool | str = False,
        return_assistant_spans: bool = False,
        *,
        budgets: Any = _UNSET,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """``apply_chat_template`` with this template and its special tokens (see :func:`chatjinja.apply_chat_template`).

        ``budgets`` and ``strict`` override this template's fields for one call.
        """
        from .runtime.render import apply_chat_template

        variables = {**self.special_tokens, **kwargs}
        return apply_chat_template(
            conversation,
            self.select_source(tools),
            tools=tools,
            documents=documents,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            return_assistant_spans=return_assistant_spans,
            budgets=self.budgets if budgets is _UNSET else budgets,
            strict=self.strict if strict is None else strict,
            **variables,
        )

    def select_source(self, tools: list | None = None) -> str:
        """The template text transformers' ``get_chat_template`` picks for these tools.

        A template loaded from a model folder or GGUF with several named templates (and no name
        asked for) keeps them in ``metadata["chat_templates"]``: ``tool_use`` when tools are given
        and it exists, else ``default``, else transformers' ValueError. Otherwise ``source``.
        """
        named = self.metadata.get("chat_templates")
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
