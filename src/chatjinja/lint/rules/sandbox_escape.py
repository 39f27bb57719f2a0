"""SC002 sandbox-escape: attribute shapes used to break out of jinja2's sandbox (``__class__``, ``|attr``, ``.format``)."""

from __future__ import annotations

import re
from typing import Iterable, Iterator

from ...syntax import ast as A
from ...syntax.visitor import walk
from ..caller_data import CONTEXT_GLOBALS, caller_data
from ..context import LintContext, const_str, constant
from ..rule import Finding, Rule

DOC = """\
## What it does
Reports the shapes server-side template injection payloads use to reach Python objects:
attribute or subscript access to names starting with `_` (`x.__class__`,
`x['__globals__']`, assigning one: `{% set ns.__dict__ = {} %}`, also when the key is held in a variable, spelt with escapes such as `'\\x5f\\x5fclass\\x5f\\x5f'` or
assembled from string pieces, joined or reversed), the `|attr(...)` filter, `.format(...)` / `.format_map(...)` on
anything but a string literal whose fields only name arguments (`'{0.__class__}'.format(x)` walks
attributes; `'<|image_{i:d}|>'.format(i=n)` does not), frame and code attributes (`gi_frame`, `f_globals`, `mro` ...), attribute names passed
as strings to `map`/`selectattr`/`rejectattr`/`sort`/`groupby`/`sum`/`unique`, and attribute access
on objects that exist only to be escaped through (`self`, `lipsum`, `cycler`, `joiner`, `config`,
`request`, `url_for`), underscore keyword names given to `namespace(...)`, a bound `.format` stored
instead of called (`{% set f = '{0.__init__}'.format %}`), and mutating method calls on the
caller's data (`messages.append(...)`, `messages[0].update(...)`, `.insert`, `.pop`, `.clear`,
`.sort` ...), followed through `{% set %}` variables, loop variables, namespace attributes and
macro parameters. Where they run on every render (not under an `if`, a loop or a macro), also mutating
calls on a list or dict the template built (`{% set d = {} %}{{ d.setdefault('k', 1) }}`) and
`{% set x.attr = ... %}` on a value that is never a namespace (`{% set x = messages %}{% set x.role = 'system' %}`):
jinja2 refuses both. And calls of a method no JSON value has on the caller's data
(`messages[0].content.run()`, `messages[0]['run']()`): they reach only a Python object the caller passed in.

## Why is this bad?
No chat template needs any of these; they are how a template from an untrusted model repository
tries to run code in the process that renders it. jinja2's sandbox blocks the known ones today,
but a template that attempts them is hostile.

## Example
```jinja
{{- messages.__class__ }}
```
```jinja
{%- set ns = namespace() %}{%- set ns.__dict__ = {} %}
```

The shapes found through values:
```jinja
{%- set d = {'a': 1} %}{{- d.setdefault('b', 2) }}
```
```jinja
{%- set x = messages %}{%- set x.role = 'system' %}
```
```jinja
{{- messages[0].content.run() }}
```

## Use instead
```jinja
{{- messages|length }}
```

## Fix safety
No fix.
"""

_UNSAFE_ATTRS = frozenset(
    "mro func_globals func_code func_closure f_globals f_locals f_builtins f_back f_code gi_frame gi_code "
    "cr_frame cr_code ag_frame ag_code tb_frame tb_next co_code im_func im_self im_class".split()
)
_FORMATS = frozenset({"format", "format_map"})
_ESCAPE_OBJECTS = frozenset({"self", "lipsum", "cycler", "joiner", "config", "request", "url_for",
                             "get_flashed_messages"})
_ATTR_TAKING_FILTERS = frozenset({"map", "selectattr", "rejectattr", "sort", "groupby", "sum", "unique",
                                  "min", "max", "dictsort"})
_MUTATORS = frozenset({"append", "insert", "pop", "popitem", "clear", "update", "extend", "remove", "sort",
                       "reverse", "setdefault", "add", "discard"})
# the methods of the values JSON decodes to: a call of any other method reaches only a caller's Python object
_JSON_METHODS = frozenset(name for kind in (str, list, dict, int, float, bool) for name in dir(kind)
                          if not name.startswith("_"))
