"""What the other chat-template engines do differently from transformers' jinja2, as the PT rules need it.

The engines are the ones ``chatjinja portability`` runs (``chatjinja.portability.engines.ENGINE_NAMES``):
``minijinja`` (Rust: TGI, mistral.rs; the ``minijinja`` PyPI package with pycompat), ``hfjs``
(``@huggingface/jinja`` 0.5.11, transformers.js) and ``llamacpp`` (llama.cpp's C++ engine in
``common/jinja/``, llama-cpp-python 0.3.36). Every table entry was measured: a one-line template
through each engine against transformers 5.24.0 (``benchmarks/pt_agreement.py`` measures the rules
on the corpus). The static half keeps its own copy of the names so the linter never imports the adapters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ...syntax import ast as A
from ...syntax.visitor import child_nodes
from ..context import const_str, last_key, path_key, strip_filters
from ..rule import Finding, Rule

__all__ = ["ENGINES", "pt_rule", "engine_list", "string_tested", "fails_without_tools", "names_by_text", "Turn", "ABSENT_CONTENT",
           "CHUNKED_CONTENT", "message_base", "reaches", "rejects_tool_turns", "fails_on_chunks", "if_arms", "arm_tests",
           "earlier_tests"]

ENGINES = ("minijinja", "hfjs", "llamacpp")
_MINI, _HFJS, _LLAMA = ENGINES


def engine_list(engines: Iterable[str]) -> str:
    """``("minijinja", "hfjs")`` → ``"minijinja and hfjs"`` (in ``ENGINES`` order)."""
    names = [e for e in ENGINES if e in set(engines)]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def pt_rule(code: str, name: str, summary: str, doc: str, engines: tuple[str, ...], visits: tuple[type, ...] = (),
            check: Callable[[Any, Any], Iterable[Finding]] | None = None,
            finish: Callable[[Any], Iterable[Finding]] | None = None) -> Rule:
    """A portability rule: a warning that names the engines its divergence class affects."""
    assert all(e in ENGINES for e in engines), engines
    return Rule(code, name, "warning", summary, doc, visits, check, finish, engines=engines)


def string_tested(ctx: Any) -> bool:
    """Whether an enclosing ``if``/``elif`` chain tests some ``content`` with ``is string`` (``m.get('content')``,
    a variable set from it ...), which the linter's path-keyed guards do not see."""
    for statement in ctx.statements:
        if isinstance(statement, A.If):
            for test in (statement.test, *(arm.test for arm in statement.elifs)):
                text = ctx.source_text(test)
                if "string" in text and "content" in text:
                    return True
    return False


def names_by_text(ctx: Any) -> dict[str, list[Any]]:
    """Every ``Name`` node of the template by its name, in source order (built once per template)."""
    found = ctx.scratch.get("_pt_names")
    if found is None:
        found = {}
        for name in ctx.nodes(A.Name):
            found.setdefault(name.name, []).append(name)
        ctx.scratch["_pt_names"] = found
    return found


def fails_without_tools(ctx: Any) -> bool:
    """Whether the template loops over ``tools`` or ``documents`` outside any macro and any test of them: transformers
    (which passes None) then fails on every conversation without tools, so no other divergence shows in one."""
    found = ctx.scratch.get("_pt_fails_without_tools")
    if found is None:
        found = False
        for loop in ctx.nodes(A.For):
            if isinstance(loop.iter, A.Name) and loop.iter.name in ("tools", "documents") and not _tested_above(loop, ctx):
                found = True
                break
        ctx.scratch["_pt_fails_without_tools"] = found
    return found


def _tested_above(node: Any, ctx: Any) -> bool:
    stem = "tool" if node.iter.name == "tools" else "doc"
    current = ctx.parent_of(node)
    while current is not None:
        if isinstance(current, A.Macro):
            return True
        if isinstance(current, A.If) and any(
                stem in ctx.source_text(t) for t in (current.test, *(arm.test for arm in current.elifs))):
            return True
        current = ctx.parent_of(current)
    return False


# -- Python methods (PT001) -----------------------------------------------------------------------------
# The methods of str, list and dict that transformers' sandbox lets a template call, but for the
# mutating ones (PT012). An engine not listed for a method does not have it (or gives another result).
STR_METHODS = frozenset(
    "capitalize casefold center count encode endswith expandtabs find format format_map index isalnum isalpha "
    "isascii isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle isupper join ljust "
    "lower lstrip partition removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip split "
    "splitlines startswith strip swapcase title translate upper zfill".split())
