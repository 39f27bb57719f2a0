"""PT016, PT017: values as clients send them, which other engines treat differently — message content left out beside tool calls, a caller's flag used as text."""

from __future__ import annotations

from typing import Iterator

from ...analysis.collect import tree_modes
from ...syntax import ast as A
from ..context import LintContext
from ..rule import Finding
from .portability import ABSENT_CONTENT, Turn, engine_list, message_base, pt_rule, reaches, rejects_tool_turns

__all__ = ["RULES"]

ABSENT_DOC = """\
## What it does
Finds a message's `content` given a filter (`|trim`, `|length`, `|tojson` ...), joined with `~` or `+`,
looped over, or given `.strip()`-like methods, in a branch an assistant turn with tool calls reaches,
with no test that it is there (`is defined`, `is string`, `if message['content']`, `|default`).

## Why is this bad?
OpenAI-compatible clients send an assistant turn that calls tools as `{"content": null, "tool_calls":
[...]}`. transformers drops the `null` key, so the template reads an undefined `content`, which each
engine treats its own way: jinja2 prints it as nothing and iterates it as an empty list, but raises on
`+` and on `|tojson`; `@huggingface/jinja` refuses every filter, `~` and loop on it ("Cannot apply
filter \\"trim\\" to type: UndefinedValue"); llama.cpp concatenates it with `+` and runs `.strip()` on
it; minijinja and hfjs write `|tojson` of it as `null`. The conversation renders in one engine and fails
in another.

## Example
```jinja
{%- for message in messages %}{{- message['role'] ~ ': ' ~ message['content']|replace('\\r\\n', '\\n') ~ '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- 'assistant: ' }}{%- endif %}
```

## Use instead
```jinja
{%- for message in messages %}{{- message['role'] ~ ': ' }}{%- if message['content'] is string %}{{- message['content']|replace('\\r\\n', '\\n') }}{%- endif %}{{- '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- 'assistant: ' }}{%- endif %}
```

## Fix safety
No fix: what a turn without content should render is the template author's decision.
"""

# llama.cpp runs these methods of an undefined value as on an empty string; jinja2 raises
_LLAMA_UNDEFINED_METHODS = frozenset({"strip", "lower", "upper", "title", "capitalize", "replace", "items"})
# @huggingface/jinja's undefined is not iterable, nor a sequence: its branches on those tests differ from jinja2's
_HFJS_ABSENT = Turn(ABSENT_CONTENT.roles, "absent-hfjs", True)


def _use(node, ctx: LintContext) -> tuple[str, bool, tuple[str, ...]] | None:
    """What the template does with ``node`` when it is undefined: a description, whether jinja2 raises there, and
    the engines that do otherwise when they get there."""
    parent = ctx.parent_of(node)
    if isinstance(parent, A.Filter) and parent.node is node:
        if parent.name in ("default", "d"):
            return None
        if parent.name == "tojson":
            return "jinja2 raises on '|tojson' of it, minijinja and hfjs write null", True, ("minijinja", "hfjs")
        return f"hfjs refuses '|{parent.name}' of it, jinja2 takes it as empty", False, ("hfjs",)
    if isinstance(parent, A.Concat):
        return "hfjs refuses '~' with it, jinja2 takes it as empty", False, ("hfjs",)
    if isinstance(parent, A.BinOp) and parent.op == "+":
        return "jinja2 raises on '+' with it, llamacpp takes it as empty", True, ("llamacpp",)
    if isinstance(parent, A.For) and parent.iter is node:
        return "hfjs refuses to loop over it, jinja2 loops over nothing", False, ("hfjs",)
    if isinstance(parent, A.Getitem) and parent.node is node:
        return "jinja2 raises on an item of it, llamacpp reads nothing", True, ("llamacpp",)
    if isinstance(parent, A.Getattr) and parent.node is node and parent.attr in _LLAMA_UNDEFINED_METHODS:
        call = ctx.parent_of(parent)
        if isinstance(call, A.Call) and call.node is parent:
            return f"jinja2 raises on '.{parent.attr}()' of it, llamacpp takes it as empty", True, ("llamacpp",)
    return None


def check_absent(node, ctx: LintContext) -> Iterator[Finding]:
    if type(node) is A.Name and node.name not in ctx.assignments:
        return
    use = _use(node, ctx)
    if use is None:
        return
    base = message_base(node, ctx, ABSENT_CONTENT)
    if base is None or "[" in base:
        return  # (``messages[0]`` is the system turn where templates read it: its content is there)
    what, raises, engines = use
    in_jinja2 = reaches(node, ctx, ABSENT_CONTENT, base)
    in_hfjs = reaches(node, ctx, _HFJS_ABSENT, base)
    if raises:  # jinja2 raises where it gets there; an engine that does not get there renders
        found = {e for e in engines if in_jinja2} | ({"hfjs"} if in_jinja2 and not in_hfjs else set())
    else:  # jinja2 renders; the engine fails where it gets there
        found = {e for e in engines if (in_hfjs if e == "hfjs" else in_jinja2)}
    if not found or rejects_tool_turns(ctx):
        return
    if "hfjs" in found and "hfjs" not in engines:
        what += "; hfjs does not get there (its undefined is not iterable)"
    ordered = tuple(e for e in ("minijinja", "hfjs", "llamacpp") if e in found)
    yield Finding(node.span.start, node.span.end, f"'{ctx.source_text(node)}' is undefined in an assistant turn that "
                  f"calls tools with content null: {what} ({engine_list(ordered)})", engines=ordered)


