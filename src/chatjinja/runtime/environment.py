"""The Hugging Face chat-template environment, reproduced from transformers 5.24.0, without compile-time folding.

transformers builds it in ``transformers/utils/chat_template_utils.py``
(``_cached_compile_jinja_template``). Everything a template can see here is the same: an
``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`` with
``jinja2.ext.loopcontrols`` and a ``{% generation %}`` tag, the ``tojson`` override and the
``raise_exception``, ``strftime_now``, ``dict`` and ``namespace`` globals.

Resource budgets (``budget.py``) are enforced from here: the sandbox hooks ``call_binop``, ``call``,
``unsafe_undefined`` and ``concat``, wrapped filters, and a code generator that meters every
``{% for %}`` iterable and ``~`` concatenation. With no render meter active they pass straight
through, so the output never depends on them.

The one deliberate difference: compiling a template never runs template code that can be
expensive. jinja2 folds constant expressions while compiling (its optimizer, and ``Output`` children
it can evaluate), so ``{% if false %}{{ 7 ** 30000000 }}{% endif %}`` hangs ``from_string`` in
transformers. Here the optimizer is off: literal text and literal constants are folded, and so are
the expressions whose folded value differs from their rendered one and which are cheap (a literal
sliced, two literals tested with ``sameas``: ``foldable_expressions``), exactly as jinja2 folds
them; everything else is evaluated when (and if) the render reaches it, which gives the same output.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import operator
import json
import sys
import threading
import time
import types
from collections import OrderedDict
from collections.abc import Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from inspect import GEN_CREATED as _GEN_CREATED
from inspect import getgeneratorstate as _generator_state
from typing import Any, Iterator

import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.filters
import jinja2.nodes
import jinja2.optimizer
import jinja2.runtime
import jinja2.sandbox
import jinja2.utils
import markupsafe
from jinja2.compiler import CodeGenerator, CompilerExit
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

from . import budget as _budget
from .budget import BudgetExceeded, Budgets, active_meter, check_source, source_nesting, tree_depth

_active_meter = _budget._meter.get  # the hooks' hot path: one C call
_monotonic = time.monotonic
_ATOMS = _budget._ATOMS
from . import diskcache as _diskcache
from .sandbox import FastAttributeMixin

__all__ = ["ChatTemplateEnvironment", "compile_template", "generation_tracking", "clear_compile_cache", "template_names"]


class AssistantTracker(Extension):
    """``{% generation %}...{% endgeneration %}``: renders its body and, while tracking, records its span."""

    tags = {"generation"}

    def __init__(self, environment: jinja2.Environment):
        super().__init__(environment)
        self._tracking: ContextVar[tuple[list[str], list[tuple[int, int]]] | None] = ContextVar(
            "chatjinja_assistant_tracker", default=None
        )
        environment.extend(activate_tracker=self.activate_tracker)

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.CallBlock:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context: jinja2.nodes.EvalContext, caller: jinja2.runtime.Macro) -> str:
        rv = caller()
        tracking = self._tracking.get()
        if tracking is not None:
            rendered_blocks, generation_indices = tracking
            start_index = len("".join(rendered_blocks))
            generation_indices.append((start_index, start_index + len(rv)))
        return rv

    def is_active(self) -> bool:
        return self._tracking.get() is not None

    @contextmanager
    def activate_tracker(self, rendered_blocks: list[str], generation_indices: list[tuple[int, int]]) -> Iterator[None]:
        if self.is_active():
            raise ValueError("AssistantTracker should not be reused before closed")
        token = self._tracking.set((rendered_blocks, generation_indices))
        try:
            yield
        finally:
            self._tracking.reset(token)


def raise_exception(message: Any) -> None:
    raise jinja2.exceptions.TemplateError(message)


def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False) -> str:
    # transformers overrides jinja2's tojson, which HTML-escapes and returns Markup
    meter = _active_meter()
    if meter is None:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    # metered here rather than by a wrapper (``_metered_filter``): it is the filter chat templates
    # call most with budgets on. The clock, the text of a container (``_check_json``), the result's size.
    if _monotonic() > meter.deadline:
        meter.check_time()
    # (an atom's JSON is sized after: a string's at most 6 times as long; the caller's own container
    # without an indent, the common case, is looked up here: its text is the caller's data)
    if type(x) not in _ATOMS and (indent is not None or id(x) not in (meter.input_ids or meter.make_input_ids())):
        _check_json(meter, x, indent)
    text = json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    if len(text) >= meter.big:
        meter.big_string(text, "result of |tojson")
    return text


tojson.chatjinja_metered = True  # type: ignore[attr-defined]


def strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


# transformers defines these three inside the function that compiles a template, and Python names a
# function by its qualified name when a call has the wrong arguments: the same name here gives the
# same message (``_cached_compile_jinja_template.<locals>.raise_exception() missing 1 required
# positional argument: 'message'``). Only the message changes: tracebacks name the code, not this.
for _function in (raise_exception, tojson, strftime_now):
    _function.__qualname__ = f"_cached_compile_jinja_template.<locals>.{_function.__name__}"
del _function


class TemplateDict:
    """The ``dict`` global: callable and ``fromkeys`` only, so templates cannot reach ``dict``'s type."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


def _namespace_attrs(namespace: jinja2.utils.Namespace) -> dict:
    return object.__getattribute__(namespace, "_Namespace__attrs")