LIST_METHODS = frozenset("copy count index".split())
DICT_METHODS = frozenset("copy get items keys values".split())
PYTHON_METHODS = STR_METHODS | LIST_METHODS | DICT_METHODS

_EVERYWHERE = frozenset("upper lower strip split startswith endswith replace title items keys values get".split())
# method -> the engines that implement it as Python does
METHOD_ENGINES: dict[str, frozenset[str]] = {m: frozenset(ENGINES) for m in _EVERYWHERE}
for _m in "lstrip rstrip".split():  # hfjs ignores the characters argument (PT001 flags it only with one)
    METHOD_ENGINES[_m] = frozenset(ENGINES)
for _m in ("splitlines find rfind count isdigit isalpha isspace islower isupper isalnum isnumeric join copy "
           "index").split():
    METHOD_ENGINES[_m] = frozenset({_MINI})
METHOD_ENGINES["capitalize"] = frozenset(ENGINES)  # hfjs leaves the rest as it is: the same for 'user', 'system'
METHOD_ENGINES["format"] = frozenset({_MINI, _LLAMA})
METHOD_ENGINES["rsplit"] = frozenset({_LLAMA})
# engines that differ only when the method gets an argument (llama.cpp: ``.replace(a, b, count)``); hfjs ignores
# the characters of ``.strip(chars)``, ``.lstrip(chars)``, ``.rstrip(chars)`` and strips whitespace: text that
# starts with a space after ``</think>`` (``content.split('</think>')[-1].lstrip('\n')``) loses it there
METHOD_ARGUMENT_ENGINES = {"replace": frozenset({_LLAMA}), "strip": frozenset({_HFJS}), "lstrip": frozenset({_HFJS}),
                           "rstrip": frozenset({_HFJS})}
# mutating methods: transformers refuses them (SecurityError); llama.cpp runs these four. (minijinja's own
# lists and dicts have no methods; its Python binding runs Python's on the caller's values, TGI's Rust does not.)
MUTATING_ENGINES: dict[str, frozenset[str]] = {m: frozenset({_LLAMA}) for m in "append pop reverse sort".split()}

# -- filters and tests (PT009) ----------------------------------------------------------------------------
# filter -> the engines that lack it (or whose version takes other arguments or gives another result)
FILTER_GAPS: dict[str, frozenset[str]] = {}


def _gap(names: str, *engines: str) -> None:
    for name in names.split():
        FILTER_GAPS[name] = FILTER_GAPS.get(name, frozenset()) | frozenset(engines)


_gap("wordcount center urlize forceescape xmlattr random wordwrap truncate", _MINI, _HFJS, _LLAMA)
_gap("striptags sum batch e escape reverse round groupby attr filesizeformat pprint slice urlencode", _HFJS, _LLAMA)
_gap("format count reject select min d", _HFJS)
_gap("format", _LLAMA)  # returns the format string unchanged
_gap("unique", _HFJS, _LLAMA)
_gap("attr", _MINI)
TEST_GAPS: dict[str, frozenset[str]] = {
    "callable": frozenset({_MINI}),
    "float": frozenset({_HFJS}),
    "escaped": frozenset({_HFJS, _LLAMA}),
    "filter": frozenset({_HFJS, _LLAMA}),
    "test": frozenset({_HFJS, _LLAMA}),
    "le": frozenset({_LLAMA}),
}
# tests written with an argument but no parentheses (``x is divisibleby 3``): hfjs cannot parse them
HFJS_BARE_ARGUMENT = _HFJS


# -- which branches a message of the conversation space takes (PT003, PT011, PT016) -----------------------
# Clients send shapes the probe conversations lacked: an assistant turn whose ``content: null`` sits beside
# ``tool_calls`` (transformers drops the key: the template sees it undefined) and content as a list of text
# parts in system, user and assistant turns. A construct matters only where such a turn reaches it.


@dataclass(frozen=True)
class Turn:
    """One message shape of the conversation space: its possible roles, what its ``content`` is (``"absent"``,
    ``"absent-hfjs"``: absent, as @huggingface/jinja's tests see it; ``"chunks"``; ``"text"``) and whether it carries
    ``tool_calls``."""

    roles: frozenset[str]
    content: str
    tool_calls: bool


