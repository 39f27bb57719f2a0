"""The runtime half: the HF-identical sandboxed jinja2 environment and ``apply_chat_template``."""

from .environment import ChatTemplateEnvironment, compile_template
from .render import apply_chat_template

__all__ = ["ChatTemplateEnvironment", "apply_chat_template", "compile_template"]
