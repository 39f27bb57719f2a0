"""SC005 resource-abuse: literal sizes far beyond any prompt, huge nested loops, doubling, endless recursion."""

from __future__ import annotations

import math
import re
from typing import Iterable, Iterator

from ...syntax import ast as A
from ...syntax.visitor import iter_child_nodes, walk
from ..caller_data import caller_data
from ..context import LintContext, const_str, constant, path_key
from ..rule import Finding, Rule

DOC = """\
## What it does
Reports shapes that make a render take unbounded time or memory:
a literal repetition count, width, indent or range size of 100,000 or more (`'x' * 10**6`,
`range(1000000)`, `|indent(100000)`, `|center(...)`, `|tojson(indent=...)`, `.zfill(...)`, `.to_bytes(...)`,
`'%999999s'|format(...)`, `'%*d' % (1000000, 1)`, `'{:>1000000}'`), also when the number is held in
a `{% set %}` variable or computed from literals (`10 ** 6`, `1000 * 1000`); an exponent of
1,000 or more (`**`); `range` loops nested so that their sizes multiply to 1,000,000 or more;
a variable doubled or squared inside a loop (`{% set s = s + s %}`, `{% set ns.x = ns.x * 2 %}`,
`{% set ns.n = ns.n * ns.n %}`); a
macro that calls itself outside any `{% if %}`, i.e. on every path; a macro that calls itself two or
more times per call with only a counter argument (`m(n - 1)`) to bound it, started at a number that
makes 1,000,000 calls or more or at one the template does not fix (a macro that walks parts of its
argument, such as a JSON schema, is bounded by the caller's data and not reported); 100 or more
comparisons of two values of the caller's data (`a == b`, `a in b`, `a is in b`, counting each
`range` loop of literal size as that many); and a `range` loop of 1,000 or more literal steps that keeps
a piece of the caller's data on every step (`{% set ns.l = ns.l + [messages[0].content[1:]] %}`).

## Why is this bad?
No chat prompt is that large. A template from an untrusted model repository can use these to
exhaust memory or CPU in the process that renders it (a denial of service on an inference
server).

## Example
```jinja
{{- 'A' * 100000000 }}
```

The shapes whose cost multiplies the caller's data:
```jinja
{%- macro m(n) %}{%- if n > 0 %}{{- m(n - 1) }}{{- m(n - 1) }}{%- endif %}{%- endmacro %}{{- m(40) }}
```
```jinja
{%- set a = messages[0].content %}{%- for i in range(1000) %}{%- if a == messages[1].content %}{%- endif %}{%- endfor %}
```
```jinja
{%- set ns = namespace(l=[]) %}{%- for i in range(1000) %}{%- set ns.l = ns.l + [messages[0].content[1:]] %}{%- endfor %}{{- ns.l|length }}
```

## Use instead
```jinja
{{- 'A' * 3 }}
```

## Fix safety
No fix.
"""

LIMIT = 100_000
def _amount(value: float) -> str:
    """A size as the findings print it (``1e+06``); an integer too large for a float is "more than 1e+308"."""
    try:
        return f"{value:g}"
    except OverflowError:
        return "more than 1e+308"


LIST_LIMIT = 1_000  # a list literal repeated this often (its items may be the caller's megabyte strings)
EXPONENT_LIMIT = 1_000
NESTED_LIMIT = 1_000_000
COMPARE_LIMIT = 100  # comparisons of two caller values a render makes (each reads both values whole)
_COMPARING_TESTS = frozenset({"in", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt",
                              "greaterthan", ">", "ge", ">="})
_WIDTH_FILTERS = frozenset({"indent", "center", "wordwrap", "truncate", "format", "batch", "slice", "tojson", "filesizeformat"})
_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs", "format", "format_map", "to_bytes"})
_PRINTF_WIDTH = re.compile(r"%[-+ 0#]*(\d+)")
_FORMAT_WIDTH = re.compile(r"\{[^{}]*:[^{}]*?(\d+)[^{}]*\}")
_LOOP_GUARDS = (A.If, A.For, A.CondExpr, A.And, A.Or)


def _number(ctx: LintContext, expr) -> float | None:
    value = constant(ctx, expr)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def _factor(ctx: LintContext, expr) -> float:
    """The product of the numeric factors of a ``*`` chain (``'ab' * 1000 * 1000`` → 1,000,000)."""
    if isinstance(expr, A.BinOp) and expr.op == "*":
        return _factor(ctx, expr.left) * _factor(ctx, expr.right)
    value = _number(ctx, expr)
    return abs(value) if value is not None else 1


