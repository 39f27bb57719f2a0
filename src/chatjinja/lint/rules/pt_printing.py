"""PT003, PT010, PT011: values other engines print differently — lists and dicts, booleans, None and floats, chunked content used as text."""

from __future__ import annotations

from typing import Iterator

from ...syntax import ast as A
from ..context import LintContext, path_key
from ..rule import Finding
from . import content_as_string, printed_non_string
from .portability import (CHUNKED_CONTENT, ENGINES, engine_list, fails_on_chunks, fails_without_tools, message_base,
                          pt_rule, reaches, string_tested)

__all__ = ["RULES"]

_HARMLESS = frozenset({"trim", "safe", "e", "escape"})
_LIST_FILTERS = frozenset({"list", "items", "dictsort", "batch", "slice", "groupby", "sort", "unique", "select",
                           "reject", "selectattr", "rejectattr"})
_LIST_METHODS = frozenset({"split", "rsplit", "splitlines", "items", "keys", "values"})


def _printed(output: A.Output) -> A.Expr:
    expr = output.expr
    while isinstance(expr, A.Filter) and expr.node is not None and expr.name in _HARMLESS:
        expr = expr.node
    return expr


def _container(expr, ctx: LintContext, depth: int = 0) -> str | None:
    """``"list"``, ``"dict"`` or ``"tuple"`` when ``expr`` is one for sure (a literal, a list filter, ``.split()``)."""
    if depth > 4:
        return None
    if isinstance(expr, A.List):
        return "list"
    if isinstance(expr, A.Dict):
        return "dict"
    if isinstance(expr, A.Tuple):
        return "tuple"
    if isinstance(expr, A.Filter) and expr.name in _LIST_FILTERS and expr.node is not None:
        return "list"
    if isinstance(expr, A.Call):
        if isinstance(expr.node, A.Getattr) and expr.node.attr in _LIST_METHODS:
            return "list"
        if isinstance(expr.node, A.Name) and expr.node.name == "range":
            return "list"
    if isinstance(expr, A.BinOp) and expr.op == "+":
        return _container(expr.left, ctx, depth + 1) or _container(expr.right, ctx, depth + 1)
    if isinstance(expr, A.Name) and expr.name not in ctx.loop_sources:
        values = ctx.assignments.get(expr.name)
        if values and all(v is not None for v in values):
            kinds = {_container(v, ctx, depth + 1) for v in values}
            if len(kinds) == 1:
                return kinds.pop()
    return None


def _numbers_only(expr) -> bool:
    return isinstance(expr, A.List) and all(
        isinstance(i, A.Const) and isinstance(i.value, (int, float)) and not isinstance(i.value, bool) for i in expr.items)


CONTAINER_DOC = """\
## What it does
Finds `{{ x }}` (or `'text' ~ x`) where `x` is a list, dict or tuple: a literal, the result of
`.split()`, `|list`, `|selectattr` ..., or a message field that can hold one (`content`,
`tool_calls`, `arguments`, `tools`, as CT002 describes); and `tool|string` of a tool definition.
For message `content` it reports only what a turn of text parts reaches (a system, user or assistant
turn, as clients send them: not a branch for `role == 'tool'`, nor one after an `is string` test),
and nothing when the template cannot render a conversation without tools in transformers (an
unguarded loop over `tools`, see PT015) or when such a turn fails in every engine anyway (a
`.strip()` of the content).

## Why is this bad?
Each engine prints containers its own way. transformers prints Python's repr
(`['a', 'b']`, `{'city': 'Paris'}`); `@huggingface/jinja` prints JSON (`["a", "b"]`, `{"city":
"Paris"}`) and joins a list with `,` under `~`; llama.cpp prints the items run together (`ab`) and
a dict as nothing; hfjs has no `|string` for a dict. Only minijinja copies Python. The model then sees another prompt in every
engine. `|tojson` prints the same JSON everywhere.

## Example
```jinja
{{- messages|map(attribute='role')|list }}
```

## Use instead
```jinja
{{- messages|map(attribute='role')|list|tojson }}
```

## Fix safety
No fix: `|tojson` changes what transformers prints too.
"""


