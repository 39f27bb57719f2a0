"""The one generic traversal of the AST: each node class's child fields (derived once from its declared fields), child iteration, a pre-order walk and a dispatch by node type.

Every traversal of the static half is built from these: the analyser's index
(``analysis.collect._Index``, a :class:`NodeVisitor`), the linter's index and its rule dispatch
(``lint.context``, ``lint.runner``: rules declare the node types they visit, :func:`dispatch_table`
maps each concrete class to them), and the helpers that look below one node.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

from . import ast
from .ast import Node, _field_names

__all__ = ["NodeVisitor", "child_fields", "child_nodes", "dispatch_table", "dump", "iter_child_nodes", "iter_fields",
           "walk"]

# The concrete node classes, each with the fields that can hold nodes: ``(name, holds a tuple of them)``.
_CLASSES: tuple[type, ...] = tuple(ast.node_classes())


def _node_field(annotation: Any) -> bool | None:
    """``False`` for a node (or ``None``) field, ``True`` for a tuple of nodes, ``None`` for a plain value."""
    if isinstance(annotation, type):
        return False if issubclass(annotation, Node) else None
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return True if args and _node_field(args[0]) is False else None
    if args:  # ``X | None``
        kinds = {_node_field(a) for a in args if a is not type(None)}
        return False if kinds == {False} else None
    return None


def _child_fields_of(cls: type) -> tuple[tuple[str, bool], ...]:
    hints = typing.get_type_hints(cls, vars(ast))
    shape = []
    for name in _field_names(cls):
        if name == "span":
            continue
        many = _node_field(hints[name])
        if many is not None:
            shape.append((name, many))
    return tuple(shape)


_CHILD_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {cls: _child_fields_of(cls) for cls in _CLASSES}


def child_fields(cls: type) -> tuple[tuple[str, bool], ...]:
    """``(field name, holds a tuple)`` for the fields of a node class that can hold nodes, in declaration order."""
    return _CHILD_FIELDS[cls]


def child_nodes(node: Node) -> list[Node]:
    """The nodes directly below ``node``, in field order (and source order within a field)."""
    out: list[Node] = []
    for name, many in _CHILD_FIELDS[type(node)]:
        value = getattr(node, name)
        if many:
            out += value
        elif value is not None:
            out.append(value)
    return out


def iter_child_nodes(node: Node) -> Iterator[Node]:
    """The nodes directly below ``node``, in field order (and source order within a field)."""
    return iter(child_nodes(node))


def iter_fields(node: Node) -> Iterator[tuple[str, Any]]:
    """(name, value) for every declared field of ``node`` except its span."""
    for name in _field_names(type(node)):
        if name != "span":
            yield name, getattr(node, name)


def walk(node: Node) -> Iterator[Node]:
    """``node`` and every node below it, pre-order."""
    stack = [node]
    fields = _CHILD_FIELDS
    while stack:
        current = stack.pop()
        yield current
        shape = fields[type(current)]
        for name, many in reversed(shape):
            value = getattr(current, name)
            if many:
                stack += reversed(value)
            elif value is not None:
                stack.append(value)


def dispatch_table(handlers: Iterable[tuple[Iterable[type], Any]]) -> dict[type, list]:
    """``(node types, handler)`` pairs to ``{concrete node class: [handlers, in the order given]}``.

    A type may be a base class (``ast.Stmt``, ``ast.Expr``, ``ast.Node``): it stands for every
    concrete class below it.
    """
    table: dict[type, list] = {}
    for types, handler in handlers:
        for kind in types:
            for cls in _CLASSES:
                if issubclass(cls, kind):
                    entries = table.setdefault(cls, [])
                    if handler not in entries:
                        entries.append(handler)
    return table


def _visit_methods(visitor: type) -> dict[type, Callable]:
    """Each concrete node class's method on ``visitor``: ``visit_<Class>`` of the class or its nearest
    base that has one (``visit_Stmt``, ``visit_Expr``, ``visit_Node``), else ``generic_visit``."""
    table = {}
    for cls in _CLASSES:
        method = None
        for base in cls.__mro__:
            method = getattr(visitor, "visit_" + base.__name__, None)
            if method is not None:
                break
        table[cls] = method if method is not None else visitor.generic_visit
    return table


class NodeVisitor:
    """Calls ``visit_<ClassName>(node)`` where defined (or that of a base class), else
    :meth:`generic_visit`, which visits the children in field order.

    The method for each node class is looked up once per visitor class, not per node.
    """

    _methods: ClassVar[dict[type, Callable]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._methods = _visit_methods(cls)

    def visit(self, node: Node) -> Any:
        return self._methods[type(node)](self, node)

    def generic_visit(self, node: Node) -> None:
        methods = self._methods
        for name, many in _CHILD_FIELDS[type(node)]:
            value = getattr(node, name)
            if many:
                for child in value:
                    methods[type(child)](self, child)
            elif value is not None:
                methods[type(value)](self, value)


NodeVisitor._methods = _visit_methods(NodeVisitor)


def dump(node: Node, indent: str = "  ") -> str:
    """A stable, readable multi-line rendering of a tree (used by the golden files)."""
    lines: list[str] = []
    _dump(node, 0, indent, lines, "")
    return "\n".join(lines) + "\n"


def _span_text(node: Node) -> str:
    s = node.span
    return f"{s.line}:{s.column}-{s.end_line}:{s.end_column}"


def _tag_text(tag: Any) -> str:
    marks = ("-" if tag.strip_left else "") + ("+" if tag.keep_left else "")
    marks += "|" + ("-" if tag.strip_right else "") + ("+" if tag.keep_right else "")
    return f"Tag {tag.name!r} [{marks}] @{_span_text(tag)}"


def _dump(node: Node, depth: int, indent: str, lines: list[str], label: str) -> None:
    pad = indent * depth
    if type(node).__name__ == "Tag":
        lines.append(f"{pad}{label}{_tag_text(node)}")
        return
    scalars = []
    nested: list[tuple[str, Any]] = []
    for name, value in iter_fields(node):
        if isinstance(value, Node):
            nested.append((name, value))
        elif isinstance(value, tuple) and any(isinstance(v, Node) for v in value):
            nested.append((name, value))
        elif isinstance(value, tuple) and not value:
            continue
        elif (value is None or value is False) and name != "value":
            continue
        else:
            scalars.append(f"{name}={value!r}")
    head = f"{pad}{label}{type(node).__name__}"
    if scalars:
        head += " " + " ".join(scalars)
    lines.append(f"{head} @{_span_text(node)}")
    for name, value in nested:
        if isinstance(value, Node):
            _dump(value, depth + 1, indent, lines, f"{name}: ")
        else:
            lines.append(f"{pad}{indent}{name}:")
            for item in value:
                _dump(item, depth + 2, indent, lines, "")
