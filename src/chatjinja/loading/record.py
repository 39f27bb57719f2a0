"""``TemplateRecord``: what loading gives back for a template (its source, name, metadata and special tokens)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .paths import refuse_path

__all__ = ["TemplateRecord"]


@dataclass(frozen=True)
class TemplateRecord:
    """A chat template as loading found it: plain data, no rendering (``chatjinja.ChatTemplate`` renders).

    ``special_tokens`` (``bos_token``, ``eos_token``, ...) are what transformers passes from the
    tokenizer's special-tokens map; ``origin`` says where the template came from and why it was chosen;
    ``metadata["chat_templates"]`` holds every named template of a set with several.
    """

    source: str
    name: str = "<string>"
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)
    special_tokens: dict[str, str] = field(default_factory=dict)
    origin: str | None = field(default=None, compare=False)

    @property
    def path(self) -> str | None:
        return self.metadata.get("path")

    @property
    def tokenizer(self) -> str | None:
        """What tokenizes for this template: its model folder (one with a ``tokenizer.json``) or its GGUF file (one with a vocabulary), else ``None``."""
        return self.metadata.get("tokenizer")

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
            refuse_path(chat_template, "chat_template")
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