_BRANCHES = (A.If, A.For, A.Macro, A.CallBlock)  # a statement inside one of these is not reached on every render
_CHOICES = (A.CondExpr, A.And, A.Or)  # nor is an expression inside one of these
_FIELD_RE = re.compile(r"\{([^{}]*)\}")


def _suspicious(value) -> bool:
    return isinstance(value, str) and (value.startswith("_") or value in _UNSAFE_ATTRS)


def _plain_format_literal(ctx: LintContext, receiver) -> bool:
    """``'<|image_{i:d}|>'.format(...)``: every value of the receiver is a literal whose fields only name arguments."""
    values = [v for v in ctx.values(receiver) if not isinstance(v, A.Name)]
    if not values:
        return False
    for value in values:
        text = const_str(value)
        if text is None:
            return False
        for m in _FIELD_RE.finditer(text):
            field = m.group(1).split(":", 1)[0].split("!", 1)[0]
            if "." in field or "[" in field:
                return False
    return True


def _after(ctx: LintContext, node, mark: str) -> int:
    """Offset of ``mark`` after the node's receiver (the ``.`` of an attribute, the ``[`` of a subscript)."""
    at = ctx.text.find(mark, node.node.span.end, node.span.end) if node.node is not None else -1
    return at if at != -1 else node.span.start


def _getattr(node: A.Getattr, ctx: LintContext) -> Iterable[Finding]:
    attr = node.attr
    if not (attr in _FORMATS or attr in _MUTATORS or attr.startswith("_") or attr in _UNSAFE_ATTRS):
        if attr in _JSON_METHODS:
            return ()  # (the last case below: a method no JSON value has)
        parent = ctx.parent_of(node)
        if not (isinstance(parent, A.Call) and parent.node is node):
            return ()
    return _getattr_findings(node, ctx)


def _getattr_findings(node: A.Getattr, ctx: LintContext) -> Iterator[Finding]:
    attr = node.attr
    dot = ctx.text.rfind(".", node.node.span.end, node.span.end)
    start = dot if dot != -1 else node.span.start
    parent = ctx.parent_of(node)
    called = isinstance(parent, A.Call) and parent.node is node
    if attr in _FORMATS:
        if not called:
            yield Finding(start, node.span.end, f"'.{attr}' is kept as a bound method instead of called; a stored "
                          "format method walks attributes of whatever it is given (a sandbox-escape shape)")
        elif not _plain_format_literal(ctx, node.node):
            yield Finding(start, node.span.end, f"'.{attr}()' on a string that is not a plain literal "
                          "(or whose fields reach attributes) is a sandbox-escape shape")
        return
    if attr.startswith("_") or attr in _UNSAFE_ATTRS:
        yield Finding(start, node.span.end, f"attribute '.{attr}' is a sandbox-escape shape")
        return
    if attr in _MUTATORS:
        how = "calls" if called else "keeps the bound method"
        if caller_data(ctx, node.node):
            yield Finding(start, node.span.end, f"'{ctx.source_text(node)}' {how} .{attr} on the caller's data: "
                          "a template must not mutate its inputs (a sandbox-escape shape)")
        elif _on_every_render(ctx, _BRANCHES + _CHOICES) and _built_container(ctx, node.node):
            yield Finding(start, node.span.end, f"'{ctx.source_text(node)}' {how} .{attr} on a list or dict the "
                          "template built, on every render: the sandbox refuses every mutating method "
                          "(a sandbox-escape shape)")
        return
    if called and attr not in _JSON_METHODS and _data_path(node.node) and caller_data(ctx, node.node):
        yield Finding(start, node.span.end, f"'{ctx.source_text(node)}()' calls a method no JSON value has on the "
                      "caller's data: it only reaches a Python object the caller passed in (a sandbox-escape shape)")


def _on_every_render(ctx: LintContext, branches: tuple[type, ...]) -> bool:
    """No ``if``, loop, macro or call block (or, for an expression, ``x if c`` / ``and`` / ``or``) encloses the node."""
    return not any(ctx.open_counts[k] for k in branches)


