"""PT001, PT002, PT009, PT012: calls other engines lack or run differently — Python methods, ``tojson`` options, filters and tests."""

from __future__ import annotations

from typing import Iterator

from ...syntax import ast as A
from ..context import LintContext
from ..rule import Finding
from .portability import (ENGINES, FILTER_GAPS, HFJS_BARE_ARGUMENT, METHOD_ARGUMENT_ENGINES, METHOD_ENGINES,
                          MUTATING_ENGINES, PYTHON_METHODS, TEST_GAPS, engine_list, names_by_text, pt_rule,
                          rejects_tool_turns)

__all__ = ["RULES"]

_NOT_DATA = frozenset({"loop", "self", "caller", "namespace", "cycler", "joiner", "range", "dict", "lipsum"})


def _method_call(call: A.Call, ctx: LintContext) -> tuple[A.Getattr, str] | None:
    """``(callee, method)`` when ``call`` is ``value.method(...)`` on a template value (not ``loop``, a namespace ...)."""
    callee = call.node
    if not isinstance(callee, A.Getattr):
        return None
    base = callee.node
    if isinstance(base, A.Name) and (base.name in _NOT_DATA or base.name in ctx.namespaces or base.name in ctx.macros):
        return None
    return callee, callee.attr


def _trimmed_later(call: A.Call, ctx: LintContext) -> bool:
    """Whether ``{% set x = ....lstrip(chars) %}`` is trimmed of all whitespace wherever ``x`` is used (``x.strip()``,
    ``x|trim``): what hfjs strips beyond ``chars`` is whitespace those strip anyway."""
    node = ctx.parent_of(call)
    while node is not None and not isinstance(node, (A.Set, A.Output, A.Stmt)):
        node = ctx.parent_of(node)
    if not isinstance(node, A.Set) or not isinstance(node.target, A.Name):
        return False
    name = node.target.name
    uses = [n for n in names_by_text(ctx).get(name, ()) if n.span.start >= node.span.end
            and not isinstance(ctx.parent_of(n), A.Set)]
    def trimmed(use: A.Name) -> bool:
        parent = ctx.parent_of(use)
        if isinstance(parent, A.Filter) and parent.name == "trim" and not parent.args:
            return True
        above = ctx.parent_of(parent)
        return isinstance(parent, A.Getattr) and parent.attr == "strip" and isinstance(above, A.Call) and not above.args
    def in_output(use: A.Name) -> bool:
        current = ctx.parent_of(use)
        while current is not None and not isinstance(current, A.Stmt):
            current = ctx.parent_of(current)
        return isinstance(current, A.Output)
    printed = [u for u in uses if in_output(u)]
    return bool(printed) and all(trimmed(u) for u in printed)


PYTHON_METHOD_DOC = """\
## What it does
Finds calls of Python `str`, `list` and `dict` methods (`.find()`, `.count()`, `.splitlines()`,
`.rsplit()`, `.format()`, `.join()`, `.isdigit()`, `.replace(a, b, count)`, `.lstrip(chars)` ...) that
some engine does not implement, or implements differently; the finding names those engines. A
`.strip(chars)` whose result is stripped of all whitespace wherever it is printed is not reported.

## Why is this bad?
transformers runs templates with Python's jinja2, where a string is a Python `str` and every method
of it works. minijinja (TGI, mistral.rs) implements the common ones through its pycompat layer,
`@huggingface/jinja` (transformers.js) and llama.cpp only a handful (`upper`, `lower`, `strip`,
`split`, `startswith`, `endswith`, `replace`, `title`, `items`, `keys`, `values`, `get`): there the
call fails ("Callee is not a function"). `@huggingface/jinja` ignores the characters given to
`.strip()`, `.lstrip()` and `.rstrip()` and strips whitespace: `content.split('</think>')[-1].lstrip('\\n')`
keeps a leading space in transformers and loses it there. Jinja filters (`|lower`, `|replace`, `|trim`)
and slicing work in every engine.

## Example
```jinja
{{- eos_token.count('s') }}
```

## Use instead
```jinja
{{- (eos_token|length) - (eos_token|replace('s', '')|length) }}
```

## Fix safety
No fix: the portable spelling depends on what the method computes.
"""