ABSENT_CONTENT = Turn(frozenset({"assistant"}), "absent", True)
CHUNKED_CONTENT = Turn(frozenset({"system", "user", "assistant"}), "chunks", False)

# what a type test says of ``content`` in each shape (None: it depends); jinja2's undefined is an empty
# iterable sequence, @huggingface/jinja's is neither ("absent-hfjs")
_CONTENT_TESTS = {
    "absent": {"defined": False, "undefined": True, "none": False, "string": False, "mapping": False,
               "number": False, "boolean": False, "iterable": True, "sequence": True},
    "absent-hfjs": {"defined": False, "undefined": True, "none": False, "string": False, "mapping": False,
                    "number": False, "boolean": False, "iterable": False, "sequence": False},
    "chunks": {"defined": True, "undefined": False, "none": False, "string": False, "mapping": False,
               "number": False, "boolean": False, "iterable": True, "sequence": True},
    "text": {"defined": True, "undefined": False, "none": False, "string": True, "mapping": False,
             "number": False, "boolean": False, "iterable": True, "sequence": True},
}
_TOOL_CALLS_TESTS = {True: {"defined": True, "undefined": False, "none": False, "iterable": True, "sequence": True,
                            "string": False, "mapping": False},
                     False: {"defined": False, "undefined": True, "none": False, "string": False, "mapping": False}}


def message_base(expr: Any, ctx: Any, turn: "Turn | None" = None, depth: int = 0) -> str | None:
    """``message`` for ``message['content']`` (or a variable some ``{% set %}`` of which is one, flow-insensitively:
    it may hold the content where it is used; with ``turn``, a ``{% set %}`` that shape cannot get to does not
    count): the path of the message the content is read from, when that message is a loop variable (not one over a
    content's chunks) or ``messages[i]``; None when ``expr`` is no message's content."""
    if isinstance(expr, A.Name):
        if depth >= 3:
            return None
        for value, node in zip(ctx.assignments.get(expr.name, ()), ctx.set_nodes.get(expr.name, ())):
            if value is not None and not isinstance(value, A.Name):
                found = message_base(value, ctx, turn, depth + 1)
                if found is not None and (turn is None or not any(
                        _truth(test, found, turn, ctx) is (not want) for test, want in _path_constraints(node, ctx))):
                    return found
        return None
    if not isinstance(expr, (A.Getattr, A.Getitem)) or not ctx.is_key_ref(expr, "content"):
        return None
    base = expr.node
    if isinstance(base, A.Name) and base.name in ctx.loop_sources and base.name not in ctx.chunk_vars:
        return base.name
    if isinstance(base, A.Getitem) and isinstance(base.node, A.Name) and base.node.name == "messages":
        return _message_key(base, ctx)
    return None


def _message_key(node: Any, ctx: Any) -> str:
    """The path of a message expression as ``message_base`` writes it (``messages[idx]`` when the index is a variable)."""
    return path_key(node) or ctx.source_text(node)


def _field(expr: Any, base: str, ctx: Any, depth: int = 0) -> str | None:
    """``"role"``, ``"content"`` or ``"tool_calls"`` when ``expr`` reads that field of the message at ``base``."""
    expr = strip_filters(expr, frozenset({"lower", "upper", "trim", "string"}))
    if isinstance(expr, A.Call) and isinstance(expr.node, A.Getattr) and expr.node.attr == "get" and expr.args \
            and const_str(expr.args[0]) is not None and _message_key(expr.node.node, ctx) == base:  # ``m.get('role')``
        return expr.args[0].value if expr.args[0].value in ("role", "content", "tool_calls") else None
    key = last_key(expr)
    if key in ("role", "content", "tool_calls") and _message_key(expr.node, ctx) == base:
        return key
    if isinstance(expr, A.Name) and ctx.assignments.get(expr.name) and depth < 3:
        values = ctx.assignments[expr.name]
        fields = {_field(v, base, ctx, depth + 1) if v is not None and not isinstance(v, A.Name) else None
                  for v in values}
        return fields.pop() if len(fields) == 1 else None
    return None


