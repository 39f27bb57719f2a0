"""From a template to ``Capabilities``: its parsed tree (depth-checked), symbolic runs over the conversation shapes of CAPABILITIES.md plus the syntactic facts (raise sites, role tests, content uses, tokens)."""

from __future__ import annotations

import functools
import gc
import re
from dataclasses import replace
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Iterable

from ..errors import ChatJinjaError
from ..limits import MAX_SOURCE_NESTING, MAX_TREE_DEPTH, StaticLimitExceeded
from ..source import Source, Span
from ..syntax import ast, parse
from ..syntax.visitor import NodeVisitor, child_nodes
from ..syntax.whitespace import effective_texts
from .execute import Program, Trace
from .facts import (
    MEDIA_CHUNK_TYPES,
    PROBED_ROLES,
    Capabilities,
    ContentUse,
    Evidence,
    RaiseSite,
    RoleTest,
    VariableUse,
)
from .filters import KNOWN_GLOBALS
from .modes import MAX_MODE_VARIANTS, MODE_SHAPES, Mode, ModeFacts, mode_variants, variant_name as _variant_name, find_modes
from .scopes import FIXED_VARIABLES
from .values import Failure, Fuel, Sym, Watched, WatchedList, current_fuel

__all__ = ["analyze_source", "collect", "collector_paused", "SCENARIOS", "run_scenarios", "template_modes", "tree_modes"]

SPECIAL_TOKEN_VALUES = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
NEEDLE = "needle"


# The input symbols of the shapes, made once (they are immutable values; the dicts and lists
# holding them are made fresh for every run).
_sym = functools.lru_cache(maxsize=None)(Sym)


def _user(label: str = "hello") -> dict:
    return {"role": "user", "content": _sym(label)}


# The probe's tool-call ids (``call9id9``, ``call8id8``) are 8 characters long; their text stays unknown.
ID_SIZE = 8


def _call(name: str, call_id: str, arguments: Any) -> dict:
    return {"id": _sym(call_id, ID_SIZE), "type": "function", "function": {"name": _sym(name), "arguments": arguments}}


def _round_trip(arguments: Any) -> list:
    return [
        _user(),
        {"role": "assistant", "content": "", "tool_calls": [_call("tool_name", "call_id", arguments)]},
        {"role": "tool", "tool_call_id": _sym("call_id", ID_SIZE), "name": _sym("tool_name"), "content": _sym("tool_result")},
        {"role": "assistant", "content": _sym("done")},
        _user("more"),
    ]


def _parallel(first: Any, second: Any) -> list:
    return [
        _user(),
        {"role": "assistant", "content": "", "tool_calls": [
            _call("tool_name", "call_id", first), _call("second_name", "call_id2", second)]},
        {"role": "tool", "tool_call_id": _sym("call_id", ID_SIZE), "name": _sym("tool_name"), "content": _sym("r1")},
        {"role": "tool", "tool_call_id": _sym("call_id2", ID_SIZE), "name": _sym("second_name"), "content": _sym("r2")},
        {"role": "assistant", "content": _sym("done")},
        _user("more"),
    ]


def _needle_chunk() -> dict:
    return {"type": "text", "text": _sym(NEEDLE)}


_MEDIA = {
    "image": lambda: {"type": "image", "url": _sym("url")},
    "image_url": lambda: {"type": "image_url", "image_url": {"url": _sym("url")}},
    "video": lambda: {"type": "video", "url": _sym("url")},
    "audio": lambda: {"type": "audio", "url": _sym("url")},
    "input_audio": lambda: {"type": "input_audio", "input_audio": {"data": _sym("audio_data"), "format": "wav"}},
}


def _tools() -> list:
    return [{"type": "function", "function": {"name": _sym("def_name"), "description": _sym("description"),
                                               "parameters": {"type": "object", "properties": {}}}}]


def _media_shape(kind: str) -> Any:
    return lambda: ([{"role": "user", "content": [_needle_chunk(), _MEDIA[kind]()]}], {})


# Each conversation shape built by a function, so a run gets fresh objects and unused shapes cost nothing.
_SHAPES: dict[str, Any] = {
    "user": lambda: ([{"role": "user", "content": _sym(NEEDLE)}], {}),
    "assistant": lambda: ([_user(), {"role": "assistant", "content": _sym(NEEDLE)}, _user("next")], {}),
    "assistant_last": lambda: ([_user(), {"role": "assistant", "content": _sym(NEEDLE)}], {}),
    "system": lambda: ([{"role": "system", "content": _sym(NEEDLE)}, _user()], {}),
    "developer": lambda: ([{"role": "developer", "content": _sym(NEEDLE)}, _user()], {}),
    "chunk_text": lambda: ([{"role": "user", "content": [_needle_chunk()]}], {}),
    "tool_definitions": lambda: ([_user()], {"tools": _tools()}),
    "round_trip": lambda: (_round_trip({_sym("arg_key"): _sym("arg_value")}), {}),
    "round_trip_string": lambda: (_round_trip(_sym("arg_key")), {}),
    "parallel": lambda: (_parallel({_sym("arg_key"): _sym("arg_value")}, {"x": 1}), {}),
    # the probe's second call takes ``json.dumps({"x": 1})``: literal text, known exactly
    "parallel_string": lambda: (_parallel(_sym("arg_key"), '{"x": 1}'), {}),
    "generation_prompt_off": lambda: ([_user(NEEDLE)], {"add_generation_prompt": False}),
    "generation_prompt_on": lambda: ([_user(NEEDLE)], {"add_generation_prompt": True}),
    "reasoning": lambda: ([_user(), {"thinking": _sym("reasoning"), "role": "assistant", "content": _sym(NEEDLE),
                                     "reasoning_content": _sym("reasoning")}], {}),
    "documents": lambda: ([_user()], {"documents": [{"title": _sym("doc_title"), "text": _sym("doc_text")}]}),
    "alternating": lambda: ([_user(), {"role": "assistant", "content": _sym("a")}, _user("b")], {}),
    "repeated_user": lambda: ([_user(), _user("again")], {}),
    **{"chunk_" + kind: _media_shape(kind) for kind in _MEDIA},
}


