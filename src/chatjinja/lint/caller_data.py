"""Whether an expression is (part of) what the caller passed in: ``messages``, ``tools``, a loop variable over them ..."""

from __future__ import annotations

from typing import Any

from ..syntax import ast as A
from .context import LintContext

__all__ = ["caller_data", "CONTEXT_GLOBALS"]

# names of the render context that are not the caller's data
CONTEXT_GLOBALS = frozenset({"namespace", "range", "dict", "raise_exception", "strftime_now", "lipsum", "cycler",
                             "joiner", "loop", "caller", "varargs", "kwargs", "true", "false", "none", "True", "False",
                             "None"})


def caller_data(ctx: LintContext, expr: Any, depth: int = 0) -> bool:
    """Whether ``expr`` is (part of) the caller's data, followed through ``{% set %}`` variables, loop variables,
    namespace attributes and macro parameters (a name nothing assigns is the caller's)."""
    if depth > 6:
        return False
    while isinstance(expr, (A.Getattr, A.Getitem, A.Filter)) and expr.node is not None:
        if isinstance(expr, A.Getattr) and isinstance(expr.node, A.Name):
            values = list(ctx.namespace_values(expr.node.name, expr.attr))
            if values:
                return any(caller_data(ctx, v, depth + 1) for v in values)
        expr = expr.node
    if not isinstance(expr, A.Name):
        return False
    name = expr.name
    if name in ctx.loop_sources:
        key = (name, None, depth)
    elif name in ctx.assignments:
        key = (name, None, depth)
    else:
        macro = ctx.enclosing_macro_of(expr)
        if macro is None or not any(p.name == name for p in macro.params):
            return name not in CONTEXT_GLOBALS
        key = (name, id(macro), depth)
    cache = ctx.scratch.setdefault("_caller_data", {})  # a name resolves alike wherever it is read
    found = cache.get(key)
    if found is None:
        cache[key] = False  # a cycle of assignments is not the caller's data
        found = cache[key] = _name_is_caller_data(ctx, expr, depth)
    return found


def _name_is_caller_data(ctx: LintContext, expr: A.Name, depth: int) -> bool:
    name = expr.name
    if name in ctx.loop_sources:
        return any(caller_data(ctx, source, depth + 1) for source in ctx.loop_sources[name])
    if name in ctx.assignments:
        return any(v is not None and not isinstance(v, (A.List, A.Dict, A.Tuple)) and caller_data(ctx, v, depth + 1)
                   for v in ctx.assignments[name])
    return any(caller_data(ctx, v, depth + 1) for v in ctx.param_values(expr))
