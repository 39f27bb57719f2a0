"""RL002 dropped-role: a standard role that no branch renders and nothing rejects."""

from __future__ import annotations

from typing import Iterator

from ..model import TemplateModel
from ..rule import Finding, Rule
from .unknown_role import role_literals

DOC = """\
## What it does
Finds the `{% if %}` chain that dispatches on a message's role inside the message loop and has
no `{% else %}`, and reports each of `system`, `user`, `assistant` and `tool` that the template
never names in any role comparison — when the template also never prints the role itself and
never tests a role with `!=` / `not in` (which sends every other role down a branch). Such
messages match no branch: they are silently left out of the prompt.

With the analyser's facts (`chatjinja lint --deep`, or `capabilities=` in the library), `system`,
`user` and `assistant` are reported when the analyser predicts their messages are not rendered
(`Capabilities.roles`) and no `raise_exception` site names them; `tool` keeps the lexical check.

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


def _uncompared_role_refs(model: TemplateModel, tag):
    """Role references in ``tag`` that are not one side of a comparison (their value is used)."""
    toks = tag.tokens
    for p, n in model.refs(tag, "role"):
        j = p.ends[n]
        nxt = toks[j] if j < len(toks) else None
        prev = toks[p.start - 1] if p.start > 0 else None
        if nxt is not None and (nxt.is_op("==", "!=") or nxt.is_name("in", "not", "is")):
            continue
        if prev is not None and prev.is_op("==", "!="):
            continue
        yield p, prev, nxt


def _prints_role(model: TemplateModel) -> bool:
    """Whether the template writes a message's role into the prompt (then every role is rendered).

    Also through a variable: ``{% set role = 'model' if m.role == 'assistant' else m.role %}{{ role }}``.
    """
    carriers: set[str] = set()
    for tag in model.tags:
        if tag.keyword == "set" and len(tag.tokens) > 2 and tag.tokens[2].is_op("="):
            if any(p.start > 2 for p, _prev, _nxt in _uncompared_role_refs(model, tag)):
                carriers.add(tag.tokens[1].value)
    for tag in model.tags:
        if tag.kind != "var" and tag.keyword != "set":
            continue
        for p, prev, nxt in _uncompared_role_refs(model, tag):
            if tag.keyword == "set" and not ((nxt is not None and nxt.is_op("+", "~")) or (prev is not None and prev.is_op("+", "~"))):
                continue
            return True
        if carriers and tag.kind == "var" and any(t.kind == "name" and t.value in carriers for t in tag.tokens):
            return True
    return False


def _facts_missing(model: TemplateModel) -> list[str]:
    """With the analyser's facts: system/user/assistant whose messages are predicted not to render and that no
    raise names. (``tool`` is left to the lexical check: its probe is a whole tool round trip, which fails for
    templates that render tool results but not tool calls.)"""
    caps = model.capabilities
    if any(site.kind == "role" and not site.roles for site in caps.raises):
        return []  # an "unsupported role" raise the analyser could not attribute: assume it rejects the rest
    rejected = {role for site in caps.raises for role in site.roles}
    simple = ("system", "user", "assistant")
    missing = [r for r in simple if r not in caps.roles and r not in rejected]
    return [] if len(missing) == len(simple) else missing  # renders no message at all: not a role dispatch


def _lexical(model: TemplateModel):
    """(missing roles, the role-dispatch if-tag without an else), or None."""
    named: set[str] = set()
    chains = []
    for tag in model.tags:
        if tag.kind == "comment":
            continue
        if _negative_role_test(model, tag):
            return None  # "role != 'tool'" sends every other role down that branch
        lits = list(role_literals(model, tag))
        named.update(lit.literal for lit, _ in lits)
        if tag.keyword == "if" and lits and any(b.keyword == "for" for b in tag.scope):
            chains.append(tag)
    missing = [r for r in STANDARD_ROLES if r not in named]
    if not missing or not chains or _prints_role(model):
        return None
    arms = {tag.index: 1 for tag in chains}
    for tag in chains:
        for other in model.tags[tag.index + 1 :]:
            if other.scope == tag.scope and other.keyword in ("elif", "else") and _same_chain(model, tag, other):
                arms[tag.index] += 1
                if other.keyword == "else":
                    return None  # a dispatch with an else: every role is rendered or rejected there
            elif other.scope == tag.scope and other.keyword == "endif":
                break
    return missing, max(chains, key=lambda t: (arms[t.index], -t.index))


def check(model: TemplateModel) -> Iterator[Finding]:
    lexical = _lexical(model)
    if model.capabilities is None:
        if lexical is None:
            return
        missing, anchor = lexical
        start, end, how = anchor.start, anchor.end, "match no branch of this role dispatch"
    else:
        missing = _facts_missing(model)
        if lexical is not None and "tool" in lexical[0]:
            missing.append("tool")
        if not missing:
            return
        if lexical is not None:
            start, end = lexical[1].start, lexical[1].end
        elif model.capabilities.role_tests:
            span = model.capabilities.role_tests[0].span
            start, end = span.start, span.end
        else:
            start = end = 0
        how = "are not rendered (analyser facts)"
    roles = ", ".join(f"'{r}'" for r in missing)
    yield Finding(start, end, f"messages with role {roles} {how} and nothing raises: they are silently dropped")


def _negative_role_test(model: TemplateModel, tag) -> bool:
    toks = tag.tokens
    for p, n in model.refs(tag, "role"):
        j = p.ends[n]
        if j < len(toks) and (toks[j].is_op("!=") or (toks[j].is_name("not") and j + 1 < len(toks) and toks[j + 1].is_name("in"))):
            if j + 1 < len(toks) and (toks[j + 1].kind == "string" or toks[j + 1].is_name("in")):
                return True
        if p.start >= 2 and toks[p.start - 1].is_op("!=") and toks[p.start - 2].kind == "string":
            return True
    return False


def _same_chain(model: TemplateModel, opener, other) -> bool:
    for tag in model.tags[opener.index + 1 : other.index]:
        if tag.scope == opener.scope and tag.keyword in ("endif", "if"):
            return False
    return True


RULE = Rule("RL002", "dropped-role", "warning", "Messages of a standard role are silently dropped", DOC, check)
