"""The typed Jinja AST: one dataclass per construct, every node carrying the Span it was parsed from.

Nodes are declared by their fields, so ``chatjinja.syntax.visitor`` walks all of them generically:
a field holds a node, a tuple of nodes, ``None`` or a plain value (str, bool, int, ...).
Treat nodes as immutable; they are plain slotted dataclasses for speed.

Whitespace control stays visible: every ``{{ }}``, ``{% %}`` and ``{# #}`` delimiter pair is a
:class:`Tag` with its ``-``/``+`` markers and its span, reachable from the node it belongs to.
Comments are :class:`Comment` statements in the body where they appear.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..source import Span

_node = dataclass(slots=True, repr=False, eq=True)


@_node
class Node:
    """Base of every AST node."""

    span: Span

    def __repr__(self) -> str:
        parts = [f"{name}={getattr(self, name)!r}" for name in _field_names(type(self)) if name != "span"]
        return f"{type(self).__name__}({', '.join(parts)})"


class Stmt(Node):
    """A template-level construct: data, output, comment or a ``{% %}`` statement."""

    __slots__ = ()


class Expr(Node):
    """An expression inside ``{{ }}`` or a tag."""

    __slots__ = ()


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


# ---- delimiters and helper nodes ---------------------------------------------------------------


@_node
class Tag(Node):
    """One delimiter pair: ``{% name ... %}``, ``{{ ... }}`` (name ``"{{"``) or ``{# ... #}`` (``"{#"``).

    ``strip_left``/``strip_right`` are the ``-`` markers (``{%-``, ``-%}``), ``keep_left``/
    ``keep_right`` the ``+`` markers that disable lstrip_blocks/trim_blocks.
    """

    name: str
    strip_left: bool
    keep_left: bool
    strip_right: bool
    keep_right: bool


@_node
class Keyword(Node):
    """``key=value`` in a call, filter or test argument list."""

    key: str
    value: Expr


@_node
class Pair(Node):
    """``key: value`` in a dict literal."""

    key: Expr
    value: Expr


@_node
class Operand(Node):
    """One ``op expr`` link of a comparison chain; op is ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``,
    ``in`` or ``not in``."""

    op: str
    expr: Expr


@_node
class Param(Node):
    """A macro or call-block parameter with its optional default."""

    name: str
    default: Expr | None


@_node
class ImportName(Node):
    """``name`` or ``name as alias`` in ``{% from ... import ... %}``."""

    name: str
    alias: str | None


@_node
class Elif(Node):
    """An ``{% elif test %}`` branch of an :class:`If`."""

    test: Expr
    body: tuple[Stmt, ...]
    tag: Tag


# ---- template and statements -------------------------------------------------------------------


@_node
class Template(Node):
    body: tuple[Stmt, ...]


@_node
class Data(Stmt):
    """Literal template text, exactly as in the source (before trim_blocks/lstrip_blocks)."""

    text: str


@_node
class Comment(Stmt):
    """``{# text #}``; ``tag`` spans the whole comment and holds its markers."""

    text: str
    tag: Tag


@_node
class Output(Stmt):
    """``{{ expr }}``."""

    expr: Expr
    tag: Tag


@_node
class Raw(Stmt):
    """``{% raw %}text{% endraw %}``."""

    text: str
    open_tag: Tag
    end_tag: Tag


@_node
class If(Stmt):
    """``{% if %}`` with its ``elif`` branches; ``else_tag`` is None when there is no ``else``."""

    test: Expr
    body: tuple[Stmt, ...]
    elifs: tuple[Elif, ...]
    else_body: tuple[Stmt, ...]
    open_tag: Tag
    else_tag: Tag | None
    end_tag: Tag


@_node
class For(Stmt):
    """``{% for target in iter if condition recursive %}`` ... ``{% else %}`` ... ``{% endfor %}``."""

    target: Expr
    iter: Expr
    condition: Expr | None
    recursive: bool
    body: tuple[Stmt, ...]
    else_body: tuple[Stmt, ...]
    open_tag: Tag
    else_tag: Tag | None
    end_tag: Tag


@_node
class Set(Stmt):
    """``{% set target = value %}``."""

    target: Expr
    value: Expr
    tag: Tag


@_node
class SetBlock(Stmt):
    """``{% set target | filters %}body{% endset %}``; each filter has ``node=None``."""

    target: Expr
    filters: tuple[Filter, ...]
    body: tuple[Stmt, ...]
    open_tag: Tag
    end_tag: Tag


@_node
class Macro(Stmt):
    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    open_tag: Tag
    end_tag: Tag


@_node
class CallBlock(Stmt):
    """``{% call(params) macro(args) %}body{% endcall %}``."""

    call: Call
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    open_tag: Tag
    end_tag: Tag


@_node
class FilterBlock(Stmt):
    """``{% filter f | g(x) %}body{% endfilter %}``; each filter has ``node=None``."""

    filters: tuple[Filter, ...]
    body: tuple[Stmt, ...]
    open_tag: Tag
    end_tag: Tag


@_node
class With(Stmt):
    targets: tuple[Expr, ...]
    values: tuple[Expr, ...]
    body: tuple[Stmt, ...]
    open_tag: Tag
    end_tag: Tag


@_node
class Autoescape(Stmt):
    value: Expr
    body: tuple[Stmt, ...]
    open_tag: Tag
    end_tag: Tag


@_node
class Block(Stmt):
    """``{% block name [scoped] [required] %}``: template inheritance, unused by chat templates."""

    name: str
    scoped: bool
    required: bool
    body: tuple[Stmt, ...]
    open_tag: Tag
    end_tag: Tag


@_node
class Generation(Stmt):
    """``{% generation %}body{% endgeneration %}`` (transformers' assistant-mask tag)."""

    body: tuple[Stmt, ...]
    open_tag: Tag
    end_tag: Tag


@_node
class Break(Stmt):
    tag: Tag


@_node
class Continue(Stmt):
    tag: Tag


@_node
class Print(Stmt):
    """``{% print a, b %}``."""

    exprs: tuple[Expr, ...]
    tag: Tag


@_node
class Include(Stmt):
    template: Expr
    ignore_missing: bool
    with_context: bool
    tag: Tag


@_node
class Import(Stmt):
    """``{% import template as target [with|without context] %}``."""

    template: Expr
    target: str
    with_context: bool
    tag: Tag


@_node
class FromImport(Stmt):
    template: Expr
    names: tuple[ImportName, ...]
    with_context: bool
    tag: Tag


@_node
class Extends(Stmt):
    template: Expr
    tag: Tag


# ---- expressions -------------------------------------------------------------------------------


@_node
class Name(Expr):
    name: str


@_node
class Const(Expr):
    """A literal: str (adjacent strings joined), int, float, bool or None."""

    value: Any


@_node
class NSRef(Expr):
    """``name.attr`` as an assignment target (``{% set ns.x = 1 %}``)."""

    name: str
    attr: str


@_node
class Tuple(Expr):
    items: tuple[Expr, ...]


@_node
class List(Expr):
    items: tuple[Expr, ...]


@_node
class Dict(Expr):
    items: tuple[Pair, ...]


@_node
class Getattr(Expr):
    """``node.attr``."""

    node: Expr
    attr: str


@_node
class Getitem(Expr):
    """``node[arg]``, also ``node.0`` (arg a Const int)."""

    node: Expr
    arg: Expr


@_node
class Slice(Expr):
    start: Expr | None
    stop: Expr | None
    step: Expr | None


@_node
class Call(Expr):
    node: Expr
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...]
    dyn_args: Expr | None
    dyn_kwargs: Expr | None


@_node
class Filter(Expr):
    """``node | name(args)``; ``node`` is None in filter blocks and set blocks."""

    node: Expr | None
    name: str
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...]
    dyn_args: Expr | None
    dyn_kwargs: Expr | None