class TemplateNamespace(jinja2.utils.Namespace):
    """The ``namespace`` global: jinja2's Namespace that refuses underscore-prefixed names."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 - jinja2's signature trick
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        if type(name) is not str or name[:1] == "_":
            TemplateNamespace._check_name(name)
        # jinja2's Namespace.__setitem__, without its own __getattribute__ round trip
        _namespace_attrs(self)[name] = value

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                "Please rename the attribute."
            )


class NoFoldCodeGenerator(CodeGenerator):
    """jinja2's code generator, except that only literal text, literal constants and
    ``foldable_expressions`` are folded, every loop iterable is metered (``environment.budget_iter``) and ``~`` goes through
    ``environment.budget_concat``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._visits = 0  # (the compile deadline is looked at every ``_COMPILE_CLOCK_EVERY`` nodes)
        # id of a loop's iterable -> the fuel one iteration costs (see ``_fuel``)
        self._metered_iterables: dict[int, int] = {}
        # id of a function body (template, macro, call block, block) -> the fuel it costs when run
        self._charged_bodies: dict[int, int] = {}
        # the fuel of the recursive loops being compiled, innermost last
        self._recursive_costs: list[int] = []
        # the expressions folded as jinja2 folds them, by id (``foldable_expressions``)
        self._foldable: dict[int, jinja2.nodes.Node] = {}
        # what encloses the node being compiled, innermost last: "loop" for a {% for %}, "buffer" for
        # a body with its own buffer (macro, call, filter and set blocks)
        self._enclosing: list[str] = []

    def _inside(self, marker: str, visit: Any, *args: Any) -> Any:
        self._enclosing.append(marker)
        try:
            return visit(*args)
        finally:
            self._enclosing.pop()

    def _in_loop_of_buffer(self) -> bool:
        """Is the node being compiled inside a loop that runs within its frame's buffer?"""
        for marker in reversed(self._enclosing):
            if marker == "loop":
                return True
            if marker == "buffer":
                return False
        return False

    def macro_body(self, node: Any, frame: Any) -> Any:
        return self._inside("buffer", super().macro_body, node, frame)

    def visit_FilterBlock(self, node: jinja2.nodes.FilterBlock, frame: Any) -> None:
        self._inside("buffer", super().visit_FilterBlock, node, frame)

    def visit_AssignBlock(self, node: jinja2.nodes.AssignBlock, frame: Any) -> None:
        self._inside("buffer", super().visit_AssignBlock, node, frame)

    def _output_child_to_const(self, node: jinja2.nodes.Expr, frame: Any, finalize: Any) -> str:
        if isinstance(node, (jinja2.nodes.TemplateData, jinja2.nodes.Const)):
            return super()._output_child_to_const(node, frame, finalize)
        if self._foldable.get(id(node)) is not node:
            raise jinja2.nodes.Impossible()
        const = node.as_const(_folding_context())  # (as jinja2 does, in the environment it folds with)
        if frame.eval_ctx.autoescape:
            const = markupsafe.escape(const)
        return finalize.const(const)  # type: ignore[no-any-return]

    def visit_Template(self, node: jinja2.nodes.Template, frame: Any = None) -> None:
        # Fuel is charged where code starts to run, not at every call: a function body (the
        # template, a macro or call block, a block) its filter and call sites when it is entered,
        # a loop its own sites with each iteration (``_fuel``).
        self._foldable = foldable_expressions(node)
        self._charged_bodies[id(node.body)] = _fuel(node.body)
        for child in node.find_all((jinja2.nodes.Macro, jinja2.nodes.CallBlock, jinja2.nodes.Block)):
            # (a macro's or caller's default arguments are evaluated in its body, at each call)
            self._charged_bodies[id(child.body)] = _fuel(child.body) + _fuel(getattr(child, "defaults", []))
        super().visit_Template(node, frame)

    def blockvisit(self, nodes: list, frame: Any) -> None:
        cost = self._charged_bodies.get(id(nodes))
        if not cost:
            return super().blockvisit(nodes, frame)
        # jinja2's blockvisit with the charge in place of its first line (``pass``): the generated
        # code keeps jinja2's line numbers, which Python's SyntaxError for a ``{% break %}`` outside
        # a loop names in its message
        try:
            self.writeline(f"environment.budget_charge({cost})")
            for node in nodes:
                self.visit(node, frame)
        except CompilerExit:
            pass

    def visit_For(self, node: jinja2.nodes.For, frame: Any) -> None:
        cost = 1 + _fuel(node.body) + (_fuel([node.test]) if node.test is not None else 0)
        if not node.recursive:
            self._metered_iterables[id(node.iter)] = cost
            return self._inside("loop", super().visit_For, node, frame)
        # a recursive loop is a function called again by ``loop(...)``: it meters what it is given
        self._recursive_costs.append(cost)
        try:
            self._inside("loop", super().visit_For, node, frame)
        finally:
            self._recursive_costs.pop()

    def write(self, x: str) -> None:
        if x == "reciter" and self._recursive_costs:  # what a recursive loop function iterates over
            x = f"environment.budget_iter(reciter, {self._recursive_costs[-1]})"
        super().write(x)

    def _output_child_pre(self, node: jinja2.nodes.Expr, frame: Any, finalize: Any) -> None:
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            return super()._output_child_pre(node, frame, finalize)
        # str(), after checking the size a container would print at (the output budget is counted
        # where the parts are collected: ``concat``, and ``budget_buffered`` in loops)
        self.write("environment.budget_text(")
        if finalize.src is not None:
            self.write(finalize.src)

    def visit_Output(self, node: jinja2.nodes.Output, frame: Any) -> None:
        super().visit_Output(node, frame)
        # Text written into a macro / call / set / filter block body is counted against the output
        # budget only inside a loop: only a loop can pile up parts in one buffer without bound.
        # Elsewhere a buffer holds at most as many parts as the frame has outputs, each a constant,
        # the caller's text or a string the template built (sized, and counted as built bytes when
        # big), and ``concat`` checks the size of the whole before joining it.
        if frame.buffer is not None and node.nodes and self._in_loop_of_buffer():
            parts = sum(1 for _ in _output_groups(node.nodes))
            self.writeline(f"environment.budget_buffered({frame.buffer}, {parts})")

    def visit(self, node: jinja2.nodes.Node, *args: Any, **kwargs: Any) -> Any:
        self._visits += 1
        if self._visits == _budget._COMPILE_CLOCK_EVERY:
            self._visits = 0
            _budget.check_compile_time()
        cost = self._metered_iterables.get(id(node))
        if self._foldable.get(id(node)) is node and not args[0].eval_ctx.volatile:
            node = jinja2.optimizer.Optimizer(self.environment).visit(node, _folding_context())  # jinja2's folding
            for inner in node.find_all(jinja2.nodes.Expr):  # (folded with this one: not again, one by one)
                self._foldable.pop(id(inner), None)
        if cost is not None:
            self.write("environment.budget_iter(")
            result = super().visit(node, *args, **kwargs)
            self.write(f", {cost})")
            return result
        return super().visit(node, *args, **kwargs)

    def visit_Add(self, node: jinja2.nodes.Add, frame: Any) -> None:
        """``+`` as ``environment.budget_add(left, right)``: one call, no operator lookup."""
        self.write("environment.budget_add(")
        self.visit(node.left, frame)
        self.write(", ")
        self.visit(node.right, frame)
        self.write(")")

    def visit_Getitem(self, node: jinja2.nodes.Getitem, frame: Any) -> None:
        if not isinstance(node.arg, jinja2.nodes.Slice):
            return super().visit_Getitem(node, frame)
        # jinja2 slices without the environment (``x[a:b]``); a slice is a copy, so it is sized
        # like anything else a template builds: ``environment.budget_slice(x, slice(a, b, c))``
        self.write("environment.budget_slice(")
        self.visit(node.node, frame)
        self.write(", slice(")
        for index, part in enumerate((node.arg.start, node.arg.stop, node.arg.step)):
            if index:
                self.write(", ")
            if part is None:
                self.write("None")
            else:
                self.visit(part, frame)
        self.write("))")

    def visit_Compare(self, node: jinja2.nodes.Compare, frame: Any) -> None:
        # One comparison is one C call however long its operands are (``a in b``, ``a == b`` on
        # strings of megabytes, or lists repeating them): a comparison of two values the source does
        # not bound goes through ``environment.budget_compare``, which charges fuel for its length.
        if len(node.ops) != 1 or not _unbounded_comparison(node.expr, node.ops[0]):
            return super().visit_Compare(node, frame)
        operand = node.ops[0]
        if operand.op in ("in", "notin"):
            self.write("environment.budget_in(" if operand.op == "in" else "(not environment.budget_in(")
            self.visit(node.expr, frame)
            self.write(", ")
            self.visit(operand.expr, frame)
            self.write(")" if operand.op == "in" else "))")
            return
        self.write("environment.budget_compare(")
        self.visit(node.expr, frame)
        self.write(f", {operand.op!r}, ")
        self.visit(operand.expr, frame)
        self.write(")")

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: Any) -> None:
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            return super().visit_Concat(node, frame)
        self.write("environment.budget_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


# What ``foldable_expressions`` accepts: names (never folded) and operations whose cost on literals the
# source's length bounds (no ``*``, ``**``, ``%``, ``/``, ``//``, filters or calls)
_CHEAP_NODES = (
    jinja2.nodes.Name, jinja2.nodes.Const, jinja2.nodes.List, jinja2.nodes.Tuple, jinja2.nodes.Dict,
    jinja2.nodes.Pair, jinja2.nodes.Slice, jinja2.nodes.Getitem, jinja2.nodes.Getattr, jinja2.nodes.Not,
    jinja2.nodes.Neg, jinja2.nodes.Pos, jinja2.nodes.And, jinja2.nodes.Or, jinja2.nodes.Compare,
    jinja2.nodes.Operand, jinja2.nodes.CondExpr, jinja2.nodes.Test, jinja2.nodes.Concat, jinja2.nodes.Add,
    jinja2.nodes.Sub,
)


@functools.cache
def _folding_context() -> jinja2.nodes.EvalContext:
    """What jinja2 folds with in transformers: its ``ImmutableSandboxedEnvironment``, which intercepts
    no operator (chatjinja's intercepts ``+``, ``*``, ``**`` and ``%``, which would stop a fold)."""
    return jinja2.nodes.EvalContext(ImmutableSandboxedEnvironment())


def foldable_expressions(tree: jinja2.nodes.Node) -> dict[int, jinja2.nodes.Node]:
    """The expressions (by id) jinja2's folding would give another result than running: those with a
    slice or a ``sameas`` test in them, made of cheap operations only (``_CHEAP_NODES``), found in one
    pass over the tree.

    jinja2 renders ``x[a:b]`` as Python slicing, which raises on ``0[::-1]`` or ``{'a': 1}[1:]``, but
    folds it through ``environment.getitem``, which makes that undefined (so ``{{ not 0[::-1] }}`` is
    ``True`` and ``{{ 0[::-1] }}`` is empty in transformers). And ``'ab' is sameas 'ab'`` folds on the
    two strings the lexer made (two objects: false), while Python compiles two equal constants of
    one function into one object (true). These expressions are folded as jinja2 folds them: what
    folds is literals under cheap operations, bounded by the source's length; names never fold.
    """
    found: dict[int, jinja2.nodes.Node] = {}
    facts: dict[int, tuple[bool, bool]] = {}  # id -> (cheap all the way down, a slice or sameas inside)
    stack: list[tuple[Any, bool]] = [(tree, False)]
    while stack:
        node, children_done = stack.pop()
        if not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in node.iter_child_nodes())
            continue
        children = [facts[id(child)] for child in node.iter_child_nodes()]
        cheap = (
            isinstance(node, _CHEAP_NODES)
            and getattr(node, "ctx", "load") == "load"
            and not (isinstance(node, jinja2.nodes.Test) and (node.dyn_args is not None or node.dyn_kwargs is not None))
            and all(fact[0] for fact in children)
        )
        differs = (
            (isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice))
            or (isinstance(node, jinja2.nodes.Test) and node.name == "sameas")
            or any(fact[1] for fact in children)
        )
        facts[id(node)] = (cheap, differs)
        if cheap and differs:
            found[id(node)] = node
    return found


