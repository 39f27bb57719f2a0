"""The Hugging Face chat-template environment, reproduced from transformers 5.25.0, without compile-time folding.

transformers builds it in ``transformers/utils/chat_template_utils.py``
(``_cached_compile_jinja_template``). Everything a template can see here is the same: an
``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`` with
``jinja2.ext.loopcontrols`` and a ``{% generation %}`` tag, the ``tojson`` override and the
``raise_exception``, ``strftime_now``, ``dict`` and ``namespace`` globals.

Resource budgets (``budget.py``) are enforced through this environment: the sandbox hooks
``call_binop``, ``call`` and ``concat``, wrapped filters, and a code generator that meters every
``{% for %}`` iterable, ``+``, ``~``, slice and unbounded comparison. The hooks and the filter wrappers
are in ``_hooks.py`` (compiled with mypyc when the package is built); the environment holds them as
attributes. With no render meter active they pass straight through, so the output never depends on them.

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
import json
import threading
import time
import types
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Iterator

import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.meta
import jinja2.nodes
import jinja2.optimizer
import jinja2.runtime
import jinja2.sandbox
import markupsafe
from jinja2.compiler import CodeGenerator, CompilerExit
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from ..limits import TREE_DEPTH_FACTOR
from . import budget as _budget
from . import diskcache as _diskcache
from ._implementation import hooks as _hooks
from .budget import BudgetExceeded, Budgets, check_source, source_nesting, tree_depth
from .sandbox import FastAttributeMixin, mutation_allowed
from .template_globals import AssistantTracker, TemplateDict, TemplateNamespace, raise_exception, strftime_now

_active_meter = _hooks._meter.get  # the hooks' hot path: one C call
_metered_json = _hooks.metered_json
_monotonic = time.monotonic

__all__ = ["ChatTemplateEnvironment", "compile_template", "generation_tracking", "clear_compile_cache", "template_names"]


def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False) -> str:
    # transformers overrides jinja2's tojson, which HTML-escapes and returns Markup
    meter = _active_meter()
    if meter is None:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    # metered here rather than by a wrapper (``metered_filter``): it is the filter chat templates
    # call most with budgets on. This function keeps transformers' signature (a call with the wrong
    # arguments fails with its message); the checks are compiled with the other hooks.
    return _metered_json(meter, x, ensure_ascii, indent, separators, sort_keys)


# the name transformers' own tojson has (see ``template_globals``: the message of a wrong call)
tojson.__qualname__ = "_cached_compile_jinja_template.<locals>.tojson"
tojson.chatjinja_metered = True  # type: ignore[attr-defined]


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
        # the budget hooks the compiled template code calls (``environment.budget_iter(...)``, ...):
        # bound methods of one ``Hooks`` held as attributes, which come before the class's methods
        hooks = _hooks.Hooks(SandboxedEnvironment.call.__get__(self), self.undefined, self.binop_table)
        for name in _hooks.HOOK_NAMES:
            setattr(self, name, getattr(hooks, name))
        for name, func in list(self.filters.items()):
            self.filters[name] = _hooks.metered_filter(name, func)
        # the comparison tests (``a is eq b``, ``a is in b``, and through ``select``/``reject``) are
        # charged as the comparison operators are
        for name, func in list(self.tests.items()):
            operator_name = "in" if name == "in" else _COMPARING_TESTS.get(name)
            if operator_name is not None:
                self.tests[name] = _metered_test(self, operator_name, func)

    # -- budget hooks: in ``_hooks.py`` (compiled when built), held as attributes (``__init__``) --------

    intercepted_binops = frozenset(_hooks.INTERCEPTED_BINOPS)  # (the operators ``Hooks.call_binop`` checks)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        if mutation_allowed(obj, attribute):  # only inside ``sandbox.mutable_containers`` (observation renders)
            return getattr(obj, attribute)
        if _budget._strict.get():
            raise jinja2.exceptions.SecurityError(
                f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe."
            )
        return super().unsafe_undefined(obj, attribute)

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
_TREE_DEPTH_FACTOR = TREE_DEPTH_FACTOR


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


def undeclared_variables(source: str) -> set[str]:
    """The variables a template reads from its context, as jinja2 finds them (``jinja2.meta``) in the default environment."""
    return jinja2.meta.find_undeclared_variables(default_environment().parse(source))


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
