"""Name resolution over the AST: which names a template reads from its render context (the kwargs it takes) and where."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from ..syntax import ast
from .facts import VariableUse
from .filters import KNOWN_GLOBALS

__all__ = ["context_reads", "FIXED_VARIABLES", "node_fields"]

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


def iter_child_nodes(node: ast.Node) -> Iterator[ast.Node]:
    """The nodes directly below ``node``, in field order."""
    shape = _NODE_FIELDS.get(type(node))
    if shape is None:
        shape = node_fields(type(node))
    for name, many in shape:
        value = getattr(node, name)
        if many:
            yield from value
        elif value is not None:
            yield value

# What apply_chat_template always passes; ``variables`` lists the others.
FIXED_VARIABLES = frozenset({"messages", "tools", "documents", "add_generation_prompt"})


@dataclass
class _Read:
    name: str
    node: ast.Name
    guarded: bool


@dataclass
class _Resolver:
    """Walks statements in order, keeping jinja2's scopes: ``for``, macros, call blocks and ``with`` open one."""

    reads: list[_Read] = field(default_factory=list)
    top_level_bound: set[str] = field(default_factory=set)
    macro_reads: list[_Read] = field(default_factory=list)

    def statements(self, body: tuple, scopes: list[set[str]], in_macro: bool) -> None:
        # (the handler is called from here, not through ``statement``: a nesting level costs two
        # frames, as deep templates need)
        for statement in body:
            cls = type(statement)
            if cls in _NOTHING_READ:
                continue
            handler = _STATEMENT_HANDLERS.get(cls)
            if handler is not None:
                handler(self, statement, scopes, in_macro)
            else:
                self.statement(statement, scopes, in_macro)

    def statement(self, node: ast.Node, scopes: list[set[str]], in_macro: bool) -> None:
        cls = type(node)
        if cls in _NOTHING_READ:
            return
        handler = _STATEMENT_HANDLERS.get(cls)
        if handler is not None:
            handler(self, node, scopes, in_macro)
            return
        for child in iter_child_nodes(node):
            if isinstance(child, ast.Expr):
                self.expression(child, scopes, in_macro)
            elif isinstance(child, ast.Elif):
                self.expression(child.test, scopes, in_macro)
                self.statements(child.body, scopes, in_macro)
            elif isinstance(child, (ast.Stmt,)):
                self.statement(child, scopes, in_macro)
            elif isinstance(child, ast.Keyword):
                self.expression(child.value, scopes, in_macro)

    def stmt_Set(self, node: ast.Set, scopes: list[set[str]], in_macro: bool) -> None:
        self.expression(node.value, scopes, in_macro)
        self.bind(node.target, scopes, in_macro)

    def stmt_SetBlock(self, node: ast.SetBlock, scopes: list[set[str]], in_macro: bool) -> None:
        self.statements(node.body, scopes, in_macro)
        for flt in node.filters:
            self.expression(flt, scopes, in_macro)
        self.bind(node.target, scopes, in_macro)

    def stmt_For(self, node: ast.For, scopes: list[set[str]], in_macro: bool) -> None:
        self.expression(node.iter, scopes, in_macro)
        inner = scopes + [set()]
        self.bind(node.target, inner, in_macro)
        inner[-1].add("loop")
        if node.condition is not None:
            self.expression(node.condition, inner, in_macro)
        self.statements(node.body, inner, in_macro)
        self.statements(node.else_body, scopes, in_macro)

    def stmt_Macro(self, node: ast.Macro, scopes: list[set[str]], in_macro: bool) -> None:
        scopes[-1].add(node.name)
        if len(scopes) == 1:
            self.top_level_bound.add(node.name)
        inner = scopes + [{p.name for p in node.params} | {"varargs", "kwargs", "caller"}]
        for param in node.params:
            if param.default is not None:
                self.expression(param.default, inner, True)
        self.statements(node.body, inner, True)

    def stmt_CallBlock(self, node: ast.CallBlock, scopes: list[set[str]], in_macro: bool) -> None:
        self.expression(node.call, scopes, in_macro)
        inner = scopes + [{p.name for p in node.params}]
        self.statements(node.body, inner, in_macro)

    def stmt_If(self, node: ast.If, scopes: list[set[str]], in_macro: bool) -> None:
        # an ``if`` opens no scope, but a name bound in only some branches may still come from the context
        self.expression(node.test, scopes, in_macro)
        branches = [node.body] + [e.body for e in node.elifs] + [node.else_body]
        bound_in_all: set[str] | None = None
        for index, body in enumerate(branches):
            if index and index <= len(node.elifs):
                self.expression(node.elifs[index - 1].test, scopes, in_macro)
            branch = scopes[:-1] + [set(scopes[-1])]
            self.statements(body, branch, in_macro)
            added = branch[-1] - scopes[-1]
            if len(scopes) == 1:
                self.top_level_bound |= added
            bound_in_all = added if bound_in_all is None else bound_in_all & added
        scopes[-1] |= bound_in_all or set()

    def stmt_With(self, node: ast.With, scopes: list[set[str]], in_macro: bool) -> None:
        for value in node.values:
            self.expression(value, scopes, in_macro)
        inner = scopes + [set()]
        for target in node.targets:
            self.bind(target, inner, in_macro)
        self.statements(node.body, inner, in_macro)

    def bind(self, target: ast.Node, scopes: list[set[str]], in_macro: bool) -> None:
        if isinstance(target, ast.Name):
            scopes[-1].add(target.name)
            if len(scopes) == 1:
                self.top_level_bound.add(target.name)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for item in target.items:
                self.bind(item, scopes, in_macro)
        elif isinstance(target, ast.NSRef):
            self.read(target.name, target, scopes, in_macro, False)

    def expression(self, node: ast.Node, scopes: list[set[str]], in_macro: bool, guarded: bool = False) -> None:
        found: list = []
        _names(node, guarded, found)
        for item, is_guarded in found:
            self.read(item.name, item, scopes, in_macro, is_guarded)

    def read(self, name: str, node: ast.Node, scopes: list[set[str]], in_macro: bool, guarded: bool) -> None:
        if name in KNOWN_GLOBALS:
            return
        for scope in scopes:
            if name in scope:
                return
        record = _Read(name, node, guarded)
        (self.macro_reads if in_macro else self.reads).append(record)