def _literal(node: Any) -> bool:
    """A value written in the source (its size bounded by the source's)."""
    if isinstance(node, (jinja2.nodes.Const, jinja2.nodes.TemplateData)):
        return True
    if isinstance(node, (jinja2.nodes.List, jinja2.nodes.Tuple)):
        return all(_literal(item) for item in node.items)
    if isinstance(node, jinja2.nodes.Dict):
        return all(_literal(pair.key) and _literal(pair.value) for pair in node.items)
    return False


def _unbounded_comparison(left: Any, operand: Any) -> bool:
    """Can this comparison go through more than the source's length? (``x == 'user'`` cannot: a
    comparison with a literal stops within the literal; ``'<x>' in content`` and ``a == b`` can.)"""
    if operand.op in ("in", "notin"):
        return not _literal(operand.expr)
    return not (_literal(left) or _literal(operand.expr))


def _fuel(body: list) -> int:
    """The filter and call sites in ``body`` that run each time it runs: not those inside a loop's body
    (charged with each iteration), a macro, a call block's body or a block (charged when called)."""
    count = 0
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (jinja2.nodes.Filter, jinja2.nodes.Call)):
            count += 1
        if isinstance(node, jinja2.nodes.For):
            stack.append(node.iter)
            stack.extend(node.else_)
        elif isinstance(node, jinja2.nodes.CallBlock):
            stack.append(node.call)
        elif not isinstance(node, (jinja2.nodes.Macro, jinja2.nodes.Block)):
            stack.extend(node.iter_child_nodes())
    return count


def _output_groups(children: list) -> Iterator[Any]:
    """The items ``visit_Output`` writes for these children: each run of literal text/constants is one."""
    previous_const = False
    for child in children:
        is_const = isinstance(child, (jinja2.nodes.TemplateData, jinja2.nodes.Const))
        if not (is_const and previous_const):
            yield child
        previous_const = is_const