def _truth(expr: Any, base: str, turn: Turn, ctx: Any) -> bool | None:
    """Whether the test ``expr`` holds for a message of shape ``turn`` at ``base`` (None: it depends)."""
    if isinstance(expr, A.Not):
        inner = _truth(expr.operand, base, turn, ctx)
        return None if inner is None else not inner
    if isinstance(expr, (A.And, A.Or)):
        left, right = _truth(expr.left, base, turn, ctx), _truth(expr.right, base, turn, ctx)
        if isinstance(expr, A.And):
            return False if False in (left, right) else True if left is True and right is True else None
        return True if True in (left, right) else False if left is False and right is False else None
    if isinstance(expr, A.Test):
        field = _field(expr.node, base, ctx)
        table = _CONTENT_TESTS.get(turn.content) if field == "content" else \
            _TOOL_CALLS_TESTS[turn.tool_calls] if field == "tool_calls" else None
        found = table.get(expr.name) if table is not None else None
        return None if found is None else found != expr.negated
    if isinstance(expr, A.Compare) and len(expr.ops) == 1:
        op, other = expr.ops[0].op, expr.ops[0].expr
        if isinstance(expr.expr, A.Filter) and expr.expr.name in ("length", "count") and expr.expr.node is not None \
                and isinstance(other, A.Const) and type(other.value) is int:
            return _length_test(_field(expr.expr.node, base, ctx), turn, op, other.value)
        field = _field(expr.expr, base, ctx)
        if field == "role":
            names = _constants(other)
            if names is None:
                return None
            hits = {role in names for role in turn.roles} if op in ("==", "in", "!=", "not in") else {None}
            if op in ("!=", "not in"):
                hits = {not h for h in hits}
            return hits.pop() if len(hits) == 1 else None
        if op in ("in", "not in") and isinstance(other, (A.Name, A.Getattr, A.Getitem)) and \
                const_str(expr.expr) in ("tool_calls", "content") and path_key(other) == base:
            present = turn.tool_calls if const_str(expr.expr) == "tool_calls" else not turn.content.startswith("absent")
            return present == (op == "in")
        if field == "content" and turn.content.startswith("absent") and const_str(other) is not None and op in ("==", "!="):
            return op == "!="
        return None
    field = _field(expr, base, ctx)
    if field == "content":
        return not turn.content.startswith("absent")
    if field == "tool_calls":
        return turn.tool_calls
    return None


def _length_test(field: str | None, turn: Turn, op: str, value: int) -> bool | None:
    """``field|length <op> value`` for the shape: absent content has length 0 in jinja2, the calls one or more."""
    if field == "content" and turn.content.startswith("absent"):
        low, high = 0, 0
    elif field == "tool_calls":
        low, high = (1, None) if turn.tool_calls else (0, 0)
    else:
        return None
    checks = {"==": lambda n: n == value, "!=": lambda n: n != value, ">": lambda n: n > value,
              ">=": lambda n: n >= value, "<": lambda n: n < value, "<=": lambda n: n <= value}
    check = checks.get(op)
    if check is None:
        return None
    at_low = check(low)
    if high is None:  # every length from ``low`` up: decided when the test holds the same way for all of them
        far = check(max(low, value) + 1)
        return at_low if at_low == far and check(max(low, value)) == at_low else None
    return at_low if at_low == check(high) else None


def _constants(expr: Any) -> set[str] | None:
    if const_str(expr) is not None:
        return {expr.value}
    if isinstance(expr, (A.List, A.Tuple)) and all(const_str(i) is not None for i in expr.items):
        return {i.value for i in expr.items}
    return None


def _inside(node: Any, span_start: int, span_end: int) -> bool:
    return span_start <= node.span.start < span_end


TOOL_RESULT = Turn(frozenset({"tool"}), "text", False)
_CLIENT_CALL_ID = "call_1"  # the space's tool-call ids, as OpenAI's API writes them