def _scenarios() -> dict[str, tuple[Any, dict[str, Any]]]:
    """The abstract conversations: the shapes of docs/CAPABILITIES.md with every user-supplied string a symbol.

    Built fresh for every run (namespaces and dicts must not leak between runs). Messages are
    given as transformers passes them (``reasoning_content`` also aliased as ``thinking``).
    """
    return {name: build() for name, build in _SHAPES.items()}


SCENARIOS = tuple(_SHAPES)


# Shapes that differ from another only in which input strings they hold: to the analyser (which
# never knows the text, and takes different inputs to be different text) they are the same run.
_SAME_SHAPE = {"generation_prompt_off": "user", "alternating": "assistant"}

# Shapes that differ from a watched one only inside one dict or list (see ``Watched``), with the
# watched shapes that can stand for them, in order: the watched run stands for them when it never
# looked inside. The media chunk shapes differ from the text chunk shape only in the content list
# (a second chunk), and from each other only in that second chunk (all with two keys); the two
# round trips differ in the value of the call's ``function.arguments`` (the two parallel shapes in both calls').
_STANDS_FOR: dict[str, tuple[str, ...]] = {"chunk_image": ("chunk_text",)}
_STANDS_FOR.update({"chunk_" + kind: ("chunk_text", "chunk_image") for kind in _MEDIA if kind != "image"})
_STANDS_FOR["round_trip_string"] = ("round_trip",)
_STANDS_FOR["parallel_string"] = ("parallel",)
# [U, assistant N] is the reasoning shape without the reasoning keys of its assistant message
_STANDS_FOR["assistant_last"] = ("reasoning",)
_REASONING_KEYS = frozenset({"thinking", "reasoning_content"})
_WATCHED = frozenset(name for names in _STANDS_FOR.values() for name in names)


def _watched_shape(name: str) -> tuple[list, dict, tuple]:
    """The shape ``name`` (one in ``_WATCHED``) with the dicts or lists the others differ in watched."""
    if name == "chunk_text":
        content = WatchedList([_needle_chunk()])
        return [{"role": "user", "content": content}], {}, (content,)
    if name == "chunk_image":
        chunk = Watched(_MEDIA["image"]())
        return [{"role": "user", "content": [_needle_chunk(), chunk]}], {}, (chunk,)
    messages, extra = _SHAPES[name]()
    if name == "reasoning":
        message = messages[1] = Watched(messages[1], _REASONING_KEYS, extra=True)
        return messages, extra, (message,)
    functions = []
    for call in messages[1]["tool_calls"]:
        function = call["function"] = Watched(call["function"], frozenset({"arguments"}))
        functions.append(function)
    return messages, extra, tuple(functions)


# Shapes that are the [user N] run when the template never reads the variable they add.
_UNREAD = {"tool_definitions": "tools", "documents": "documents", "generation_prompt_on": "add_generation_prompt"}


class _Runs(dict):
    """Symbolic runs by scenario name, each made on first use.

    A run whose only difference from the ``[user N]`` run is a variable the template never reads
    (``tools``, ``documents``, ``add_generation_prompt``) is that run: it cannot differ.
    A run whose shape differs from a watched one only inside the watched dict is the watched run
    when that run never looked inside it (see ``_STANDS_FOR``).
    """

    def __init__(self, template: ast.Template, texts: dict[int, str], reads: set[str] | None,
                 bindable: frozenset[str] | None = None, variables: dict[str, Any] | None = None):
        super().__init__()
        self.variables = variables or {}  # a mode's variables, set in every run
        self.default: "_Runs | None" = None  # (a mode's runs: the default mode's, for the shapes not in MODE_SHAPES)
        self.template = template
        self.texts = texts
        self.reads = reads
        self.bindable = bindable
        self.program: Program | None = None  # compiled on the first run, shared by all of them
        self.unlooked: set[str] = set()  # watched runs that never looked inside the watched dict
        self.runs_away: bool | None = None  # whether the runs for [user] and [user, assistant, user] both hit a limit

    def close(self) -> None:
        """The runs are over: the compiled program is let go at once (see ``Program.close``)."""
        if self.program is not None:
            self.program.close()
            self.program = None

    def _runs_away(self) -> bool:
        if self.runs_away is None:
            self.runs_away = all(self[n].failure is not None and self[n].failure.kind == "limit" for n in ("user", "assistant"))
        return self.runs_away

    def _stand_in(self, name: str) -> Trace | None:
        """The run of the first watched shape that can stand for ``name`` and never looked inside (runs them as needed)."""
        for watched in _STANDS_FOR[name]:
            trace = self[watched]
            if watched in self.unlooked:
                return trace
        return None

    def __missing__(self, name: str) -> Trace:
        if self.default is not None and name not in MODE_SHAPES:
            trace = self[name] = self.default[name]
            return trace
        unread = _UNREAD
        stand_in = self._stand_in(name) if name in _STANDS_FOR else None
        if name in _SAME_SHAPE:
            trace = self[_SAME_SHAPE[name]]
        elif stand_in is not None:
            trace = stand_in
        elif self.reads is not None and name in unread and unread[name] not in self.reads:
            trace = self["user"]
        elif name not in ("user", "assistant") and self._runs_away():
            # the two simplest conversations both exceed a limit: so would every other one
            trace = Trace(failure=Failure("limit", "not run: the runs for [user] and [user, assistant, user] exceeded a limit"))
        else:
            watched = None
            if name in _WATCHED:
                messages, extra, watched = _watched_shape(name)
            else:
                messages, extra = _SHAPES[name]()
            context = {"messages": messages, "tools": None, "documents": None, "add_generation_prompt": False,
                       **SPECIAL_TOKEN_VALUES, **self.variables, **extra}
            if self.program is None:
                self.program = Program(self.template, self.texts, self.bindable)
            trace = self.program.run(context)
            if watched is not None and not any(w.read for w in watched):
                self.unlooked.add(name)
        self[name] = trace
        return trace


def run_scenarios(template: ast.Template, text: str, nodes: list | None = None,
                  reads: set[str] | None = None, bindable: frozenset[str] | None = None,
                  index: "_Index | None" = None) -> dict[str, Trace]:
    """The symbolic runs, one per conversation shape, made when first looked up (all of them when iterated).

    ``bindable`` (see ``_Index.bindable``) lets name lookups skip the scopes for names nothing binds.
    """
    if index is not None:
        texts = effective_texts(template, text, tags=index.of(ast.Tag), datas=index.of(ast.Data))
    else:
        texts = effective_texts(template, text, nodes)
    runs = _Runs(template, texts, reads, bindable)
    return runs