# Statements that read no name (text, comments, raw blocks, loop control).
_NOTHING_READ = frozenset({ast.Data, ast.Comment, ast.Raw, ast.Break, ast.Continue})


def _names(node: ast.Node, guarded: bool, found: list) -> None:
    """Every ``Name`` read in an expression, with whether it is read under ``is defined`` / ``| default``, into ``found``."""
    cls = type(node)
    if cls is ast.Name:
        found.append((node, guarded))
        return
    if cls is ast.Const or cls is ast.Tag:
        return
    if (cls is ast.Test and node.name in ("defined", "undefined", "none")) or (
            cls is ast.Filter and node.name in ("default", "d") and node.node is not None):
        _names(node.node, True, found)
        for child in node.args:
            _names(child, guarded, found)
        for child in node.kwargs:
            _names(child, guarded, found)
        return
    shape = _NODE_FIELDS.get(cls)
    if shape is None:
        shape = node_fields(cls)
    for name, many in shape:
        value = getattr(node, name)
        if many:
            for child in value:
                _names(child, guarded, found)
        elif value is not None:
            _names(value, guarded, found)


_STATEMENT_HANDLERS = {getattr(ast, name[5:]): fn for name, fn in vars(_Resolver).items() if name.startswith("stmt_")}


def context_reads(template: ast.Template) -> list[VariableUse]:
    """Names read from the render context, first read first; macros' free names count unless bound at top level."""
    resolver = _Resolver()
    resolver.statements(template.body, [set()], False)
    reads = list(resolver.reads) + [r for r in resolver.macro_reads if r.name not in resolver.top_level_bound]
    reads.sort(key=lambda r: r.node.span.start)
    uses: dict[str, VariableUse] = {}
    for read in reads:
        existing = uses.get(read.name)
        if existing is None:
            uses[read.name] = VariableUse(read.name, read.node.span, read.guarded)
        elif read.guarded and not existing.guarded:
            uses[read.name] = VariableUse(read.name, existing.span, True)
    return list(uses.values())
