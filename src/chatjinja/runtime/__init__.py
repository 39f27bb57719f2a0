"""The runtime half: the HF-identical sandboxed jinja2 environment and the render of a template source."""

from .environment import ChatTemplateEnvironment, compile_template
from .render import render_source

__all__ = ["ChatTemplateEnvironment", "compile_template", "render_source"]