def all_runs(template: ast.Template, text: str) -> dict[str, Trace]:
    """Every symbolic run, made now."""
    runs = run_scenarios(template, text)
    return {name: runs[name] for name in SCENARIOS}


# ---- syntactic facts ---------------------------------------------------------------------------

_CONTROL_TOKEN = re.compile(
    r"<\|[^|<>\s]{1,40}\|>"  # <|im_start|>, <|eot_id|>
    r"|<｜[^｜<>]{1,40}｜>"  # DeepSeek's full-width bars
    r"|\[/?[A-Z][A-Z_]{1,30}\]"  # [INST], [/INST], [TOOL_CALLS]
    r"|</?[a-z][a-z0-9]*(?:_[a-z0-9]+)+>"  # <start_of_turn>, <end_of_utterance>, <tool_call>
    r"|</?(?:s|think|tools|eos|bos|pad|unk|sep|cls|mask)>"
)


def _control_tokens(index: "_Index") -> tuple[str, ...]:
    # One search over all the texts joined by "<>": no token pattern can match across it (a
    # pattern's "<" is always its first character and is never followed by ">").
    texts = [node.text for node in index.of(ast.Data)]
    texts += [node.value for node in index.of(ast.Const) if isinstance(node.value, str)]
    return tuple(sorted(set(_CONTROL_TOKEN.findall("<>".join(texts)))))


def _is_role_expr(node: ast.Node) -> bool:
    if isinstance(node, ast.Getattr):
        return node.attr == "role"
    if isinstance(node, ast.Getitem):
        return isinstance(node.arg, ast.Const) and node.arg.value == "role"
    if isinstance(node, ast.Call) and isinstance(node.node, ast.Getattr) and node.node.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Const) and node.args[0].value == "role"
    if isinstance(node, ast.Filter) and node.name in ("trim", "lower", "string") and node.node is not None:
        return _is_role_expr(node.node)
    return False


def _literal_strings(node: ast.Node) -> tuple[str, ...] | None:
    if isinstance(node, ast.Const) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [item.value for item in node.items if isinstance(item, ast.Const) and isinstance(item.value, str)]
        return tuple(values) if len(values) == len(node.items) else None
    return None


_ROLE_TEST_NAMES = frozenset({"eq", "equalto", "==", "ne", "!=", "in"})


def _role_tests(index: "_Index", text: str) -> tuple[RoleTest, ...]:
    tests = []
    # (only the candidates are sorted: a stable sort keeps their order among equal places either way)
    candidates = [n for n in index.of(ast.Compare) if len(n.ops) == 1]
    candidates += [n for n in index.of(ast.Filter) if n.name in ("selectattr", "rejectattr") and len(n.args) >= 3]
    candidates += [n for n in index.of(ast.Test) if n.name in _ROLE_TEST_NAMES]
    for node in sorted(candidates, key=lambda n: n.span.start):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, operand = node.expr, node.ops[0]
            subject, other = (left, operand.expr) if _is_role_expr(left) else (operand.expr, left)
            if not _is_role_expr(subject):
                continue
            roles = _literal_strings(other)
            if roles is not None:
                tests.append(RoleTest(node.span, roles, operand.op, _text(text, subject.span)))
        elif isinstance(node, ast.Filter) and node.name in ("selectattr", "rejectattr") and len(node.args) >= 3:
            attribute, test, value = node.args[0], node.args[1], node.args[2]
            if (isinstance(attribute, ast.Const) and attribute.value == "role" and isinstance(test, ast.Const)
                    and test.value in ("equalto", "eq", "==", "in", "ne", "!=")):
                roles = _literal_strings(value)
                if roles is not None:
                    tests.append(RoleTest(node.span, roles, node.name if test.value not in ("ne", "!=") else
                                          ("rejectattr" if node.name == "selectattr" else "selectattr"),
                                          _text(text, node.node.span) if node.node is not None else ""))
        elif isinstance(node, ast.Test) and node.name in ("eq", "equalto", "==", "ne", "!=", "in") and _is_role_expr(node.node):
            roles = _literal_strings(node.args[0]) if node.args else None
            if roles is not None:
                op = {"ne": "!=", "!=": "!="}.get(node.name, "in" if node.name == "in" else "==")
                if node.negated:
                    op = {"==": "!=", "!=": "==", "in": "not in"}[op]
                tests.append(RoleTest(node.span, roles, op, _text(text, node.node.span)))
    return tuple(tests)


def _is_content_expr(node: ast.Node) -> bool:
    if isinstance(node, ast.Getattr):
        return node.attr == "content"
    if isinstance(node, ast.Getitem):
        return isinstance(node.arg, ast.Const) and node.arg.value == "content"
    return False


def _content_uses(index: _Index, text: str, tests: dict[int, RoleTest], traces: dict[str, Trace]) -> tuple[ContentUse, ...]:
    """Where message content is printed (from the runs, so through aliases and macros) and where it is inspected."""
    printed: dict[int, tuple[Span, str, set[str]]] = {}
    sources = [("user", "user", NEEDLE), ("assistant", "assistant", NEEDLE), ("assistant", "assistant_last", NEEDLE),
               ("system", "system", NEEDLE), ("developer", "developer", NEEDLE), ("tool", "round_trip", "tool_result")]
    for role, scenario, label in sources:
        trace = traces[scenario]
        for span in trace.printed.get(label, ()) if trace.ok else ():
            printed.setdefault(span.start, (span, "output", set()))[2].add(role)
    if traces["chunk_text"].ok:
        for span in traces["chunk_text"].printed.get(NEEDLE, ()):
            entry = printed.setdefault(span.start, (span, "chunks", set()))
            entry[2].add("user")
    uses = [ContentUse(span, how, tuple(sorted(roles)), _text(text, span)) for span, how, roles in printed.values()]
    for node in index.of(ast.Test, ast.For, ast.Filter):
        how = None
        subject = None
        if isinstance(node, ast.Test) and _is_content_expr(node.node):
            how, subject = "type-test", node.node
        elif isinstance(node, ast.For) and _is_content_expr(node.iter):
            how, subject = "iterated", node.iter
        elif isinstance(node, ast.Filter) and node.name in ("tojson", "string", "pprint") and node.node is not None and _is_content_expr(node.node):
            how, subject = "dump", node.node
        if how is None:
            continue
        roles = _roles_under(index.role_tests_over(node, tests))
        uses.append(ContentUse(node.span, how, roles, _text(text, subject.span)))
    uses.sort(key=lambda u: (u.span.start, u.how))
    return tuple(uses)


