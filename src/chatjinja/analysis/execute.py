"""Symbolic execution of a template's AST over one abstract conversation: which input symbols reach the output, and what fails.

The executor follows jinja2's semantics (scoping of ``for``/macros, namespaces, ``loop``,
whitespace control, the sandbox's attribute rules) on the abstract values of
:mod:`chatjinja.analysis.values`. It never produces a prompt: the output is a sequence of
literal pieces and symbols, and each symbol that reaches it is recorded with the span of the
construct that printed it. Where a condition depends on text the analyser does not know, both
branches are followed and a failure inside them counts as "may fail", not "fails".
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..source import Span
from ..syntax import ast
from .filters import GLOBALS, apply_filter, apply_test
from .values import (
    UNKNOWN,
    Builtin,
    Cat,
    Failure,
    Loop,
    Method,
    Namespace,
    Sym,
    SymLen,
    Undefined,
    Unknown,
    arithmetic,
    compare,
    concat,
    get_attribute,
    get_item,
    iterate,
    labels_in,
    to_text,
    truth,
)

__all__ = ["Trace", "execute", "effective_texts", "STEP_LIMIT", "STEP_LIMIT_MESSAGE"]

STEP_LIMIT = 200_000
STEP_LIMIT_MESSAGE = "symbolic execution step limit"
MAX_OUTPUT = 32 * 1024 * 1024  # characters, all buffers together (the runtime's max_output_chars)
RUN_TIME_LIMIT = 1.0  # seconds per run, checked between steps (the runtime's render timeout is the same)
DEPTH_LIMIT = 40


@dataclass
class Trace:
    """What one symbolic run saw: output pieces, where each input symbol was printed, how it ended."""

    pieces: list = field(default_factory=list)
    printed: dict[str, list[Span]] = field(default_factory=dict)  # label -> spans of the constructs that printed it
    failure: Failure | None = None
    may_fail: list[Failure] = field(default_factory=list)
    steps: int = 0

    @property
    def ok(self) -> bool:
        return self.failure is None

    def contains(self, label: str) -> bool:
        return self.failure is None and label in self.printed

    def shape(self) -> tuple:
        """The output as literal text and symbol labels, for comparing two runs."""
        out: list = []
        for piece in self.pieces:
            for part in piece.parts if isinstance(piece, Cat) else (piece,):
                if isinstance(part, str):
                    if out and isinstance(out[-1], str):
                        out[-1] += part
                    elif part:
                        out.append(part)
                elif isinstance(part, Sym):
                    out.append(("sym", part.label))
                else:
                    out.append(("unknown", tuple(sorted(labels_in(part)))))
        return tuple(out)

    def literal_text(self) -> str:
        """The literal pieces of the output (input symbols left out)."""
        out = []
        for piece in self.pieces:
            if isinstance(piece, str):
                out.append(piece)
            elif isinstance(piece, Cat):
                out.extend(p for p in piece.parts if isinstance(p, str))
        return "".join(out)


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


@dataclass
class _Macro:
    node: ast.Macro | None
    params: tuple
    body: tuple
    scope: list  # the scope chain the macro was defined in
    name: str
    caller: Any = None


@dataclass(frozen=True)
class _Caller:
    body: tuple
    params: tuple
    scope: list


_WS_TAIL = re.compile(r"[ \t]*$")


def effective_texts(template: ast.Template, text: str, nodes: list | None = None) -> dict[int, str]:
    """Each ``Data`` node's text after ``-`` markers, trim_blocks and lstrip_blocks (keyed by start offset)."""
    tags_by_end: dict[int, ast.Tag] = {}
    tags_by_start: dict[int, ast.Tag] = {}
    datas: list[ast.Data] = []
    for node in nodes if nodes is not None else _walk(template):
        if isinstance(node, ast.Tag):
            tags_by_end[node.span.end] = node
            tags_by_start[node.span.start] = node
        elif isinstance(node, ast.Data):
            datas.append(node)
    result: dict[int, str] = {}
    for data in datas:
        value = data.text
        before = tags_by_end.get(data.span.start)
        after = tags_by_start.get(data.span.end)
        if before is not None:
            if before.strip_right:
                value = value.lstrip()
            elif before.name != "{{" and not before.keep_right:
                if value.startswith("\r\n"):
                    value = value[2:]
                elif value.startswith("\n") or value.startswith("\r"):
                    value = value[1:]
        if after is not None:
            if after.strip_left:
                value = value.rstrip()
            elif after.name != "{{" and not after.keep_left:
                tail = _WS_TAIL.search(value)
                if tail is not None and tail.start() < len(value):
                    line_start = text.rfind("\n", 0, data.span.end - (len(value) - tail.start())) + 1
                    run = text[line_start : after.span.start]
                    if run.strip(" \t") == "":
                        value = value[: tail.start()]
        result[data.span.start] = value
    return result