def _path_constraints(node: Any, ctx: Any) -> list[tuple[Any, bool]]:
    """The tests of the ``if`` arms (``x if c``, ``c and x``, ``c or x``) around ``node``, each with the truth value the
    path to ``node`` needs."""
    out: list[tuple[Any, bool]] = []
    child, parent = node, ctx.parent_of(node)
    while parent is not None:
        if isinstance(parent, A.Elif):
            statement = ctx.parent_of(parent)
            index = statement.elifs.index(parent)
            out += [(parent.test, True), (statement.test, False)] + [(e.test, False) for e in statement.elifs[:index]]
            child, parent = statement, ctx.parent_of(statement)
            continue
        if isinstance(parent, A.If) and child is not parent.test:
            if any(child is s for s in parent.body):
                out.append((parent.test, True))
            elif any(child is s for s in parent.else_body):
                out += [(parent.test, False)] + [(e.test, False) for e in parent.elifs]
        elif isinstance(parent, A.And) and child is parent.right:
            out.append((parent.left, True))
        elif isinstance(parent, A.Or) and child is parent.right:
            out.append((parent.left, False))
        elif isinstance(parent, A.CondExpr) and child is not parent.test:
            out.append((parent.test, child is parent.expr1))
        child, parent = parent, ctx.parent_of(parent)
    return out


def _role_base(tests: list[Any], ctx: Any) -> str | None:
    """The message the role tests among ``tests`` read (``message`` for ``message['role'] == 'tool'``)."""
    for test in tests:
        stack = [test]
        while stack:
            node = stack.pop()
            if isinstance(node, A.Compare):
                subject = strip_filters(node.expr, frozenset({"lower", "upper", "trim", "string"}))
                if last_key(subject) == "role":
                    return _message_key(subject.node, ctx)
            stack.extend(child for child in child_nodes(node) if isinstance(child, A.Expr))
    return None


def _id_length_check(tests: list[Any]) -> bool:
    """A test of an id's length against a number other than the space's ids' (Mistral's ``id|length != 9``)."""
    for test in tests:
        stack = [test]
        while stack:
            node = stack.pop()
            if isinstance(node, A.Compare) and isinstance(node.expr, A.Filter) and node.expr.name == "length" \
                    and node.expr.node is not None and (path_key(node.expr.node) or "").split(".")[-1].endswith("id") \
                    and any(isinstance(op.expr, A.Const) and op.expr.value != len(_CLIENT_CALL_ID) for op in node.ops):
                return True
            stack.extend(child for child in child_nodes(node) if isinstance(child, A.Expr))
    return False


USER_CHUNKS = Turn(frozenset({"user"}), "chunks", False)
# str methods no engine has for a list (the linter's CT001 list, less those llama.cpp maps to filters)
_TEXT_ONLY_METHODS = frozenset("strip lstrip rstrip split rsplit splitlines startswith endswith find rfind index "
                               "rindex count removeprefix removesuffix partition rpartition".split())


def fails_on_chunks(ctx: Any) -> bool:
    """Whether a user turn whose content is a list of text parts fails in every engine: a ``str`` method no engine
    has for lists (``message['content'].strip()``) is called on it where no type test keeps the list away. Every
    conversation of the space with such a turn then fails everywhere, whatever the template did before. Cached."""
    found = ctx.scratch.get("_pt_fails_on_chunks")
    if found is None:
        found = False
        for call in ctx.nodes(A.Call):
            callee = call.node
            if not isinstance(callee, A.Getattr) or callee.attr not in _TEXT_ONLY_METHODS:
                continue
            base = message_base(callee.node, ctx) if not isinstance(callee.node, A.Name) else None
            if base is not None and not any(_truth(test, base, USER_CHUNKS, ctx) is (not want)
                                            for test, want in _path_constraints(call, ctx)):
                found = True
                break
        ctx.scratch["_pt_fails_on_chunks"] = found
    return found


def rejects_tool_turns(ctx: Any) -> bool:
    """Whether the template raises on the space's tool-calling conversations (system, user, an assistant turn with
    calls, tool results, ...) wherever it gets to them: it polices alternation, raises for every ``tool`` turn or
    assistant turn with calls, or checks that tool-call ids have Mistral's 9 characters (clients send ``call_...``).
    Each engine then fails as transformers does. Cached per template."""
    found = ctx.scratch.get("_pt_rejects_tool_turns")
    if found is not None:
        return found
    found = False
    for call in ctx.calls.get("raise_exception", ()):
        constraints = _path_constraints(call, ctx)
        tests = [t for t, _ in constraints]
        if _id_length_check(tests):
            found = True
            break
        base = _role_base(tests, ctx)
        if base is None:
            continue
        truths = {turn: [_truth(t, base, turn, ctx) for t, _ in constraints] for turn in (TOOL_RESULT, ABSENT_CONTENT)}
        wants = [want for _, want in constraints]
        if any("% 2" in ctx.source_text(t) for t in tests):  # alternation: it raises unless these turns are left out
            if not all(any(got is not None and got != want for got, want in zip(truths[turn], wants)) for turn in truths):
                found = True
                break
        elif constraints and any(all(got is want for got, want in zip(truths[turn], wants)) for turn in truths):
            found = True
            break
    ctx.scratch["_pt_rejects_tool_turns"] = found
    return found


