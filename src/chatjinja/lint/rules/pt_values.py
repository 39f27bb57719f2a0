"""PT016, PT017, PT018: values as clients send them, which other engines treat differently — message content left out beside tool calls, a caller's flag used as text, tool data (schema types, argument values) used as text."""

from __future__ import annotations

from typing import Iterator

from ...analysis.collect import tree_modes
from ...syntax import ast as A
from ..context import LintContext, const_str, last_key, path_key
from ..rule import Finding
from .portability import (ABSENT_CONTENT, Turn, arm_tests, earlier_tests, engine_list, message_base, pt_rule, reaches,
                          rejects_tool_turns)

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


TOOL_DATA_DOC = """\
## What it does
Finds tool data that clients send in shapes the template does not expect, turned into text or
looked up: a string filter (`|upper`, `|lower`, `|trim` ...) or an `in [...]` test on a tool
parameter's JSON Schema `type`, `.items()` of a parameter's schema, and `{{ }}`, `~` or `|string` of
a tool call's argument value (a loop variable over `arguments|items`, or a macro parameter such values
are passed to) outside an `is string` test.

## Why is this bad?
JSON Schema lets `type` be a list (`"type": ["integer", "null"]`, as OpenAI clients write an optional
parameter), and arguments hold `null`, booleans, numbers, lists and objects. transformers writes
Python's text for them (`['INTEGER', 'NULL']`, `None`, `True`, `{'a': 1}`); `@huggingface/jinja` has
no `|upper` for a list and no `|string` for `null` and prints `true` and JSON; llama.cpp prints `null`
as nothing and a dict as nothing, and cannot test a list `in` a list. An array parameter's schema has
an `items` key, which `@huggingface/jinja` reads for `schema.items()` instead of calling the method.
The tool prompt then differs per engine, or fails.

## Example
```jinja
{%- for message in messages %}{%- if message['tool_calls'] is defined %}{%- for call in message['tool_calls'] %}{%- if call['function']['arguments'] is mapping %}{%- for name, value in call['function']['arguments']|items %}{{- name ~ '=' ~ value ~ ';' }}{%- endfor %}{%- endif %}{%- endfor %}{%- endif %}{%- endfor %}
```

## Use instead
```jinja
{%- for message in messages %}{%- if message['tool_calls'] is defined %}{%- for call in message['tool_calls'] %}{%- if call['function']['arguments'] is mapping %}{%- for name, value in call['function']['arguments']|items %}{{- name ~ '=' ~ value|tojson ~ ';' }}{%- endfor %}{%- endif %}{%- endfor %}{%- endif %}{%- endfor %}
```

## Fix safety
No fix: `|tojson` changes what transformers prints too.
"""


def _argument_value(expr, ctx: LintContext, depth: int = 0) -> bool:
    """Whether ``expr`` is a tool call's argument value: the value of a loop over something holding ``argument``
    (``for k, v in call.arguments|items``, ``for item in argument``), or a macro parameter such a value is passed to."""
    if not isinstance(expr, A.Name) or depth > 3 or expr.name in ctx.assignments:
        return False  # (a name the template sets holds what the template made of the value)
    for loop in _loops_binding(ctx).get(expr.name, ()):
        if not (loop.open_tag.span.end <= expr.span.start < loop.end_tag.span.start) or not _over_arguments(loop, ctx):
            continue
        target = loop.target
        if isinstance(target, A.Tuple) and len(target.items) == 2 and isinstance(target.items[1], A.Name) \
                and target.items[1].name == expr.name:
            return True
        if isinstance(target, A.Name) and target.name == expr.name and not (
                isinstance(loop.iter, A.Filter) and loop.iter.name in ("items", "dictsort")):
            return True
    macro = ctx.enclosing_macro_of(expr)
    if macro is not None and any(param.name == expr.name for param in macro.params):
        return any(_argument_value(value, ctx, depth + 1) for value in ctx.param_values(expr))
    return False


def _loops_binding(ctx: LintContext) -> dict[str, list[A.For]]:
    """The loops by the names their targets bind (built once per template)."""
    found = ctx.scratch.get("_pt_loops")
    if found is None:
        found = {}
        for loop in ctx.nodes(A.For):
            targets = loop.target.items if isinstance(loop.target, A.Tuple) else (loop.target,)
            for target in targets:
                if isinstance(target, A.Name):
                    found.setdefault(target.name, []).append(loop)
        ctx.scratch["_pt_loops"] = found
    return found


def _over_arguments(loop: A.For, ctx: LintContext) -> bool:
    """Whether the loop iterates a tool call's arguments: its iterable (or the value a variable it names was set to)
    reads ``arguments`` (``call.arguments|items``, ``args.items()`` after ``set args = call.function.arguments``)."""
    subject = loop.iter
    if isinstance(subject, A.Call) and isinstance(subject.node, A.Getattr):
        subject = subject.node.node
    elif isinstance(subject, A.Filter) and subject.node is not None:
        subject = subject.node
    return any("argument" in ctx.source_text(value) for value in ctx.values(subject))


