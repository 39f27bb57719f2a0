"""RL001 unknown-role: a role compared with a literal that is a near miss of a role chat APIs send."""

from __future__ import annotations

from typing import Iterator

from ..model import TemplateModel
from ..rule import Finding, Rule

DOC = """\
## What it does
Finds a message role compared (`==`, `!=`, `in [...]`) with a string that no chat API sends but
that is one or two edits away from one, or differs only in case: `'asistant'`, `'usr'`,
`'System'`, `'tools'`. Roles chat APIs send: `system`, `user`, `assistant`, `tool`, `developer`
(OpenAI), `function` (legacy OpenAI), `ipython` (Llama 3.1), `model` (Gemma). Unrelated custom
roles (`tool_response`, `document`) are left alone.

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


def near_miss(value: str) -> str | None:
    """The known role ``value`` probably meant, or None when it is known or unrelated."""
    if value in KNOWN_ROLES or not value:
        return None
    for role in KNOWN_ROLES:
        if value.lower() == role:
            return role
    best = min(KNOWN_ROLES, key=lambda r: _distance(value, r))
    limit = 1 if len(value) <= 4 else 2
    return best if _distance(value, best) <= limit else None


def role_literals(model: TemplateModel, tag) -> Iterator[tuple]:
    """(string token, path key) for every literal a role is compared with in ``tag``."""
    toks = tag.tokens
    for p, n in model.refs(tag, "role"):
        if n != len(p.segments):
            continue
        j = p.ends[n]
        if j + 1 < len(toks) and toks[j].is_op("==", "!=") and toks[j + 1].kind == "string":
            yield toks[j + 1], p.key(n)
        elif j + 1 < len(toks) and toks[j].is_name("in") or (j + 2 < len(toks) and toks[j].is_name("not") and toks[j + 1].is_name("in")):
            k = j + 1 if toks[j].is_name("in") else j + 2
            if k < len(toks) and toks[k].is_op("[", "("):
                k += 1
                while k < len(toks) and not toks[k].is_op("]", ")"):
                    if toks[k].kind == "string":
                        yield toks[k], p.key(n)
                    k += 1
        if p.start >= 2 and toks[p.start - 1].is_op("==", "!=") and toks[p.start - 2].kind == "string":
            yield toks[p.start - 2], p.key(n)


def check(model: TemplateModel) -> Iterator[Finding]:
    for tag in model.tags:
        if tag.kind == "comment":
            continue
        for lit, key in role_literals(model, tag):
            meant = near_miss(lit.literal)
            if meant is not None:
                yield Finding(lit.start, lit.end, f"{key} is compared with {lit.value}, a role no chat API sends; "
                              f"did you mean '{meant}'?")


RULE = Rule("RL001", "unknown-role", "warning", "A role is compared with a misspelt role name", DOC, check)