def check_python_method(call: A.Call, ctx: LintContext) -> Iterator[Finding]:
    found = _method_call(call, ctx)
    if found is None:
        return
    callee, method = found
    if method not in PYTHON_METHODS:
        return
    supported = METHOD_ENGINES.get(method, frozenset())
    missing = [e for e in ENGINES if e not in supported]
    if call.args or call.kwargs:
        missing += [e for e in METHOD_ARGUMENT_ENGINES.get(method, ()) if e not in missing]
        if method == "replace" and len(call.args) < 3:
            missing = [e for e in missing if e != "llamacpp"]
        if method in ("strip", "lstrip", "rstrip") and _trimmed_later(call, ctx):
            missing = [e for e in missing if e != "hfjs"]
    if not missing:
        return
    missing = tuple(e for e in ENGINES if e in missing)
    if missing == ("hfjs",) and method in ("strip", "lstrip", "rstrip"):
        yield Finding(callee.span.start, callee.span.end, f"'.{method}(chars)': hfjs ignores the characters and strips "
                      "whitespace, so text that starts or ends with other whitespace loses it there", engines=missing)
        return
    yield Finding(callee.span.start, callee.span.end,
                  f"'.{method}()' is a Python method that {engine_list(missing)} "
                  f"{'does' if len(missing) == 1 else 'do'} not implement as Python does", engines=missing)


TOJSON_DOC = """\
## What it does
Finds `|tojson` with the keyword arguments `ensure_ascii`, `sort_keys` or `separators`.

## Why is this bad?
transformers' `tojson` filter is `json.dumps` and takes all of them. minijinja's takes only `indent`
and fails on any other keyword ("unknown keyword argument 'ensure_ascii'"), so TGI and mistral.rs
cannot render the template at all; llama.cpp's does not implement `sort_keys=true`. `indent` works in
every engine, and transformers' `tojson` already writes non-ASCII characters as they are, so
`ensure_ascii=False` changes nothing there.

## Example
```jinja
{{- tools|tojson(ensure_ascii=False) }}
```

## Use instead
```jinja
{{- tools|tojson }}
```

## Fix safety
No fix: removing the argument is safe for `ensure_ascii=False` only.
"""

_TOJSON_ENGINES = {"ensure_ascii": ("minijinja",), "separators": ("minijinja",), "sort_keys": ("minijinja", "llamacpp")}


def check_tojson(node: A.Filter, ctx: LintContext) -> Iterator[Finding]:
    if node.name != "tojson":
        return
    engines: set[str] = set()
    names = []
    for kw in node.kwargs:
        if kw.key in _TOJSON_ENGINES:
            engines.update(_TOJSON_ENGINES[kw.key])
            names.append(kw.key)
    if node.dyn_kwargs is not None:
        engines.add("minijinja")
        names.append("**")
    if not engines:
        return
    first = next(kw for kw in node.kwargs if kw.key in names) if node.kwargs and names[0] != "**" else node
    ordered = tuple(e for e in ENGINES if e in engines)
    yield Finding(first.span.start, first.span.end,
                  f"tojson({', '.join(names)}=...) fails in {engine_list(ordered)}; only 'indent' is portable",
                  engines=ordered)


FILTER_DOC = """\
## What it does
Finds filters and tests that some engine lacks, or runs with other arguments or another result:
`|wordcount`, `|truncate`, `|center`, `|striptags`, `|sum`, `|batch`, `|round`, `|groupby`, `|unique`,
`|escape`, `|reverse` (hfjs, llama.cpp), `|count`, `|select`, `|reject`, `|min` (hfjs), `|format`
(hfjs, llama.cpp), `|map('filter')`, `|selectattr(attr, '==', x)`, `|trim(chars)`,
`|replace(a, b, count)`, `is callable` (minijinja), `is divisibleby 3` without parentheses (hfjs),
`|tojson` of `|map`/`|select`/`|selectattr` ... without `|list` (every engine), `|int` or `|float`
of message content (minijinja) ...; the finding names the engines. Filters inside a macro are not reported: chat templates use macros to
render tool schemas, and what reaches a filter there depends on each tool's shape (the rule predicts
what ordinary conversations show).

## Why is this bad?
Each engine ships its own filter library. transformers has all of jinja2's; the others fail on a
filter they do not know ("Unknown ArrayValue filter: sum", "unknown filter: filter wordcount is
unknown") or compute something else (llama.cpp's `|format` returns the format string as it is).
jinja2's `|map` and `|select` give a generator, which its `|tojson` refuses ("Object of type
generator is not JSON serializable"), where every other engine has a list and writes it; minijinja's
`|int` and `|float` raise on text that is not a number ("invalid float literal"), where the others give
0.

## Example
```jinja
{{- messages|map(attribute='role')|map('upper')|join(',') }}
```

## Use instead
```jinja
{%- for message in messages %}{{- message['role']|upper }}{%- if not loop.last %}{{- ',' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- ',ASSISTANT' }}{%- endif %}
```

## Fix safety
No fix: the portable spelling depends on the filter.
"""