def _schema_node(name: A.Name, ctx: LintContext) -> bool:
    """Whether the variable holds a tool parameter's JSON Schema: a loop over something read from ``properties`` or
    ``parameters`` (followed through ``{% set %}``), or a parameter of a macro (where templates walk schemas); not
    a content chunk."""
    if name.name in ctx.chunk_vars:
        return False
    sources = list(ctx.loop_sources.get(name.name, ())) + [v for v in ctx.assignments.get(name.name, ()) if v is not None]
    for source in sources:
        subject = source.node.node if isinstance(source, A.Call) and isinstance(source.node, A.Getattr) else \
            source.node if isinstance(source, A.Filter) and source.node is not None else source
        if any(word in ctx.source_text(value) for value in ctx.values(subject) for word in ("properties", "parameters")):
            return True
    macro = ctx.enclosing_macro_of(name)
    return macro is not None and any(p.name == name.name for p in macro.params) and not sources


def _schema_type(expr, ctx: LintContext) -> bool:
    """``value['type']`` (``schema.get('type')``, a variable set to one) of a tool parameter's schema."""
    if isinstance(expr, A.Name):
        values = ctx.assignments.get(expr.name, ())
        return bool(values) and all(v is not None and not isinstance(v, A.Name) and _schema_type(v, ctx) for v in values)
    if isinstance(expr, A.Call) and isinstance(expr.node, A.Getattr) and expr.node.attr == "get" and expr.args \
            and const_str(expr.args[0]) == "type":
        return isinstance(expr.node.node, A.Name) and _schema_node(expr.node.node, ctx)
    return last_key(expr) == "type" and isinstance(expr.node, A.Name) and _schema_node(expr.node, ctx)


def _in_string_branch(node, name: str, ctx: LintContext) -> bool:
    """Whether the enclosing ``if`` arm (or ``x if c``) that holds ``node`` tests ``name is string`` (an ``else`` after
    one does not count: what reaches it is everything but a string)."""
    tests = arm_tests(node, ctx) + [c.test for c in ctx.innermost.get(A.CondExpr, ())
                                     if c.expr1.span.start <= node.span.start < c.expr1.span.end]
    return any(("string" if not t.negated else None) == "string" and path_key(t.node) == name
               for test in tests for t in _conjuncts(test) if isinstance(t, A.Test) and t.name == "string")


def _disjuncts(test) -> list:
    return _disjuncts(test.left) + _disjuncts(test.right) if isinstance(test, A.Or) else [test]


def _conjuncts(test) -> list:
    return _conjuncts(test.left) + _conjuncts(test.right) if isinstance(test, A.And) else [test]


def check_tool_data(node, ctx: LintContext) -> Iterator[Finding]:
    if isinstance(node, A.Call):
        callee = node.node
        if isinstance(callee, A.Getattr) and callee.attr == "items" and isinstance(callee.node, A.Name) \
                and _schema_node(callee.node, ctx) and not node.args:
            yield Finding(callee.span.start, callee.span.end, f"'{ctx.source_text(callee)}()' of a JSON Schema: an array "
                          "property's schema has an 'items' key, which hfjs calls instead of the method", engines=("hfjs",))
        return
    if isinstance(node, A.Operand):
        if node.op in ("in", "not in") and isinstance(node.expr, (A.List, A.Tuple)):
            compare = ctx.parent_of(node)
            if isinstance(compare, A.Compare) and compare.ops[0] is node and _schema_type(compare.expr, ctx):
                yield Finding(compare.span.start, compare.span.end, f"'{ctx.source_text(compare)}': a JSON Schema type "
                              "can be a list (['integer', 'null']), which llamacpp cannot look up in a list",
                              engines=("llamacpp",))
        return
    if isinstance(node, A.Filter):
        if node.node is None:
            return
        if node.name in _STRING_FILTERS and _schema_type(node.node, ctx):
            yield Finding(node.span.start, node.span.end, f"'{ctx.source_text(node)}': a JSON Schema type can be a list "
                          f"(['integer', 'null']), which hfjs cannot give '|{node.name}'", engines=("hfjs",))
        elif node.name == "string" and _argument_value(node.node, ctx) and not _in_string_branch(node, node.node.name, ctx):
            yield Finding(node.span.start, node.span.end, f"'{ctx.source_text(node)}' of an argument value: hfjs refuses "
                          "'|string' of null, jinja2 writes None", engines=("hfjs",))
        return
    printed = [node.expr] if isinstance(node, A.Output) else list(node.items)  # ``{{ value }}``, ``'k=' ~ value``
    for expr in printed:
        if _argument_value(expr, ctx) and not _in_string_branch(node, expr.name, ctx) and not any(
                isinstance(t, A.Test) and t.name == "none" and not t.negated and path_key(t.node) == expr.name
                for test in earlier_tests(node, ctx) for t in _disjuncts(test)):  # null was written out before
            yield Finding(expr.span.start, expr.span.end, f"'{ctx.source_text(expr)}' is an argument value, which can be "
                          "null, a boolean, a list or an object: jinja2 prints Python's text for them, hfjs and llamacpp "
                          "their own", engines=("hfjs", "llamacpp"))


RULES = {
    "PT016": pt_rule("PT016", "absent-content", "Message content used as a value where a tool-calling turn leaves it out",
                     ABSENT_DOC, ("minijinja", "hfjs", "llamacpp"), (A.Getattr, A.Getitem, A.Name), check_absent),
    "PT017": pt_rule("PT017", "flag-as-text", "A caller's flag variable used as text or a list",
                     FLAG_DOC, ("minijinja", "hfjs", "llamacpp"), (A.Name,), check_flag),
    "PT018": pt_rule("PT018", "tool-data-as-text", "A tool schema's type or a tool call's argument value turned into text",
                     TOOL_DATA_DOC, ("hfjs", "llamacpp"), (A.Filter, A.Output, A.Concat, A.Call, A.Operand),
                     check_tool_data),
}
