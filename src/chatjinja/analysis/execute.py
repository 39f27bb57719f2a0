"""Symbolic execution of a template's AST over one abstract conversation: which input symbols reach the output, and what fails.

The executor follows jinja2's semantics (scoping of ``for``/macros, namespaces, ``loop``,
whitespace control, the sandbox's attribute rules) on the abstract values of
:mod:`chatjinja.analysis.values`. It never produces a prompt: the output is a sequence of
literal pieces and symbols, and each symbol that reaches it is recorded with the span of the
construct that printed it. Where a condition depends on text the analyser does not know, both
branches are followed and a failure inside them counts as "may fail", not "fails".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..source import Span
from ..syntax import ast
from .filters import FILTERS, GLOBALS, TESTS
from .values import (
    _DICT_METHODS,
    _MUTATING,
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
    built_items,
    current_fuel,
    concat,
    get_attribute,
    get_item,
    iterate,
    labels_in,
    to_text,
    truth,
)

__all__ = ["Trace", "Program", "execute", "STEP_LIMIT", "STEP_LIMIT_MESSAGE"]

STEP_LIMIT = 200_000
STEP_LIMIT_MESSAGE = "symbolic execution step limit"
MAX_OUTPUT = 32 * 1024 * 1024  # characters, all buffers together (the runtime's max_output_chars)
DEPTH_LIMIT = 40


@dataclass
class Trace:
    """What one symbolic run saw: output pieces, where each input symbol was printed, how it ended."""

    pieces: list = field(default_factory=list)
    printed: dict[str, list[Span]] = field(default_factory=dict)  # label -> spans of the constructs that printed it
    failure: Failure | None = None
    may_fail: list[Failure] = field(default_factory=list)
    steps: int = 0
    _shape: tuple | None = field(default=None, repr=False, compare=False)  # made on first ask, after the run

    @property
    def ok(self) -> bool:
        return self.failure is None

    def contains(self, label: str) -> bool:
        return self.failure is None and label in self.printed

    def shape(self) -> tuple:
        """The output as literal text and symbol labels, for comparing two runs (asked after the run, made once)."""
        if self._shape is not None:
            return self._shape
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
        self._shape = tuple(out)
        return self._shape

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
    code: Any = field(default=None, compare=False, repr=False)  # the compiled (_MacroCode) parameters and body


@dataclass(frozen=True)
class _Caller:
    body: tuple
    params: tuple
    scope: list
    code: Any = field(default=None, compare=False, hash=False, repr=False)  # the compiled (_MacroCode) body


class _MacroCode:
    """A macro's or call block's parameters (names, compiled defaults) and compiled body."""

    __slots__ = ("names", "defaults", "body")

    def __init__(self, names: tuple, defaults: tuple, body: Any):
        self.names = names
        self.defaults = defaults
        self.body = body


class _Executor:
    """The state of one symbolic run; the template's behaviour is in the closures of :class:`Program`."""

    __slots__ = ("context", "trace", "buffers", "top", "speculative", "depth", "output_chars", "fuel", "charged", "work", "checkpoint")

    def __init__(self, context: dict[str, Any]):
        self.context = context
        self.trace = Trace()
        self.buffers: list[list] = [self.trace.pieces]
        self.top: dict[str, Any] = {}
        self.speculative = 0
        self.depth = 0
        self.output_chars = 0
        self.fuel = current_fuel.get()  # the analysis's fuel, charged with the steps at each checkpoint
        self.charged = 0  # the steps charged to it so far
        self.work = 0  # expression nodes of the statement lists run since the last charge (see ``compile_body``)
        self.checkpoint = min(16, STEP_LIMIT + 1)  # every step that reaches it calls ``passed``

    def lookup(self, scope: list, name: str) -> Any:
        for frame in reversed(scope):
            if name in frame:
                return frame[name]
        if name in self.context:
            return self.context[name]
        if name in GLOBALS:
            return GLOBALS[name]
        return Undefined(name)

    def emit(self, value: Any, span: Span) -> None:
        if type(value) is str:
            self.output_chars += len(value)
            if self.output_chars > MAX_OUTPUT:
                raise Failure("limit", f"output longer than {MAX_OUTPUT} characters", span)
            self.buffers[-1].append(value)
            return
        if type(value) is Sym:  # an input string: no literal characters; printed at the top level, its label is recorded
            if self.output_chars > MAX_OUTPUT:
                raise Failure("limit", f"output longer than {MAX_OUTPUT} characters", span)
            buffers = self.buffers
            buffers[-1].append(value)
            if len(buffers) == 1:
                self.trace.printed.setdefault(value.label, []).append(span)
            return
        if isinstance(value, str):
            self.output_chars += len(value)
        elif isinstance(value, Cat):
            self.output_chars += sum(len(p) for p in value.parts if isinstance(p, str))
        if self.output_chars > MAX_OUTPUT:
            raise Failure("limit", f"output longer than {MAX_OUTPUT} characters", span)
        buffers = self.buffers
        buffers[-1].append(value)
        if len(buffers) == 1 and not isinstance(value, str):
            printed = self.trace.printed
            for label in labels_in(value):
                printed.setdefault(label, []).append(span)

    def capture(self, body: Any, scope: list) -> Any:
        """Run a compiled body into a buffer of its own; the text it printed."""
        buffer: list = []
        self.buffers.append(buffer)
        try:
            body(self, scope)
        finally:
            self.buffers.pop()
        return concat(buffer)

    def step(self) -> None:
        trace = self.trace
        steps = trace.steps = trace.steps + 1
        if steps >= self.checkpoint:
            self.passed(steps)

    def passed(self, steps: int) -> None:
        """The step count reached the checkpoint: fail past the step limit, charge the analysis's fuel, set the next checkpoint.

        The checkpoint is the next multiple of 16 (the fuel is charged about every 16 steps) and
        never above the limit, so a statement list fails at the first statement past the limit.
        Nothing here reads a clock: where a run stops depends on the template alone.
        """
        if steps > STEP_LIMIT:
            raise Failure("limit", STEP_LIMIT_MESSAGE)
        self.settle(steps)
        self.checkpoint = min(((steps >> 4) + 1) << 4, STEP_LIMIT + 1)

    def settle(self, steps: int) -> None:
        """Charge the steps and the work not yet charged to the analysis's fuel."""
        if self.fuel is not None:
            self.fuel.spend(steps - self.charged + self.work)
            self.charged = steps
            self.work = 0

    def branch(self, body: Any, scope: list) -> None:
        """A branch that may not run: its failures are "may fail", its ``break``/``continue`` stay inside."""
        self.speculative += 1
        try:
            body(self, scope)
        except Failure as failure:
            self.trace.may_fail.append(failure.with_traceback(None))  # (its frames freed, not kept by the trace)
        except (_Break, _Continue):
            pass
        finally:
            self.speculative -= 1

    def maybe(self, expr: Any, scope: list) -> Any:
        try:
            return expr(self, scope)
        except Failure as failure:
            self.trace.may_fail.append(failure.with_traceback(None))  # (its frames freed, not kept by the trace)
            return UNKNOWN

    def call_macro(self, macro: _Macro, args: list, kwargs: dict, span: Span, caller: Any) -> Any:
        if self.depth >= DEPTH_LIMIT:
            raise Failure("limit", "macro recursion too deep", span)
        code = macro.code
        frame: dict[str, Any] = {}
        top = self.top
        inner = [top] + ([f for f in macro.scope if f is not top]) + [frame]
        names = code.names
        extra = list(args[len(names):])
        for index, name in enumerate(names):
            if index < len(args):
                frame[name] = args[index]
            elif name in kwargs:
                frame[name] = kwargs.pop(name)
            elif code.defaults[index] is not None:
                frame[name] = code.defaults[index](self, inner)
            else:
                frame[name] = Undefined(name)
        for name in names:
            kwargs.pop(name, None)
        frame["varargs"] = extra
        frame["kwargs"] = kwargs
        if caller is not None:
            frame["caller"] = caller
        self.depth += 1
        try:
            return self.capture(code.body, inner)
        finally:
            self.depth -= 1

    def call_caller(self, caller: _Caller, args: list, kwargs: dict) -> Any:
        frame: dict[str, Any] = {}
        for index, name in enumerate(caller.code.names):
            if index < len(args):
                frame[name] = args[index]
            elif name in kwargs:
                frame[name] = kwargs[name]
            else:
                frame[name] = Undefined(name)
        return self.capture(caller.code.body, caller.scope + [frame])


