"""``LintContext``: the linted template as rules see it — the typed AST, the analyser's facts and the facts rules share.

Built once per template by the runner: one walk indexes the tree (parents, assignments, macro
calls, type tests, the whitespace that reaches the output) and records the enter/leave sequence the
runner dispatches from; during the dispatch the runner keeps, for a few node kinds, how many enclose
the visited node and which is innermost, and which type tests the enclosing ``if``s (``x if c``,
``c and x``) make, so a rule asks about a node's surroundings in constant time. Rules read it; their
own state between ``check`` and ``finish`` goes in ``scratch``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import Any, Iterator

from ..analysis.collect import collect
from ..errors import ChatJinjaError
from ..source import Source
from ..syntax import ast as A
from ..syntax.visitor import child_nodes
from ..syntax.whitespace import kept_ranges

__all__ = ["LintContext", "Leave", "TRACKED", "STATEMENTS", "path_key", "type_tests", "strip_filters", "TYPE_TESTS", "const_str"]

TYPE_TESTS = frozenset({"string", "mapping", "iterable", "sequence", "none", "defined", "undefined", "number"})
# filters that keep a string's identity for comparisons (``m.role|lower == 'user'``)
_TRANSPARENT = frozenset({"lower", "upper", "trim", "string", "capitalize", "title", "safe", "e", "escape"})
_RESOLVE_DEPTH = 6
_MAX_VALUES = 64  # values followed per expression (a name set thousands of times is not followed further)


def path_key(node: Any) -> str | None:
    """``message['content']`` / ``message.content`` → ``"message.content"``; None for anything but a data path."""
    parts: list[str] = []
    while True:
        if isinstance(node, A.Name):
            parts.append(node.name)
            break
        if isinstance(node, A.Getattr):
            parts.append(node.attr)
            node = node.node
        elif isinstance(node, A.Getitem) and isinstance(node.arg, A.Const):
            value = node.arg.value
            if isinstance(value, str):
                parts.append(value)
            elif isinstance(value, int) and not isinstance(value, bool):
                parts.append(f"[{value}]")
            else:
                return None
            node = node.node
        else:
            return None
    out = ""
    for part in reversed(parts):
        out += part if not out or part.startswith("[") else "." + part
    return out


def last_key(node: Any) -> str | None:
    """The attribute or constant key a ``Getattr``/``Getitem`` reads (``m.role`` → ``"role"``)."""
    if isinstance(node, A.Getattr):
        return node.attr
    if isinstance(node, A.Getitem) and isinstance(node.arg, A.Const) and isinstance(node.arg.value, str):
        return node.arg.value
    return None


def const_str(node: Any) -> str | None:
    return node.value if isinstance(node, A.Const) and isinstance(node.value, str) else None


def strip_filters(node: Any, filters: frozenset[str] = _TRANSPARENT) -> Any:
    """``m.role|lower|trim`` → ``m.role``."""
    while isinstance(node, A.Filter) and node.node is not None and node.name in filters:
        node = node.node
    return node


def type_tests(expr: Any) -> set[tuple[str, str]]:
    """``path is [not] string`` ... anywhere in ``expr`` → {(path key, test)} (``|default`` counts as ``defined``)."""
    out: set[tuple[str, str]] = set()
    if expr is None:
        return out
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, A.Test) and node.name in TYPE_TESTS:
            key = path_key(node.node)
            if key is not None:
                out.add((key, node.name))
        for child in child_nodes(node):
            if isinstance(child, A.Expr):
                stack.append(child)
    return out


# the node kinds whose enclosing instances the context counts (``inside``, ``enclosing``, ``open_counts``)
TRACKED = frozenset({A.For, A.Macro, A.If, A.Elif, A.CondExpr, A.And, A.Or, A.Output, A.Set, A.CallBlock})
STATEMENTS = frozenset(cls for cls in A.node_classes() if issubclass(cls, A.Stmt))
_CLOSING = TRACKED | STATEMENTS  # the kinds the dispatch sequence marks the end of
_INDEXED = frozenset({A.Set, A.SetBlock, A.With, A.For, A.Macro, A.Call, A.Comment, A.Test})


class Leave:
    """The end of a node in the dispatch sequence: every node below ``node`` comes before it."""

    __slots__ = ("node",)

    def __init__(self, node: Any):
        self.node = node


_UP = object()  # the walk's mark for the end of a node that no Leave follows


def _start(node: Any) -> int:
    return node.span.start


class LintContext:
    """Everything a rule reads about one template (see the module docstring)."""

    def __init__(self, source: Source, tree: A.Template, capabilities: Any = None,
                 add_bos_token: bool | None = None, record: frozenset | None = None):
        self.source = source
        self.text = source.text
        self.tree = tree
        self.capabilities = capabilities  # chatjinja.analysis.Capabilities, None when the analyser gave up
        self.add_bos_token = add_bos_token
        self.parent: dict[int, Any] = {}
        self.by_type: dict[type, list[Any]] = {}  # in walk order; ``nodes(kind)`` sorts a kind's list when first asked
        self.assignments: dict[str, list[Any]] = {}  # name → value expressions ({% set %}, {% with %})
        self.set_nodes: dict[str, list[Any]] = {}  # name → the Set / SetBlock nodes assigning it
        self.loop_sources: dict[str, list[Any]] = {}  # loop variable → the iterated expressions
        self.macros: dict[str, A.Macro] = {}
        self.calls: dict[str, list[A.Call]] = {}  # callee name → its calls
        self.comments: list[A.Comment] = []
        self.events: list[Any] = []  # the dispatch sequence: nodes, and a Leave after each TRACKED or statement node
        self._type_tests: list[tuple[int, int, str, str]] = []
        self._index(record)
        tags = self.by_type.get(A.Tag, [])
        self.kept = kept_ranges(self.text, tags, self.nodes(A.Data))  # Data start → (start, end) of what is written
        self.tag_ending_at = {t.span.end: t for t in tags}
        self.tag_starting_at = {t.span.start: t for t in tags}
        # the dispatch walk's state (maintained by the runner, for the kinds in TRACKED:
        # For, Macro, If, Elif, CondExpr, And, Or, Output, Set, CallBlock)
        self.open_counts: Counter = Counter()  # node type → how many enclosing nodes of that type
        self.innermost: dict[type, list[Any]] = {}
        self.active_tests: Counter = Counter()  # (key, test) → enclosing ifs testing it
        self.statements: list[Any] = []  # the enclosing statements (Stmt nodes), innermost last
        self._raise_guards: set[tuple[str, str]] | None = None
        self.scratch: dict[str, Any] = {}  # per-rule state between check() calls and finish(), keyed by rule code
        self._facts_tried = capabilities is not None
        self._printed_names: set[str] | None = None

    # -- the index ------------------------------------------------------------------------------
    def _index(self, record: frozenset | None) -> None:
        """One walk: parents, nodes by type, assignments, calls, depth, and the dispatch sequence the runner replays
        (so the tree is walked once).

        The sequence holds, in pre-order, each node of a kind in ``record`` (every kind when None) and of the kinds
        whose enclosing instances the dispatch counts (``TRACKED``, statements), and a :class:`Leave` after the last
        node below each of the latter. Its depth counter moves at the nodes that have children below them.
        """
        parent = self.parent
        by_type = self.by_type
        events = self.events
        tests = self._type_tests
        assign = self._assign
        loop_sources, macros, calls, comments = self.loop_sources, self.macros, self.calls, self.comments
        depth = deepest = 0  # depth: of the node being entered's parent
        self.deepest = self.tree
        Tag, Set, SetBlock, With, For, Macro, Call, Name, Comment, Test = (
            A.Tag, A.Set, A.SetBlock, A.With, A.For, A.Macro, A.Call, A.Name, A.Comment, A.Test)
        indexed = _INDEXED
        closing = _CLOSING
        recorded = record
        children_of = child_nodes
        up = _UP
        tags: list[Any] = []
        stack: list[Any] = [self.tree]
        pop, push = stack.pop, stack.append
        while stack:
            node = pop()
            kind = type(node)
            if kind is Leave:
                events.append(node)
                depth -= 1
                continue
            if node is up:
                depth -= 1
                continue
            found = by_type.get(kind)
            if found is None:
                by_type[kind] = [node]
            else:
                found.append(node)
            if kind in indexed:
                if kind is Set:
                    assign(node.target, node.value, node)
                elif kind is SetBlock:
                    assign(node.target, None, node)
                elif kind is With:
                    for target, value in zip(node.targets, node.values):
                        assign(target, value, node)
                elif kind is For:
                    for name in _target_names(node.target):
                        loop_sources.setdefault(name, []).append(node.iter)
                elif kind is Macro:
                    macros.setdefault(node.name, node)
                elif kind is Call:
                    if type(node.node) is Name:
                        calls.setdefault(node.node.name, []).append(node)
                elif kind is Comment:
                    comments.append(node)
                elif node.name in TYPE_TESTS:  # (a Test)
                    key = path_key(node.node)
                    if key is not None:
                        tests.append((node.span.start, node.span.end, key, node.name))
            leave = kind in closing
            if leave or recorded is None or kind in recorded:
                events.append(node)
            children = children_of(node)
            if depth >= deepest:
                deepest, self.deepest = depth + 1, node
            if not children:
                if leave:
                    events.append(Leave(node))
                continue
            depth += 1
            push(Leave(node) if leave else up)
            for child in reversed(children):
                parent[id(child)] = node
                if type(child) is Tag:  # a leaf no rule visits: indexed here, never walked
                    tags.append(child)
                    if depth > deepest:
                        deepest, self.deepest = depth, child
                else:
                    push(child)
        self.depth = deepest
        if tags:
            by_type.setdefault(Tag, []).extend(tags)
        self._sorted: set[type] = set()
        comments.sort(key=_start)
        tests.sort()
        self._test_starts = [t[0] for t in tests]

    def type_tests_in(self, *exprs: Any) -> set[tuple[str, str]]:
        """``type_tests`` of expressions of this tree, from the index (no walk)."""
        out: set[tuple[str, str]] = set()
        tests = self._type_tests
        if not tests:
            return out
        for expr in exprs:
            if expr is None:
                continue
            start, end = expr.span.start, expr.span.end
            i = bisect_left(self._test_starts, start)
            while i < len(tests) and tests[i][0] < end:
                if tests[i][1] <= end:
                    out.add((tests[i][2], tests[i][3]))
                i += 1
        return out

    def _assign(self, target: Any, value: Any, node: Any) -> None:
        if isinstance(target, A.Name):
            self.assignments.setdefault(target.name, []).append(value)
            self.set_nodes.setdefault(target.name, []).append(node)
        elif isinstance(target, A.NSRef):
            key = f"{target.name}.{target.attr}"
            self.assignments.setdefault(key, []).append(value)
            self.set_nodes.setdefault(key, []).append(node)
        elif isinstance(target, A.Tuple):
            items = value.items if isinstance(value, (A.Tuple, A.List)) and len(value.items) == len(target.items) else None
            for i, item in enumerate(target.items):
                self._assign(item, items[i] if items else None, node)

    def nodes(self, kind: type) -> list[Any]:
        """The nodes of one class, in source order."""
        found = self.by_type.get(kind)
        if found is None:
            return []
        if kind not in self._sorted:
            found.sort(key=_start)
            self._sorted.add(kind)
        return found

    def parent_of(self, node: Any) -> Any:
        return self.parent.get(id(node))

    @property
    def facts(self) -> Any:
        """The analyser's ``Capabilities`` for this template (computed on first use), None when it gives up."""
        if not self._facts_tried:
            self._facts_tried = True
            try:
                self.capabilities = collect(self.tree, self.source)
            except (ChatJinjaError, RecursionError, ValueError, MemoryError):
                self.capabilities = None
        return self.capabilities

    @property
    def printed_names(self) -> set[str]:
        """Names read anywhere inside a ``{{ }}``."""
        if self._printed_names is None:
            out: set[str] = set()
            for output in self.nodes(A.Output):
                stack = [output.expr]
                while stack:
                    node = stack.pop()
                    if isinstance(node, A.Name):
                        out.add(node.name)
                    stack.extend(child_nodes(node))
            self._printed_names = out
        return self._printed_names

    def statement(self) -> Any:
        """The innermost statement enclosing the node being visited."""
        return self.statements[-1] if self.statements else None

    # -- positions and text -----------------------------------------------------------------------
    def source_text(self, node: Any) -> str:
        return self.text[node.span.start : node.span.end]

    # -- the dispatch walk's view -----------------------------------------------------------------
    def inside(self, kind: type) -> bool:
        """Whether a node of ``kind`` (one of the tracked kinds) encloses the node visited."""
        return self.open_counts[kind] > 0

    def enclosing(self, kind: type) -> Any:
        """The innermost enclosing node of ``kind`` (the node itself excluded), or None."""
        found = self.innermost.get(kind)
        return found[-1] if found else None

    def guarded(self, key: str, tests: tuple[str, ...] = ("string", "mapping", "iterable", "sequence")) -> bool:
        """Whether an enclosing ``if`` (or a raising precondition) type-tests ``key``."""
        active = self.active_tests
        for t in tests:
            if active.get((key, t)):
                return True
        guards = self.raise_guards
        return bool(guards) and any((key, t) in guards for t in tests)

    @property
    def raise_guards(self) -> set[tuple[str, str]]:
        """Type tests of the ``if`` arms that enclose a ``raise_exception`` call (checked preconditions)."""
        if self._raise_guards is None:
            out: set[tuple[str, str]] = set()
            for call in self.calls.get("raise_exception", ()):
                node = self.parent_of(call)
                while node is not None:
                    if isinstance(node, (A.If, A.Elif)):
                        out |= type_tests(node.test)
                    node = self.parent_of(node)
            self._raise_guards = out
        return self._raise_guards

    # -- values -----------------------------------------------------------------------------------
    def values(self, expr: Any, depth: int = _RESOLVE_DEPTH) -> Iterator[Any]:
        """``expr`` and what it may stand for: the values ``{% set %}`` gives a name, the arguments
        passed to a macro parameter (and its default), followed up to a few steps."""
        seen: set[int] = set()
        todo = [(expr, 0)]
        while todo and len(seen) < _MAX_VALUES:
            node, level = todo.pop()
            if id(node) in seen or node is None:
                continue
            seen.add(id(node))
            yield node
            if level >= depth:
                continue
            if isinstance(node, A.Name):
                for value in self.assignments.get(node.name, ()):
                    todo.append((value, level + 1))
                for value in self.param_values(node):
                    todo.append((value, level + 1))
            elif isinstance(node, A.Getattr) and isinstance(node.node, A.Name):
                for value in self.assignments.get(f"{node.node.name}.{node.attr}", ()):
                    todo.append((value, level + 1))
                for value in self.namespace_values(node.node.name, node.attr):
                    todo.append((value, level + 1))
            elif isinstance(node, A.Filter) and node.node is not None and node.name in _TRANSPARENT:
                todo.append((node.node, level + 1))
            elif isinstance(node, A.CondExpr):
                todo.append((node.expr1, level + 1))
                if node.expr2 is not None:
                    todo.append((node.expr2, level + 1))

    def namespace_values(self, name: str, attr: str) -> Iterator[Any]:
        """``ns.attr`` where ``{% set ns = namespace(attr=value) %}``: that value."""
        for value in self.assignments.get(name, ()):
            if isinstance(value, A.Call) and isinstance(value.node, A.Name) and value.node.name == "namespace":
                for kw in value.kwargs:
                    if kw.key == attr:
                        yield kw.value

    def param_values(self, name: A.Name) -> Iterator[Any]:
        """The arguments a macro's callers pass for the parameter ``name`` refers to (and its default)."""
        macro = self.enclosing_macro_of(name)
        if macro is None:
            return
        for index, param in enumerate(macro.params):
            if param.name != name.name:
                continue
            if param.default is not None:
                yield param.default
            for call in self.calls.get(macro.name, ()):
                if index < len(call.args):
                    yield call.args[index]
                for kw in call.kwargs:
                    if kw.key == param.name:
                        yield kw.value
            return

    def enclosing_macro_of(self, node: Any) -> A.Macro | None:
        """The macro whose body holds ``node`` (climbs parents: call it for names, not in a loop over all nodes)."""
        current = self.parent_of(node)
        steps = 0
        while current is not None and steps < 10_000:
            if isinstance(current, A.Macro):
                return current
            current = self.parent_of(current)
            steps += 1
        return None

    def role_expr(self, expr: Any) -> str | None:
        """The role key when ``expr`` is (or stands for) a message's role: ``m.role``, ``m['role']|lower``,
        a variable set from one, a macro parameter a role is passed to."""
        for value in self.values(strip_filters(expr)):
            value = strip_filters(value)
            if last_key(value) == "role":
                key = path_key(value)
                if key is None or not key.startswith(("loop.", "self.")):
                    return key or self.source_text(value)
        return None

    def role_case(self, expr: Any) -> str | None:
        """``"upper"`` or ``"lower"`` when the role in ``expr`` goes through ``|upper`` / ``|lower`` (outermost first),
        also in the value a variable was set to (``{% set role = m.role|upper %}``); ``"mixed"`` when assignments
        disagree (the linter does not follow the order of assignments)."""
        found = set()
        for value in self.values(expr):
            while isinstance(value, A.Filter) and value.node is not None:
                if value.name in ("upper", "lower"):
                    found.add(value.name)
                    break
                value = value.node
        return found.pop() if len(found) == 1 else "mixed" if found else None

    def is_key_ref_name(self, name: str, key: str) -> bool:
        """Whether the variable ``name`` holds ``key`` of a message-like value (``set c = m.content``); cached."""
        cache = self.scratch.setdefault("_key_names", {})
        found = cache.get((name, key))
        if found is None:
            values = self.assignments.get(name)
            found = cache[(name, key)] = bool(values) and all(
                v is not None and not isinstance(v, A.Name) and self.is_key_ref(v, key) for v in values)
        return found

    def is_key_ref(self, expr: Any, key: str) -> bool:
        """Whether ``expr`` reads ``key`` of a message-like value (``m.content``), or is a variable
        every assignment of which does; ``ns.content`` of a namespace and loop/self attributes excluded."""
        if isinstance(expr, A.Name):
            return self.is_key_ref_name(expr.name, key)
        if last_key(expr) != key:
            return False
        base = expr.node
        if isinstance(base, A.Name):
            name = base.name
            if name in ("loop", "self") or name in self.namespaces or name in self.chunk_vars:
                return False
        return True

    @property
    def namespaces(self) -> frozenset[str]:
        """Variables set to ``namespace(...)``: ``ns.content`` is the template's own value, not a message's."""
        found = self.scratch.get("_namespaces")
        if found is None:
            found = frozenset(name for name, values in self.assignments.items()
                              if any(isinstance(v, A.Call) and isinstance(v.node, A.Name) and v.node.name == "namespace"
                                     for v in values))
            self.scratch["_namespaces"] = found
        return found

    @property
    def chunk_vars(self) -> frozenset[str]:
        """Loop variables over a message's content (``for block in message['content']``)."""
        found = self.scratch.get("_chunks")
        if found is None:
            found = frozenset(name for name, sources in self.loop_sources.items()
                              if any(last_key(s) == "content" for s in sources))
            self.scratch["_chunks"] = found
        return found

    def is_assigned(self, name: str) -> bool:
        return name in self.assignments or name in self.loop_sources


