"""SC005 resource-abuse: literal sizes far beyond any prompt, huge nested loops, doubling, endless recursion."""

from __future__ import annotations

import re
from typing import Iterator

from ...syntax import ast as A
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
`{% set ns.n = ns.n * ns.n %}`); and a
macro that calls itself outside any `{% if %}`, i.e. on every path.

## Why is this bad?
No chat prompt is that large. A template from an untrusted model repository can use these to
exhaust memory or CPU in the process that renders it (a denial of service on an inference
server).

## Example
```jinja
{{- 'A' * 100000000 }}
```

## Use instead
```jinja
{{- 'A' * 3 }}
```

## Fix safety
No fix.
"""

LIMIT = 100_000
LIST_LIMIT = 1_000  # a list literal repeated this often (its items may be the caller's megabyte strings)
EXPONENT_LIMIT = 1_000
NESTED_LIMIT = 1_000_000
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


def _binop(node: A.BinOp, ctx: LintContext) -> Iterator[Finding]:
    if node.op == "**":
        exponent = _number(ctx, node.right)
        if exponent is not None and exponent >= EXPONENT_LIMIT:
            yield Finding(_op_at(ctx, node), node.right.span.end, f"exponent {exponent:g} is far beyond the size of any "
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
            yield Finding(start, end, f"repetition by {count:g} is far beyond the size of any prompt (resource abuse)")
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
        yield Finding(start if start != -1 else node.span.start, node.span.end, f"|{node.name} width {value:g} is far "
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
            yield Finding(node.span.start, node.span.end, f".{callee.attr}() width {value:g} is far beyond the size "
                          "of any prompt (resource abuse)")
        return
    if isinstance(callee, A.Name):
        if callee.name == "lipsum":
            value = _big_argument(ctx, node)
            if value is not None:
                yield Finding(node.span.start, node.span.end, f"lipsum({value:g}) is far beyond the size of any prompt "
                              "(resource abuse)")
            return
        size = _range_size(ctx, node)
        if size is not None and size >= LIMIT:
            yield Finding(node.span.start, node.span.end, f"range of {size:g} is far beyond the size of any prompt "
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


def _const(node: A.Const, ctx: LintContext) -> Iterator[Finding]:
    text = const_str(node)
    if text is None or ("%" not in text and "{" not in text):
        return
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
        yield Finding(span.start, span.end, f"nested range loops run {product:g} times (resource abuse)")


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


def _set(node: A.Set, ctx: LintContext) -> Iterator[Finding]:
    if not ctx.inside(A.For):
        return
    target = node.target
    key = target.name if isinstance(target, A.Name) else f"{target.name}.{target.attr}" if isinstance(target, A.NSRef) else None
    if key is not None and _grows(key, node.value):
        span = node.tag.span
        yield Finding(span.start, span.end, "a value doubled on every loop iteration grows exponentially (resource abuse)")


def _entered(node, ctx: LintContext) -> Iterator[Finding]:
    """Remember how many conditionals enclose a macro or loop, to tell later whether a call inside is conditional."""
    ctx.scratch.setdefault("SC005", {})[id(node)] = tuple(ctx.open_counts[k] for k in _LOOP_GUARDS)
    return iter(())


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
           A.Macro: _entered}


def check(node, ctx: LintContext) -> Iterator[Finding]:
    return _CHECKS[type(node)](node, ctx)


RULE = Rule("SC005", "resource-abuse", "error", "A shape that makes rendering take unbounded time or memory", DOC,
            tuple(_CHECKS), check, finish)
