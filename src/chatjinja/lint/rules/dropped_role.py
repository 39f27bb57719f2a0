"""RL002 dropped-role: a standard role that no branch renders and nothing rejects."""

from __future__ import annotations

from typing import Iterable, Iterator

from ...syntax import ast as A
from ...syntax.visitor import child_nodes
from ..context import LintContext
from ..rule import Finding, Rule
from .unknown_role import role_literals

DOC = """\
## What it does
Finds the `{% if %}` chain that dispatches on a message's role inside the message loop and has
no `{% else %}`, and reports each of `system`, `user`, `assistant` and `tool` that the template
never names in any role comparison — when the template also never prints the role itself and
never tests a role with `!=` / `not in` (which sends every other role down a branch). Such
messages match no branch: they are silently left out of the prompt.

Role comparisons are found on the AST, through filters and variables. The analyser's facts then
confirm `system`, `user` and `assistant`: each is reported only when the analyser also predicts
that its messages are not rendered (`Capabilities.roles`) and no `raise_exception` site names it;
`tool` keeps the syntactic check (its probe is a whole tool round trip).

## Why is this bad?
A conversation with a `tool` result (or a system prompt) renders without error but the model
never sees that message. Either render it or `raise_exception` in an `{% else %}` branch.

## Example
```jinja
{%- for message in messages %}{%- if message.role == 'user' %}{{- 'U' }}{%- elif message.role == 'assistant' %}{{- 'A' }}{%- elif message.role == 'system' %}{{- 'S' }}{%- endif %}{%- endfor %}
```

## Use instead
```jinja
{%- for message in messages %}{%- if message.role == 'user' %}{{- 'U' }}{%- elif message.role == 'assistant' %}{{- 'A' }}{%- elif message.role == 'system' %}{{- 'S' }}{%- else %}{{- raise_exception('unsupported role') }}{%- endif %}{%- endfor %}
```

## Fix safety
No fix.
"""

STANDARD_ROLES = ("system", "user", "assistant", "tool")


def check(node, ctx: LintContext) -> Iterator[Finding]:
    state = ctx.scratch.setdefault("RL002", {"named": set(), "negative": False, "chains": [], "tests": {}})
    for lit, _key, op, case in role_literals(ctx, node):
        state["named"].add(lit.value.lower() if case == "upper" else lit.value)
        if op in ("!=", "not in", "rejectattr"):
            state["negative"] = True
        if ctx.inside(A.For):
            statement = ctx.statement()
            if isinstance(statement, A.If) and statement.test is not None:
                state["chains"].append(statement)
    return ()


def _prints_role(ctx: LintContext) -> bool:
    """Whether the template writes a message's role into the prompt (then every role is rendered)."""
    carriers = set()
    for name, values in ctx.assignments.items():
        if any(v is not None and _uncompared_role(ctx, v) for v in values):
            carriers.add(name)
    for output in ctx.nodes(A.Output):
        if _uncompared_role(ctx, output.expr):
            return True
        if carriers and _mentions(output.expr, carriers):
            return True
    return False


def _uncompared_role(ctx: LintContext, expr) -> bool:
    stack = [(expr, None)]
    while stack:
        node, parent = stack.pop()
        if ctx.role_expr(node) is not None and not isinstance(node, A.Name):
            if not isinstance(parent, (A.Compare, A.Operand, A.Test)):
                return True
            continue
        if isinstance(node, (A.Compare, A.Test)) or (isinstance(node, A.Call) and isinstance(node.node, A.Name)
                                                     and node.node.name == "raise_exception"):
            continue
        for child in child_nodes(node):
            stack.append((child, node))
    return False


def _mentions(expr, names: set[str]) -> bool:
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, A.Name) and node.name in names:
            return True
        stack.extend(child_nodes(node))
    return False


def _facts_missing(caps, lexical: list[str]) -> list[str]:
    """system/user/assistant the analyser predicts are not rendered and no raise names; ``tool`` from the syntax."""
    tool = [r for r in lexical if r == "tool"]
    if any(site.kind == "role" and not site.roles for site in caps.raises):
        return tool  # an "unsupported role" raise the analyser could not attribute: assume it rejects the rest
    rejected = {role for site in caps.raises for role in site.roles}
    simple = ("system", "user", "assistant")
    missing = [r for r in simple if r not in caps.roles and r not in rejected]
    if len(missing) == len(simple):
        return tool  # renders no message at all: not a role dispatch
    return missing + tool


def finish(ctx: LintContext) -> Iterator[Finding]:
    state = ctx.scratch.get("RL002")
    if state is None or state["negative"] or not state["chains"]:
        return
    chains = []
    seen = set()
    for chain in state["chains"]:
        if id(chain) in seen:
            continue
        seen.add(id(chain))
        if chain.else_tag is not None:
            return  # a dispatch with an else: every role is rendered or rejected there
        chains.append(chain)
    if _prints_role(ctx):
        return
    missing = [r for r in STANDARD_ROLES if r not in state["named"]]
    caps = ctx.facts
    if caps is not None:
        missing = _facts_missing(caps, missing)
    if not missing:
        return
    anchor = max(chains, key=lambda c: (1 + len(c.elifs), -c.span.start))
    roles = ", ".join(f"'{r}'" for r in STANDARD_ROLES if r in missing)
    span = anchor.open_tag.span
    yield Finding(span.start, span.end, f"messages with role {roles} are not rendered by this role dispatch and "
                  "nothing raises: they are silently dropped")


RULE = Rule("RL002", "dropped-role", "warning", "Messages of a standard role are silently dropped", DOC,
            (A.Compare, A.Filter), check, finish)