def _roles_under(tests: tuple[RoleTest, ...]) -> tuple[str, ...]:
    roles = set(PROBED_ROLES)
    for test in tests:
        if test.operator in ("==", "in", "selectattr"):
            roles &= set(test.roles)
    return tuple(sorted(roles))


# The node classes whose guard the facts ask for (raise sites, content uses).
_GUARDED = (ast.Call, ast.Test, ast.For, ast.Filter)
# The node classes the facts list (``_Index.of``; each is listed by its own visit method in ``_Index``).
_INDEXED = (ast.Tag, ast.Data, ast.Name, ast.Const, ast.Call, ast.Compare, ast.Filter, ast.Test, ast.For, ast.Generation)
# Tests and filters whose subject is read "guarded" (a missing variable is expected there).
_DEFINEDNESS_TESTS = frozenset({"defined", "undefined", "none"})
_DEFAULT_FILTERS = frozenset({"default", "d"})


class _Guard:
    """The ``if`` branch a node is in: its test (``None`` for ``else``), the earlier tests it excludes, the enclosing guard.

    (A plain class: a frozen dataclass's ``__init__`` costs several times more, and guards are never compared.)
    """

    __slots__ = ("test", "excluded", "parent")

    def __init__(self, test: ast.Expr | None, excluded: tuple, parent: "_Guard | None"):
        self.test = test
        self.excluded = excluded
        self.parent = parent


