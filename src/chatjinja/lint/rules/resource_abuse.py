"""SC005 resource-abuse: literal sizes far beyond any prompt, huge nested loops, doubling, endless recursion."""

from __future__ import annotations

import re
from typing import Iterator

from ..lexer import Token
from ..model import TemplateModel
from ..rule import Finding, Rule

DOC = """\
## What it does
Reports shapes that make a render take unbounded time or memory:
a literal repetition count, width, indent or range size of 100,000 or more (`'x' * 10**6`,
`range(1000000)`, `|indent(100000)`, `|center(...)`, `'%999999s'|format(...)`); an exponent of
1,000 or more (`**`); `range` loops nested so that their sizes multiply to 1,000,000 or more;
a variable doubled inside a loop (`{% set s = s + s %}`, `{% set ns.x = ns.x * 2 %}`); and a
macro that calls itself outside any `{% if %}`, i.e. on every path.

## Why is this bad?
No chat prompt is that large. A template from an untrusted model repository can use these to
exhaust memory or CPU in the process that renders it (a denial of service on an inference
server).

## Example
```jinja
{{- 'A' * 100000000 }}
```

## Use instead
```jinja
{{- 'A' * 3 }}
```

## Fix safety
No fix.
"""

LIMIT = 100_000
EXPONENT_LIMIT = 1_000
NESTED_LIMIT = 1_000_000
_WIDTH_FILTERS = frozenset({"indent", "center", "wordwrap", "truncate", "format", "batch", "slice"})
_PRINTF_WIDTH = re.compile(r"%[-+ 0#]*(\d+)")
_DIGIT = re.compile(r"\d")


def _int(tok: Token) -> int | None:
    if tok.kind == "int":
        try:
            return int(tok.value.replace("_", ""), 0)
        except ValueError:
            return None
    if tok.kind == "float":
        try:
            return int(float(tok.value.replace("_", "")))
        except (ValueError, OverflowError):
            return None
    return None


def _const(toks: list[Token], i: int) -> tuple[int | None, int]:
    """A constant integer expression starting at ``i`` (``10 ** 6``, ``1000 * 1000``): (value, next index)."""
    value = _int(toks[i]) if i < len(toks) else None
    if value is None:
        return None, i
    j = i + 1
    while j + 1 < len(toks) and toks[j].is_op("*", "**") and _int(toks[j + 1]) is not None:
        rhs = _int(toks[j + 1])
        if toks[j].value == "**":
            value = value ** min(rhs, 64) if value > 1 else value  # type: ignore[operator]
        else:
            value *= rhs  # type: ignore[operator]
        j += 2
    return value, j


