"""The AST's node fields for generic walks, and the variables every render context has (the name resolution itself is in ``collect._Index``'s walk)."""

from __future__ import annotations

from ..syntax import ast

__all__ = ["FIXED_VARIABLES", "node_fields"]

# The fields of each node class that can hold nodes, with whether they hold a tuple of them; plain
# fields (names, operators, flags, a literal's value) are left out.
_PLAIN_FIELD_TYPES = frozenset({"str", "bool", "int", "str | None"})
_NODE_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def node_fields(cls: type) -> tuple[tuple[str, bool], ...]:
    """``(field name, holds a tuple)`` for the fields of a node class that can hold nodes, in declaration order."""
    shape = _NODE_FIELDS.get(cls)
    if shape is None:
        shape = _NODE_FIELDS[cls] = () if cls is ast.Const else tuple(
            (f.name, f.type.startswith("tuple[")) for f in cls.__dataclass_fields__.values()
            if f.name != "span" and f.type not in _PLAIN_FIELD_TYPES)
    return shape


# What apply_chat_template always passes; ``variables`` lists the others.
FIXED_VARIABLES = frozenset({"messages", "tools", "documents", "add_generation_prompt"})