class _Index(NodeVisitor):
    """One pass over the tree (the generic visitor of ``syntax.visitor``): the nodes of the classes facts list (``_INDEXED``)
    in visiting order (pre-order, field order), for the nodes facts ask about the ``if`` branch they sit in, the names read
    from the render context (``reads``: first read first, with jinja2's scopes; macros' free names count unless bound at
    top level) and every name a run can put in a scope (``bindable``: assignment, loop and ``with`` targets, macro names
    and parameters, and the names loops, macros and call blocks bind themselves).

    Only the constructs that open a scope, bind a name or guard a read have a method of their own; every other node is
    visited generically. The walk's state: the guard, the scope chain and whether inside a macro (set for each statement
    list), and where the names an expression reads go (``_found``) and whether they are read guarded.
    """

    def __init__(self, template: ast.Template):
        self.by_type: dict[type, list] = {cls: [] for cls in _INDEXED}
        self._names, self._tag_list = self.by_type[ast.Name], self.by_type[ast.Tag]
        self.guard: dict[int, _Guard | None] = {}
        # context reads: ``(name node, read under a definedness guard)`` checked against the scopes in the
        # order jinja2 binds (``for``, macros, call blocks and ``with`` open a scope; reads sorted by place at the end)
        self._reads: list[tuple[ast.Name, bool]] = []
        self._macro_reads: list[tuple[ast.Name, bool]] = []
        self._top_level_bound: set[str] = set()
        self._bindable = {"loop", "varargs", "kwargs", "caller"}
        self._discard: list = []  # the names of expressions nothing reads (targets, call-block defaults, ``*args``)
        self._found: list = self._discard
        self._guarded = False
        self._in_guard: _Guard | None = None
        self._scopes: list[set[str]] = [set()]
        self._in_macro = False
        self.tests: list[ast.Expr] = []  # every ``if``/``elif`` and conditional-expression test (the modes' source)
        self._body(template.body, None, self._scopes, False)
        self.bindable = frozenset(self._bindable)
        chosen = self._reads + [r for r in self._macro_reads if r[0].name not in self._top_level_bound]
        chosen.sort(key=lambda r: r[0].span.start)
        uses: dict[str, VariableUse] = {}
        for node, guarded in chosen:
            existing = uses.get(node.name)
            if existing is None:
                uses[node.name] = VariableUse(node.name, node.span, guarded)
            elif guarded and not existing.guarded:
                uses[node.name] = VariableUse(node.name, existing.span, True)
        self.reads = list(uses.values())
        del self._reads, self._macro_reads, self._discard, self._found, self._scopes, self._names, self._tag_list

    # -- the walk's steps ---------------------------------------------------------------------------
    def _body(self, statements: tuple, guard: _Guard | None, scopes: list[set[str]], in_macro: bool) -> None:
        """A statement list run under ``guard`` in the scope chain ``scopes``."""
        saved = self._in_guard, self._scopes, self._in_macro
        self._in_guard, self._scopes, self._in_macro = guard, scopes, in_macro
        methods, datas, Data = self._methods, self.by_type[ast.Data], ast.Data
        for child in statements:
            if type(child) is Data:  # (the most common statement, listed without a call)
                datas.append(child)
            else:
                methods[type(child)](self, child)
        self._in_guard, self._scopes, self._in_macro = saved

    def _expr(self, node: ast.Node, found: list, guarded: bool = False) -> None:
        """Visit an expression (or a node inside one) with the names it reads going to ``found``."""
        self._found, self._guarded = found, guarded
        self._methods[type(node)](self, node)

    def _check(self, found: list, scopes: list[set[str]] | None = None, in_macro: bool | None = None) -> None:
        """The names in ``found`` that no scope binds are read from the context."""
        if not found:
            return
        scopes = self._scopes if scopes is None else scopes
        into = self._macro_reads if (self._in_macro if in_macro is None else in_macro) else self._reads
        known = KNOWN_GLOBALS
        for item in found:
            name = item[0].name
            if name in known:
                continue
            for scope in scopes:
                if name in scope:
                    break
            else:
                into.append(item)
        found.clear()

    def _bind(self, target: ast.Node, scopes: list[set[str]]) -> None:
        cls = type(target)
        if cls is ast.Name:
            self._bind_name(target.name, scopes)
        elif cls is ast.Tuple or cls is ast.List:
            for item in target.items:
                self._bind(item, scopes)
        elif cls is ast.NSRef:
            self._check([(target, False)], scopes)

    def _bind_name(self, name: str, scopes: list[set[str]]) -> None:
        scopes[-1].add(name)
        self._bindable.add(name)
        if len(scopes) == 1:
            self._top_level_bound.add(name)

    def _tags(self, *tags: ast.Tag | None) -> None:
        listed = self._tag_list
        for tag in tags:
            if tag is not None:
                listed.append(tag)

    # -- expressions ----------------------------------------------------------------------------------
    def _listed(self, node: ast.Node) -> None:
        """A node of a listed class with nothing below it (a tag, a text, a constant)."""
        self.by_type[type(node)].append(node)

    visit_Tag = visit_Data = visit_Const = _listed

    def visit_Compare(self, node: ast.Compare) -> None:
        self.by_type[ast.Compare].append(node)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        self._names.append(node)
        self._found.append((node, self._guarded))

    def visit_Call(self, node: ast.Call | ast.Filter | ast.Test) -> None:
        cls = type(node)
        self.by_type[cls].append(node)
        self.guard[id(node)] = self._in_guard
        found, guarded = self._found, self._guarded
        # the subject of ``is defined`` / ``| default`` is read guarded; their ``*args``/``**kwargs`` are not read
        special = (cls is ast.Test and node.name in _DEFINEDNESS_TESTS) or (
            cls is ast.Filter and node.name in _DEFAULT_FILTERS and node.node is not None)
        if node.node is not None:
            self._expr(node.node, found, True if special else guarded)
        for arg in node.args:
            self._expr(arg, found, guarded)
        for keyword in node.kwargs:
            self._expr(keyword, found, guarded)
        for extra in (node.dyn_args, node.dyn_kwargs):
            if extra is not None:
                self._expr(extra, self._discard if special else found, guarded)
        self._found, self._guarded = found, guarded

    visit_Filter = visit_Test = visit_Call

    # -- statements ---------------------------------------------------------------------------------
    def visit_Stmt(self, node: ast.Stmt) -> None:
        """A statement that opens no scope and binds nothing: its expressions are read in field order."""
        listed = self.by_type.get(type(node))
        if listed is not None:
            listed.append(node)
        methods, Tag = self._methods, ast.Tag
        found: list = []
        for child in child_nodes(node):
            cls = type(child)
            if cls is Tag:  # (listed without a call)
                self._tag_list.append(child)
            elif isinstance(child, ast.Stmt):
                methods[cls](self, child)
            else:
                self._found, self._guarded = found, False
                methods[cls](self, child)
                self._check(found)

    def visit_CondExpr(self, node: ast.CondExpr) -> None:
        self.tests.append(node.test)
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        self.tests.append(node.test)
        self.tests.extend(e.test for e in node.elifs)
        guard, scopes, in_macro = self._in_guard, self._scopes, self._in_macro
        found: list = []
        self._expr(node.test, found)
        self._check(found)
        previous: list[ast.Expr] = []
        bound_in_all: set[str] | None = None
        top = len(scopes) == 1
        for index, (test, statements) in enumerate([(node.test, node.body)] + [(e.test, e.body) for e in node.elifs]):
            if index:  # (an ``elif`` test runs when the earlier tests failed)
                self._in_guard = _Guard(None, tuple(previous), guard)
                self._expr(test, found)
                self._in_guard = guard
                self._check(found)
            branch = scopes[:-1] + [set(scopes[-1])]
            self._body(statements, _Guard(test, tuple(previous), guard), branch, in_macro)
            if index:
                self._tags(node.elifs[index - 1].tag)
            added = branch[-1] - scopes[-1]
            if top:
                self._top_level_bound.update(added)
            bound_in_all = added if bound_in_all is None else bound_in_all & added
            previous.append(test)
        # an ``if`` opens no scope, but a name bound in only some branches may still come from the context
        branch = scopes[:-1] + [set(scopes[-1])]
        if node.else_body:
            self._body(node.else_body, _Guard(None, tuple(previous), guard), branch, in_macro)
        added = branch[-1] - scopes[-1]
        if top:
            self._top_level_bound.update(added)
        scopes[-1].update(bound_in_all & added)
        self._tags(node.open_tag, node.else_tag, node.end_tag)

    def visit_Set(self, node: ast.Set) -> None:
        found: list = []
        self._expr(node.target, self._discard)
        self._expr(node.value, found)
        self._tags(node.tag)
        self._check(found)
        self._bind(node.target, self._scopes)

    def visit_For(self, node: ast.For) -> None:
        guard, scopes, in_macro = self._in_guard, self._scopes, self._in_macro
        self.by_type[ast.For].append(node)
        self.guard[id(node)] = guard
        found: list = []
        self._expr(node.target, self._discard)
        self._expr(node.iter, found)
        self._check(found)
        inner = scopes + [set()]
        self._bind(node.target, inner)
        inner[-1].add("loop")
        if node.condition is not None:
            self._expr(node.condition, found)
            self._check(found, inner)
        self._body(node.body, guard, inner, in_macro)
        self._body(node.else_body, guard, scopes, in_macro)
        self._tags(node.open_tag, node.else_tag, node.end_tag)

    def visit_Macro(self, node: ast.Macro) -> None:
        guard, scopes = self._in_guard, self._scopes
        self._bind_name(node.name, scopes)
        params = {p.name for p in node.params}
        self._bindable.update(params)
        inner = scopes + [params | {"varargs", "kwargs", "caller"}]
        found: list = []
        for param in node.params:
            self._expr(param, found)
        self._check(found, inner, True)
        self._body(node.body, guard, inner, True)
        self._tags(node.open_tag, node.end_tag)

    def visit_CallBlock(self, node: ast.CallBlock) -> None:
        guard, scopes, in_macro = self._in_guard, self._scopes, self._in_macro
        found: list = []
        self._expr(node.call, found)
        self._check(found)
        params = {p.name for p in node.params}
        self._bindable.update(params)
        for param in node.params:
            self._expr(param, self._discard)  # (a call block's parameter defaults are not read)
        self._body(node.body, guard, scopes + [params], in_macro)
        self._tags(node.open_tag, node.end_tag)

    def visit_SetBlock(self, node: ast.SetBlock) -> None:
        guard, scopes, in_macro = self._in_guard, self._scopes, self._in_macro
        found: list = []
        self._expr(node.target, self._discard)
        for flt in node.filters:
            self._expr(flt, found)
        self._body(node.body, guard, scopes, in_macro)
        self._tags(node.open_tag, node.end_tag)
        self._check(found)  # (the filters apply after the body ran)
        self._bind(node.target, scopes)

    def visit_With(self, node: ast.With) -> None:
        guard, scopes, in_macro = self._in_guard, self._scopes, self._in_macro
        found: list = []
        for target in node.targets:
            self._expr(target, self._discard)
        for value in node.values:
            self._expr(value, found)
        self._check(found)
        inner = scopes + [set()]
        for target in node.targets:
            self._bind(target, inner)
        self._body(node.body, guard, inner, in_macro)
        self._tags(node.open_tag, node.end_tag)

    def of(self, *types: type) -> list:
        """The nodes of these classes, in visiting order."""
        if len(types) == 1:
            return self.by_type.get(types[0], [])
        return [n for t in types for n in self.by_type.get(t, ())]

    def condition(self, node: ast.Node, text: str) -> str | None:
        """The source text of the tests that must hold for ``node`` to run (``None`` when unconditional)."""
        parts: list[str] = []
        guard = self.guard.get(id(node))
        while guard is not None:
            here = [f"not ({_expression_text(text, t.span)})" for t in guard.excluded]
            if guard.test is not None:
                test_text = _expression_text(text, guard.test.span)
                here.append(f"({test_text})" if isinstance(guard.test, ast.Or) else test_text)
            parts = here + parts
            guard = guard.parent
        return " and ".join(parts) if parts else None

    def rejected_roles(self, node: ast.Node, tests: dict[int, RoleTest]) -> tuple[str, ...]:
        """The probed roles for which every role test among the branch tests guarding ``node`` holds.

        Only conjuncts that are role tests (``==``, ``!=``, ``in``, ``not in``, ``or`` of them, and
        the ``not`` of earlier branches' tests) count; empty when there are none.
        """
        allowed = set(PROBED_ROLES)
        seen = False
        guard = self.guard.get(id(node))
        while guard is not None:
            for excluded in guard.excluded:
                roles = _role_set(excluded, tests)
                if roles is not None:
                    seen = True
                    allowed -= roles
            if guard.test is not None:
                for conjunct in _conjuncts(guard.test):
                    roles = _role_set(conjunct, tests)
                    if roles is not None:
                        seen = True
                        allowed &= roles
            guard = guard.parent
        return tuple(sorted(allowed)) if seen else ()

    def role_tests_over(self, node: ast.Node, tests: dict[int, RoleTest]) -> tuple[RoleTest, ...]:
        """The positive role tests (``==``, ``in``) among the branch tests guarding ``node``."""
        found: list[RoleTest] = []
        guard = self.guard.get(id(node))
        while guard is not None:
            if guard.test is not None:
                found.extend(_positive_role_tests(guard.test, tests))
            guard = guard.parent
        return tuple(found)