def _nothing(ex: _Executor, scope: list) -> None:
    return None


def _closed(ex: _Executor, scope: list) -> None:
    raise RuntimeError("this Program is closed")


_MISSING = object()


class Program:
    """A template compiled once into closures ``f(executor, scope)``, then run for every conversation shape.

    Each closure does what a tree-walking interpreter's method for its node would, without the
    dispatch: jinja2's semantics as described in the module docstring, and the same bookkeeping
    (a step per statement, loop iteration and call; a failure without a place gets the span of the
    innermost expression or statement it passed through). A closure whose own code can raise a
    failure without a place catches it and adds its span; one that only combines its children's
    values (``not``, ``and``, ``if``-expressions, names, literals) does not need to, since a
    child's failure already has a place.
    """

    def __init__(self, template: ast.Template, texts: dict[int, str], bindable: frozenset[str] | None = None):
        """``bindable``: every name a run can put in a scope (``None``: unknown); others are looked up in the context only."""
        self.texts = texts
        self.bindable = bindable
        self.nodes = 0  # expression nodes compiled so far (a statement list's weight: see ``compile_body``)
        self.body = self.compile_body(template.body)

    def close(self) -> None:
        """Drop the compiled closures: they refer to the program, a reference cycle through every one of
        them that only the cyclic collector could free (one pass over all of them); without the
        program's own reference, they are freed as soon as the program is. It runs no more after."""
        self.body = _closed

    def run(self, context: dict[str, Any]) -> Trace:
        ex = _Executor(context)
        try:
            self.body(ex, [ex.top])
        except Failure as failure:
            ex.trace.failure = failure.with_traceback(None)
        except (_Break, _Continue):
            pass
        except RecursionError:
            ex.trace.failure = Failure("limit", "nesting too deep")
        except (ValueError, OverflowError) as exc:
            # Python refusing a value the template made (an integer too long to print, a float too large to
            # convert): the render raises it too. The places known to raise fail with their own Failure; this
            # keeps any other from ending the analysis with a traceback.
            ex.trace.failure = Failure("type", f"{type(exc).__name__}: {exc}")
        ex.settle(ex.trace.steps)
        return ex.trace

    # ---- statements ---------------------------------------------------------------------------

    def compile_body(self, statements: tuple) -> Any:
        """A statement list: a step for each statement (counted before it runs), then the statement.

        The statements are compiled when the list first runs: branches that no conversation reaches
        are never compiled, and compiling happens inside a run, so a template nested too deeply to
        compile fails that run ("nesting too deep") the way it fails to run.

        Each time the list runs, the expression nodes of its statements (not of their bodies, which
        are lists of their own) are charged to the analysis's fuel as work, besides the steps.

        Statements that do nothing (comments, text that whitespace control removed) are not called:
        their steps are added to the next statement's, or checked at the end of the list. Past the
        step limit the run fails before the next statement that does something, in the same state.
        """
        if not statements:
            return _nothing
        items: tuple | None = None
        trailing = weight = 0

        def body(ex: _Executor, scope: list) -> None:
            nonlocal items, trailing, weight
            if items is None:
                before = self.nodes
                items, trailing = self.compile_statements(statements)
                weight = self.nodes - before  # (bodies below compile when they first run: not counted here)
            ex.work += weight
            trace = ex.trace
            for count, fn in items:
                steps = trace.steps = trace.steps + count
                if steps >= ex.checkpoint:
                    ex.passed(steps)
                fn(ex, scope)
            if trailing:
                steps = trace.steps = trace.steps + trailing
                if steps >= ex.checkpoint:
                    ex.passed(steps)

        return body

    def compile_statements(self, statements: tuple) -> tuple[tuple, int]:
        """``((steps, closure), ...)`` for the statements that do something, and the steps left at the end."""
        items: list[tuple[int, Any]] = []
        pending = 0
        texts, data = self.texts, ast.Data
        for statement in statements:
            pending += 1
            if type(statement) is data and not texts.get(statement.span.start, statement.text):
                continue  # text that whitespace control removed (what ``stmt_Data`` finds, without the calls)
            fn = self.statement(statement)
            if fn is not None:
                items.append((pending, fn))
                pending = 0
        return tuple(items), pending

    def statement(self, node: ast.Stmt) -> Any:
        """The closure for one statement (``None`` for one that does nothing, like a comment)."""
        method = _STATEMENTS.get(type(node))
        if method is None:
            return None
        fn = method(self, node)
        if fn is None or type(node) in _SELF_SPANNED:
            return fn
        span = node.span

        def statement(ex: _Executor, scope: list) -> None:
            try:
                fn(ex, scope)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return statement

    def stmt_Data(self, node: ast.Data) -> Any:
        text = self.texts.get(node.span.start, node.text)
        return self._emit_text(text, node.span) if text else None

    def stmt_Raw(self, node: ast.Raw) -> Any:
        return self._emit_text(node.text, node.span) if node.text else None

    @staticmethod
    def _emit_text(text: str, span: Span) -> Any:
        size = len(text)

        def data(ex: _Executor, scope: list) -> None:
            ex.output_chars += size
            if ex.output_chars > MAX_OUTPUT:
                raise Failure("limit", f"output longer than {MAX_OUTPUT} characters", span)
            ex.buffers[-1].append(text)

        return data

    def stmt_Output(self, node: ast.Output) -> Any:
        value, span = self.expr(node.expr), node.span

        def output(ex: _Executor, scope: list) -> None:
            try:
                text = value(ex, scope)
                if type(text) is str:  # (what ``emit`` does with a str, inline)
                    ex.output_chars += len(text)
                    if ex.output_chars > MAX_OUTPUT:
                        raise Failure("limit", f"output longer than {MAX_OUTPUT} characters", span)
                    ex.buffers[-1].append(text)
                    return
                ex.emit(to_text(text), span)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return output

    def stmt_Print(self, node: ast.Print) -> Any:
        values_list = []
        for e in node.exprs:
            values_list.append(self.expr(e))
        values, span = tuple(values_list), node.span

        def print_(ex: _Executor, scope: list) -> None:
            for value in values:
                ex.emit(to_text(value(ex, scope)), span)

        return print_

    def stmt_If(self, node: ast.If) -> Any:
        tests_list = [(self.expr(node.test), self.compile_body(node.body))]
        for e in node.elifs:
            tests_list.append((self.expr(e.test), self.compile_body(e.body)))
        tests = tuple(tests_list)
        otherwise = self.compile_body(node.else_body)
        branch, span = _Executor.branch, node.span
        if len(tests) == 1:
            test, body = tests[0]

            def if_else(ex: _Executor, scope: list) -> None:
                try:
                    value = test(ex, scope)
                    outcome = value if value is True or value is False else truth(value)
                    if outcome is True:
                        body(ex, scope)
                    elif outcome is None:
                        branch(ex, body, scope)
                        if otherwise is not _nothing:
                            branch(ex, otherwise, scope)
                    elif otherwise is not _nothing:
                        otherwise(ex, scope)
                except Failure as failure:
                    if failure.span is None:
                        failure.span = span
                    raise

            return if_else

        def if_(ex: _Executor, scope: list) -> None:
            try:
                certain = True
                for test, body in tests:
                    value = test(ex, scope)
                    outcome = value if value is True or value is False else truth(value)
                    if outcome is True:
                        if certain:
                            body(ex, scope)
                        else:
                            branch(ex, body, scope)
                        return
                    if outcome is None:
                        branch(ex, body, scope)
                        certain = False
                if certain:
                    otherwise(ex, scope)
                else:
                    branch(ex, otherwise, scope)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return if_

    def stmt_For(self, node: ast.For) -> Any:
        iterable, iter_span = self.expr(node.iter), node.iter.span
        bind = self.binder(node.target)
        target = node.target.name if type(node.target) is ast.Name else None  # (a name is bound inline)
        condition = self.expr(node.condition) if node.condition is not None else None
        otherwise = self.compile_body(node.else_body)
        body = self.compile_body(node.body)
        recursive = node.recursive
        branch = _Executor.branch

        # (``again`` is ``loop_`` itself, passed in: a closure naming itself is a reference cycle)
        def loop_(ex: _Executor, items: list, scope: list, depth0: int, certain: bool, again: Any) -> None:
            frame: dict[str, Any] = {}
            inner = scope + [frame]
            loop = Loop(0, len(items), items, depth0)
            if recursive:
                loop.recurse = lambda sub: ex.capture(
                    lambda _ex, _scope: again(ex, iterate(sub), scope, depth0 + 1, True, again), scope)
            frame["loop"] = loop
            trace = ex.trace
            for index, item in enumerate(items):
                # a step per iteration (an empty body still costs one)
                steps = trace.steps = trace.steps + 1
                if steps >= ex.checkpoint:
                    ex.passed(steps)
                loop.index0 = index
                if target is not None:
                    frame[target] = item
                else:
                    bind(item, frame)
                try:
                    if certain:
                        body(ex, inner)
                    else:
                        branch(ex, body, inner)
                except _Continue:
                    continue
                except _Break:
                    break

        span = node.span

        def for_(ex: _Executor, scope: list) -> None:
            try:
                items = iterate(iterable(ex, scope), iter_span)
                if condition is not None:
                    frame: dict[str, Any] = {}
                    inner = scope + [frame]
                    kept = []
                    for item in items:
                        bind(item, frame)
                        if truth(condition(ex, inner)) is not False:
                            kept.append(item)
                    items = kept
                if not items:
                    otherwise(ex, scope)
                    return
                loop_(ex, items, scope, 0, not (len(items) == 1 and isinstance(items[0], Unknown)), loop_)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return for_

    def binder(self, target: ast.Expr) -> Any:
        """``bind(value, frame)`` for an assignment or loop target."""
        if isinstance(target, ast.Name):
            name = target.name

            def bind_name(value: Any, frame: dict) -> None:
                frame[name] = value

            return bind_name
        if isinstance(target, (ast.Tuple, ast.List)):
            subs_list = []
            for item in target.items:
                subs_list.append(self.binder(item))
            subs = tuple(subs_list)
            count, span = len(target.items), target.span

            def bind_items(value: Any, frame: dict) -> None:
                if isinstance(value, (Unknown, SymLen)):
                    values = [UNKNOWN] * count
                elif isinstance(value, (list, tuple)):
                    values = list(value)
                elif isinstance(value, str):
                    values = list(value)
                elif isinstance(value, dict):
                    values = list(value.keys())
                else:
                    values = [UNKNOWN] * count
                if len(values) != count:
                    raise Failure("type", f"cannot unpack {len(values)} values into {count}", span)
                for sub, item in zip(subs, values):
                    sub(item, frame)

            return bind_items
        if isinstance(target, ast.NSRef):
            span = target.span

            def bind_attribute(value: Any, frame: dict) -> None:
                raise Failure("type", "namespace attribute as a loop target", span)

            return bind_attribute

        def bind_nothing(value: Any, frame: dict) -> None:
            return None

        return bind_nothing

    def assigner(self, target: ast.Expr) -> Any:
        """``assign(ex, value, scope)`` for ``{% set %}``: a namespace attribute or names in the innermost frame."""
        if isinstance(target, ast.NSRef):
            name, attr, span = target.name, target.attr, target.span

            def assign_attribute(ex: _Executor, value: Any, scope: list) -> None:
                namespace = ex.lookup(scope, name)
                if not isinstance(namespace, Namespace):
                    raise Failure("type", "cannot assign attribute on non-namespace object", span)
                if attr.startswith("_"):
                    raise Failure("security", "underscore-prefixed namespace attribute", span)
                namespace.attrs[attr] = value

            return assign_attribute
        bind = self.binder(target)

        def assign(ex: _Executor, value: Any, scope: list) -> None:
            bind(value, scope[-1])

        return assign

    def stmt_Set(self, node: ast.Set) -> Any:
        if type(node.target) is ast.Name:  # ``{% set x = ... %}``: the binding inline
            value, name, span = self.expr(node.value), node.target.name, node.span

            def set_name(ex: _Executor, scope: list) -> None:
                try:
                    scope[-1][name] = value(ex, scope)
                except Failure as failure:
                    if failure.span is None:
                        failure.span = span
                    raise

            return set_name
        value, assign, span = self.expr(node.value), self.assigner(node.target), node.span

        def set_(ex: _Executor, scope: list) -> None:
            try:
                assign(ex, value(ex, scope), scope)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return set_

    def stmt_SetBlock(self, node: ast.SetBlock) -> Any:
        body, assign = self.compile_body(node.body), self.assigner(node.target)
        filters_list = []
        for flt in node.filters:
            filters_list.append(self.filter(flt))
        filters = tuple(filters_list)

        def set_block(ex: _Executor, scope: list) -> None:
            value = ex.capture(body, scope)
            for flt in filters:
                value = flt(ex, value, scope)
            assign(ex, value, scope)

        return set_block

    def macro_code(self, params: tuple, body: tuple) -> _MacroCode:
        defaults = []
        for p in params:
            defaults.append(self.expr(p.default) if p.default is not None else None)
        return _MacroCode(tuple(p.name for p in params), tuple(defaults), self.compile_body(body))

    def stmt_Macro(self, node: ast.Macro) -> Any:
        code = self.macro_code(node.params, node.body)

        def macro(ex: _Executor, scope: list) -> None:
            scope[-1][node.name] = _Macro(node, node.params, node.body, scope, node.name, code=code)

        return macro

    def stmt_CallBlock(self, node: ast.CallBlock) -> Any:
        code = self.macro_code(node.params, node.body)
        call, span = self.invoker(node.call), node.span

        def call_block(ex: _Executor, scope: list) -> None:
            caller = _Caller(node.body, node.params, scope, code)
            ex.emit(to_text(call(ex, scope, caller)), span)

        return call_block

    def stmt_FilterBlock(self, node: ast.FilterBlock) -> Any:
        body, span = self.compile_body(node.body), node.span
        filters_list = []
        for flt in node.filters:
            filters_list.append(self.filter(flt))
        filters = tuple(filters_list)

        def filter_block(ex: _Executor, scope: list) -> None:
            value = ex.capture(body, scope)
            for flt in filters:
                value = flt(ex, value, scope)
            ex.emit(to_text(value), span)

        return filter_block

    def stmt_With(self, node: ast.With) -> Any:
        pairs_list = []
        for t, v in zip(node.targets, node.values):
            pairs_list.append((self.binder(t), self.expr(v)))
        pairs = tuple(pairs_list)
        body = self.compile_body(node.body)

        span = node.span

        def with_(ex: _Executor, scope: list) -> None:
            try:
                frame: dict[str, Any] = {}
                for bind, value in pairs:
                    bind(value(ex, scope), frame)
                body(ex, scope + [frame])
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return with_

    def _plain_body(self, node: Any) -> Any:
        return self.compile_body(node.body)

    stmt_Autoescape = stmt_Block = stmt_Generation = _plain_body

    def stmt_Break(self, node: ast.Break) -> Any:
        def break_(ex: _Executor, scope: list) -> None:
            raise _Break()

        return break_

    def stmt_Continue(self, node: ast.Continue) -> Any:
        def continue_(ex: _Executor, scope: list) -> None:
            raise _Continue()

        return continue_

    def _no_loader(self, node: Any) -> Any:
        span = node.span

        def no_loader(ex: _Executor, scope: list) -> None:
            raise Failure("type", "no loader for this environment specified", span)

        return no_loader

    stmt_Include = stmt_Import = stmt_FromImport = stmt_Extends = _no_loader

    # ---- expressions --------------------------------------------------------------------------

    def expr(self, node: ast.Expr) -> Any:
        """The closure ``f(ex, scope) -> value`` for an expression; a failure without a place gets its span."""
        self.nodes += 1
        method = _EXPRESSIONS.get(type(node))
        if method is None:
            key = type(node)

            def unsupported(ex: _Executor, scope: list) -> Any:
                raise KeyError(key)

            return unsupported
        return method(self, node)

    @staticmethod
    def _spanned(fn: Any, span: Span) -> Any:
        def spanned(ex: _Executor, scope: list) -> Any:
            try:
                return fn(ex, scope)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return spanned

    def expr_Name(self, node: ast.Name) -> Any:
        name = node.name
        fallback = GLOBALS.get(name)
        if self.bindable is not None and name not in self.bindable:
            def context_name(ex: _Executor, scope: list) -> Any:
                context = ex.context
                if name in context:
                    return context[name]
                return Undefined(name) if fallback is None else fallback

            return context_name

        def name_(ex: _Executor, scope: list) -> Any:
            for frame in reversed(scope):
                if name in frame:
                    return frame[name]
            context = ex.context
            if name in context:
                return context[name]
            return Undefined(name) if fallback is None else fallback

        return name_

    def expr_Const(self, node: ast.Const) -> Any:
        value = node.value

        def const(ex: _Executor, scope: list) -> Any:
            return value

        return const

    def expr_Tuple(self, node: ast.Tuple) -> Any:
        items_list = []
        for item in node.items:
            items_list.append(self.expr(item))
        items = tuple(items_list)

        def tuple_(ex: _Executor, scope: list) -> Any:
            return tuple([item(ex, scope) for item in items])

        return tuple_

    def expr_List(self, node: ast.List) -> Any:
        items_list = []
        for item in node.items:
            items_list.append(self.expr(item))
        items = tuple(items_list)

        def list_(ex: _Executor, scope: list) -> Any:
            return [item(ex, scope) for item in items]

        return list_

    def expr_Dict(self, node: ast.Dict) -> Any:
        pairs_list = []
        for pair in node.items:
            pairs_list.append((self.expr(pair.key), self.expr(pair.value), pair.span))
        pairs = tuple(pairs_list)

        def dict_(ex: _Executor, scope: list) -> Any:
            out: dict = {}
            for key_fn, value_fn, span in pairs:
                key = key_fn(ex, scope)
                if isinstance(key, (list, dict)):
                    raise Failure("type", "unhashable type", span)
                out[key] = value_fn(ex, scope)
            return out

        return self._spanned(dict_, node.span)

    def expr_NSRef(self, node: ast.NSRef) -> Any:
        name, attr, span = node.name, node.attr, node.span

        def nsref(ex: _Executor, scope: list) -> Any:
            try:
                return get_attribute(ex.lookup(scope, name), attr, span)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return nsref

    def expr_Getattr(self, node: ast.Getattr) -> Any:
        attr, span = node.attr, node.span

        if attr in _DICT_ATTRIBUTES:
            obj = self.expr(node.node)

            def getattr_method(ex: _Executor, scope: list) -> Any:
                try:
                    return get_attribute(obj(ex, scope), attr, span)
                except Failure as failure:
                    if failure.span is None:
                        failure.span = span
                    raise

            return getattr_method

        if type(node.node) is ast.Name:  # ``message.role``, ``loop.first``: the name's lookup inline
            name = node.node.name
            fallback = GLOBALS.get(name)
            in_scopes = self.bindable is None or name in self.bindable

            def getattr_name(ex: _Executor, scope: list) -> Any:
                try:
                    if in_scopes:
                        for frame in reversed(scope):
                            if name in frame:
                                value = frame[name]
                                break
                        else:
                            value = ex.context.get(name, _MISSING)
                    else:
                        value = ex.context.get(name, _MISSING)
                    if value is _MISSING:
                        value = Undefined(name) if fallback is None else fallback
                    cls = type(value)
                    if cls is dict:  # not a dict method name: the item, or Undefined
                        return value[attr] if attr in value else Undefined(attr, value)
                    if cls is Loop:  # (what ``get_attribute`` does for these two, inline)
                        return value.attribute(attr)
                    if cls is Namespace:
                        return value.attrs.get(attr, Undefined(attr, value))
                    return get_attribute(value, attr, span)
                except Failure as failure:
                    if failure.span is None:
                        failure.span = span
                    raise

            return getattr_name
        obj = self.expr(node.node)

        def getattr_(ex: _Executor, scope: list) -> Any:
            try:
                value = obj(ex, scope)
                if type(value) is dict:  # not a dict method name: the item, or Undefined
                    return value[attr] if attr in value else Undefined(attr, value)
                return get_attribute(value, attr, span)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return getattr_

    def expr_Getitem(self, node: ast.Getitem) -> Any:
        span = node.span
        if not (type(node.arg) is ast.Const and type(node.arg.value) is str and type(node.node) is ast.Name):
            obj = self.expr(node.node)  # (the constant-key access on a name looks the name up itself)
        if isinstance(node.arg, ast.Slice):
            bounds = tuple(None if p is None else self.expr(p) for p in (node.arg.start, node.arg.stop, node.arg.step))

            def get_slice(ex: _Executor, scope: list) -> Any:
                try:
                    value = obj(ex, scope)
                    parts = [None if p is None else p(ex, scope) for p in bounds]
                    if any(isinstance(p, (Unknown, SymLen, Sym, Cat)) for p in parts):
                        return Unknown(labels_in(value))
                    if any(isinstance(p, Undefined) for p in parts):
                        parts = [None if isinstance(p, Undefined) else p for p in parts]
                    return get_item(value, slice(*parts), span)
                except Failure as failure:
                    if failure.span is None:
                        failure.span = span
                    raise

            return get_slice
        if type(node.arg) is ast.Const and type(node.arg.value) is str:
            const_key = node.arg.value
            if type(node.node) is ast.Name:  # ``message['role']``: the name's lookup inline
                name = node.node.name
                fallback = GLOBALS.get(name)
                in_scopes = self.bindable is None or name in self.bindable

                def getitem_name(ex: _Executor, scope: list) -> Any:
                    try:
                        if in_scopes:
                            for frame in reversed(scope):
                                if name in frame:
                                    value = frame[name]
                                    break
                            else:
                                value = ex.context.get(name, _MISSING)
                        else:
                            value = ex.context.get(name, _MISSING)
                        if value is _MISSING:
                            value = Undefined(name) if fallback is None else fallback
                        if type(value) is dict and const_key in value:
                            return value[const_key]
                        return get_item(value, const_key, span)
                    except Failure as failure:
                        if failure.span is None:
                            failure.span = span
                        raise

                return getitem_name

            def getitem_const(ex: _Executor, scope: list) -> Any:
                try:
                    value = obj(ex, scope)
                    if type(value) is dict and const_key in value:
                        return value[const_key]
                    return get_item(value, const_key, span)
                except Failure as failure:
                    if failure.span is None:
                        failure.span = span
                    raise

            return getitem_const
        key = self.expr(node.arg)

        def getitem(ex: _Executor, scope: list) -> Any:
            try:
                value = obj(ex, scope)
                return get_item(value, key(ex, scope), span)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return getitem

    def expr_Slice(self, node: ast.Slice) -> Any:
        def slice_(ex: _Executor, scope: list) -> Any:
            return UNKNOWN

        return slice_

    def arguments(self, node: Any) -> Any:
        """``f(ex, scope) -> (args, kwargs)`` for a call's, filter's or test's argument list."""
        if node.args and not node.kwargs and node.dyn_args is None and node.dyn_kwargs is None and all(
                type(a) is ast.Const for a in node.args):
            literals = tuple(a.value for a in node.args)  # immutable values, the same every time

            def literal_arguments(ex: _Executor, scope: list) -> tuple[list, dict]:
                return list(literals), {}

            return literal_arguments
        positional_list, named_list = [], []
        for a in node.args:
            positional_list.append(self.expr(a))
        for k in node.kwargs:
            named_list.append((k.key, self.expr(k.value)))
        positional, named = tuple(positional_list), tuple(named_list)
        dyn_args = self.expr(node.dyn_args) if node.dyn_args is not None else None
        dyn_kwargs = self.expr(node.dyn_kwargs) if node.dyn_kwargs is not None else None
        if dyn_args is None and dyn_kwargs is None:
            if not named:
                if not positional:
                    def no_arguments(ex: _Executor, scope: list) -> tuple[list, dict]:
                        return [], {}

                    return no_arguments

                def positional_only(ex: _Executor, scope: list) -> tuple[list, dict]:
                    return [a(ex, scope) for a in positional], {}

                return positional_only

        def arguments(ex: _Executor, scope: list) -> tuple[list, dict]:
            args = [a(ex, scope) for a in positional]
            kwargs = {key: value(ex, scope) for key, value in named}
            if dyn_args is not None:
                extra = dyn_args(ex, scope)
                if isinstance(extra, (list, tuple)):
                    built_items(len(extra))
                    args.extend(extra)
            if dyn_kwargs is not None:
                extra = dyn_kwargs(ex, scope)
                if isinstance(extra, dict):
                    kwargs.update({str(k): v for k, v in extra.items()})
            return args, kwargs

        return arguments

    def invoker(self, node: ast.Call) -> Any:
        """``f(ex, scope, caller) -> value``: a call, without the span bookkeeping of the Call expression itself."""
        function_fn, arguments, span = self.expr(node.node), self.arguments(node), node.span
        raise_exception = GLOBALS["raise_exception"]

        def invoke(ex: _Executor, scope: list, caller: Any) -> Any:
            trace = ex.trace  # (a step, as ``ex.step()``, inline)
            steps = trace.steps = trace.steps + 1
            if steps >= ex.checkpoint:
                ex.passed(steps)
            function = function_fn(ex, scope)
            args, kwargs = arguments(ex, scope)
            if function is raise_exception:
                message = args[0] if args else ""
                text = message if isinstance(message, str) else None
                raise Failure("raise", text if text is not None else "raise_exception", span, site=node)
            if isinstance(function, (Builtin, Method)):  # (the most common: first; the classes are unrelated)
                try:
                    return function(*args, **kwargs)
                except Failure as failure:
                    if failure.span is None:
                        failure.span = span
                    raise
                except (TypeError, ValueError) as exc:
                    raise Failure("type", str(exc), span) from None
            if isinstance(function, _Macro):
                return ex.call_macro(function, args, kwargs, span, caller)
            if isinstance(function, _Caller):
                return ex.call_caller(function, args, kwargs)
            if isinstance(function, Loop):
                if function.recurse is None:
                    raise Failure("type", "the loop is not recursive", span)
                return function.recurse(args[0] if args else [])
            if isinstance(function, Undefined):
                raise function.fail(span)
            if isinstance(function, Unknown):
                return Unknown(labels_in(args) | labels_in(kwargs))
            raise Failure("type", f"'{type(function).__name__}' object is not callable", span)

        return invoke

    def expr_Call(self, node: ast.Call) -> Any:
        invoke, span = self.invoker(node), node.span

        def call(ex: _Executor, scope: list) -> Any:
            try:
                return invoke(ex, scope, None)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return call

    def filter(self, node: ast.Filter) -> Any:
        """``f(ex, value, scope)``: apply a filter to a value (no span bookkeeping of its own)."""
        arguments, name, span = self.arguments(node), node.name, node.span
        fn = FILTERS.get(name)

        def apply(ex: _Executor, value: Any, scope: list) -> Any:
            args, kwargs = arguments(ex, scope)
            if fn is None:
                raise Failure("type", f"No filter named {name!r}.", span)
            return fn(value, tuple(args), kwargs, span)

        return apply

    def expr_Filter(self, node: ast.Filter) -> Any:
        subject = self.expr(node.node) if node.node is not None else None
        span, fn = node.span, FILTERS.get(node.name)
        if subject is not None and fn is not None:
            arguments = self.arguments(node)  # (what ``filter`` applies, inline)

            def filter_known(ex: _Executor, scope: list) -> Any:
                try:
                    value = subject(ex, scope)
                    args, kwargs = arguments(ex, scope)
                    return fn(value, tuple(args), kwargs, span)
                except Failure as failure:
                    if failure.span is None:
                        failure.span = span
                    raise

            return filter_known
        apply = self.filter(node)

        def filter_(ex: _Executor, scope: list) -> Any:
            try:
                return apply(ex, subject(ex, scope) if subject is not None else "", scope)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return filter_

    def expr_Test(self, node: ast.Test) -> Any:
        subject, name, span, negated = self.expr(node.node), node.name, node.span, node.negated
        fn = TESTS.get(name)
        if fn is not None and not node.args and not node.kwargs and node.dyn_args is None and node.dyn_kwargs is None:
            # ``is defined``, ``is string``, ``is none``: no argument list to evaluate
            def test_plain(ex: _Executor, scope: list) -> Any:
                try:
                    result = fn(subject(ex, scope))
                    if isinstance(result, Unknown):
                        return UNKNOWN
                    return (not result) if negated else bool(result)
                except Failure as failure:
                    if failure.span is None:
                        failure.span = span
                    raise

            return test_plain
        arguments = self.arguments(node)

        def test(ex: _Executor, scope: list) -> Any:
            try:
                value = subject(ex, scope)
                args, kwargs = arguments(ex, scope)
                if fn is None:
                    raise Failure("type", f"No test named {name!r}.", span)
                result = fn(value, *args)
                if isinstance(result, Unknown):
                    return UNKNOWN
                return (not result) if negated else bool(result)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return test

    _BINOPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod", "**": "pow"}

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        left, right, op, span = self.expr(node.left), self.expr(node.right), self._BINOPS[node.op], node.span

        def binop(ex: _Executor, scope: list) -> Any:
            try:
                a = left(ex, scope)
                return arithmetic(op, a, right(ex, scope), span)
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return binop

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand, op, span = self.expr(node.operand), node.op, node.span

        def unary(ex: _Executor, scope: list) -> Any:
            value = operand(ex, scope)
            if isinstance(value, Undefined):
                raise value.fail(span)
            if isinstance(value, (int, float)):
                return -value if op == "-" else +value
            if isinstance(value, (Unknown, SymLen)):
                return UNKNOWN
            raise Failure("type", f"bad operand type for unary {op}", span)

        return self._spanned(unary, span)

    def expr_Not(self, node: ast.Not) -> Any:
        operand = self.expr(node.operand)

        def not_(ex: _Executor, scope: list) -> Any:
            outcome = truth(operand(ex, scope))
            return UNKNOWN if outcome is None else not outcome

        return not_  # truth() and maybe() raise no failure of their own: no span to add

    def expr_And(self, node: ast.And) -> Any:
        left_fn, right_fn = self.expr(node.left), self.expr(node.right)

        def and_(ex: _Executor, scope: list) -> Any:
            left = left_fn(ex, scope)
            outcome = truth(left)
            if outcome is False:
                return left
            if outcome is None:
                right = ex.maybe(right_fn, scope)
                return UNKNOWN if truth(right) is not False else right
            return right_fn(ex, scope)

        return and_  # truth() and maybe() raise no failure of their own: no span to add

    def expr_Or(self, node: ast.Or) -> Any:
        left_fn, right_fn = self.expr(node.left), self.expr(node.right)

        def or_(ex: _Executor, scope: list) -> Any:
            left = left_fn(ex, scope)
            outcome = truth(left)
            if outcome is True:
                return left
            if outcome is None:
                right = ex.maybe(right_fn, scope)
                return UNKNOWN if truth(right) is not True else right
            return right_fn(ex, scope)

        return or_  # truth() and maybe() raise no failure of their own: no span to add

    _COMPARE = {"==": "eq", "!=": "ne", "<": "lt", "<=": "lteq", ">": "gt", ">=": "gteq", "in": "in", "not in": "notin"}

    def expr_Compare(self, node: ast.Compare) -> Any:
        first = self.expr(node.expr)
        span = node.span
        if len(node.ops) == 1 and type(node.ops[0].expr) is ast.Const:
            op, op_span = self._COMPARE[node.ops[0].op], node.ops[0].span
            right = node.ops[0].expr.value  # a literal: the same immutable value on every evaluation

            def compare_literal(ex: _Executor, scope: list) -> Any:
                try:
                    left = first(ex, scope)
                    if op == "eq" and type(left) is str and type(right) is str:
                        return left == right
                    outcome = compare(op, left, right, op_span)
                    if outcome is False:
                        return False
                    if isinstance(outcome, Unknown):
                        return UNKNOWN
                    return True
                except Failure as failure:
                    if failure.span is None:
                        failure.span = span
                    raise

            return compare_literal
        operands_list = []
        for o in node.ops:
            operands_list.append((self.expr(o.expr), self._COMPARE[o.op], o.span))
        operands = tuple(operands_list)
        if len(operands) == 1:
            (second, op, op_span), = operands

            def compare_one(ex: _Executor, scope: list) -> Any:
                try:
                    left = first(ex, scope)
                    right = second(ex, scope)
                    if op == "eq" and type(left) is str and type(right) is str:
                        return left == right
                    outcome = compare(op, left, right, op_span)
                    if outcome is False:
                        return False
                    if isinstance(outcome, Unknown):
                        return UNKNOWN
                    return True
                except Failure as failure:
                    if failure.span is None:
                        failure.span = span
                    raise

            return compare_one

        def compare_(ex: _Executor, scope: list) -> Any:
            try:
                left = first(ex, scope)
                result: Any = True
                for right_fn, op, op_span in operands:
                    right = right_fn(ex, scope)
                    outcome = compare(op, left, right, op_span)
                    if outcome is False:
                        return False
                    if isinstance(outcome, Unknown):
                        result = UNKNOWN
                    left = right
                return result
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return compare_

    def expr_Concat(self, node: ast.Concat) -> Any:
        items_list = []
        for item in node.items:
            items_list.append(self.expr(item))
        items = tuple(items_list)

        span = node.span

        def concat_(ex: _Executor, scope: list) -> Any:
            try:
                return concat([to_text(item(ex, scope)) for item in items])
            except Failure as failure:
                if failure.span is None:
                    failure.span = span
                raise

        return concat_

    def expr_CondExpr(self, node: ast.CondExpr) -> Any:
        test, expr1 = self.expr(node.test), self.expr(node.expr1)
        expr2 = self.expr(node.expr2) if node.expr2 is not None else None

        def cond(ex: _Executor, scope: list) -> Any:
            outcome = truth(test(ex, scope))
            if outcome is True:
                return expr1(ex, scope)
            if outcome is False:
                return expr2(ex, scope) if expr2 is not None else Undefined("else")
            first = ex.maybe(expr1, scope)
            second = ex.maybe(expr2, scope) if expr2 is not None else Undefined("else")
            if first == second:
                return first
            return Unknown(labels_in(first) | labels_in(second))

        return cond  # truth() and maybe() raise no failure of their own: no span to add

    def expr_Keyword(self, node: ast.Keyword) -> Any:
        return self.expr(node.value)  # a failure from the value already has the value's place


# Attribute names that are methods of a dict (``get_attribute`` returns the method, not the item).
_DICT_ATTRIBUTES = _DICT_METHODS | _MUTATING

_STATEMENTS = {getattr(ast, name[5:]): fn for name, fn in vars(Program).items()
               if name.startswith("stmt_") and hasattr(ast, name[5:])}
_EXPRESSIONS = {getattr(ast, name[5:]): fn for name, fn in vars(Program).items()
                if name.startswith("expr_") and hasattr(ast, name[5:])}
# Statements whose closures give their failures a place themselves (or cannot fail): no wrapper.
_SELF_SPANNED = frozenset({ast.Data, ast.Raw, ast.Output, ast.If, ast.For, ast.Set, ast.With, ast.Macro, ast.Break, ast.Continue,
                           ast.Include, ast.Import, ast.FromImport, ast.Extends})


def execute(template: ast.Template, texts: dict[int, str], context: dict[str, Any]) -> Trace:
    """Run ``template`` symbolically with the template variables ``context`` (abstract values)."""
    return Program(template, texts).run(context)