def _range_size(toks: list[Token]) -> int | None:
    for i, tok in enumerate(toks):
        if tok.is_name("range") and i + 1 < len(toks) and toks[i + 1].is_op("("):
            args = []
            j = i + 2
            while j < len(toks) and not toks[j].is_op(")"):
                v, j2 = _const(toks, j)
                if v is None:
                    return None
                args.append(v)
                j = j2
                if j < len(toks) and toks[j].is_op(","):
                    j += 1
            if len(args) == 1:
                return args[0]
            if len(args) >= 2:
                step = args[2] if len(args) > 2 and args[2] else 1
                return max(0, (args[1] - args[0]) // abs(step))
    return None


def _sizes(model: TemplateModel, tag) -> Iterator[tuple[int, int, str]]:
    toks = tag.tokens
    for i, tok in enumerate(toks):
        if tok.is_op("**") and i + 1 < len(toks):
            v = _int(toks[i + 1])
            if v is not None and v >= EXPONENT_LIMIT:
                yield tok.start, toks[i + 1].end, f"exponent {v}"
                return
        if tok.is_op("*"):
            for side, j in (("right", i + 1), ("left", i - 1)):
                if 0 <= j < len(toks):
                    if side == "right":
                        v, _ = _const(toks, j)
                    else:
                        v = _int(toks[j])
                    if v is not None and v >= LIMIT:
                        yield tok.start, toks[j].end if side == "right" else tok.end, f"repetition by {v}"
                        return
        if tok.is_op("|") and i + 2 < len(toks) and toks[i + 1].kind == "name" and toks[i + 1].value in _WIDTH_FILTERS and toks[i + 2].is_op("("):
            v, _ = _const(toks, i + 3)
            if v is not None and v >= LIMIT:
                yield toks[i + 1].start, toks[min(i + 3, len(toks) - 1)].end, f"|{toks[i + 1].value} width {v}"
                return
        if tok.kind == "string" and "%" in tok.literal:
            for m in _PRINTF_WIDTH.finditer(tok.literal):
                if int(m.group(1)) >= LIMIT:
                    yield tok.start, tok.end, f"format width {m.group(1)}"
                    return
    size = _range_size(toks)
    if size is not None and size >= LIMIT:
        yield toks[0].start, toks[-1].end, f"range of {size}"


def _doubling(tag) -> bool:
    """``{% set x = x + x %}``, ``x ~ x``, ``x * 2``, ``2 * x`` (also for ``ns.x``)."""
    toks = tag.tokens
    eq = next((i for i, t in enumerate(toks) if t.kind == "op" and t.value == "="), None)
    if eq is None or eq < 2:
        return False
    target = "".join(t.value for t in toks[1:eq])
    value = "".join(t.value for t in toks[eq + 1 :])
    if value.startswith("(") and value.endswith(")"):
        value = value[1:-1]
    if value in (f"{target}+{target}", f"{target}~{target}"):
        return True
    for left, right in ((target + "*", ""), ("", "*" + target)):
        if value.startswith(left) and value.endswith(right):
            number = value[len(left) : len(value) - len(right)]
            if number.isdigit() and int(number) >= 2:
                return True
    return False


def check(model: TemplateModel) -> Iterator[Finding]:
    has_macro = any(tag.keyword == "macro" for tag in model.tags)
    for tag in model.tags:
        if tag.kind == "comment" or not tag.tokens:
            continue
        numeric = _DIGIT.search(model.text, tag.inner_start, tag.inner_end) is not None and any(
            t.kind in ("int", "float") or (t.kind == "string" and "%" in t.value) for t in tag.tokens
        )
        if numeric:
            for start, end, what in _sizes(model, tag):
                yield Finding(start, end, f"{what} is far beyond the size of any prompt (resource abuse)")
        if tag.keyword == "for" and numeric:
            size = _range_size(tag.tokens)
            if size is not None and size < LIMIT:
                product = size
                outer = 0
                for b in tag.scope:
                    if b.keyword == "for" and b.tag is not None:
                        s = _range_size(b.tag.tokens)
                        if s is not None:
                            product *= s
                            outer += 1
                if outer and product >= NESTED_LIMIT:
                    yield Finding(tag.start, tag.end, f"nested range loops run {product} times (resource abuse)")
        if tag.keyword == "set" and any(b.keyword == "for" for b in tag.scope) and _doubling(tag):
            yield Finding(tag.start, tag.end, "a value doubled on every loop iteration grows exponentially (resource abuse)")
        if has_macro and tag.scope:
            macro = next((b for b in reversed(tag.scope) if b.keyword == "macro"), None)
            if macro is None or len(macro.tag.tokens) < 2:
                continue
            name = macro.tag.tokens[1].value
            inner = tag.scope[tag.scope.index(macro) + 1 :]
            if any(b.keyword in ("if", "for") for b in inner):
                continue
            if tag.keyword in ("if", "elif", "for") or any(t.is_name("if", "and", "or") for t in tag.tokens):
                continue  # a conditional (statement or inline "x if c else y") can end the recursion
            for i, tok in enumerate(tag.tokens):
                if tok.is_name(name) and i + 1 < len(tag.tokens) and tag.tokens[i + 1].is_op("(") and not (i and tag.tokens[i - 1].is_op(".")):
                    yield Finding(tok.start, tok.end, f"macro '{name}' calls itself on every path: the recursion never "
                                  "ends (resource abuse)")
                    break


RULE = Rule("SC005", "resource-abuse", "error", "A shape that makes rendering take unbounded time or memory", DOC, check)