class ChatTemplateEnvironment(FastAttributeMixin, _diskcache.CodeRecorder, ImmutableSandboxedEnvironment):
    """transformers' chat-template environment (see the module docstring) with folding off."""

    code_generator_class = NoFoldCodeGenerator

    def __init__(self, **options: Any) -> None:
        options.setdefault("trim_blocks", True)
        options.setdefault("lstrip_blocks", True)
        options.setdefault("extensions", [AssistantTracker, jinja2.ext.loopcontrols])
        options.setdefault("optimized", False)
        super().__init__(**options)
        self.filters["tojson"] = tojson
        self.globals["raise_exception"] = raise_exception
        self.globals["strftime_now"] = strftime_now
        self.globals["dict"] = TemplateDict()
        self.globals["namespace"] = TemplateNamespace
        for name, func in list(self.filters.items()):
            self.filters[name] = _metered_filter(name, func)
        # the comparison tests (``a is eq b``, ``a is in b``, and through ``select``/``reject``) are
        # charged as the comparison operators are
        for name, func in list(self.tests.items()):
            operator_name = "in" if name == "in" else _COMPARING_TESTS.get(name)
            if operator_name is not None:
                self.tests[name] = _metered_test(self, operator_name, func)

    # -- budget hooks: each is a pass-through while no meter is active ---------------------------

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "%" and type(left) is int and type(right) is int:  # no bigger than ``right``
            return left % right
        meter = _active_meter()
        if meter is None:
            return self.binop_table[operator](left, right)
        if operator == "+" and type(left) is str and type(right) is str:  # the common case, inline
            if meter.max_string is not None and len(left) + len(right) > meter.max_string:
                meter.string_size(len(left) + len(right), "'+' concatenation")
            result = left + right
            if len(result) >= meter.big:
                meter.big_string(result, "'+' concatenation")
            return result
        _check_binop(meter, operator, left, right)
        result = self.binop_table[operator](left, right)
        # '%' is the only one whose size is not known in advance; a big result of any counts as built
        return meter.sized(result, _BINOP_RESULTS[operator])

    def budget_add(self, left: Any, right: Any) -> Any:
        """``left + right``, then its size checked: a sum is at most as big as its two operands, so
        computing it first is safe (unlike ``*``, ``**`` and ``%``, checked before in ``call_binop``)."""
        result = left + right
        kind = type(result)
        if kind is str:  # (the most common sum in chat templates)
            meter = _active_meter()
            if meter is not None and len(result) >= meter.big:
                meter.big_string(result, "'+' concatenation")
            return result
        if kind is int or kind is float:
            return result
        meter = _active_meter()
        if meter is None:
            return result
        return meter.sized(result, "'+' concatenation")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - jinja2's signature
        kind = type(__obj)
        meter = _active_meter()
        if meter is not None:
            if kind is _BuiltinMethod:
                # the common case needs no metering: ``.get``/``.items`` of a small dict (a value it
                # holds, a view, a small copy) or an unchecked method of a short string (its result at
                # most 4 times as long); neither keeps its arguments
                owner = __obj.__self__
                owner_kind = type(owner)
                if (owner_kind is dict and len(owner) < meter.big) or (
                    owner_kind is str and len(owner) * 4 < meter.big and __obj.__name__ not in _CHECKED_STR_METHODS
                ):
                    meter = None
            elif kind is _Macro:  # a macro (the rest of the common cases), inline
                # (its arguments are not counted as built, unlike ``f(*iterable)`` below: a macro keeps
                # them only in ``varargs``, for the call, or in what it builds from them, which is sized)
                depth = meter.depth
                if depth >= meter.depth_cap:
                    raise BudgetExceeded("max_recursion_depth", meter.max_depth, f"{depth + 1} nested macro/loop calls")
                meter.depth = depth + 1
                if kwargs:  # as Context.call calls a macro
                    kwargs.pop("_loop_vars", None)
                    kwargs.pop("_block_vars", None)
                try:
                    return __obj(*args, **kwargs)
                except StopIteration:
                    return __self.undefined("value was undefined because a callable raised a StopIteration exception")
                finally:
                    # (a macro body returns ``concat`` of its buffer, which sized and counted it)
                    meter.depth = depth
            elif __obj is TemplateNamespace and not args:
                # ``namespace(a=..., b=...)``: no iterable to consume (keyword arguments are not
                # metered: a dict unpacked into them is already a dict the template holds), the
                # result never sized
                meter = None
            elif __obj is _safe_range or (kind is _Method and __obj.__func__ is _GENERATION_SUPPORT):
                # ``range(...)`` (lazy, at most jinja2's 100,000 items; a loop over it is metered) and a
                # ``{% generation %}`` block (its body's output was sized when it was joined)
                meter = None
        # Callables jinja2's sandbox always allows and ``Context.call`` calls as they are (no
        # ``pass_context``-style argument): called here directly, as ``Context.call`` would.
        direct = kind in _DIRECT_CALL_TYPES or __obj is TemplateNamespace or __obj is raise_exception
        if meter is None:
            if not direct:
                return super().call(__context, __obj, *args, **kwargs)
            if kwargs:
                kwargs.pop("_loop_vars", None)
                kwargs.pop("_block_vars", None)
            try:
                return __obj(*args, **kwargs)
            except StopIteration:
                return __self.undefined("value was undefined because a callable raised a StopIteration exception")
        # (no fuel here: the call site was charged with the code around it, see ``_fuel``)
        if len(args) >= meter.big:
            # ``f(*iterable)``: the arguments are a new tuple, its items often new objects (numbers of
            # a range), which the callee may keep (``cycler(*range(100000))``)
            meter.add_built(_getsizeof(args) + _ARG_BYTES * len(args), "tuple of call arguments")
        if kind is _LoopContext:  # ``loop(...)`` of a recursive loop (a macro is counted above, inline)
            # (a recursive loop meters what it is given itself: ``NoFoldCodeGenerator.write``)
            depth = meter.depth + 1
            if depth > meter.depth_cap:
                raise BudgetExceeded("max_recursion_depth", meter.max_depth, f"{depth} nested macro/loop calls")
            meter.depth = depth
            try:
                return super().call(__context, __obj, *args, **kwargs)
            except StopIteration:
                return __self.undefined("value was undefined because a callable raised a StopIteration exception")
            finally:
                # (a recursive loop body returns ``concat`` of its buffer, which sized and counted it)
                meter.depth = depth - 1
        if kind is _BuiltinMethod:
            if owner_kind in _SIZED_OWNERS and len(owner) >= meter.big:
                meter.check_time()  # a method of a big string or container: maybe one pass over it
            if isinstance(owner, (str, bytes)) and __obj.__name__ in _CHECKED_STR_METHODS:
                name = __obj.__name__
                if name == "join":
                    args = _consumed_args(meter, args, "str.join() of an iterable")
                _check_call(meter, __obj, args, kwargs)
                if name in _SPLITTING_METHODS:
                    # new strings inside a list or tuple: counted from the text they are cut from
                    if kwargs:
                        kwargs.pop("_loop_vars", None)
                        kwargs.pop("_block_vars", None)
                    result = meter.sized(__obj(*args, **kwargs), f"str.{name}() result")
                    if len(owner) >= meter.big and not (len(result) == 1 and result[0] is owner):
                        meter.add_pieces(owner, len(result), f"str.{name}() result")
                    return result
        elif kind in _CHECKED_CALLABLE_TYPES:
            _check_call(meter, __obj, args, kwargs)
            if type(getattr(__obj, "__self__", None)) is TemplateDict:  # dict.fromkeys(...)
                args = _consumed_args(meter, args, "dict.fromkeys() of an iterable")
        elif kind is TemplateDict or __obj is TemplateNamespace:
            args = _consumed_args(meter, args, "dict() or namespace() of an iterable")
        if direct:
            if kwargs:
                kwargs.pop("_loop_vars", None)
                kwargs.pop("_block_vars", None)
            try:
                result = __obj(*args, **kwargs)
            except StopIteration:
                return __self.undefined("value was undefined because a callable raised a StopIteration exception")
        else:
            result = super().call(__context, __obj, *args, **kwargs)
        result_kind = type(result)
        if result_kind is str:
            if len(result) >= meter.big:
                meter.big_string(result, "call result")
            return result
        if result_kind is list or result_kind is dict or result_kind is tuple:
            if len(result) < meter.big:
                return result
        elif result_kind in _UNSIZED_RESULTS:
            return result
        return meter.sized(result, "call result")

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        if _budget._strict.get():
            raise jinja2.exceptions.SecurityError(
                f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe."
            )
        return super().unsafe_undefined(obj, attribute)

    def concat(self, parts: Any) -> str:  # type: ignore[override]
        """``"".join``, counting: a buffer (list) is a built string, anything else is the render's output.

        The output (the root render function's generator) is collected in chunks of ``_OUTPUT_CHUNK``
        parts at C speed, each chunk counted against the output budget and the built bytes before the
        next is made (``Meter.output_parts``), so parts cannot pile up unseen; a budget crossed is thrown
        into the generator, so the error names the template line it stopped at.
        """
        meter = _active_meter()
        if meter is None:
            return "".join(parts)
        if type(parts) is list:
            size = sum(map(len, parts))
            if size < meter.big:
                return "".join(parts)
            if size > meter.string_cap:
                meter.string_size(size, "block output")
            text = "".join(parts)
            meter.big_string(text, "block output")
            return text
        iterator = iter(parts)
        chunk = collected = list(_islice(iterator, _OUTPUT_CHUNK))
        while True:
            try:
                meter.output_parts(sum(map(len, chunk)), len(chunk))
            except BudgetExceeded as error:
                throw = getattr(iterator, "throw", None)
                if throw is not None:
                    throw(error)  # raises it at the generator's yield, in the template's code
                raise
            if len(chunk) < _OUTPUT_CHUNK:
                return "".join(collected)
            chunk = list(_islice(iterator, _OUTPUT_CHUNK))
            collected += chunk

    def budget_iter(self, iterable: Any, cost: int = 1) -> Any:
        """A loop's iterable, metered: each iteration is a loop iteration and ``cost`` steps of fuel
        (one for the iteration, one for each filter and call site in the loop's body)."""
        meter = _active_meter()
        if meter is None:
            return iterable
        kind = type(iterable)
        if kind in _PLAIN_SEQUENCES:
            count = len(iterable)
        elif kind is _Generator and iterable.gi_code is _ITEMS_CODE:  # ``x|items``
            count = _items_length(iterable)
        else:
            count = _LOOP_UPFRONT + 1
        # A loop over a sequence of up to _LOOP_UPFRONT items is charged its whole length when it
        # starts (also if it ends in a break), with no per-item wrapper, unless that would cross a
        # budget: then it is counted as it goes, so a loop left early is never refused for the items
        # it skipped. The clock as ``budget_charge`` looks at it (``Meter.spend``).
        room = meter.room - count * cost
        loops = meter.loops + count
        if room >= 0 and loops <= meter._loop_cap:
            # (the common case: no clock to look at, no budget crossed; the room is under
            # CLOCK_STEPS, so count is at most _LOOP_UPFRONT here)
            meter.room = room
            meter.loops = loops
            return iterable
        if count <= _LOOP_UPFRONT and loops <= meter._loop_cap and meter.steps + count * cost <= meter._step_cap:
            meter.loops = loops
            meter.spend(count * cost)
            return iterable
        if kind is _Undefined:  # iterates over nothing
            return iterable
        if hasattr(kind, "__len__") and not isinstance(iterable, jinja2.runtime.Undefined):
            return _SizedMeteredIterable(iterable, meter, cost)
        return _MeteredIterable(iterable, meter, cost)

    def budget_slice(self, value: Any, key: slice) -> Any:
        """``value[key]`` for a slice (a copy): sized, and counted as built when big."""
        result = value[key]
        meter = _active_meter()
        if meter is None:
            return result
        kind = type(result)
        if (kind is str or kind is list or kind is tuple or kind is bytes) and len(result) >= meter.big:
            meter.check_time()
            meter.sized(result, "slice")
        if kind is list or kind is tuple:
            meter.add_input_copy(result, value)
        return result

    def budget_compare(self, left: Any, operator: str, right: Any) -> Any:
        """A comparison whose operands the source does not bound (``_unbounded_comparison``): fuel for
        the characters it may go through, charged before it runs, when an operand is long or a container."""
        meter = _active_meter()
        if meter is not None:
            kind = type(left)
            if kind is str:  # two long strings: compared character by character
                if len(left) >= meter.big and type(right) is str and len(right) >= meter.big:
                    meter.charge_work(min(len(left), len(right)), f"'{operator}' comparison")
            elif kind in _SIZED_OWNERS and type(right) is kind:  # two containers: item by item
                meter.charge_work(min(meter.work(left), meter.work(right)), f"'{operator}' comparison")
        return _COMPARE_OPERATORS[operator](left, right)

    def budget_in(self, item: Any, container: Any) -> bool:
        """``item in container`` whose container the source does not bound: fuel for the characters
        it may go through (a string searched, a list's items compared, a long key hashed)."""
        meter = _active_meter()
        if meter is not None:
            kind = type(container)
            if kind is dict:
                if type(item) is str and len(item) >= meter.big:
                    meter.charge_work(len(item), "'in' comparison")
            elif kind is str:
                if len(container) >= meter.big:
                    meter.charge_work(len(container), "'in' comparison")
            elif kind is list or kind is tuple:
                if type(item) is str:
                    # a string is compared with each item in O(1) unless the item is a string of its
                    # length (then at most its length in characters): without a look at the items
                    # when that is under a step (``'k' not in handled_keys``), else the smaller bound
                    chars = len(container) * (len(item) + 1)
                    if chars >= _WORK_PER_STEP:
                        meter.charge_work(min(chars, meter.work(container)), "'in' comparison")
                else:
                    meter.charge_work(meter.work(container), "'in' comparison")
        return item in container

    def budget_charge(self, cost: int) -> None:
        """A function body (template, macro, call block, block) starts: ``cost`` steps of fuel, and the
        clock each time the steps pass a multiple of ``CLOCK_STEPS`` (``Meter.spend``)."""
        meter = _active_meter()
        if meter is None:
            return
        room = meter.room - cost
        if room >= 0:
            meter.room = room
        else:
            meter.spend(cost)

    def budget_buffered(self, buffer: list, count: int) -> None:
        """``count`` parts were just written into a block's buffer, in a loop: each time the buffer
        passes a multiple of ``_OUTPUT_CHUNK`` parts, the last chunk is counted as ``concat`` counts
        the output (so parts cannot pile up unseen; the whole is sized when the buffer is joined)."""
        size = len(buffer)
        if (size - count) >> _OUTPUT_CHUNK_BITS == size >> _OUTPUT_CHUNK_BITS:
            return
        meter = _active_meter()
        if meter is None:
            return
        meter.output_parts(sum(map(len, buffer[-_OUTPUT_CHUNK:])), _OUTPUT_CHUNK)

    def budget_text(self, value: Any) -> str:
        """``str(value)`` for ``{{ ... }}`` output, refusing a container whose text would pass the string budget."""
        if type(value) is str:
            return value
        meter = _active_meter()
        if meter is not None:
            meter.text_of(value, "printed value")
            return meter.sized(str(value), "printed value")
        return str(value)

    def budget_concat(self, parts: tuple) -> str:
        """``~``: strings only (the common case) are joined at C speed and sized after, as ``+`` is (the
        result is no bigger than the strings that already exist); any other part is sized before
        ``str()`` runs on it."""
        try:
            text = "".join(parts)
        except TypeError:  # a part that is not a string
            text = None
        meter = _active_meter()
        if meter is None:
            return "".join(map(str, parts)) if text is None else text
        if text is None:
            for part in parts:
                if type(part) is not str:
                    meter.text_of(part, "'~' operand")
            strings = list(map(str, parts))
            size = sum(map(len, strings))
            if size > meter.string_cap:
                meter.string_size(size, "'~' concatenation")
            text = "".join(strings)
        if len(text) >= meter.big:
            meter.big_string(text, "'~' concatenation")
        return text

    # -- compiling under source budgets ----------------------------------------------------------

    def _tokenize(self, source: str, name: Any, filename: Any = None, state: Any = None) -> Any:
        stream = super()._tokenize(source, name, filename, state)
        if _budget._compile_deadline.get() is not None:  # the parser pulls tokens: clocked as it does
            stream._iter = _budget.clocked_tokens(stream._iter)
        return stream

    def compile_budgeted(self, source: str, max_nesting: int | None) -> jinja2.Template:
        """``from_string`` after checking bracket/block nesting (the parser recurses) and tree depth."""
        if max_nesting is None:
            return self.from_string(source)
        nesting = source_nesting(source, self, max_nesting)
        if nesting > max_nesting:
            raise BudgetExceeded("max_source_nesting", max_nesting, f"{nesting} nested brackets and blocks")
        try:
            tree = self.parse(source)
            depth = tree_depth(tree, _TREE_DEPTH_FACTOR * max_nesting)
            if depth > _TREE_DEPTH_FACTOR * max_nesting:
                raise BudgetExceeded("max_source_nesting", max_nesting, f"expression tree deeper than {depth - 1}")
            template = self.from_string(tree)
        except RecursionError:
            raise BudgetExceeded("max_source_nesting", max_nesting, "template nests too deeply to parse") from None
        template.chatjinja_nesting = max(nesting, -(-depth // _TREE_DEPTH_FACTOR))  # type: ignore[attr-defined]
        return template


# The parsed tree of a template is a few levels deeper than its bracket/block nesting.
_TREE_DEPTH_FACTOR = 4


_LOOP_BATCH = 32  # iterations a metered loop counts before it reports them
_LOOP_UPFRONT = 1024  # the longest sequence a loop is charged for in full when it starts
_OUTPUT_CHUNK_BITS = 12
_OUTPUT_CHUNK = 1 << _OUTPUT_CHUNK_BITS  # parts of output collected and counted at a time
_islice = itertools.islice
_Generator = types.GeneratorType
_Undefined = jinja2.runtime.Undefined
# what a loop can be charged for in full when it starts (``len`` is what it will iterate over)
_PLAIN_SEQUENCES = frozenset({list, tuple, dict, str, range, type({}.items()), type({}.keys()), type({}.values())})


_ITEMS_CODE = jinja2.filters.do_items.__code__


def _items_length(generator: Any) -> int:
    """How many pairs a ``|items`` generator (jinja2's ``do_items``) will yield: the length of its
    dict when it has not started and the dict is an exact one (which a template cannot change: the
    sandbox refuses its mutating methods); else more than a loop is charged for upfront."""
    if _generator_state(generator) == _GEN_CREATED:
        value = generator.gi_frame.f_locals.get("value")
        if type(value) is dict:
            return len(value)
    return _LOOP_UPFRONT + 1


class _MeteredIterable:
    __slots__ = ("_iterable", "_meter", "_cost")

    def __init__(self, iterable: Any, meter: _budget.Meter, cost: int):
        self._iterable = iterable
        self._meter = meter
        self._cost = cost

    def __iter__(self) -> Iterator[Any]:
        # Counted in batches of 32 (a local counter is far cheaper than the meter's), checked at
        # every batch and at the end of the loop; a loop left early adds its rest unchecked.
        meter = self._meter
        cost = self._cost
        pending = 0
        try:
            for item in self._iterable:
                pending += 1
                if pending == _LOOP_BATCH:
                    pending = 0
                    meter.loop_iterations(_LOOP_BATCH, cost)
                yield item
            if pending:
                count, pending = pending, 0
                meter.loop_iterations(count, cost)
        finally:
            if pending:
                meter.loops += pending
                meter.steps += pending * cost


class _SizedMeteredIterable(_MeteredIterable):
    __slots__ = ()

    def __len__(self) -> int:
        return len(self._iterable)


def _check_binop(meter: _budget.Meter, operator: str, left: Any, right: Any) -> None:
    """Refuse an operation whose result would cross a size budget, before computing it."""
    if operator == "*":
        if isinstance(left, int) and isinstance(right, int):
            meter.int_bits(left.bit_length() + right.bit_length(), "product")
            return
        if isinstance(right, int):
            seq, count = left, right
        elif isinstance(left, int):
            seq, count = right, left
        else:
            return
        if isinstance(seq, (str, bytes)):
            meter.string_size(len(seq) * max(count, 0), "repeated string")
        elif isinstance(seq, (list, tuple)):
            meter.sequence_size(len(seq) * max(count, 0), "repeated sequence")
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            meter.int_bits(abs(left).bit_length() * right, "power")
    elif operator == "+":
        if isinstance(left, (str, bytes)) and isinstance(right, (str, bytes)):
            meter.string_size(len(left) + len(right), "'+' concatenation")
        elif isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
            meter.sequence_size(len(left) + len(right), "'+' concatenation")
    elif operator == "%" and isinstance(left, str):
        _budget.check_percent_format(meter, left, right)


_BINOP_RESULTS = {operator: f"result of '{operator}'" for operator in ChatTemplateEnvironment.intercepted_binops}
_COMPARING_TESTS = {
    "==": "eq", "eq": "eq", "equalto": "eq", "!=": "ne", "ne": "ne", ">": "gt", "gt": "gt", "greaterthan": "gt",
    ">=": "gteq", "ge": "gteq", "<": "lt", "lt": "lt", "lessthan": "lt", "<=": "lteq", "le": "lteq",
}


def _metered_test(environment: "ChatTemplateEnvironment", operator_name: str, func: Any) -> Any:
    """A comparison test through ``budget_in``/``budget_compare`` (any other call shape: the test
    itself, so a wrong call fails with the test's own message)."""
    contains, compare = environment.budget_in, environment.budget_compare

    def metered(*args: Any, **kwargs: Any) -> Any:
        if len(args) != 2 or kwargs:
            return func(*args, **kwargs)
        if operator_name == "in":
            return contains(args[0], args[1])
        return compare(args[0], operator_name, args[1])

    functools.update_wrapper(metered, func)
    return metered


_COMPARE_OPERATORS = {
    "eq": operator.eq, "ne": operator.ne, "gt": operator.gt, "gteq": operator.ge, "lt": operator.lt, "lteq": operator.le,
}
_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill"})
_Macro = jinja2.runtime.Macro
_LoopContext = jinja2.runtime.LoopContext
# the callables ``_check_call`` knows: str methods, the str.format wrappers, lipsum, strftime_now
_CHECKED_CALLABLE_TYPES = frozenset({types.FunctionType, types.MethodType})
_BuiltinMethod = types.BuiltinMethodType
_Method = types.MethodType
_safe_range = jinja2.sandbox.safe_range
_GENERATION_SUPPORT = AssistantTracker._generation_support
# the str methods ``_check_call`` has a size check for (any other builtin method is not looked at)
# the ones that cut a string into new strings and return them in a list or tuple
_SPLITTING_METHODS = frozenset({"split", "rsplit", "splitlines", "partition", "rpartition"})
_CHECKED_STR_METHODS = _WIDTH_METHODS | _SPLITTING_METHODS | {"expandtabs", "join", "replace", "translate"}
# what ``Context.call`` calls unchanged and ``SandboxedEnvironment.is_safe_callable`` allows: builtin
# methods (``'a'.strip``, ``d.items``), macros, the ``dict`` global (plus ``namespace`` and
# ``raise_exception``, by identity)
_SIZED_OWNERS = frozenset({str, list, dict, tuple})
_DIRECT_CALL_TYPES = frozenset({types.BuiltinMethodType, _Macro, TemplateDict})
# results ``Meter.sized`` never checks (not a str, bytes, list, tuple or dict)
_UNSIZED_RESULTS = frozenset(
    {
        bool, int, float, type(None), type({}.items()), type({}.keys()), type({}.values()), types.GeneratorType,
        TemplateNamespace, jinja2.runtime.Undefined,
    }
)


def _consumed_args(meter: _budget.Meter, args: tuple, what: str) -> tuple:
    """``args`` with each generator, range or dict ``.items()`` counted as the callee consumes it
    (``Meter.materializing``): ``str.join()``, ``dict()``, ``dict.fromkeys()`` and ``namespace()`` build
    from them."""
    if not any(type(arg) in _CONSUMED_ITERABLES for arg in args):
        return args
    return tuple(meter.materializing(arg, what) if type(arg) in _CONSUMED_ITERABLES else arg for arg in args)


def _arg(args: tuple, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _check_call(meter: _budget.Meter, obj: Any, args: tuple, kwargs: dict) -> None:
    """Size checks for the calls a template can make that build big strings from small arguments."""
    wrapped = getattr(obj, "__wrapped__", None)
    if wrapped is not None and getattr(wrapped, "__name__", None) in ("format", "format_map"):
        fmt = getattr(wrapped, "__self__", None)
        if isinstance(fmt, str):
            values = args[0] if (wrapped.__name__ == "format_map" and args) else kwargs
            _budget.check_brace_format(meter, fmt, args, values if hasattr(values, "values") else {})
        return
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, (str, bytes)):  # (bytes: from ``str.encode``; they have the same methods)
        name = getattr(obj, "__name__", "")
        if name in _WIDTH_METHODS:
            width = _arg(args, kwargs, 0, "width", 0)
            if isinstance(width, int):
                meter.string_size(width, f"str.{name}() result")
        elif name == "expandtabs":
            size = _arg(args, kwargs, 0, "tabsize", 8)
            if isinstance(size, int):
                tabs = owner.count("\t" if isinstance(owner, str) else b"\t")
                meter.string_size(len(owner) + tabs * max(size, 0), "str.expandtabs() result")
        elif name == "join":
            _check_join(meter, owner, _arg(args, kwargs, 0, "iterable"))
        elif name == "replace":
            _check_replace(meter, owner, _arg(args, kwargs, 0, "old"), _arg(args, kwargs, 1, "new"), _arg(args, kwargs, 2, "count", -1))
        elif name == "translate" and isinstance(owner, str):
            _check_translate(meter, owner, _arg(args, kwargs, 0, "table"))
        elif name in ("split", "rsplit", "splitlines") and isinstance(owner, str) and meter.max_items is not None and len(owner) // 2 >= meter.max_items:
            _check_split(meter, owner, name, args, kwargs)
        return
    if obj is jinja2.utils.generate_lorem_ipsum:
        n = _arg(args, kwargs, 0, "n", 5)
        most = _arg(args, kwargs, 3, "max", 100)
        if isinstance(n, int) and isinstance(most, int):
            meter.step(max(n, 0))
            meter.string_size(max(n, 0) * max(most, 0) * 16, "lipsum() result")
    elif obj is strftime_now:
        fmt = _arg(args, kwargs, 0, "format", "")
        if isinstance(fmt, str):
            meter.string_size(len(fmt) * 16, "strftime_now() result")


# What str.split() and str.splitlines() split at (every str.isspace() character / line boundary).
_WHITESPACE = tuple(chr(c) for c in range(0x3001) if chr(c).isspace())
_LINE_BREAKS = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _check_split(meter: _budget.Meter, text: str, name: str, args: tuple, kwargs: dict) -> None:
    """A split of a long string: count the pieces (C-level) before the list of them is built."""
    if name == "splitlines":
        pieces = sum(map(text.count, _LINE_BREAKS)) + 1
    else:
        separator = _arg(args, kwargs, 0, "sep")
        if separator is None:  # at most one more word than whitespace characters
            pieces = sum(map(text.count, _WHITESPACE)) + 1
        elif isinstance(separator, str) and separator:
            pieces = text.count(separator) + 1
        else:
            return
        limit = _arg(args, kwargs, 1, "maxsplit", -1)
        if isinstance(limit, int) and limit >= 0:
            pieces = min(pieces, limit + 1)
    meter.sequence_size(pieces, f"str.{name}() result")


_STR_ONLY = _budget._STR_ONLY
_WORK_PER_STEP = _budget._WORK_PER_STEP


def _check_join(meter: _budget.Meter, separator: Any, items: Any) -> None:
    if isinstance(items, (list, tuple)) and meter.max_string is not None:
        limit = meter.max_string
        if _STR_ONLY.issuperset(map(type, items)):  # the common case, at C speed: strings only
            size = sum(map(len, items))
            if items and isinstance(separator, str):
                size += len(separator) * (len(items) - 1)
            if size > limit:
                meter.string_size(size, "joined string")
            return
        size = 0.0
        for item in items:
            size += len(item) if type(item) is str else _budget.text_size(item, limit)
            if size > limit:
                break
        if isinstance(separator, str):
            size += len(separator) * max(len(items) - 1, 0)
        meter.string_size(int(min(size, limit + 1)) if size > limit else int(size), "joined string")


def _check_translate(meter: _budget.Meter, text: str, table: Any) -> None:
    """``str.translate(table)``: every character may become the longest string in the table."""
    if isinstance(table, Mapping):
        values: Any = table.values()
    elif isinstance(table, (list, tuple)):
        values = table
    else:
        return  # a string maps a character to a character; nothing else a template holds is subscriptable
    longest = max((len(value) for value in values if isinstance(value, str)), default=1)
    meter.string_size(len(text) * max(longest, 1), "str.translate() result")


def _check_replace(meter: _budget.Meter, text: Any, old: Any, new: Any, count: Any) -> None:
    if not (
        (isinstance(text, str) and isinstance(old, str) and isinstance(new, str))
        or (isinstance(text, bytes) and isinstance(old, bytes) and isinstance(new, bytes))
    ) or len(new) <= len(old):
        return
    hits = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    meter.string_size(len(text) + hits * (len(new) - len(old)), "replaced string")


def _json_shape(value: Any, limit: int) -> tuple[int, int]:
    """(number of nodes, deepest level) of a JSON-ish value, walked iteratively; stops counting past ``limit`` nodes."""
    nodes, deepest = 0, 0
    stack = [(value, 1)]
    while stack and nodes <= limit:
        item, depth = stack.pop()
        nodes += 1
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((child, depth + 1) for child in item)
    return nodes, deepest


def _check_json(meter: _budget.Meter, value: Any, indent: Any) -> None:
    """``tojson`` of anything but an atom: refuse JSON text over the string budget before it is built."""
    if meter.max_string is None:
        return
    if id(value) not in (meter.input_ids or meter.make_input_ids()):  # (the caller's own: the caller's text)
        meter.text_of(value, "JSON text")
    if indent is None:
        return
    width = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
    if width > 0 and meter.input_shape_bound(value) * width > meter.max_string:
        # (the caller's data small enough as a whole is not walked: the common case, tools)
        nodes, deepest = _json_shape(value, meter.max_string)
        meter.string_size(nodes * deepest * width, "indented JSON")


def _pre_center(meter: _budget.Meter, args: tuple, kwargs: dict) -> None:
    _pre_text(meter, args, kwargs)
    width = _arg(args, kwargs, 1, "width", 80)
    if isinstance(width, int):
        meter.string_size(width, "centred string")


def _pre_indent(meter: _budget.Meter, args: tuple, kwargs: dict) -> None:
    _pre_text(meter, args, kwargs)
    width = _arg(args, kwargs, 1, "width", 4)
    text = args[0] if args else ""
    size = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    if isinstance(text, str) and size > 0:
        meter.string_size(len(text) + (text.count("\n") + 1) * size, "indented string")


def _pre_wordwrap(meter: _budget.Meter, args: tuple, kwargs: dict) -> None:
    _pre_text(meter, args, kwargs)
    text = args[0] if args else ""
    width = _arg(args, kwargs, 1, "width", 79)
    wrap = _arg(args, kwargs, 3, "wrapstring", "\n")
    if isinstance(text, str) and isinstance(wrap, str) and isinstance(width, int):
        lines = len(text) // max(width, 1) + text.count("\n") + 1
        meter.string_size(len(text) + lines * len(wrap), "wrapped string")


def _pre_replace(meter: _budget.Meter, args: tuple, kwargs: dict) -> None:
    _pre_text(meter, args, kwargs)
    if len(args) >= 3:
        _check_replace(meter, args[0], args[1], args[2], _arg(args, kwargs, 3, "count", -1))


def _pre_join(meter: _budget.Meter, args: tuple, kwargs: dict) -> None:
    if args and _arg(args, kwargs, 2, "attribute") is None:
        _check_join(meter, _arg(args, kwargs, 1, "d", ""), args[0])


def _pre_text(meter: _budget.Meter, args: tuple, kwargs: dict) -> None:
    """Filters that turn their value into text first (``soft_str``)."""
    if args:
        meter.text_of(args[0], "filtered value")


def _pre_sized(meter: _budget.Meter, args: tuple, kwargs: dict) -> None:
    """Filters that copy their value into a list: refuse a value longer than the sequence budget first."""
    if args and isinstance(args[0], (str, list, tuple, dict)):
        meter.sequence_size(len(args[0]), "filtered sequence")


def _pre_ordering(meter: _budget.Meter, args: tuple, kwargs: dict) -> None:
    """Filters that compare the items (``sort``, ``unique``, ``min``, ``max``, ``dictsort``, ``groupby``)
    and, case-insensitive by default, first make a lower-case copy of each string key: the copies are
    counted as built bytes, the comparisons as fuel (a sort compares each item about log2(n) times)."""
    _pre_sized(meter, args, kwargs)
    if not args or type(args[0]) is str:
        return
    work = meter.work(args[0])
    if work >= _budget.BIG_VALUE:
        count = len(args[0]) if hasattr(args[0], "__len__") else 1
        meter.add_built(int(min(work, meter.built_cap)) + _budget._PIECE_BYTES * count, "lower-case keys")
        meter.charge_work(work * max(1, count.bit_length()), "comparing the items")


def _pre_selecting(meter: _budget.Meter, args: tuple, kwargs: dict) -> None:
    """``select``/``reject``(``attr``) run a test on each item, usually a comparison: fuel for the
    characters they may go through."""
    if args and type(args[0]) is not str:
        work = meter.work(args[0])
        if work >= _budget.BIG_VALUE:
            meter.charge_work(work, "testing the items")


def _pre_sum(meter: _budget.Meter, args: tuple, kwargs: dict) -> None:
    """``sum`` over lists or strings concatenates: quadratic work, charged as fuel, and a size check."""
    if not args or not isinstance(args[0], (list, tuple)) or not args[0]:
        return
    items = args[0]
    if isinstance(items[0], (list, tuple, str)):
        total = sum(len(item) for item in items if isinstance(item, (list, tuple, str)))
        meter.sequence_size(total, "summed sequence")
        meter.step(len(items) * total // 100)


def _pre_format(meter: _budget.Meter, args: tuple, kwargs: dict) -> None:
    _pre_text(meter, args, kwargs)
    if args and isinstance(args[0], str):
        _budget.check_percent_format(meter, args[0], kwargs or tuple(args[1:]))


def _pre_count(meter: _budget.Meter, args: tuple, kwargs: dict, index: int, name: str) -> None:
    count = _arg(args, kwargs, index, name)
    if isinstance(count, int):
        meter.sequence_size(count, f"|{name}")
        meter.step(max(count, 0))


_FILTER_CHECKS = {
    "center": _pre_center,
    "indent": _pre_indent,
    "wordwrap": _pre_wordwrap,
    "replace": _pre_replace,
    "join": _pre_join,
    "format": _pre_format,
    "batch": lambda meter, args, kwargs: _pre_count(meter, args, kwargs, 1, "linecount"),
    "slice": lambda meter, args, kwargs: _pre_count(meter, args, kwargs, 1, "slices"),
    "sum": _pre_sum,
    **{name: _pre_sized for name in ("list", "reverse")},
    **{name: _pre_ordering for name in ("sort", "unique", "dictsort", "min", "max", "groupby")},
    **{name: _pre_selecting for name in ("select", "reject", "selectattr", "rejectattr")},
    **{
        name: _pre_text
        for name in (
            "string", "upper", "lower", "capitalize", "title", "trim", "striptags", "escape", "e",
            "forceescape", "safe", "urlencode", "urlize", "wordcount", "truncate", "pprint", "xmlattr",
        )
    },
}


# filters that turn a generator argument (from map, select, ...) into a list or a string: the
# generator is counted as they consume it (``Meter.materializing``)
_CONSUMING_FILTERS = frozenset(
    "batch dictsort first groupby join last list max min random reverse slice sort sum unique".split()
)
# of those, the ones that turn a range (new numbers) or a dict's items (new pairs) into a list,
# counted like a generator (not |last, |reverse, |random, which treat a range or a dict view as a
# sequence), and the ones that turn a string into a list (or lists) of its characters
_LISTING_FILTERS = frozenset({"batch", "groupby", "join", "list", "slice", "sort", "unique"})
_CUTTING_FILTERS = frozenset({"batch", "list", "slice", "sort"})
# filters whose result is a generator that keeps the filter's arguments (any others are let go when
# the filter returns: a big argument tuple, ``|f(*iterable)``, is counted only for these)
_KEEPING_FILTERS = frozenset({"map", "select", "reject", "selectattr", "rejectattr"})
# filters whose result is a list of new pairs or groups (counted in full, not only from 1,024 items)
_PAIRING_FILTERS = frozenset({"dictsort", "groupby"})
_PAIR_BYTES = 120  # a 2-tuple (56 bytes) plus, for groupby, the group's list and namedtuple
_ARG_BYTES = 40  # a reference in the argument tuple plus a new int (28-32 bytes)
_DictItems = type({}.items())
_CONSUMED_ITERABLES = frozenset({_Generator, range, _DictItems})
_getsizeof = sys.getsizeof

# one pass at C speed over a string or sequence the template already holds (or O(1)): the clock is
# looked at only when the value is a big string for these, at every call for the others
_UNTIMED_FILTERS = frozenset(
    """abs attr capitalize count d default e escape first float forceescape int items last length lower
    safe string title trim upper""".split()
)


# filters with nothing to meter: O(1), they return a value the template already holds or a number,
# and keep nothing (their fuel is charged with the code around them): not wrapped at all
_UNMETERED_FILTERS = frozenset({"abs", "attr", "count", "d", "default", "first", "items", "last", "length"})

# one C-speed pass over a string, whose result is at most ``_TEXT_GROWTH`` times as long whatever the
# other arguments (a case mapping triples a character at most, an escape makes ``&#34;`` of ``"``): on a
# string that short of the ``big`` threshold there is nothing to check or count, and no clock to look at
_SCALED_TEXT_FILTERS = frozenset({"trim", "upper", "lower", "capitalize", "title", "string", "safe", "escape", "e", "forceescape"})
_TEXT_GROWTH = 5


def _metered_filter(name: str, func: Any) -> Any:
    """Wrap a filter: the filter's own size check first, the clock, the result's size after."""
    if getattr(func, "chatjinja_metered", False) or name in _UNMETERED_FILTERS:
        return func
    skip = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0
    check = _FILTER_CHECKS.get(name)
    # the common check, inline below: a value that is not a string is sized before it becomes text
    text_check = check is _pre_text
    if text_check:
        check = None
    what = f"result of |{name}"
    timed = name not in _UNTIMED_FILTERS
    consumes = name in _CONSUMING_FILTERS
    listing = name in _LISTING_FILTERS
    cuts = name in _CUTTING_FILTERS
    pairs = name in _PAIRING_FILTERS
    keeps = name in _KEEPING_FILTERS

    def metered_text(value: Any, /, *args: Any, **kwargs: Any) -> Any:  # (the ``_SCALED_TEXT_FILTERS``: none takes a context)
        meter = _active_meter()
        if meter is None or (type(value) is str and len(value) * _TEXT_GROWTH < meter.big):
            return func(value, *args, **kwargs)
        return metered(value, *args, **kwargs)

    def metered(*args: Any, **kwargs: Any) -> Any:
        meter = _active_meter()
        if meter is None:
            return func(*args, **kwargs)
        # (no fuel here: the filter site was charged with the code around it, see ``_fuel``)
        # a filter can take a while on big data: look at the clock (meter.check_time(), inline), except
        # for the ones that are O(1) or one C-speed pass over a string (clocked below when it is big)
        if timed and _monotonic() > meter.deadline:
            meter.check_time()
        if keeps and len(args) >= meter.big:  # ``|map('f', *iterable)``: the generator keeps its arguments
            meter.add_built(_getsizeof(args) + _ARG_BYTES * len(args), "tuple of filter arguments")
        if check is not None:  # the filter's own size check (before the value is looked at below)
            check(meter, args[skip:], kwargs)
        if len(args) > skip:
            value = args[skip]
            kind = type(value)
            if kind is str:
                if len(value) >= meter.big:
                    if cuts:  # a list of the string's characters (each a new string, for most of them)
                        meter.add_pieces(value, len(value), f"|{name} of a string")
                    if not timed:
                        meter.check_time()
            elif consumes and (kind is _Generator or (listing and (kind is range or kind is _DictItems))):
                args = args[:skip] + (meter.materializing(value, f"|{name} of a {kind.__name__}"),) + args[skip + 1 :]
            elif text_check:
                meter.text_of(value, "filtered value")
        result = func(*args, **kwargs)
        kind = type(result)
        if kind is str:
            if len(result) >= meter.big:
                meter.big_string(result, what)
            return result
        if pairs and kind is list:
            # a new (key, value) pair or group per item, whatever the length
            meter.add_built(_getsizeof(result) + _PAIR_BYTES * len(result), what)
        if kind is list or kind is dict or kind is tuple:
            if len(result) < meter.big:
                return result
        elif kind in _UNSIZED_RESULTS:
            return result
        return meter.sized(result, what)

    def metered_join(eval_ctx: Any, value: Any, /, *args: Any, **kwargs: Any) -> Any:  # (``|join``)
        meter = _active_meter()
        if meter is None:
            return func(eval_ctx, value, *args, **kwargs)
        kind = type(value)
        if not (kind is list or kind is tuple):
            return metered(eval_ctx, value, *args, **kwargs)
        # a list or tuple (the common case; ``metered`` does the same for it): the clock, the size of the
        # joined string before it is built, the result's size after
        if _monotonic() > meter.deadline:
            meter.check_time()
        if (args[1] if len(args) > 1 else kwargs.get("attribute")) is None:
            _check_join(meter, args[0] if args else kwargs.get("d", ""), value)
        result = func(eval_ctx, value, *args, **kwargs)
        if len(result) >= meter.big:
            meter.big_string(result, what)
        return result

    # (the short forms name the value argument: they assume the signature jinja2 3.1 gives these filters)
    if name in _SCALED_TEXT_FILTERS and not skip:
        wrapper = metered_text
    elif name == "join" and skip == 1:
        wrapper = metered_join
    else:
        wrapper = metered
    functools.update_wrapper(wrapper, func)
    wrapper.chatjinja_metered = True  # type: ignore[attr-defined]
    return wrapper


_environment: ChatTemplateEnvironment | None = None
_environment_lock = threading.Lock()


def default_environment() -> ChatTemplateEnvironment:
    """The process-wide environment (built on first use)."""
    global _environment
    if _environment is None:
        with _environment_lock:
            if _environment is None:
                _environment = ChatTemplateEnvironment()
    return _environment


_CACHE_SIZE = 256
_compiled: "OrderedDict[str, jinja2.Template]" = OrderedDict()
_compiled_lock = threading.Lock()


def source_hash(source: str) -> str:
    # memoised by the string itself: a dict lookup reuses the str's cached hash, no re-encoding
    key = _source_hashes.get(source)
    if key is None:
        key = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
        if len(_source_hashes) >= _CACHE_SIZE:
            _source_hashes.clear()
        _source_hashes[source] = key
    return key


_source_hashes: dict[str, str] = {}


def compile_template(source: str, budgets: Budgets | None = None) -> jinja2.Template:
    """Compile a chat template in the default environment, cached by the hash of its source.

    With ``budgets``, the source size and nesting budgets are checked first (a cached template
    is checked again against the budgets of this call).
    """
    check_source(source, budgets)
    max_nesting = None if budgets is None else budgets.max_source_nesting
    timeout = None if budgets is None else budgets.timeout
    key = source_hash(source)
    with _compiled_lock:
        template = _compiled.get(key)
        if template is not None:
            _compiled.move_to_end(key)
    if template is None:
        template = _load_from_disk_cache(key)
        if template is not None:
            with _compiled_lock:
                template = _compiled.setdefault(key, template)
    if template is not None:
        if max_nesting is not None:
            nesting = getattr(template, "chatjinja_nesting", None)
            if nesting is None:  # compiled without budgets: measure now (raises if too deep)
                measured = _compile_via_disk_cache(source, key, max_nesting, timeout)
                template.chatjinja_nesting = measured.chatjinja_nesting  # type: ignore[attr-defined]
            elif nesting > max_nesting:
                raise BudgetExceeded("max_source_nesting", max_nesting, f"{nesting} nested brackets and blocks")
        return template
    template = _compile_via_disk_cache(source, key, max_nesting, timeout)
    with _compiled_lock:
        _compiled[key] = template
        while len(_compiled) > _CACHE_SIZE:
            _compiled.popitem(last=False)
    return template


def _load_from_disk_cache(key: str) -> jinja2.Template | None:
    """A template from the on-disk cache (``diskcache``: authenticated, versioned), or None."""
    cached = _diskcache.load(key)
    if cached is None:
        return None
    env = default_environment()
    template = env.template_class.from_code(env, cached.code, _flat_globals(env.make_globals(None)), None)
    if cached.nesting is not None:
        template.chatjinja_nesting = cached.nesting  # type: ignore[attr-defined]
    return template


def _compile_via_disk_cache(source: str, key: str, max_nesting: int | None, timeout: float | None = None) -> jinja2.Template:
    """Compile (under the nesting budget and, with ``timeout``, a deadline for lexing, parsing and code
    generation) and, when the disk cache is on, store the compiled code."""
    if timeout is not None:
        # half the render's timeout for lexing, parsing and generating code (the Python compile of
        # the generated code, which cannot be interrupted, takes about as long again at most)
        token = _budget._compile_deadline.set((_monotonic() + timeout / 2, timeout))
        try:
            return _compile_via_disk_cache(source, key, max_nesting)
        finally:
            _budget._compile_deadline.reset(token)
    if not _diskcache.disk_cache_enabled():
        template = default_environment().compile_budgeted(source, max_nesting)
    else:
        with _diskcache.recording_code() as recorded:
            template = default_environment().compile_budgeted(source, max_nesting)
        if recorded:
            _diskcache.store(key, recorded[-1], getattr(template, "chatjinja_nesting", None))
    template.globals = _flat_globals(template.globals)
    return template


def _flat_globals(globals_: Any) -> dict:
    """A template's globals as one dict instead of jinja2's ChainMap over the environment's.

    Every render copies them into a new context (``dict(globals, **vars)``), and copying a ChainMap
    walks its maps key by key: about a sixth of a small template's render. The environment's globals
    are set once, in ``ChatTemplateEnvironment.__init__``, so the snapshot sees the same names.
    """
    return dict(globals_)


def template_names(template: jinja2.Template) -> frozenset:
    """Every string constant in a compiled template's code: a superset of the variables it can read
    (jinja2 reads a variable only by its name, ``resolve('tools')``; a template has no way to list or
    compute the names of its context's variables). Cached on the template."""
    names = getattr(template, "chatjinja_names", None)
    if names is None:
        found: set = set()
        codes = [template.root_render_func.__code__] + [func.__code__ for func in template.blocks.values()]
        while codes:
            code = codes.pop()
            for const in code.co_consts:
                if type(const) is str:
                    found.add(const)
                elif isinstance(const, types.CodeType):
                    codes.append(const)
        names = template.chatjinja_names = frozenset(found)  # type: ignore[attr-defined]
    return names


def clear_compile_cache() -> None:
    with _compiled_lock:
        _compiled.clear()


@contextmanager
def generation_tracking(template: jinja2.Template, rendered_blocks: list[str], spans: list[tuple[int, int]]) -> Iterator[None]:
    """Record the character spans of ``{% generation %}`` bodies while rendering ``template``."""
    with template.environment.activate_tracker(rendered_blocks, spans):  # type: ignore[attr-defined]
        yield