def check_container(node, ctx: LintContext) -> Iterator[Finding]:
    if isinstance(node, A.Output):
        expr = _printed(node)
        kind = _container(expr, ctx)
        if kind is None:
            if not _chunk_turn(node, ctx, expr) or string_tested(ctx) or fails_without_tools(ctx):
                return
            trimmed = isinstance(node.expr, A.Filter) and node.expr.name == "trim"
            for found in printed_non_string.check(node, ctx):
                if trimmed:  # llama.cpp's |trim of a list writes Python's repr, hfjs has no |trim for lists
                    yield Finding(found.start, found.end, found.message.replace("which {{ }} prints as a Python repr",
                                  "which transformers writes as a Python repr under |trim, and hfjs cannot trim"),
                                  engines=("hfjs",))
                    continue
                yield Finding(found.start, found.end, found.message.replace("which {{ }} prints as a Python repr",
                              "which hfjs prints as JSON and llamacpp as its items run together"),
                              engines=("hfjs", "llamacpp"))
            inner = expr.left if isinstance(expr, A.Or) else expr.node if isinstance(expr, A.Filter) and \
                expr.name in ("default", "d") else None  # ``content or ''``, ``content|default('')``
            if inner is not None and ctx.is_key_ref(inner, "content") and not ctx.guarded(
                    path_key(inner) or ctx.source_text(inner), ("string", "mapping", "iterable", "sequence", "none")):
                yield Finding(inner.span.start, inner.span.end, f"'{ctx.source_text(inner)}' can be a list of chunks, "
                              "which transformers prints as a Python repr, hfjs as JSON and llamacpp as its items run "
                              "together; check its type", engines=("hfjs", "llamacpp"))
            return
        engines = ("llamacpp",) if _numbers_only(expr) else ("hfjs", "llamacpp")
        yield Finding(expr.span.start, expr.span.end, f"printing a {kind} gives Python's repr in transformers, "
                      f"something else in {engine_list(engines)}; print it with |tojson", engines=engines)
        return
    if isinstance(node, A.Filter):  # ``tool|string``: a tool definition (a dict) turned into text
        target = node.node
        if node.name == "string" and target is not None and _turn_content(target, ctx) and _chunk_turn(node, ctx, target) \
                and not string_tested(ctx) and not ctx.guarded(path_key(target) or ctx.source_text(target)):
            yield Finding(node.span.start, node.span.end, f"'{ctx.source_text(node)}' of a list of chunks is Python's repr "
                          "in transformers and JSON in hfjs", engines=("hfjs",))
            return
        if node.name == "string" and isinstance(target, A.Name) and any(
                "tools" in ctx.source_text(source) for source in ctx.loop_sources.get(target.name, ())):
            yield Finding(node.span.start, node.span.end, f"'{ctx.source_text(node)}' turns a tool definition (a dict) into "
                          "Python's repr in transformers; hfjs has no |string for objects; use |tojson",
                          engines=("hfjs",))
        return
    for item in node.items:  # Concat: 'text' ~ list
        kind = _container(item, ctx)
        if kind is not None:
            yield Finding(item.span.start, item.span.end, f"'~' with a {kind} writes Python's repr in transformers, "
                          "something else in hfjs and llamacpp; use |tojson", engines=("hfjs", "llamacpp"))


SCALAR_DOC = """\
## What it does
Finds `{{ }}` of a boolean (a comparison, a test, `true`), of `none`, and float literals in exponent
notation (`1e-5`).

## Why is this bad?
transformers prints Python's `True`, `False` and `None`. `@huggingface/jinja` prints `true`/`false`
and an empty string for `none`, llama.cpp an empty string for `none`; neither parses `1e-5`, which
minijinja prints without the exponent. Write the text you mean instead of printing the value.

## Example
```jinja
{%- for message in messages %}{{- loop.first }}{%- endfor %}{{- add_generation_prompt is true }}
```

## Use instead
```jinja
{%- if add_generation_prompt %}{{- 'True' }}{%- else %}{{- 'False' }}{%- endif %}
```

## Fix safety
No fix.
"""

_BOOL_METHODS = frozenset({"startswith", "endswith", "isdigit", "isalpha", "isspace", "islower", "isupper"})


def _scalar(expr) -> tuple[str, tuple[str, ...]] | None:
    if isinstance(expr, (A.Compare, A.Test, A.Not)):
        return "a boolean", ("hfjs",)
    if isinstance(expr, A.Const):
        if isinstance(expr.value, bool):
            return "a boolean", ("hfjs",)
        if expr.value is None:
            return "none", ("hfjs", "llamacpp")
    if isinstance(expr, A.Getattr) and isinstance(expr.node, A.Name) and expr.node.name == "loop" \
            and expr.attr in ("first", "last"):
        return "a boolean", ("hfjs",)
    if isinstance(expr, A.Call) and isinstance(expr.node, A.Getattr) and expr.node.attr in _BOOL_METHODS:
        return "a boolean", ("hfjs",)
    return None


def check_scalar(node, ctx: LintContext) -> Iterator[Finding]:
    if isinstance(node, A.Const):
        if isinstance(node.value, float) and "e" in ctx.source_text(node).lower():
            yield Finding(node.span.start, node.span.end, "a float in exponent notation: hfjs and llamacpp cannot "
                          "parse it, minijinja prints it without the exponent", engines=ENGINES)
        return
    expr = _printed(node)
    found = _scalar(expr)
    if found is None:
        return
    what, engines = found
    shown = "True/False" if what == "a boolean" else "None"
    yield Finding(expr.span.start, expr.span.end, f"printing {what} writes '{shown}' in transformers, something else in "
                  f"{engine_list(engines)}", engines=engines)


