"""SC002 sandbox-escape: attribute shapes used to break out of jinja2's sandbox (``__class__``, ``|attr``, ``.format``)."""

from __future__ import annotations

import re
from typing import Iterator

from ..lexer import Token
from ..model import TemplateModel
from ..rule import Finding, Rule

DOC = """\
## What it does
Reports the shapes server-side template injection payloads use to reach Python objects:
attribute or subscript access to names starting with `_` (`x.__class__`,
`x['__globals__']`, also when the key is held in a variable, spelt with escapes such as `'\\x5f\\x5fclass\\x5f\\x5f'` or
assembled from string pieces, joined or reversed), the `|attr(...)` filter, `.format(...)` / `.format_map(...)` on
anything but a string literal whose fields only name arguments (`'{0.__class__}'.format(x)` walks
attributes; `'<|image_{i:d}|>'.format(i=n)` does not), frame and code attributes (`gi_frame`, `f_globals`, `mro` ...), attribute names passed
as strings to `map`/`selectattr`/`rejectattr`/`sort`/`groupby`/`sum`/`unique`, and attribute access
on objects that exist only to be escaped through (`self`, `lipsum`, `cycler`, `joiner`, `config`,
`request`, `url_for`).

## Why is this bad?
No chat template needs any of these; they are how a template from an untrusted model repository
tries to run code in the process that renders it. jinja2's sandbox blocks the known ones today,
but a template that attempts them is hostile.

## Example
```jinja
{{- messages.__class__ }}
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
    "cr_frame cr_code ag_frame ag_code tb_frame tb_next co_code im_func im_self im_class format format_map".split()
)
_ESCAPE_OBJECTS = frozenset({"self", "lipsum", "cycler", "joiner", "config", "request", "url_for",
                             "get_flashed_messages"})
# A tag can only hold one of the shapes below if its text matches this (a cheap pre-check per tag).
_SUSPECT = re.compile(
    r"\.\s*_|['\"]_|__|attr|format|mro|_frame|_globals|_code|_locals|_builtins|f_back|tb_next|im_(?:func|self|class)"
    r"|func_|self|lipsum|cycler|joiner|config|request|url_for|get_flashed|\\[xuUN0-7]"
)
_ATTR_TAKING_FILTERS = frozenset({"attr", "map", "selectattr", "rejectattr", "sort", "groupby", "sum", "unique",
                                  "min", "max", "dictsort"})


def _folded_string(toks: list[Token], i: int, stop: int) -> str | None:
    """The constant value of ``toks[i:stop]`` when it is string literals joined by ``+``/``~`` (or reversed/joined)."""
    parts: list[str] = []
    expect_string = True
    j = i
    while j < stop:
        t = toks[j]
        if expect_string and t.kind == "string":
            parts.append(t.literal)
        elif not expect_string and t.is_op("+", "~"):
            pass
        elif not expect_string and t.is_op("|") and j + 1 < stop and toks[j + 1].is_name("reverse", "lower", "join", "trim"):
            name = toks[j + 1].value
            value = "".join(parts)
            parts = [value[::-1] if name == "reverse" else value.lower() if name == "lower" else value.strip() if name == "trim" else value]
            j += 2
            continue
        else:
            return None
        expect_string = not expect_string
        j += 1
    return "".join(parts) if parts else None


def _matching(toks: list[Token], i: int) -> int:
    """Index of the bracket closing ``toks[i]``."""
    pairs = {"[": "]", "(": ")", "{": "}"}
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].is_op("[", "(", "{"):
            depth += 1
        elif toks[j].is_op("]", ")", "}"):
            depth -= 1
            if depth == 0:
                return j
    return len(toks)


def _suspicious_name(value: str) -> bool:
    return value.startswith("_") or (value in _UNSAFE_ATTRS and value not in ("format", "format_map"))


_FIELD_RE = re.compile(r"\{([^{}]*)\}")


def _plain_format_literal(toks: list[Token], i: int) -> bool:
    """``'<|image_{i:d}|>'.format(...)``: a literal receiver whose fields only name arguments (no ``.x``/``[x]``)."""
    if i < 0 or toks[i].kind != "string":
        return False
    for m in _FIELD_RE.finditer(toks[i].literal):
        field = m.group(1).split(":", 1)[0].split("!", 1)[0]
        if "." in field or "[" in field:
            return False
    return True


def check(model: TemplateModel) -> Iterator[Finding]:
    suspect = _SUSPECT.search
    # variables holding a dunder-looking string ({% set k = '__class__' %}), later used as a key
    dunder_vars = {name for name, values in model.assignments.items()
                   if any(any(t.kind == "string" and "__" in t.literal for t in v) for _tag, v in values)}
    for tag in model.tags:
        toks = tag.tokens
        if not toks or (suspect(model.text, tag.inner_start, tag.inner_end) is None
                        and not (dunder_vars and any(t.kind == "name" and t.value in dunder_vars for t in toks))):
            continue
        n = len(toks)
        for i, tok in enumerate(toks):
            prev = toks[i - 1] if i else None
            nxt = toks[i + 1] if i + 1 < n else None
            if tok.kind == "name" and prev is not None and prev.is_op("."):
                if tok.value in ("format", "format_map"):
                    if nxt is not None and nxt.is_op("(") and not _plain_format_literal(toks, i - 2):
                        yield Finding(prev.start, tok.end, f"'.{tok.value}()' on a string that is not a plain literal "
                                      "(or whose fields reach attributes) is a sandbox-escape shape")
                    continue
                if tok.value.startswith("_") or tok.value in _UNSAFE_ATTRS:
                    yield Finding(prev.start, tok.end, f"attribute '.{tok.value}' is a sandbox-escape shape")
                    continue
            if tok.kind == "name" and prev is not None and prev.is_op("|") and tok.value == "attr":
                yield Finding(prev.start, tok.end, "the |attr filter reads arbitrary attributes (a sandbox-escape shape)")
                continue
            if tok.kind == "name" and tok.value in _ESCAPE_OBJECTS and not (prev is not None and prev.is_op(".")) and nxt is not None and nxt.is_op(".", "["):
                yield Finding(tok.start, nxt.end, f"'{tok.value}' is only useful to reach Python internals (a sandbox-escape shape)")
                continue
            if tok.is_op("[") and prev is not None and not prev.is_op("(", ",", "[", "=", "==", "!=", "+", "~", "{", ":", "|") and not (prev.kind == "name" and prev.value in ("in", "and", "or", "not", "if", "else", "is", "return")):
                close = _matching(toks, i)
                value = _folded_string(toks, i + 1, close)
                if value is not None and _suspicious_name(value):
                    yield Finding(tok.start, toks[min(close, n - 1)].end, f"subscript {value!r} is a sandbox-escape shape")
                    continue
                pieces = [t.literal for t in toks[i + 1 : close]
                          if (t.kind == "string" and ("__" in t.literal or t.literal.startswith("_")))
                          or (t.kind == "name" and t.value in dunder_vars)]
                if pieces:
                    yield Finding(tok.start, toks[min(close, n - 1)].end, f"subscript built from {pieces[0]!r} is a "
                                  "sandbox-escape shape (a dunder name assembled at render time)")
                    continue
            if tok.kind == "string" and tok.literal.startswith("_") and _in_attr_filter_args(toks, i):
                yield Finding(tok.start, tok.end, f"attribute name {tok.literal!r} passed to a filter is a sandbox-escape shape")


def _in_attr_filter_args(toks: list[Token], i: int) -> bool:
    """Whether the string at ``i`` is inside the argument list of a filter that takes attribute names."""
    depth = 0
    for j in range(i - 1, -1, -1):
        t = toks[j]
        if t.is_op(")", "]", "}"):
            depth += 1
        elif t.is_op("(", "[", "{"):
            if depth == 0:
                return t.is_op("(") and j >= 2 and toks[j - 1].kind == "name" and toks[j - 1].value in _ATTR_TAKING_FILTERS and toks[j - 2].is_op("|")
            depth -= 1
    return False


RULE = Rule("SC002", "sandbox-escape", "error", "A sandbox-escape shape (dunder attribute, |attr, .format)", DOC, check)
