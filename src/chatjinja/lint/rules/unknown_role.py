"""RL001 unknown-role: a role compared with a literal that is a near miss of a role chat APIs send."""

from __future__ import annotations

from typing import Iterator

from ...syntax import ast as A
from ...syntax.visitor import walk
from ..context import LintContext, const_str
from ..rule import Finding, Rule

DOC = """\
## What it does
Finds a message role compared (`==`, `!=`, `in [...]`, `selectattr('role', 'equalto', ...)`)
with a string that no chat API sends but that is one or two edits away from one, or differs only
in case — also through filters (`m.role|lower == 'asistant'`), a variable (`{% set r = m.role %}`),
a list held in a variable, or a macro parameter the role is passed to: `'asistant'`, `'usr'`,
`'System'`, `'tools'`. Roles chat APIs send: `system`, `user`, `assistant`, `tool`, `developer`
(OpenAI), `function` (legacy OpenAI), `ipython` (Llama 3.1), `model` (Gemma). Unrelated custom
roles (`tool_response`, `document`) are left alone, and so is a role the template declares: one in
the list it validates roles against before raising (`{% if role not in ['system', 'functions'] %}`
`{{ raise_exception(...) }}`).

## Why is this bad?
Roles are compared case-sensitively: a typo makes a branch that never runs, so that turn is
rendered by the wrong branch or dropped, and nothing fails.

## Example
```jinja
{%- for message in messages %}{%- if message['role'] == 'asistant' %}{{- 'A' }}{%- else %}{{- 'U' }}{%- endif %}{%- endfor %}
```

## Use instead
```jinja
{%- for message in messages %}{%- if message['role'] == 'assistant' %}{{- 'A' }}{%- else %}{{- 'U' }}{%- endif %}{%- endfor %}
```

## Fix safety
No fix is applied by `--fix`: the suggested spelling is in the message.
"""

KNOWN_ROLES = ("system", "user", "assistant", "tool", "developer", "function", "ipython", "model")


def _distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def near_miss(value: str, case: str | None = None) -> str | None:
    """The known role ``value`` probably meant, or None when it is known or unrelated.

    ``case`` is ``"upper"``/``"lower"`` when the role was compared after ``|upper``/``|lower``.
    """
    upper = tuple(r.upper() for r in KNOWN_ROLES)
    known = upper if case == "upper" else KNOWN_ROLES + upper if case == "mixed" else KNOWN_ROLES
    if value in known or not value or len(value) > 40:
        return None
    for role in known:
        if value.lower() == role.lower():
            return role
    best = min(known, key=lambda r: _distance(value, r))
    limit = 1 if len(value) <= 4 else 2
    return best if _distance(value, best) <= limit else None


def _literals(ctx: LintContext, expr) -> Iterator:
    """The string constants ``expr`` is or holds (a list literal, or a variable set to one)."""
    for value in ctx.values(expr):
        if const_str(value) is not None:
            yield value
        elif isinstance(value, (A.List, A.Tuple)):
            for item in value.items:
                if const_str(item) is not None:
                    yield item


def role_literals(ctx: LintContext, node) -> Iterator[tuple]:
    """(string constant, role key, operator, case) for every literal a role is compared with in ``node``
    (a ``Compare`` or a ``selectattr``/``rejectattr`` filter); case is the ``|upper``/``|lower`` it went through."""
    if isinstance(node, A.Compare):
        left = node.expr
        for operand in node.ops:
            right = operand.expr
            op = operand.op
            if op in ("==", "!="):
                for subject, other in ((left, right), (right, left)):
                    key = ctx.role_expr(subject) if const_str(other) is not None or isinstance(other, A.Name) else None
                    if key is not None:
                        for lit in _literals(ctx, other):
                            yield lit, key, op, ctx.role_case(subject)
            elif op in ("in", "not in"):
                key = ctx.role_expr(left)
                if key is not None:
                    for lit in _literals(ctx, right):
                        yield lit, key, op, ctx.role_case(left)
            left = right
    elif isinstance(node, A.Filter) and node.name in ("selectattr", "rejectattr") and len(node.args) >= 3:
        if const_str(node.args[0]) == "role" and const_str(node.args[1]) in ("equalto", "==", "eq", "in", "ne", "!="):
            for lit in _literals(ctx, node.args[2]):
                yield lit, "role", node.name, None


def _declared(ctx: LintContext) -> set[str]:
    """Roles the template declares it supports: the list it checks roles against before raising
    (``{% if role not in ['system', 'functions', ...] %}{{ raise_exception(...) }}``)."""
    found = ctx.scratch.get("RL001")
    if found is None:
        found = set()
        for node in ctx.nodes(A.If):
            if not any(isinstance(s, A.Output) and isinstance(s.expr, A.Call) and isinstance(s.expr.node, A.Name)
                       and s.expr.node.name == "raise_exception" for s in node.body):
                continue
            for compare in (n for n in walk(node.test) if isinstance(n, A.Compare)):
                for lit, _key, op, case in role_literals(ctx, compare):
                    if op == "not in":
                        found.add(lit.value.lower() if case else lit.value)
        ctx.scratch["RL001"] = found
    return found


def check(node, ctx: LintContext) -> Iterator[Finding]:
    for lit, key, _op, case in role_literals(ctx, node):
        if (lit.value.lower() if case else lit.value) in _declared(ctx):
            continue  # a custom role the template declares and validates
        meant = near_miss(lit.value, case)
        if meant is not None:
            yield Finding(lit.span.start, lit.span.end, f"{key} is compared with {ctx.source_text(lit)}, a role no chat "
                          f"API sends; did you mean '{meant}'?")


RULE = Rule("RL001", "unknown-role", "warning", "A role is compared with a misspelt role name", DOC,
            (A.Compare, A.Filter), check)
