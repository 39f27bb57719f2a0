"""The static half's front end: the Lark grammar, the parser and the typed AST of Jinja templates."""

from . import ast
from .parser import build_parser, format_error, parse
from .visitor import NodeVisitor, dump, iter_child_nodes, iter_fields, walk

__all__ = [
    "ast",
    "build_parser",
    "dump",
    "format_error",
    "iter_child_nodes",
    "iter_fields",
    "NodeVisitor",
    "parse",
    "walk",
]