# filters whose jinja2 result is a generator, not a list (``|list`` makes one)
_LAZY_FILTERS = frozenset({"map", "select", "reject", "selectattr", "rejectattr"})


def check_filter(node, ctx: LintContext) -> Iterator[Finding]:
    if ctx.inside(A.Macro):
        return  # macros render tool schemas: what reaches a filter there depends on the tool's shape
    if isinstance(node, A.Test):
        engines = set(TEST_GAPS.get(node.name, ()))
        if node.args and "(" not in ctx.text[node.node.span.end:node.args[0].span.start].split(node.name, 1)[-1]:
            engines.add(HFJS_BARE_ARGUMENT)  # ``x is divisibleby 3``: hfjs cannot parse it
        what = f"'is {node.name}'"
    else:
        engines = set(FILTER_GAPS.get(node.name, ()))
        first = node.args[0] if node.args else None
        if node.name == "map" and isinstance(first, A.Const) and isinstance(first.value, str):
            engines.update(("hfjs", "llamacpp"))
        elif node.name in ("selectattr", "rejectattr") and len(node.args) >= 2 and isinstance(node.args[1], A.Const) \
                and node.args[1].value in ("==", "!=", "<", ">", "<=", ">="):
            engines.update(("hfjs", "llamacpp"))
        elif node.name == "trim" and node.args:
            engines.add("hfjs")
        elif node.name == "replace" and len(node.args) >= 3:
            engines.add("llamacpp")
        elif node.name == "join" and any(kw.key == "attribute" for kw in node.kwargs):
            engines.add("hfjs")
        elif node.name in ("int", "float") and node.node is not None and ctx.is_key_ref(node.node, "content") \
                and not rejects_tool_turns(ctx):  # (templates parse tool results so: not where those all fail)
            engines.add("minijinja")  # text that is not a number: minijinja raises, the others give 0
        elif node.name == "tojson" and isinstance(node.node, A.Filter) and node.node.name in _LAZY_FILTERS:
            engines.update(("minijinja", "hfjs", "llamacpp"))  # jinja2's result is a generator: json.dumps refuses it
        what = f"'|{node.name}'"
    if not engines:
        return
    ordered = tuple(e for e in ENGINES if e in engines)
    yield Finding(node.span.start, node.span.end,
                  f"{what} as written here is missing in {engine_list(ordered)} (or gives another result)",
                  engines=ordered)


MUTATING_DOC = """\
## What it does
Finds calls of the list methods that change the list in place and llama.cpp runs: `.append()`,
`.pop()`, `.sort()`, `.reverse()`.

## Why is this bad?
transformers' sandbox refuses them: the render stops with `SecurityError: access to attribute
'append' of 'list' object is unsafe`. llama.cpp runs them, so the same template renders in
llama-server and fails in transformers, or takes another branch. (minijinja has no such methods on
its own lists either: it fails as transformers does.) Build lists with `namespace` and `+`, which
every engine runs the same way.

## Example
```jinja
{%- set names = [] %}{%- for message in messages %}{%- set _ = names.append(message['role']) %}{%- endfor %}{{- names|length }}
```

## Use instead
```jinja
{%- set ns = namespace(names=[]) %}{%- for message in messages %}{%- set ns.names = ns.names + [message['role']] %}{%- endfor %}{{- ns.names|length }}
```

## Fix safety
No fix.
"""


def check_mutating(call: A.Call, ctx: LintContext) -> Iterator[Finding]:
    found = _method_call(call, ctx)
    if found is None or found[1] not in MUTATING_ENGINES:
        return
    callee, method = found
    engines = tuple(e for e in ENGINES if e in MUTATING_ENGINES[method])
    yield Finding(callee.span.start, callee.span.end,
                  f"'.{method}()' changes a value in place: transformers' sandbox refuses it, {engine_list(engines)} "
                  f"{'runs' if len(engines) == 1 else 'run'} it", engines=engines)


RULES = {
    "PT001": pt_rule("PT001", "python-method", "A Python string/list/dict method some engine does not implement",
                     PYTHON_METHOD_DOC, ENGINES, (A.Call,), check_python_method),
    "PT002": pt_rule("PT002", "tojson-arguments", "tojson with keyword arguments other engines reject",
                     TOJSON_DOC, ("minijinja", "llamacpp"), (A.Filter,), check_tojson),
    "PT009": pt_rule("PT009", "missing-filter", "A filter or test some engine lacks or runs differently",
                     FILTER_DOC, ENGINES, (A.Filter, A.Test), check_filter),
    "PT012": pt_rule("PT012", "mutating-method", "A list method transformers refuses and llama.cpp runs",
                     MUTATING_DOC, ("llamacpp",), (A.Call,), check_mutating),
}