def _walk(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            stack.extend(reversed(item))
            continue
        if not isinstance(item, ast.Node):
            continue
        yield item
        for name in item.__dataclass_fields__:
            if name == "span":
                continue
            value = getattr(item, name)
            if isinstance(value, (ast.Node, tuple)):
                stack.append(value)


class _Executor:
    def __init__(self, template: ast.Template, texts: dict[int, str], context: dict[str, Any]):
        self.template = template
        self.texts = texts
        self.context = context
        self.trace = Trace()
        self.buffers: list[list] = [self.trace.pieces]
        self.top: dict[str, Any] = {}
        self.speculative = 0
        self.depth = 0
        self.output_chars = 0
        self.deadline = time.monotonic() + RUN_TIME_LIMIT

    # ---- scopes -------------------------------------------------------------------------------

    def lookup(self, scope: list, name: str) -> Any:
        for frame in reversed(scope):
            if name in frame:
                return frame[name]
        if name in self.context:
            return self.context[name]
        if name in GLOBALS:
            return GLOBALS[name]
        return Undefined(name)

    # ---- output -------------------------------------------------------------------------------

    def emit(self, value: Any, span: Span) -> None:
        if isinstance(value, str):
            self.output_chars += len(value)
        elif isinstance(value, Cat):
            self.output_chars += sum(len(p) for p in value.parts if isinstance(p, str))
        if self.output_chars > MAX_OUTPUT:
            raise Failure("limit", f"output longer than {MAX_OUTPUT} characters", span)
        self.buffers[-1].append(value)
        if len(self.buffers) == 1 and not isinstance(value, str):
            for label in labels_in(value):
                self.trace.printed.setdefault(label, []).append(span)

    def capture(self, run: Any) -> Any:
        buffer: list = []
        self.buffers.append(buffer)
        try:
            run()
        finally:
            self.buffers.pop()
        return concat(buffer)

    # ---- statements ---------------------------------------------------------------------------

    def run(self) -> Trace:
        try:
            self.body(self.template.body, [self.top])
        except Failure as failure:
            self.trace.failure = failure
        except (_Break, _Continue):
            pass
        except RecursionError:
            self.trace.failure = Failure("limit", "nesting too deep")
        return self.trace

    def body(self, statements: tuple, scope: list) -> None:
        for statement in statements:
            self.statement(statement, scope)

    def step(self) -> None:
        self.trace.steps += 1
        if self.trace.steps > STEP_LIMIT:
            raise Failure("limit", STEP_LIMIT_MESSAGE)
        if (self.trace.steps & 15) == 0 and time.monotonic() > self.deadline:
            raise Failure("limit", "symbolic execution time limit")

    def statement(self, node: ast.Stmt, scope: list) -> None:
        self.trace.steps += 1
        if self.trace.steps > STEP_LIMIT:
            raise Failure("limit", STEP_LIMIT_MESSAGE)
        if (self.trace.steps & 15) == 0 and time.monotonic() > self.deadline:
            raise Failure("limit", "symbolic execution time limit")
        method = _STATEMENTS.get(type(node))
        if method is None:
            return
        try:
            method(self, node, scope)
        except Failure as failure:
            if failure.span is None:
                failure.span = node.span
            raise

    def stmt_Data(self, node: ast.Data, scope: list) -> None:
        text = self.texts.get(node.span.start, node.text)
        if text:
            self.emit(text, node.span)

    def stmt_Raw(self, node: ast.Raw, scope: list) -> None:
        if node.text:
            self.emit(node.text, node.span)

    def stmt_Output(self, node: ast.Output, scope: list) -> None:
        value = self.expr(node.expr, scope)
        self.emit(to_text(value), node.span)

    def stmt_Print(self, node: ast.Print, scope: list) -> None:
        for expr in node.exprs:
            self.emit(to_text(self.expr(expr, scope)), node.span)

    def branch(self, statements: tuple, scope: list, certain: bool) -> None:
        if certain:
            self.body(statements, scope)
            return
        self.speculative += 1
        try:
            self.body(statements, scope)
        except Failure as failure:
            self.trace.may_fail.append(failure)
        except (_Break, _Continue):
            pass
        finally:
            self.speculative -= 1

    def stmt_If(self, node: ast.If, scope: list) -> None:
        tests = [(node.test, node.body)] + [(e.test, e.body) for e in node.elifs]
        certain = True
        for test, statements in tests:
            outcome = truth(self.expr(test, scope))
            if outcome is True:
                self.branch(statements, scope, certain)
                return
            if outcome is None:
                self.branch(statements, scope, False)
                certain = False
        self.branch(node.else_body, scope, certain)

    def stmt_For(self, node: ast.For, scope: list) -> None:
        iterable = self.expr(node.iter, scope)
        items = iterate(iterable, node.iter.span)
        frame: dict[str, Any] = {}
        inner = scope + [frame]
        if node.condition is not None:
            kept = []
            for item in items:
                self.bind(node.target, item, frame)
                outcome = truth(self.expr(node.condition, inner))
                if outcome is not False:
                    kept.append(item)
            items = kept
        if not items:
            self.body(node.else_body, scope)
            return
        certain = not (len(items) == 1 and isinstance(items[0], Unknown))
        self._loop(node, items, scope, 0, certain)

    def _loop(self, node: ast.For, items: list, scope: list, depth0: int, certain: bool) -> None:
        frame: dict[str, Any] = {}
        inner = scope + [frame]
        loop = Loop(0, len(items), items, depth0)
        if node.recursive:
            loop.recurse = lambda sub: self.capture(lambda: self._loop(node, iterate(sub), scope, depth0 + 1, True))
        frame["loop"] = loop
        for index, item in enumerate(items):
            self.step()  # an empty body still costs an iteration
            loop.index0 = index
            self.bind(node.target, item, frame)
            try:
                self.branch(node.body, inner, certain)
            except _Continue:
                continue
            except _Break:
                break

    def bind(self, target: ast.Expr, value: Any, frame: dict) -> None:
        if isinstance(target, ast.Name):
            frame[target.name] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (Unknown, SymLen)):
                values = [UNKNOWN] * len(target.items)
            elif isinstance(value, (list, tuple)):
                values = list(value)
            elif isinstance(value, str):
                values = list(value)
            elif isinstance(value, dict):
                values = list(value.keys())
            else:
                values = [UNKNOWN] * len(target.items)
            if len(values) != len(target.items):
                raise Failure("type", f"cannot unpack {len(values)} values into {len(target.items)}", target.span)
            for sub, item in zip(target.items, values):
                self.bind(sub, item, frame)
        elif isinstance(target, ast.NSRef):
            raise Failure("type", "namespace attribute as a loop target", target.span)

    def stmt_Set(self, node: ast.Set, scope: list) -> None:
        value = self.expr(node.value, scope)
        self.assign(node.target, value, scope)

    def assign(self, target: ast.Expr, value: Any, scope: list) -> None:
        if isinstance(target, ast.NSRef):
            namespace = self.lookup(scope, target.name)
            if not isinstance(namespace, Namespace):
                raise Failure("type", "cannot assign attribute on non-namespace object", target.span)
            if target.attr.startswith("_"):
                raise Failure("security", "underscore-prefixed namespace attribute", target.span)
            namespace.attrs[target.attr] = value
            return
        self.bind(target, value, scope[-1])

    def stmt_SetBlock(self, node: ast.SetBlock, scope: list) -> None:
        value = self.capture(lambda: self.body(node.body, scope))
        for flt in node.filters:
            value = self.filter(flt, value, scope)
        self.assign(node.target, value, scope)

    def stmt_Macro(self, node: ast.Macro, scope: list) -> None:
        scope[-1][node.name] = _Macro(node, node.params, node.body, scope, node.name)

    def stmt_CallBlock(self, node: ast.CallBlock, scope: list) -> None:
        caller = _Caller(node.body, node.params, scope)
        value = self.call(node.call, scope, caller=caller)
        self.emit(to_text(value), node.span)

    def stmt_FilterBlock(self, node: ast.FilterBlock, scope: list) -> None:
        value = self.capture(lambda: self.body(node.body, scope))
        for flt in node.filters:
            value = self.filter(flt, value, scope)
        self.emit(to_text(value), node.span)

    def stmt_With(self, node: ast.With, scope: list) -> None:
        frame: dict[str, Any] = {}
        for target, value in zip(node.targets, node.values):
            self.bind(target, self.expr(value, scope), frame)
        self.body(node.body, scope + [frame])

    def stmt_Autoescape(self, node: ast.Autoescape, scope: list) -> None:
        self.body(node.body, scope)

    def stmt_Block(self, node: ast.Block, scope: list) -> None:
        self.body(node.body, scope)

    def stmt_Generation(self, node: ast.Generation, scope: list) -> None:
        self.body(node.body, scope)

    def stmt_Break(self, node: ast.Break, scope: list) -> None:
        raise _Break()

    def stmt_Continue(self, node: ast.Continue, scope: list) -> None:
        raise _Continue()

    def _no_loader(self, node: Any, scope: list) -> None:
        raise Failure("type", "no loader for this environment specified", node.span)

    stmt_Include = stmt_Import = stmt_FromImport = stmt_Extends = _no_loader

    # ---- expressions --------------------------------------------------------------------------

    def expr(self, node: ast.Expr, scope: list) -> Any:
        try:
            return _EXPRESSIONS[type(node)](self, node, scope)
        except Failure as failure:
            if failure.span is None:
                failure.span = node.span
            raise

    def expr_Name(self, node: ast.Name, scope: list) -> Any:
        name = node.name
        for frame in reversed(scope):
            if name in frame:
                return frame[name]
        if name in self.context:
            return self.context[name]
        value = GLOBALS.get(name)
        return Undefined(name) if value is None else value

    def expr_Const(self, node: ast.Const, scope: list) -> Any:
        return node.value

    def expr_Tuple(self, node: ast.Tuple, scope: list) -> Any:
        return tuple(self.expr(item, scope) for item in node.items)

    def expr_List(self, node: ast.List, scope: list) -> Any:
        return [self.expr(item, scope) for item in node.items]

    def expr_Dict(self, node: ast.Dict, scope: list) -> Any:
        out: dict = {}
        for pair in node.items:
            key = self.expr(pair.key, scope)
            if isinstance(key, (list, dict)):
                raise Failure("type", "unhashable type", pair.span)
            out[key] = self.expr(pair.value, scope)
        return out

    def expr_NSRef(self, node: ast.NSRef, scope: list) -> Any:
        return get_attribute(self.lookup(scope, node.name), node.attr, node.span)

    def expr_Getattr(self, node: ast.Getattr, scope: list) -> Any:
        return get_attribute(self.expr(node.node, scope), node.attr, node.span)

    def expr_Getitem(self, node: ast.Getitem, scope: list) -> Any:
        obj = self.expr(node.node, scope)
        if isinstance(node.arg, ast.Slice):
            parts = [None if p is None else self.expr(p, scope) for p in (node.arg.start, node.arg.stop, node.arg.step)]
            if any(isinstance(p, (Unknown, SymLen, Sym, Cat)) for p in parts):
                return Unknown(labels_in(obj))
            if any(isinstance(p, Undefined) for p in parts):
                parts = [None if isinstance(p, Undefined) else p for p in parts]
            return get_item(obj, slice(*parts), node.span)
        key = self.expr(node.arg, scope)
        return get_item(obj, key, node.span)

    def expr_Slice(self, node: ast.Slice, scope: list) -> Any:
        return UNKNOWN

    def expr_Call(self, node: ast.Call, scope: list) -> Any:
        return self.call(node, scope)

    def arguments(self, node: Any, scope: list) -> tuple[list, dict]:
        args = [self.expr(a, scope) for a in node.args]
        kwargs = {k.key: self.expr(k.value, scope) for k in node.kwargs}
        if node.dyn_args is not None:
            extra = self.expr(node.dyn_args, scope)
            if isinstance(extra, (list, tuple)):
                args.extend(extra)
        if node.dyn_kwargs is not None:
            extra = self.expr(node.dyn_kwargs, scope)
            if isinstance(extra, dict):
                kwargs.update({str(k): v for k, v in extra.items()})
        return args, kwargs

    def call(self, node: ast.Call, scope: list, caller: Any = None) -> Any:
        self.step()
        function = self.expr(node.node, scope)
        args, kwargs = self.arguments(node, scope)
        if function is GLOBALS["raise_exception"]:
            message = args[0] if args else ""
            text = message if isinstance(message, str) else None
            raise Failure("raise", text if text is not None else "raise_exception", node.span, site=node)
        if isinstance(function, _Macro):
            return self.call_macro(function, args, kwargs, node.span, caller)
        if isinstance(function, _Caller):
            return self.call_caller(function, args, kwargs)
        if isinstance(function, Loop):
            if function.recurse is None:
                raise Failure("type", "the loop is not recursive", node.span)
            return function.recurse(args[0] if args else [])
        if isinstance(function, (Builtin, Method)):
            try:
                return function(*args, **kwargs)
            except Failure as failure:
                if failure.span is None:
                    failure.span = node.span
                raise
            except (TypeError, ValueError) as exc:
                raise Failure("type", str(exc), node.span) from None
        if isinstance(function, Undefined):
            raise function.fail(node.span)
        if isinstance(function, Unknown):
            return Unknown(labels_in(args) | labels_in(kwargs))
        raise Failure("type", f"'{type(function).__name__}' object is not callable", node.span)

    def call_macro(self, macro: _Macro, args: list, kwargs: dict, span: Span, caller: Any) -> Any:
        if self.depth >= DEPTH_LIMIT:
            raise Failure("limit", "macro recursion too deep", span)
        frame: dict[str, Any] = {}
        inner = [self.top] + ([f for f in macro.scope if f is not self.top]) + [frame]
        extra = list(args[len(macro.params):])
        for index, param in enumerate(macro.params):
            if index < len(args):
                frame[param.name] = args[index]
            elif param.name in kwargs:
                frame[param.name] = kwargs.pop(param.name)
            elif param.default is not None:
                frame[param.name] = self.expr(param.default, inner)
            else:
                frame[param.name] = Undefined(param.name)
        for param in macro.params:
            kwargs.pop(param.name, None)
        frame["varargs"] = extra
        frame["kwargs"] = kwargs
        if caller is not None:
            frame["caller"] = caller
        self.depth += 1
        try:
            return self.capture(lambda: self.body(macro.body, inner))
        finally:
            self.depth -= 1

    def call_caller(self, caller: _Caller, args: list, kwargs: dict) -> Any:
        frame: dict[str, Any] = {}
        for index, param in enumerate(caller.params):
            if index < len(args):
                frame[param.name] = args[index]
            elif param.name in kwargs:
                frame[param.name] = kwargs[param.name]
            else:
                frame[param.name] = Undefined(param.name)
        return self.capture(lambda: self.body(caller.body, caller.scope + [frame]))

    def filter(self, node: ast.Filter, value: Any, scope: list) -> Any:
        args, kwargs = self.arguments(node, scope)
        return apply_filter(node.name, value, tuple(args), kwargs, node.span)

    def expr_Filter(self, node: ast.Filter, scope: list) -> Any:
        value = self.expr(node.node, scope) if node.node is not None else ""
        return self.filter(node, value, scope)

    def expr_Test(self, node: ast.Test, scope: list) -> Any:
        value = self.expr(node.node, scope)
        args, kwargs = self.arguments(node, scope)
        result = apply_test(node.name, value, tuple(args), kwargs, node.span)
        if isinstance(result, Unknown):
            return UNKNOWN
        return (not result) if node.negated else bool(result)

    _BINOPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod", "**": "pow"}

    def expr_BinOp(self, node: ast.BinOp, scope: list) -> Any:
        left = self.expr(node.left, scope)
        right = self.expr(node.right, scope)
        return arithmetic(self._BINOPS[node.op], left, right, node.span)

    def expr_UnaryOp(self, node: ast.UnaryOp, scope: list) -> Any:
        value = self.expr(node.operand, scope)
        if isinstance(value, Undefined):
            raise value.fail(node.span)
        if isinstance(value, (int, float)):
            return -value if node.op == "-" else +value
        if isinstance(value, (Unknown, SymLen)):
            return UNKNOWN
        raise Failure("type", f"bad operand type for unary {node.op}", node.span)

    def expr_Not(self, node: ast.Not, scope: list) -> Any:
        outcome = truth(self.expr(node.operand, scope))
        return UNKNOWN if outcome is None else not outcome

    def expr_And(self, node: ast.And, scope: list) -> Any:
        left = self.expr(node.left, scope)
        outcome = truth(left)
        if outcome is False:
            return left
        right = self._maybe(node.right, scope, outcome is None)
        if outcome is None:
            return UNKNOWN if truth(right) is not False else right
        return right

    def expr_Or(self, node: ast.Or, scope: list) -> Any:
        left = self.expr(node.left, scope)
        outcome = truth(left)
        if outcome is True:
            return left
        right = self._maybe(node.right, scope, outcome is None)
        if outcome is None:
            return UNKNOWN if truth(right) is not True else right
        return right

    def _maybe(self, node: ast.Expr, scope: list, speculative: bool) -> Any:
        if not speculative:
            return self.expr(node, scope)
        try:
            return self.expr(node, scope)
        except Failure as failure:
            self.trace.may_fail.append(failure)
            return UNKNOWN

    _COMPARE = {"==": "eq", "!=": "ne", "<": "lt", "<=": "lteq", ">": "gt", ">=": "gteq", "in": "in", "not in": "notin"}

    def expr_Compare(self, node: ast.Compare, scope: list) -> Any:
        left = self.expr(node.expr, scope)
        result: Any = True
        for operand in node.ops:
            right = self.expr(operand.expr, scope)
            outcome = compare(self._COMPARE[operand.op], left, right, operand.span)
            if outcome is False:
                return False
            if isinstance(outcome, Unknown):
                result = UNKNOWN
            left = right
        return result

    def expr_Concat(self, node: ast.Concat, scope: list) -> Any:
        return concat([to_text(self.expr(item, scope)) for item in node.items])

    def expr_CondExpr(self, node: ast.CondExpr, scope: list) -> Any:
        outcome = truth(self.expr(node.test, scope))
        if outcome is True:
            return self.expr(node.expr1, scope)
        if outcome is False:
            return self.expr(node.expr2, scope) if node.expr2 is not None else Undefined("else")
        first = self._maybe(node.expr1, scope, True)
        second = self._maybe(node.expr2, scope, True) if node.expr2 is not None else Undefined("else")
        if first == second:
            return first
        return Unknown(labels_in(first) | labels_in(second))

    def expr_Keyword(self, node: ast.Keyword, scope: list) -> Any:
        return self.expr(node.value, scope)


_STATEMENTS = {getattr(ast, name[5:]): fn for name, fn in vars(_Executor).items()
               if name.startswith("stmt_") and hasattr(ast, name[5:])}
_EXPRESSIONS = {getattr(ast, name[5:]): fn for name, fn in vars(_Executor).items()
                if name.startswith("expr_") and hasattr(ast, name[5:])}


def execute(template: ast.Template, texts: dict[int, str], context: dict[str, Any]) -> Trace:
    """Run ``template`` symbolically with the template variables ``context`` (abstract values)."""
    return _Executor(template, texts, context).run()