def if_arms(statement: A.If) -> list[tuple[Any, int, int]]:
    """``(test, body start, body end)`` of each arm of an ``if``/``elif`` chain (the ``else`` body not included)."""
    ends = [e.span.start for e in statement.elifs]
    ends.append(statement.else_tag.span.start if statement.else_tag is not None else statement.end_tag.span.start)
    tests = [statement.test] + [e.test for e in statement.elifs]
    return [(test, test.span.end, end) for test, end in zip(tests, ends)]


def arm_tests(node: Any, ctx: Any) -> list[Any]:
    """The tests of the enclosing ``if``/``elif`` arms whose body holds ``node`` (visit-time: the dispatch's state)."""
    out = []
    for statement in ctx.statements:
        if isinstance(statement, A.If):
            for test, start, end in if_arms(statement):
                if start <= node.span.start < end:
                    out.append(test)
    return out


def earlier_tests(node: Any, ctx: Any) -> list[Any]:
    """The tests of the ``if``/``elif`` arms that failed on the way to ``node`` (the arms before the one holding it,
    every arm for an ``else`` body). Visit-time."""
    out = []
    for statement in ctx.statements:
        if isinstance(statement, A.If):
            arms = if_arms(statement)
            for index, (test, start, end) in enumerate(arms):
                if start <= node.span.start < end:
                    out += [t for t, _, _ in arms[:index]]
                    break
            else:
                if statement.else_tag is not None and node.span.start >= statement.else_tag.span.start:
                    out += [t for t, _, _ in arms]
    return out


def reaches(node: Any, ctx: Any, turn: Turn, base: str | None) -> bool:
    """Whether a message of shape ``turn`` (read at ``base``) can get to ``node``: no enclosing ``if`` arm, ``x if c``,
    ``c and x`` or loop filter decides against it. Visit-time only (it reads the dispatch walk's state)."""
    if base is None:
        return True
    for statement in ctx.statements:
        if isinstance(statement, A.If):
            arms = if_arms(statement)
            at = node.span.start
            for index, (test, body_start, end) in enumerate(arms):
                if test.span.start <= at < test.span.end:  # in the arm's own test: the earlier arms failed
                    if any(_truth(arms[j][0], base, turn, ctx) is True for j in range(index)):
                        return False
                    break
                if body_start <= at < end:
                    if _truth(test, base, turn, ctx) is False or any(
                            _truth(arms[j][0], base, turn, ctx) is True for j in range(index)):
                        return False
                    break
            else:
                if statement.else_tag is not None and at >= statement.else_tag.span.start and any(
                        _truth(t, base, turn, ctx) is True for t, _, _ in arms):
                    return False
        elif isinstance(statement, A.For) and statement.condition is not None and \
                _inside(node, statement.open_tag.span.end, statement.end_tag.span.start) and \
                _truth(statement.condition, base, turn, ctx) is False:
            return False
    for cond in ctx.innermost.get(A.CondExpr, ()):
        if _inside(node, cond.expr1.span.start, cond.expr1.span.end) and _truth(cond.test, base, turn, ctx) is False:
            return False
        if cond.expr2 is not None and _inside(node, cond.expr2.span.start, cond.expr2.span.end) and \
                _truth(cond.test, base, turn, ctx) is True:
            return False
    for both in ctx.innermost.get(A.And, ()):
        if _inside(node, both.right.span.start, both.right.span.end) and _truth(both.left, base, turn, ctx) is False:
            return False
    for either in ctx.innermost.get(A.Or, ()):
        if _inside(node, either.right.span.start, either.right.span.end) and _truth(either.left, base, turn, ctx) is True:
            return False
    return True