def _conjuncts(expr: ast.Node) -> list[ast.Node]:
    if isinstance(expr, ast.And):
        return _conjuncts(expr.left) + _conjuncts(expr.right)
    return [expr]


def _role_set(expr: ast.Node, tests: dict[int, RoleTest]) -> set[str] | None:
    """The probed roles for which ``expr`` holds, when ``expr`` is built from role tests only."""
    if isinstance(expr, ast.Not):
        inner = _role_set(expr.operand, tests)
        return None if inner is None else set(PROBED_ROLES) - inner
    if isinstance(expr, ast.Or):
        left, right = _role_set(expr.left, tests), _role_set(expr.right, tests)
        return None if left is None or right is None else left | right
    if isinstance(expr, ast.And):
        left, right = _role_set(expr.left, tests), _role_set(expr.right, tests)
        return None if left is None or right is None else left & right
    test = tests.get(expr.span.start)
    if test is None or test.span.end != expr.span.end or test.operator not in ("==", "in", "!=", "not in"):
        return None
    named = set(test.roles) & set(PROBED_ROLES)
    return named if test.operator in ("==", "in") else set(PROBED_ROLES) - named


def _positive_role_tests(expr: ast.Node, tests: dict[int, RoleTest]) -> list[RoleTest]:
    if isinstance(expr, ast.And):
        return _positive_role_tests(expr.left, tests) + _positive_role_tests(expr.right, tests)
    test = tests.get(expr.span.start)
    if test is not None and test.span.end == expr.span.end and test.operator in ("==", "in", "selectattr"):
        return [test]
    return []


def _text(text: str, span: Span) -> str:
    return text[span.start : span.end]


def _expression_text(text: str, span: Span) -> str:
    """An expression's source text, widened over the parentheses its span leaves out (``(a) != (b)``)."""
    start, end = span.start, span.end
    for _ in range(8):
        snippet = text[start:end]
        if "(" not in snippet and ")" not in snippet:
            break  # (nothing to balance: what the scan below finds)
        depth = lowest = 0
        quote = None
        for char in snippet:
            if quote:
                if char == quote:
                    quote = None
            elif char in "'\"":
                quote = char
            elif char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                lowest = min(lowest, depth)
        if lowest < 0:
            before = text.rfind("(", 0, start)
            if before < 0 or text[before + 1 : start].strip():
                break
            start = before
        elif depth > 0:
            after = text.find(")", end)
            if after < 0 or text[end:after].strip():
                break
            end = after + 1
        else:
            break
    return text[start:end]


def _raise_sites(index: _Index, text: str, tests: dict[int, RoleTest]) -> tuple[RaiseSite, ...]:
    sites = []
    for node in index.of(ast.Call):
        if not (isinstance(node, ast.Call) and isinstance(node.node, ast.Name) and node.node.name == "raise_exception"):
            continue
        argument = node.args[0] if node.args else None
        message = argument.value if isinstance(argument, ast.Const) and isinstance(argument.value, str) else None
        source = _text(text, argument.span) if argument is not None else ""
        condition = index.condition(node, text)
        sites.append(RaiseSite(node.span, message, source, condition, _raise_kind(condition, message),
                               index.rejected_roles(node, tests)))
    return tuple(sites)