@_node
class Test(Expr):
    """``node is [not] name(args)``."""

    node: Expr
    name: str
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...]
    dyn_args: Expr | None
    dyn_kwargs: Expr | None
    negated: bool


@_node
class BinOp(Expr):
    """Arithmetic: op is ``+``, ``-``, ``*``, ``/``, ``//``, ``%`` or ``**``."""

    op: str
    left: Expr
    right: Expr


@_node
class UnaryOp(Expr):
    """``-operand`` or ``+operand``."""

    op: str
    operand: Expr


@_node
class Not(Expr):
    operand: Expr


@_node
class And(Expr):
    left: Expr
    right: Expr


@_node
class Or(Expr):
    left: Expr
    right: Expr


@_node
class Compare(Expr):
    """``expr op1 e1 op2 e2 ...`` (chained comparisons)."""

    expr: Expr
    ops: tuple[Operand, ...]


@_node
class Concat(Expr):
    """``a ~ b ~ c``."""

    items: tuple[Expr, ...]


@_node
class CondExpr(Expr):
    """``expr1 if test else expr2``; ``expr2`` is None when the else part is missing."""

    test: Expr
    expr1: Expr
    expr2: Expr | None


def node_classes() -> list[type[Node]]:
    """Every concrete node class defined here."""
    out = []
    for value in globals().values():
        if isinstance(value, type) and issubclass(value, Node) and value not in (Node, Stmt, Expr):
            out.append(value)
    return out
