"""Generic traversal of the AST: child iteration, pre-order walk and a visit_<Class> dispatcher."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .ast import Node, _field_names


def iter_fields(node: Node) -> Iterator[tuple[str, Any]]:
    """(name, value) for every declared field of ``node`` except its span."""
    for name in _field_names(type(node)):
        if name != "span":
            yield name, getattr(node, name)


def iter_child_nodes(node: Node) -> Iterator[Node]:
    """The nodes directly below ``node``, in field order (and source order within a field)."""
    for name in _field_names(type(node)):
        if name == "span":
            continue
        value = getattr(node, name)
        if isinstance(value, Node):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, Node):
                    yield item


def walk(node: Node) -> Iterator[Node]:
    """``node`` and every node below it, pre-order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        children = list(iter_child_nodes(current))
        children.reverse()
        stack.extend(children)


class NodeVisitor:
    """Calls ``visit_<ClassName>(node)`` where defined, else :meth:`generic_visit` (visit children)."""

    def visit(self, node: Node) -> Any:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            return self.generic_visit(node)
        return method(node)

    def generic_visit(self, node: Node) -> None:
        for child in iter_child_nodes(node):
            self.visit(child)


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