def _built_container(ctx: LintContext, receiver) -> bool:
    """Whether ``receiver`` may be a list or dict literal of the template's own (or ``dict(...)``)."""
    return any(isinstance(v, (A.List, A.Dict))
               or isinstance(v, A.Call) and isinstance(v.node, A.Name) and v.node.name == "dict"
               for v in ctx.values(receiver))


def _data_path(expr) -> bool:
    """``messages[0].content``: attributes and subscripts down to a name (no filter or call changes the value)."""
    while isinstance(expr, (A.Getattr, A.Getitem)):
        expr = expr.node
    return isinstance(expr, A.Name)


def _nsref(node: A.NSRef, ctx: LintContext) -> Iterable[Finding]:
    return _nsref_findings(node, ctx) if node.attr.startswith("_") else ()


def _nsref_findings(node: A.NSRef, ctx: LintContext) -> Iterator[Finding]:
    """``{% set ns.__dict__ = {} %}`` (also in a tuple target or a ``{% set %}`` block): an underscore attribute
    assigned, wherever it is; the namespace refuses it as it refuses reading one."""
    dot = ctx.text.find(".", node.span.start, node.span.end)
    yield Finding(dot if dot != -1 else node.span.start, node.span.end, f"attribute '.{node.attr}' assigned on "
                  f"'{node.name}' is a sandbox-escape shape")


def _set(node: A.Set, ctx: LintContext) -> Iterable[Finding]:
    target = node.target
    # (an underscore attribute is reported where it is named, by _nsref)
    return _set_findings(node, ctx) if isinstance(target, A.NSRef) and not target.attr.startswith("_") else ()


def _set_findings(node: A.Set, ctx: LintContext) -> Iterator[Finding]:
    """``{% set x.attr = v %}`` reached on every render with ``x`` provably not a namespace: jinja2 refuses it."""
    target = node.target
    if not isinstance(target, A.NSRef) or not _on_every_render(ctx, _BRANCHES):
        return
    if _never_namespace(ctx, target.name):
        span = node.tag.span
        yield Finding(span.start, span.end, f"'{{% set {target.name}.{target.attr} %}}' assigns an attribute of "
                      f"'{target.name}', which is never a namespace: an attempt to mutate the caller's data or a "
                      "literal, which jinja2 refuses on every render (a sandbox-escape shape)")


def _never_namespace(ctx: LintContext, name: str, depth: int = 0) -> bool:
    """Whether every value the variable ``name`` can hold is something other than a ``namespace(...)``."""
    if depth > 6 or name in ctx.loop_sources:
        return False
    values = ctx.assignments.get(name)
    if not values:
        return name not in CONTEXT_GLOBALS  # the caller's data: JSON holds no namespace
    return all(_not_namespace_value(ctx, v, depth + 1) for v in values)


def _not_namespace_value(ctx: LintContext, value, depth: int) -> bool:
    if isinstance(value, (A.Const, A.List, A.Dict, A.Tuple, A.Concat, A.BinOp, A.Compare)):
        return True
    while isinstance(value, (A.Getattr, A.Getitem)):
        value = value.node
    return isinstance(value, A.Name) and _never_namespace(ctx, value.name, depth)


def _getitem(node: A.Getitem, ctx: LintContext) -> Iterable[Finding]:
    arg = node.arg
    if type(arg) is A.Const:  # (``messages[0]``: the cases below, each for a constant at a glance)
        value = arg.value
        if not _suspicious(value) and not (isinstance(value, str) and (value in _FORMATS or "__" in value)):
            parent = ctx.parent_of(node)
            if not (isinstance(parent, A.Call) and parent.node is node):
                return ()
    return _getitem_findings(node, ctx)