def _target_names(target: Any) -> Iterator[str]:
    if isinstance(target, A.Name):
        yield target.name
    elif isinstance(target, A.Tuple):
        for item in target.items:
            yield from _target_names(item)


_BIG = 2**256  # folded integers are capped here (only "at least this large" matters to the rules)
_MAX_FOLDED_TEXT = 10_000


def constant(ctx: "LintContext | None", expr: Any, depth: int = 0) -> Any:
    """The value of a constant expression — literals joined, repeated, reversed, joined by ``|join``,
    arithmetic on numbers, a variable ``{% set %}`` once to one — or None when it is not constant."""
    if depth > 40 or expr is None:
        return None
    kind = type(expr)
    if kind is A.Const:
        return expr.value
    if kind is A.Name:
        if ctx is None:
            return None
        values = ctx.assignments.get(expr.name, ())
        return constant(ctx, values[0], depth + 1) if len(values) == 1 else None
    if kind in (A.List, A.Tuple):
        items = [constant(ctx, item, depth + 1) for item in expr.items]
        return None if any(i is None for i in items) else items
    if kind is A.UnaryOp:
        value = constant(ctx, expr.operand, depth + 1)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if expr.op == "-" else value
        return None
    if kind is A.Concat:
        parts = [constant(ctx, item, depth + 1) for item in expr.items]
        if any(p is None for p in parts):
            return None
        out = "".join(str(p) for p in parts)
        return out if len(out) <= _MAX_FOLDED_TEXT else None
    if kind is A.BinOp:
        left, right = constant(ctx, expr.left, depth + 1), constant(ctx, expr.right, depth + 1)
        if left is None or right is None:
            return None
        return _binop(expr.op, left, right)
    if kind is A.Filter and expr.node is not None:
        value = constant(ctx, expr.node, depth + 1)
        if value is None:
            return None
        name = expr.name
        if name == "join" and isinstance(value, list):
            sep = constant(ctx, expr.args[0], depth + 1) if expr.args else ""
            return sep.join(str(v) for v in value) if isinstance(sep, str) else None
        if isinstance(value, str):
            if name == "reverse":
                return value[::-1]
            if name in ("lower", "upper", "trim", "string"):
                return value.lower() if name == "lower" else value.upper() if name == "upper" else value.strip() if name == "trim" else value
        if name in ("int", "float") and isinstance(value, (int, float, str)):
            try:
                return int(float(value)) if name == "int" else float(value)
            except (ValueError, OverflowError):
                return None
        return None
    if kind is A.Getitem and isinstance(expr.arg, A.Slice):
        value = constant(ctx, expr.node, depth + 1)
        s = expr.arg
        bounds = [constant(ctx, b, depth + 1) if b is not None else None for b in (s.start, s.stop, s.step)]
        if isinstance(value, (str, list)) and all(b is None or isinstance(b, int) for b in bounds):
            return value[slice(*bounds)]
    return None