CHUNKS_DOC = """\
## What it does
Finds message `content` used as text — concatenated with `+` or `~`, given a string filter or
method, searched with `in` — with no `is string` check around it (the places CT001 reports), in a
branch a system, user or assistant turn of text parts reaches, in a template that renders
conversations without tools and does not fail on such turns in every engine (a `.strip()` of the
content).

## Why is this bad?
Clients send `content` as a list of chunks (`[{"type": "text", "text": "..."}]`). Then transformers
raises `TypeError` on `+` and writes the Python repr for `~` and `|trim`, while `@huggingface/jinja`
concatenates the list for `+` and `~` and fails on `|trim` ("Unknown ArrayValue filter: trim"), and
llama.cpp concatenates for `+`: the conversation renders (or is refused) differently.
Check the type and join the text chunks yourself.

## Example
```jinja
{%- for message in messages if message['content'] is defined %}{{- message['role'] ~ ': ' ~ message['content'] }}{%- endfor %}{%- if add_generation_prompt %}{{- 'assistant: ' }}{%- endif %}
```

## Use instead
```jinja
{%- for message in messages if message['content'] is defined %}{{- message['role'] ~ ': ' }}{%- if message['content'] is string %}{{- message['content'] }}{%- else %}{%- for chunk in message['content'] %}{{- chunk['text'] }}{%- endfor %}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- 'assistant: ' }}{%- endif %}
```

## Fix safety
No fix: what a list of chunks should become is the template author's decision.
"""


def _turn_content(node, ctx: LintContext) -> bool:
    """``message.content`` of a loop variable over the conversation or of ``messages[i]`` (where chunk lists arrive);
    or a variable every ``{% set %}`` of which is one."""
    return message_base(node, ctx) is not None


def _chunk_turn(node, ctx: LintContext, content=None) -> bool:
    """Whether a turn whose content is a list of text parts (system, user or assistant, as clients send them) can get
    to ``node``, judged by the role and type tests around it on the message ``content`` is read from; never when a
    user turn of text parts fails in every engine (each conversation with chunks has one)."""
    base = message_base(content, ctx) if content is not None else None
    return reaches(node, ctx, CHUNKED_CONTENT, base) and not fails_on_chunks(ctx)


def check_chunks(node, ctx: LintContext) -> Iterator[Finding]:
    if not _turn_content(node, ctx) or not _chunk_turn(node, ctx, node) or string_tested(ctx) or fails_without_tools(ctx):
        return
    parent = ctx.parent_of(node)
    if isinstance(parent, A.Or) and parent.left is node:  # ``'<|user|>' + (message['content'] or '')``
        above = ctx.parent_of(parent)
        if isinstance(above, A.BinOp) and above.op == "+" and not ctx.guarded(path_key(node) or ctx.source_text(node)):
            yield Finding(node.span.start, node.span.end, f"'{ctx.source_text(node)}' may be a list of chunks, but the "
                          "template concatenates it with '+' without an 'is string' check: a list of chunks renders "
                          "differently in hfjs and llamacpp", engines=("hfjs", "llamacpp"))
        return
    if isinstance(parent, A.BinOp) and parent.op == "+":
        engines = ("hfjs", "llamacpp")  # Python raises; hfjs and llama.cpp concatenate
    elif isinstance(parent, A.Concat):
        engines = ("hfjs",)  # Python and llama.cpp write the repr; hfjs joins with ','
    elif isinstance(parent, A.Filter) and parent.name == "trim":
        engines = ("hfjs",)  # Python writes the repr; hfjs has no |trim for lists
    else:
        return  # a method call or 'in' fails (or agrees) everywhere
    for found in content_as_string.check(node, ctx):
        yield Finding(found.start, found.end, found.message + f": a list of chunks renders differently in "
                      f"{engine_list(engines)}", engines=engines)


RULES = {
    "PT003": pt_rule("PT003", "printed-container", "A list, dict or tuple printed: each engine prints it its own way",
                     CONTAINER_DOC, ("hfjs", "llamacpp"), (A.Output, A.Concat, A.Filter), check_container),
    "PT010": pt_rule("PT010", "printed-scalar", "A boolean, none or exponent float printed, which engines spell differently",
                     SCALAR_DOC, ENGINES, (A.Output, A.Const), check_scalar),
    "PT011": pt_rule("PT011", "content-chunks-as-text", "Message content used as text: chunk lists render differently per engine",
                     CHUNKS_DOC, ("hfjs", "llamacpp"), (A.Getattr, A.Getitem, A.Name), check_chunks),
}