def _getitem_findings(node: A.Getitem, ctx: LintContext) -> Iterator[Finding]:
    if isinstance(node.arg, A.Slice):
        return
    start = _after(ctx, node, "[")
    value = None
    for candidate in ctx.values(node.arg):
        folded = constant(ctx, candidate)
        if _suspicious(folded):
            value = folded
            break
    if value is None:
        key = constant(ctx, node.arg)
        parent = ctx.parent_of(node)
        if isinstance(key, str) and key in _FORMATS and (const_str(node.node) is not None or (isinstance(parent, A.Call) and parent.node is node)):
            value = key  # 'str'['format'](...): the format method fetched with a subscript
    if value is not None:
        yield Finding(start, node.span.end, f"subscript {value!r} is a sandbox-escape shape")
        return
    parent = ctx.parent_of(node)
    if isinstance(parent, A.Call) and parent.node is node and _data_path(node) and caller_data(ctx, node.node):
        yield Finding(start, node.span.end, f"'{ctx.source_text(node)}()' calls an item of the caller's data: no JSON "
                      "value is callable, so it only reaches a Python object the caller passed in (a sandbox-escape "
                      "shape)")
        return
    for inner in walk(node.arg):
        text = const_str(inner)
        if text is not None and ("__" in text or text.startswith("_")):
            yield Finding(start, node.span.end, f"subscript built from {text!r} is a sandbox-escape shape "
                          "(a dunder name assembled at render time)")
            return


def _filter(node: A.Filter, ctx: LintContext) -> Iterable[Finding]:
    return _filter_findings(node, ctx) if node.name == "attr" or node.name in _ATTR_TAKING_FILTERS else ()


def _filter_findings(node: A.Filter, ctx: LintContext) -> Iterator[Finding]:
    base = node.node.span.end if node.node is not None else node.span.start
    name_at = ctx.text.find(node.name, base, node.span.end)
    bar = ctx.text.rfind("|", base, name_at + 1) if name_at != -1 else -1
    if node.name == "attr":
        yield Finding(bar if bar != -1 else node.span.start, name_at + 4 if name_at != -1 else node.span.end,
                      "the |attr filter reads arbitrary attributes (a sandbox-escape shape)")
        return
    if node.name in _ATTR_TAKING_FILTERS:
        for arg in (*node.args, *(kw.value for kw in node.kwargs)):
            value = constant(ctx, arg)
            if isinstance(value, str) and value.startswith("_"):
                yield Finding(arg.span.start, arg.span.end, f"attribute name {value!r} passed to a filter is a "
                              "sandbox-escape shape")
                return


def _call(node: A.Call, ctx: LintContext) -> Iterable[Finding]:
    callee = node.node
    return _call_findings(node, ctx) if isinstance(callee, A.Name) and callee.name == "namespace" else ()


def _call_findings(node: A.Call, ctx: LintContext) -> Iterator[Finding]:
    if isinstance(node.node, A.Name) and node.node.name == "namespace":
        for kw in node.kwargs:
            if kw.key.startswith("_"):
                yield Finding(kw.span.start, kw.span.end, f"namespace() given the underscore name {kw.key!r} "
                              "(a sandbox-escape shape)")
                return
        if node.dyn_kwargs is not None:
            for value in ctx.values(node.dyn_kwargs):
                if isinstance(value, A.Dict) and any(_suspicious(constant(ctx, p.key)) for p in value.items):
                    yield Finding(node.dyn_kwargs.span.start, node.dyn_kwargs.span.end, "namespace() given "
                                  "underscore names through **kwargs (a sandbox-escape shape)")
                    return


def _name(node: A.Name, ctx: LintContext) -> Iterable[Finding]:
    return _name_findings(node, ctx) if node.name in _ESCAPE_OBJECTS else ()


def _name_findings(node: A.Name, ctx: LintContext) -> Iterator[Finding]:
    if node.name not in _ESCAPE_OBJECTS or node.name in ctx.assignments or node.name in ctx.loop_sources:
        return
    parent = ctx.parent_of(node)
    if isinstance(parent, (A.Getattr, A.Getitem)) and parent.node is node:
        yield Finding(node.span.start, min(node.span.end + 1, parent.span.end), f"'{node.name}' is only useful to "
                      "reach Python internals (a sandbox-escape shape)")


_CHECKS = {A.Getattr: _getattr, A.Getitem: _getitem, A.Filter: _filter, A.Call: _call, A.Name: _name, A.Set: _set,
           A.NSRef: _nsref}


def check(node, ctx: LintContext) -> Iterator[Finding]:
    return _CHECKS[type(node)](node, ctx)


RULE = Rule("SC002", "sandbox-escape", "error", "A sandbox-escape shape (dunder attribute, |attr, .format)", DOC,
            tuple(_CHECKS), check, checks=_CHECKS)