def _binop(op: str, left: Any, right: Any) -> Any:
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right))
    try:
        if numbers:
            if op == "**":
                if abs(left) > 1 and right > 256:
                    return _BIG
                value = left ** right
            elif op == "*":
                value = left * right
            elif op == "+":
                value = left + right
            elif op == "-":
                value = left - right
            elif op == "//" and right:
                value = left // right
            elif op == "/" and right:
                value = left / right
            elif op == "%" and right:
                value = left % right
            else:
                return None
            if isinstance(value, complex):
                return None
            return min(value, _BIG) if isinstance(value, int) else value
        if op == "+" and isinstance(left, str) and isinstance(right, str):
            out = left + right
        elif op == "*" and isinstance(left, (str, list)) and isinstance(right, int) and not isinstance(right, bool):
            out = left * right if len(left) * max(right, 0) <= _MAX_FOLDED_TEXT else None
        elif op == "*" and isinstance(right, (str, list)) and isinstance(left, int) and not isinstance(left, bool):
            out = right * left if len(right) * max(left, 0) <= _MAX_FOLDED_TEXT else None
        else:
            return None
        return out if out is None or len(out) <= _MAX_FOLDED_TEXT else None
    except (OverflowError, ValueError, ZeroDivisionError, TypeError):
        return None