def _raise_kind(condition: str | None, message: str | None) -> str:
    """What a raise site polices, from its message (or, without a constant message, its guard)."""
    for words in ((message or "").lower(), (condition or "").lower()):
        if not words:
            continue
        if "altern" in words or "% 2" in words or "index0" in words:
            return "alternation"
        if "role" in words:
            return "role"
        if "tool" in words or "function" in words:
            return "tool"
        if "content" in words or "chunk" in words or "image" in words or "video" in words or "audio" in words:
            return "content"
    return "other"


# ---- assembling the report ---------------------------------------------------------------------


def _evidence(spans: Iterable[Span], note: str, limit: int = 3) -> list[Evidence]:
    out: list[Evidence] = []
    seen: set[int] = set()
    for span in spans:
        if span.start in seen:
            continue
        seen.add(span.start)
        out.append(Evidence(span, note))
        if len(out) >= limit:
            break
    return out


def _failure_evidence(trace: Trace, scenario: str) -> list[Evidence]:
    failure = trace.failure
    if failure is None or failure.span is None:
        return []
    return [Evidence(failure.span, f"{scenario}: {failure.kind} ({failure.message[:80]})")]


def _printed(traces: dict[str, Trace], scenario: str, label: str, fact: str, evidence: dict[str, list]) -> bool:
    trace = traces[scenario]
    if trace.contains(label):
        evidence.setdefault(fact, []).extend(_evidence(trace.printed[label], f"{scenario}: prints {label}"))
        return True
    evidence.setdefault(fact, []).extend(_failure_evidence(trace, scenario))
    return False


_ROUND_TRIPS = ("round_trip", "round_trip_string")  # the call's arguments as a mapping, as its JSON string


def _printed_either(traces: dict[str, Trace], scenarios: tuple[str, ...], label: str, fact: str,
                    evidence: dict[str, list]) -> bool:
    """``_printed`` for the first of ``scenarios`` that prints ``label`` (the later runs made only when needed)."""
    found: list[Evidence] = []
    for scenario in scenarios:
        mine: dict[str, list] = {}
        if _printed(traces, scenario, label, fact, mine):
            evidence.setdefault(fact, []).extend(mine[fact])
            return True
        found += mine.get(fact, [])
    evidence.setdefault(fact, []).extend(found)
    return False


def _dumps_chunk(trace: Trace) -> bool:
    literal = trace.literal_text()
    return "'type'" in literal or '"type"' in literal


def analyze_source(source: Source) -> Capabilities:
    """``chatjinja.analysis.analyze``: parse, check the tree's depth and collect, with the cyclic collector paused."""
    with collector_paused():  # (the parse too: its tree is most of what the collector would scan)
        try:
            return _analyze(source)
        except ChatJinjaError as exc:
            # Raised from here without its traceback, whose frames hold the tree and the runs: they are
            # freed now, while the collector waits, not scanned by the full pass that follows the pause.
            error = exc.with_traceback(None)
    raise error


def _analyze(source: Source) -> Capabilities:
    tree = parse(source)
    depth_limit = MAX_TREE_DEPTH
    if _deeper_than(tree, depth_limit):
        raise StaticLimitExceeded("max_source_nesting", MAX_SOURCE_NESTING,
                                  f"expression tree deeper than {depth_limit}", source_name=source.name)
    try:
        return collect(tree, source)
    except StaticLimitExceeded as exc:
        exc.source_name = source.name
        raise
    except RecursionError:
        raise ChatJinjaError("template is nested too deeply to analyse", source_name=source.name) from None


def template_modes(source: Source) -> tuple[Mode, ...]:
    """The modes of a template (``analysis.modes``): its tree parsed and indexed, nothing run."""
    with collector_paused():
        return tree_modes(parse(source))


def tree_modes(tree: ast.Template) -> tuple[Mode, ...]:
    """The modes of a parsed template (the linter's tree): indexed, nothing run."""
    if _deeper_than(tree, MAX_TREE_DEPTH):
        return ()
    try:
        index = _Index(tree)
    except RecursionError:
        return ()
    return find_modes(index.tests, [u.name for u in index.reads], index.of(ast.Name))


def _deeper_than(tree: Any, limit: int) -> bool:
    """Whether the tree is more than ``limit`` nodes deep (walked a level at a time, without recursion, stopping there)."""
    level, depth = [tree], 1
    while level:
        if depth > limit:
            return True
        below: list = []
        for node in level:
            below += child_nodes(node)
        level, depth = below, depth + 1
    return False


def collect(template: ast.Template, source: Source) -> Capabilities:
    """Every fact of the report for one parsed template, within the analysis fuel (:data:`~chatjinja.analysis.values.ANALYSIS_FUEL`)."""
    token = current_fuel.set(Fuel())
    try:
        with collector_paused():
            return _collect(template, source)
    finally:
        current_fuel.reset(token)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for one analysis (``analyze`` pauses it for the parse too), as it was after.

    The parsed tree and the compiled runs are up to hundreds of thousands of objects that live until
    the analysis ends: with the collector on, each of its passes scans them again (most of the time
    a 1 MB template takes). What they allocate is bounded by the source limits and the analysis fuel;
    the reference cycles it leaves (the compiled closures, garbage once it returns) go at the
    collector's next pass afterwards, one scan of them instead of one per pass.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _collect(template: ast.Template, source: Source) -> Capabilities:
    index = _Index(template)
    reads = {u.name for u in index.reads}
    texts = effective_texts(template, source.text, tags=index.of(ast.Tag), datas=index.of(ast.Data))
    traces = _Runs(template, texts, reads, index.bindable)
    try:
        facts = _facts(source, index, traces)
        modes = find_modes(index.tests, [u.name for u in index.reads], index.of(ast.Name))
        if not modes:
            return facts
        in_modes, cut = _facts_in_modes(template, source, index, traces, modes, facts)
    finally:
        traces.close()
    return replace(facts, modes=modes, in_modes=in_modes, modes_cut=cut)