def _op_at(ctx: LintContext, node: A.BinOp) -> int:
    at = ctx.text.find(node.op, node.left.span.end, node.right.span.start)
    return at if at != -1 else node.span.start


def _range_size(ctx: LintContext, expr) -> float | None:
    if not (isinstance(expr, A.Call) and isinstance(expr.node, A.Name) and expr.node.name == "range"):
        return None
    args = [_number(ctx, a) for a in expr.args]
    if not args or any(a is None for a in args):
        return None
    if len(args) == 1:
        return args[0]
    step = args[2] if len(args) > 2 and args[2] else 1
    return max(0, (args[1] - args[0]) // abs(step))


_SIZED_OPS = frozenset({"**", "*", "%"})


def _binop(node: A.BinOp, ctx: LintContext) -> Iterable[Finding]:
    return _binop_sizes(node, ctx) if node.op in _SIZED_OPS else ()  # (``+`` chains: nothing to size)


def _binop_sizes(node: A.BinOp, ctx: LintContext) -> Iterator[Finding]:
    if node.op == "**":
        exponent = _number(ctx, node.right)
        if exponent is not None and exponent >= EXPONENT_LIMIT:
            yield Finding(_op_at(ctx, node), node.right.span.end, f"exponent {_amount(exponent)} is far beyond the size of any "
                          "prompt (resource abuse)")
    elif node.op == "*":
        parent = ctx.parent_of(node)
        if isinstance(parent, A.BinOp) and parent.op == "*":
            return  # the whole chain is judged at its top
        count = _factor(ctx, node)
        lists = isinstance(node.left, A.List) or isinstance(node.right, A.List)
        if count >= LIMIT or (lists and count >= LIST_LIMIT):
            op = _op_at(ctx, node)
            right = _number(ctx, node.right)
            start, end = (op, node.span.end) if right is not None and abs(right) >= LIMIT or _number(ctx, node.left) is None \
                else (node.span.start, op + 1)
            yield Finding(start, end, f"repetition by {_amount(count)} is far beyond the size of any prompt (resource abuse)")
    elif node.op == "%" and isinstance(node.right, (A.Tuple, A.List)):
        text = const_str(node.left) or ""
        if "*" in text and any((_number(ctx, item) or 0) >= LIMIT for item in node.right.items):
            yield Finding(node.span.start, node.span.end, "a '*' width of 100,000 or more is far beyond the size of "
                          "any prompt (resource abuse)")


def _big_argument(ctx: LintContext, node) -> float | None:
    for arg in (*node.args, *(kw.value for kw in node.kwargs)):
        value = _number(ctx, arg)
        if value is not None and value >= LIMIT:
            return value
    return None


def _empty_replace(ctx: LintContext, node) -> bool:
    return bool(node.args) and constant(ctx, node.args[0]) == ""


def _filter(node: A.Filter, ctx: LintContext) -> Iterator[Finding]:
    if node.name == "replace" and _empty_replace(ctx, node):
        yield Finding(node.span.start, node.span.end, "replacing the empty string inserts the replacement between "
                      "every character: the size multiplies (resource abuse)")
        return
    if node.name in ("map", "select", "reject") and node.args and const_str(node.args[0]) in _WIDTH_FILTERS:
        pass  # map('center', 15000000): the width filter applied to every item
    elif node.name not in _WIDTH_FILTERS:
        return
    value = _big_argument(ctx, node)
    if value is not None:
        start = ctx.text.find(node.name, node.node.span.end if node.node is not None else node.span.start)
        yield Finding(start if start != -1 else node.span.start, node.span.end, f"|{node.name} width {_amount(value)} is far "
                      "beyond the size of any prompt (resource abuse)")


def _call(node: A.Call, ctx: LintContext) -> Iterator[Finding]:
    callee = node.node
    if isinstance(callee, A.Getattr) and callee.attr == "replace" and _empty_replace(ctx, node):
        yield Finding(node.span.start, node.span.end, "replacing the empty string inserts the replacement between "
                      "every character: the size multiplies (resource abuse)")
        return
    if isinstance(callee, A.Getattr) and callee.attr in _WIDTH_METHODS:
        value = _big_argument(ctx, node)
        if value is not None:
            yield Finding(node.span.start, node.span.end, f".{callee.attr}() width {_amount(value)} is far beyond the size "
                          "of any prompt (resource abuse)")
        return
    if isinstance(callee, A.Name):
        if callee.name == "lipsum":
            value = _big_argument(ctx, node)
            if value is not None:
                yield Finding(node.span.start, node.span.end, f"lipsum({_amount(value)}) is far beyond the size of any prompt "
                              "(resource abuse)")
            return
        size = _range_size(ctx, node)
        if size is not None and size >= LIMIT:
            yield Finding(node.span.start, node.span.end, f"range of {_amount(size)} is far beyond the size of any prompt "
                          "(resource abuse)")
            return
        if callee.name == "loop":
            loop = ctx.enclosing(A.For)
            if loop is not None and loop.recursive and _unconditional(ctx, loop):
                yield Finding(callee.span.start, callee.span.end, "the recursive loop calls loop() on every path: "
                              "the recursion never ends (resource abuse)")
            return
        macro = ctx.enclosing(A.Macro)
        if macro is not None and _unconditional(ctx, macro):
            if callee.name == macro.name:
                yield Finding(callee.span.start, callee.span.end, f"macro '{macro.name}' calls itself on every path: "
                              "the recursion never ends (resource abuse)")
            else:
                ctx.scratch.setdefault("SC005-calls", []).append((macro.name, callee))


def _const(node: A.Const, ctx: LintContext) -> Iterable[Finding]:
    text = node.value
    if not isinstance(text, str) or ("%" not in text and "{" not in text):
        return ()
    return _widths(node, text)


def _widths(node: A.Const, text: str) -> Iterator[Finding]:
    for pattern in (_PRINTF_WIDTH, _FORMAT_WIDTH):
        for m in pattern.finditer(text):
            if int(m.group(1)) >= LIMIT:
                yield Finding(node.span.start, node.span.end, f"format width {int(m.group(1))} is far beyond the size "
                              "of any prompt (resource abuse)")
                return


def _for(node: A.For, ctx: LintContext) -> Iterator[Finding]:
    if node.recursive:
        _entered(node, ctx)
    size = _range_size(ctx, node.iter)
    if size is None or size >= LIMIT:
        return
    product, outer = size, 0
    for loop in ctx.innermost.get(A.For, ()):
        s = _range_size(ctx, loop.iter)
        if s is not None:
            product *= s
            outer += 1
    if outer and product >= NESTED_LIMIT:
        span = node.open_tag.span
        yield Finding(span.start, span.end, f"nested range loops run {_amount(product)} times (resource abuse)")


def _grows(target: str, value) -> bool:
    """``x + x``, ``x ~ x``, ``x * 2``, ``2 * x``, ``x * x`` (also for ``ns.x``)."""
    if isinstance(value, A.Concat):
        return len(value.items) >= 2 and sum(path_key(i) == target for i in value.items) >= 2
    if isinstance(value, A.BinOp) and value.op in ("+", "*"):
        left, right = path_key(value.left), path_key(value.right)
        if left == target and right == target:
            return True
        if value.op == "*":
            for mine, other in ((left, value.right), (right, value.left)):
                number = constant(None, other)
                if mine == target and isinstance(number, (int, float)) and not isinstance(number, bool) and number >= 2:
                    return True
    return False


def _kept(ctx: LintContext, target: str, value) -> bool:
    """``x + [item]``, ``x ~ item``, ``x + item`` where ``item`` holds the caller's data: ``x`` keeps a copy per step."""
    if isinstance(value, A.Concat):
        items = value.items
    elif isinstance(value, A.BinOp) and value.op == "+":
        items = (value.left, value.right)
    else:
        return False
    if not any(path_key(i) == target for i in items):
        return False
    return any(isinstance(n, A.Name) and caller_data(ctx, n)
               for item in items if path_key(item) != target for n in walk(item))


def _set(node: A.Set, ctx: LintContext) -> Iterator[Finding]:
    if not ctx.inside(A.For):
        return
    target = node.target
    key = target.name if isinstance(target, A.Name) else f"{target.name}.{target.attr}" if isinstance(target, A.NSRef) else None
    if key is None:
        return
    span = node.tag.span
    if _grows(key, node.value):
        yield Finding(span.start, span.end, "a value doubled on every loop iteration grows exponentially (resource abuse)")
        return
    steps = _literal_steps(ctx)
    if steps >= LIST_LIMIT and _kept(ctx, key, node.value):
        yield Finding(span.start, span.end, f"a loop of {_amount(steps)} literal steps keeps a piece of the caller's data "
                      "on every step: memory grows with the step count times the input (resource abuse)")


def _compare(node, ctx: LintContext) -> Iterator[Finding]:
    """Count comparisons of two caller values (``a == b``, ``a in b``, ``a is in b``); ``finish`` judges the total."""
    if isinstance(node, A.Test):
        pairs = [(node.node, node.args[0])] if node.name in _COMPARING_TESTS and node.args else []
    else:
        pairs, left = [], node.expr
        for operand in node.ops:
            pairs.append((left, operand.expr))
            left = operand.expr
    found = ctx.scratch.setdefault("SC005-compares", [])
    for left, right in pairs:
        if caller_data(ctx, left) and caller_data(ctx, right):
            found.append((node, _literal_steps(ctx)))
    return ()


def _literal_steps(ctx: LintContext) -> float:
    """How often the visited node runs per render as far as the template fixes it: the product of the sizes of the
    enclosing ``range`` loops of literal size (a loop over the caller's data counts once)."""
    steps = 1
    for loop in ctx.innermost.get(A.For, ()):
        size = _range_size(ctx, loop.iter)
        steps *= size if size is not None and size > 1 else 1
    return steps


def _macro(node: A.Macro, ctx: LintContext) -> Iterator[Finding]:
    _entered(node, ctx)
    if sum(node.span.start <= c.span.start < node.span.end for c in ctx.calls.get(node.name, ())) < 2:
        return
    calls = _fanout(ctx, node.body, node.name)
    if calls < 2:
        return
    size = _recursion_size(ctx, node, calls)
    if size is not None and size >= NESTED_LIMIT:
        span = node.open_tag.span
        bound = f"{size:.3g} calls" if size < _UNBOUNDED else "a number of calls exponential in its argument"
        yield Finding(span.start, span.end, f"macro '{node.name}' calls itself {_amount(calls)} times per call with a counter "
                      f"as its only bound: {bound} (resource abuse)")


_UNBOUNDED = float("inf")


def _fanout(ctx: LintContext, body, name: str) -> float:
    """The most self-calls of macro ``name`` one execution of ``body`` makes (the branches of an ``if`` exclude
    each other; a ``range`` loop of a literal size repeats its body that often)."""
    if isinstance(body, (tuple, list)):
        return sum(_fanout(ctx, n, name) for n in body)
    if body is None or isinstance(body, A.Macro):
        return 0
    if isinstance(body, A.If):
        arms = [_fanout(ctx, body.body, name), _fanout(ctx, body.else_body, name)]
        arms += [_fanout(ctx, arm.test, name) + _fanout(ctx, arm.body, name) for arm in body.elifs]
        return _fanout(ctx, body.test, name) + max(arms)
    if isinstance(body, A.CondExpr):
        return _fanout(ctx, body.test, name) + max(_fanout(ctx, body.expr1, name), _fanout(ctx, body.expr2, name))
    if isinstance(body, A.For):
        size = _range_size(ctx, body.iter)
        repeat = min(size, LIMIT) if size is not None and size > 1 else 1
        inner = _fanout(ctx, body.body, name) + _fanout(ctx, body.condition, name)
        return _fanout(ctx, body.iter, name) + repeat * inner + _fanout(ctx, body.else_body, name)
    own = 1 if isinstance(body, A.Call) and isinstance(body.node, A.Name) and body.node.name == name else 0
    return own + sum(_fanout(ctx, child, name) for child in iter_child_nodes(body))


def _recursion_size(ctx: LintContext, macro: A.Macro, fanout: float) -> float | None:
    """``fanout ** depth`` when every self-call passes the macro's parameters through arithmetic only (nothing
    structural shrinks) and one parameter counts down by a constant: the depth is its first value over the step.
    None when some argument is not arithmetic on parameters (a schema walked part by part is bounded by its size)."""
    params = [p.name for p in macro.params]
    inside = [c for c in ctx.calls.get(macro.name, ()) if macro.span.start <= c.span.start < macro.span.end]
    steps: dict[str, set] = {p: set() for p in params}
    for call in inside:
        passed = {**dict(zip(params, call.args)), **{kw.key: kw.value for kw in call.kwargs}}
        if call.dyn_args is not None or call.dyn_kwargs is not None:
            return None
        for arg in passed.values():
            if not all(isinstance(n, (A.BinOp, A.UnaryOp, A.Const)) or isinstance(n, A.Name) and n.name in params
                       for n in walk(arg)):
                return None
        for param in params:
            arg = passed.get(param)
            step = None
            if isinstance(arg, A.BinOp) and arg.op == "-" and isinstance(arg.left, A.Name) and arg.left.name == param:
                number = _number(ctx, arg.right)
                step = number if number is not None and number > 0 else None
            steps[param].add(step)
    counters = [p for p in params if steps[p] and None not in steps[p]]
    if not counters:
        return None
    param = counters[0]
    index = params.index(param)
    outside = [c for c in ctx.calls.get(macro.name, ()) if not macro.span.start <= c.span.start < macro.span.end]
    firsts = []
    for call in outside:
        arg = call.args[index] if index < len(call.args) else next(
            (kw.value for kw in call.kwargs if kw.key == param), macro.params[index].default)
        firsts.append(_number(ctx, arg) if arg is not None else None)
    if not firsts:
        return None
    if any(first is None for first in firsts):
        return _UNBOUNDED  # the depth is a value the template does not fix
    depth = max(firsts) / min(steps[param])
    return _UNBOUNDED if depth * math.log10(fanout) > 300 else float(fanout) ** depth


def _entered(node, ctx: LintContext) -> Iterator[Finding]:
    """Remember how many conditionals enclose a macro or loop, to tell later whether a call inside is conditional."""
    ctx.scratch.setdefault("SC005", {})[id(node)] = tuple(ctx.open_counts[k] for k in _LOOP_GUARDS)
    return ()


def _unconditional(ctx: LintContext, owner) -> bool:
    """No ``if``, loop, ``x if c`` or ``and``/``or`` between ``owner`` (a macro or a loop) and the node visited."""
    before = ctx.scratch.get("SC005", {}).get(id(owner))
    if before is None:
        return False
    now = [ctx.open_counts[k] for k in _LOOP_GUARDS]
    if isinstance(owner, A.For):
        now[_LOOP_GUARDS.index(A.For)] -= 1  # the loop itself
    return before == tuple(now)


def finish(ctx: LintContext) -> Iterator[Finding]:
    yield from _many_comparisons(ctx)
    yield from _call_cycles(ctx)


def _many_comparisons(ctx: LintContext) -> Iterator[Finding]:
    """``COMPARE_LIMIT`` or more comparisons of two caller values: each reads both whole, so the template multiplies
    the cost of the caller's largest strings by a count it chose."""
    found = ctx.scratch.get("SC005-compares", ())
    total = sum(steps for _, steps in found)
    if total >= COMPARE_LIMIT:
        first = found[0][0]
        yield Finding(first.span.start, first.span.end, f"{_amount(total)} comparisons of two values of the caller's "
                      "data: each reads both whole, so the render costs that many times the input (resource abuse)")


def _call_cycles(ctx: LintContext) -> Iterator[Finding]:
    """Macros that call each other on every path (``a`` calls ``b``, ``b`` calls ``a``): a cycle never ends."""
    edges: dict[str, list] = {}
    for caller, call in ctx.scratch.get("SC005-calls", ()):
        if call.name in ctx.macros:
            edges.setdefault(caller, []).append(call)
    reported: set[str] = set()
    for start in edges:
        path = [start]
        seen = {start}
        todo = [(start, iter(edges.get(start, ())))]
        while todo:
            name, calls = todo[-1]
            call = next(calls, None)
            if call is None:
                todo.pop()
                path.pop()
                continue
            if call.name == start and start not in reported:
                reported.update(path)
                cycle = " -> ".join([*path, start])
                yield Finding(call.span.start, call.span.end, f"macros call each other on every path ({cycle}): "
                              "the recursion never ends (resource abuse)")
                break
            if call.name not in seen:
                seen.add(call.name)
                path.append(call.name)
                todo.append((call.name, iter(edges.get(call.name, ()))))


_CHECKS = {A.BinOp: _binop, A.Filter: _filter, A.Call: _call, A.Const: _const, A.For: _for, A.Set: _set,
           A.Macro: _macro, A.Compare: _compare, A.Test: _compare}


def check(node, ctx: LintContext) -> Iterator[Finding]:
    return _CHECKS[type(node)](node, ctx)


RULE = Rule("SC005", "resource-abuse", "error", "A shape that makes rendering take unbounded time or memory", DOC,
            tuple(_CHECKS), check, finish, checks=_CHECKS)