FLAG_DOC = """\
## What it does
Finds a variable the caller passes and the template tests as a flag (`{% if date_string %}`, `is
defined`, `is true` ...: the caller may pass `true` or `false`) used as text or a list: printed,
joined with `~` or `+`, given a string or list filter, or indexed.

## Why is this bad?
A caller that passes the flag as a boolean (as `chat_template_kwargs` do: `{"model_identity":
true}`) gets a different prompt in each engine. transformers prints Python's `True` and raises on
`'text' + True`; `@huggingface/jinja` prints `true` and concatenates, and refuses `|trim` of a
boolean; llama.cpp concatenates `True`; and jinja2's `|reject` of `false` is an empty list where the
other engines refuse it. Test the value's type, or keep flags and text in separate variables.

## Example
```jinja
{%- if model_identity %}{{- model_identity ~ '\\n' }}{%- endif %}{%- for message in messages %}{{- message['role'] ~ '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- 'assistant\\n' }}{%- endif %}
```

## Use instead
```jinja
{%- if model_identity is string %}{{- model_identity ~ '\\n' }}{%- endif %}{%- for message in messages %}{{- message['role'] ~ '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- 'assistant\\n' }}{%- endif %}
```

## Fix safety
No fix.
"""

_STRING_FILTERS = frozenset({"trim", "upper", "lower", "replace", "title", "capitalize", "striptags"})
_SELECTING_FILTERS = frozenset({"select", "reject", "selectattr", "rejectattr", "map"})


def _flags(ctx: LintContext) -> frozenset[str]:
    """The template's mode variables that take a boolean (the conversation space sets each to true and to false)."""
    found = ctx.scratch.get("_pt_flags")
    if found is None:
        found = frozenset(mode.name for mode in tree_modes(ctx.tree) if any(v is True for v in mode.values))
        ctx.scratch["_pt_flags"] = found
    return found


def _flag_use(node: A.Name, ctx: LintContext) -> tuple[str, tuple[str, ...]] | None:
    parent = ctx.parent_of(node)
    if isinstance(parent, A.Output) and parent.expr is node:
        return "hfjs prints true/false where jinja2 prints True/False", ("hfjs",)
    if isinstance(parent, A.Concat):
        return "hfjs writes true/false with '~' where jinja2 writes True/False", ("hfjs",)
    if isinstance(parent, A.BinOp) and parent.op == "+":
        return "jinja2 raises on '+' with a boolean, hfjs and llamacpp concatenate it", ("hfjs", "llamacpp")
    if isinstance(parent, A.Getitem) and parent.node is node:
        return "jinja2 reads an item of a boolean as undefined, hfjs and llamacpp raise", ("hfjs", "llamacpp")
    if isinstance(parent, A.Filter) and parent.node is node:
        if parent.name == "string":
            return "hfjs writes '|string' of it as true/false where jinja2 writes True/False", ("hfjs",)
        if parent.name in _STRING_FILTERS:
            return f"hfjs has no '|{parent.name}' for booleans", ("hfjs",)
        if parent.name in _SELECTING_FILTERS:
            return f"jinja2's '|{parent.name}' of false is empty, the other engines refuse a boolean", \
                ("minijinja", "hfjs", "llamacpp")
    return None


def check_flag(node: A.Name, ctx: LintContext) -> Iterator[Finding]:
    if node.name not in _flags(ctx):
        return
    use = _flag_use(node, ctx)
    if use is None or ctx.guarded(node.name, ("string", "mapping", "iterable", "sequence", "number")):
        return
    what, engines = use
    yield Finding(node.span.start, node.span.end, f"'{node.name}' is tested as a flag, so a caller may pass true or "
                  f"false: {what}", engines=engines)


RULES = {
    "PT016": pt_rule("PT016", "absent-content", "Message content used as a value where a tool-calling turn leaves it out",
                     ABSENT_DOC, ("minijinja", "hfjs", "llamacpp"), (A.Getattr, A.Getitem, A.Name), check_absent),
    "PT017": pt_rule("PT017", "flag-as-text", "A caller's flag variable used as text or a list",
                     FLAG_DOC, ("minijinja", "hfjs", "llamacpp"), (A.Name,), check_flag),
}