def _facts_in_modes(template: ast.Template, source: Source, index: "_Index", default_runs: "_Runs",
                    modes: tuple[Mode, ...], default: Capabilities) -> tuple[tuple[ModeFacts, ...], tuple[str, ...]]:
    """The probed facts that differ from the default in each mode variant (one variable set at a time).

    The variants run on a fuel of their own (:data:`~chatjinja.analysis.values.ANALYSIS_FUEL` again,
    for all of them together) and at most :data:`MAX_MODE_VARIANTS` of them: the default facts never
    pay for the modes. The variants not analysed are named in ``cut``.
    """
    variants = mode_variants(modes)
    kept, cut = variants[:MAX_MODE_VARIANTS], [_variant_name(v) for v in variants[MAX_MODE_VARIANTS:]]
    baseline = default.probed()
    found: list[ModeFacts] = []
    token = current_fuel.set(Fuel())
    program = Program(template, default_runs.texts, index.bindable)  # (compiled once for every variant)
    try:
        for number, variables in enumerate(kept):
            runs = _Runs(template, default_runs.texts, default_runs.reads, index.bindable, dict(variables))
            runs.program, runs.default = program, default_runs
            try:
                if not runs["user"].ok and default.roles:
                    continue  # a value the template cannot take (``"Reasoning: " + reasoning_effort`` with true)
                probed = _facts(source, index, runs).probed()
            except StaticLimitExceeded:
                cut.extend(_variant_name(v) for v in kept[number:])
                break
            differing = {k: v for k, v in probed.items() if v != baseline[k]}
            if differing:
                found.append(ModeFacts(variables, differing))
    finally:
        program.close()
        current_fuel.reset(token)
    return tuple(found), tuple(cut)


def _facts(source: Source, index: _Index, traces: _Runs) -> Capabilities:
    text = source.text
    uses = index.reads
    evidence: dict[str, list[Evidence]] = {}

    roles = []
    if _printed(traces, "user", NEEDLE, "roles", evidence):
        roles.append("user")
    if _printed(traces, "assistant", NEEDLE, "roles", evidence) or _printed(traces, "assistant_last", NEEDLE, "roles", evidence):
        roles.append("assistant")
    for role in ("system", "developer"):
        if _printed(traces, role, NEEDLE, "roles", evidence):
            roles.append(role)
    # the tool-call facts hold with the call's arguments as a mapping or as its JSON string (the string
    # run is made only when the mapping run does not print it)
    if _printed_either(traces, _ROUND_TRIPS, "tool_result", "roles", evidence):
        roles.append("tool")
    content_string = _printed(traces, "user", NEEDLE, "content_string", evidence)

    chunk_types = []
    text_only = traces["chunk_text"]
    if _printed(traces, "chunk_text", NEEDLE, "chunk_types", evidence) and not _dumps_chunk(text_only):
        chunk_types.append("text")
    type_literals = None  # each literal string's last place, made when a media kind is supported
    for kind in MEDIA_CHUNK_TYPES:
        trace = traces["chunk_" + kind]
        if trace.ok and trace.shape() != (text_only.shape() if text_only.ok else None) and not _dumps_chunk(trace):
            chunk_types.append(kind)
            if type_literals is None:
                type_literals = {n.value: n.span for n in index.of(ast.Const) if isinstance(n.value, str)}
            if kind in type_literals:
                evidence.setdefault("chunk_types", []).append(Evidence(type_literals[kind], f"chunk type {kind!r}"))
        else:
            evidence.setdefault("chunk_types", []).extend(_failure_evidence(trace, "chunk_" + kind))

    arguments = []
    if _printed(traces, "round_trip", "arg_key", "tool_call_arguments", evidence):
        arguments.append("object")
    if _printed(traces, "round_trip_string", "arg_key", "tool_call_arguments", evidence):
        arguments.append("string")
    evidence["parallel_tool_calls"] = []
    parallel = False
    for scenario in ("parallel", "parallel_string"):
        trace = traces[scenario]
        if trace.contains("tool_name") and trace.contains("second_name"):
            evidence["parallel_tool_calls"] = _evidence(trace.printed["second_name"], f"{scenario}: prints the second call")
            parallel = True
            break
        evidence["parallel_tool_calls"] += _failure_evidence(trace, scenario)

    on, off = traces["generation_prompt_on"], traces["generation_prompt_off"]
    generation_prompt = on.ok and (not off.ok or on is not off and on.shape() != off.shape())
    evidence["generation_prompt"] = _evidence(
        (n.span for n in index.of(ast.Name) if n.name == "add_generation_prompt"),
        "reads add_generation_prompt") + _failure_evidence(on, "generation_prompt_on")

    alternating, repeated = traces["alternating"], traces["repeated_user"]
    requires_alternation = alternating.ok and not repeated.ok
    evidence["requires_alternation"] = _failure_evidence(repeated, "repeated_user") + _failure_evidence(alternating, "alternating")

    role_tests = _role_tests(index, text)
    tests_by_start = {t.span.start: t for t in role_tests}
    variables = tuple(sorted(u.name for u in uses if u.name not in FIXED_VARIABLES and u.name != "raise_exception"))
    special = tuple(sorted(u.name for u in uses if u.name.endswith("_token")))
    other_roles = sorted({r for t in role_tests for r in t.roles} - set(PROBED_ROLES))

    return Capabilities(
        roles=tuple(sorted(roles)),
        content_string=content_string,
        chunk_types=tuple(sorted(chunk_types)),
        tool_definitions=_printed(traces, "tool_definitions", "def_name", "tool_definitions", evidence),
        tool_calls=_printed_either(traces, _ROUND_TRIPS, "tool_name", "tool_calls", evidence),
        tool_call_arguments=tuple(arguments),
        parallel_tool_calls=parallel,
        tool_call_ids=_printed_either(traces, _ROUND_TRIPS, "call_id", "tool_call_ids", evidence),
        generation_prompt=generation_prompt,
        reasoning=_printed(traces, "reasoning", "reasoning", "reasoning", evidence),
        documents=_printed(traces, "documents", "doc_text", "documents", evidence),
        requires_alternation=requires_alternation,
        other_roles=tuple(other_roles),
        variables=variables,
        special_tokens=special,
        raises=_raise_sites(index, text, tests_by_start),
        generation_tags=bool(index.of(ast.Generation)),
        uses_strftime_now=any(n.name == "strftime_now" for n in index.of(ast.Name)),
        control_tokens=_control_tokens(index),
        evidence={name: tuple(items) for name, items in evidence.items()},
        role_tests=role_tests,
        content_uses=_content_uses(index, text, tests_by_start, traces),
        variable_uses=tuple(uses),
        source_name=source.name,
    )

