"""WS001 leaked-whitespace: indentation and newlines between tags that trim_blocks/lstrip_blocks keep."""

from __future__ import annotations

import re
from typing import Iterable, Iterator

from ...syntax import ast as A
from ...syntax.visitor import child_fields
from ..context import LintContext
from ..diagnostic import Edit, Fix
from ..rule import Finding, Rule

DOC = """\
## What it does
Finds text between tags that is made only of spaces, tabs and newlines and that survives the
whitespace control transformers uses (`trim_blocks=True`, `lstrip_blocks=True`): `trim_blocks`
removes only the first newline after a `%}` or `#}`, and `lstrip_blocks` removes only the spaces
and tabs before a `{%` or `{#` at the start of a line — never before `{{`, and never the newline
that ends the previous line when that line ends in `}}`. A `+` marker that keeps whitespace on
purpose is respected. Whitespace the template writes on purpose is not reported: a single
separator between two `{{ }}` tags on the same line, a bare newline between two `{{ }}` tags,
newlines ending a line that writes the template's own text (`{"name": ...},` in a JSON list laid
out one item per line), a bare newline ending a line that starts with a `{{ }}` (or an indented
`{{- }}`) inside a loop body (one item per line, as in GLM-4.6's `{% for tool in tools %}` /
`{{ tool | tojson }}` / `{% endfor %}` or MiniMax-M2's `<invoke name="...">` lines), newlines
ending a `{{ }}` that starts a line inside a block of raw text (Seed-OSS's docstring-like tool list:
`\"\"\"` / `    {{ description }}` / a blank line), a newline after a `{{ }}` that ends with a
string literal when the template writes that same line followed by a newline elsewhere
(`{{ '### Response:' }}` then a newline, where the messages write `'### Response:\\n'`), one blank
line after a block tag whose `{%-` strips the layout before it, once something has been written
(`{%- if tools %}`, a blank line, the next paragraph: the author removes every other line break and
keeps this one), and whitespace that is the whole of an `if`/`for` branch
(`{% if not loop.last %}\\n\\n{% endif %}`). Nor is whitespace in a branch that calls
`raise_exception`, which writes nothing. Text that holds anything but whitespace is the template's
own output and never reported.

## Why is this bad?
Indentation that makes a template readable ends up in the prompt: the model sees newlines and
spaces its training data never had (the Mistral V1 template printed with indentation renders
`"<s>\\n         [INST] Hello ..."` instead of `"<s> [INST] Hello ..."`).

## Example
```jinja
{% for message in messages %}
    {{ loop.index }}
{% endfor %}
```

## Use instead
```jinja
{% for message in messages %}
    {{- loop.index }}
{%- endfor %}
```

## Fix safety
The fix is unsafe (applied only with `--fix --unsafe-fixes`): it adds one `-` marker per leaking
run, on the tag after it (`{{-`, `{%-`) or, at the end of the template, on the tag before it
(`-}}`). It removes exactly the reported whitespace, which changes the rendered prompt: removing
that whitespace is the purpose of the fix, and only the template's author knows the prompt the
model was trained on.
"""

_LAYOUT = frozenset(" \t\r\n")


def _describe(s: str) -> str:
    return repr(s).replace("'", '"') if len(s) <= 24 else repr(s[:20]).replace("'", '"')[:-1] + '..."'


def open_text(tag: A.Tag) -> str:
    head = "{{" if tag.name == "{{" else "{#" if tag.name == "{#" else "{%"
    return head + ("-" if tag.strip_left else "+" if tag.keep_left else "")


def close_text(tag: A.Tag) -> str:
    tail = "}}" if tag.name == "{{" else "#}" if tag.name == "{#" else "%}"
    return ("-" if tag.strip_right else "+" if tag.keep_right else "") + tail


_TAG = re.compile(r"\{[{%#].*?[}%#]\}", re.S)


def _intended(ctx: LintContext, before: A.Tag | None, after: A.Tag | None, ws: str, start: int) -> bool:
    if (before is not None and before.keep_right) or (after is not None and after.keep_left):
        return True
    if before is not None and before.name == "{{" and after is not None and after.name == "{{":
        # "{{ a }} {{ b }}" or "{{ a }}\n{{ b }}": a separator, not layout
        return ws in (" ", "\n", "\r\n") or "\n" not in ws
    if ws.strip("\r\n"):
        return False  # spaces or tabs: indentation
    text = ctx.text
    line_start = text.rfind("\n", 0, start) + 1
    if _TAG.sub("", text[line_start:start]).strip():
        return True  # the newline ends a line of the template's own text ('{"name": ...},' then a newline)
    if before is not None and line_start == start:
        # the line's own newline went with the tag before (trim_blocks): what remains separates that line's text
        tag_line = text.rfind("\n", 0, before.span.start) + 1
        if _TAG.sub("", text[tag_line : before.span.start]).strip():
            return True
    if before is not None and before.name == "{{" and ws in ("\n", "\r\n") and ctx.inside(A.For):
        # a loop body writing one item per line: "{{ item }}" (or an indented "{{- item }}") starts its line
        prefix = text[line_start : before.span.start]
        if prefix == "" or (before.strip_left and not prefix.strip(" \t")):
            return True
    if before is not None and before.name == "{{":
        facts = _text_facts(ctx)
        if before.span.start in facts.embedded:
            return True  # "    {{ description }}" on a line of a raw-text block: its newline is part of that text
        tail = facts.literal_tail.get(before.span.start)
        if tail and tail in facts.line_ends:
            return True  # "{{ '### Response:' }}" then a newline, where the template writes '### Response:\n' too
    if (before is not None and before.name != "{{" and before.strip_left and line_start == start
            and ws in ("\n", "\r\n") and _text_facts(ctx).first_written < start):
        # "{%- if tools %}", a blank line, then the next paragraph: the author strips the layout before the
        # tag with "-" and keeps one blank line after it, once the prompt has begun
        return True
    return False


class _TextFacts:
    """What WS001 knows of the template's own text, built once per template in linear time."""

    __slots__ = ("embedded", "literal_tail", "line_ends", "first_written")

    def __init__(self, ctx: LintContext):
        text = ctx.text
        #: starts of ``{{`` tags that begin a line inside raw text (the text node before them holds words and
        #: ends with a newline and indentation)
        self.embedded: set[int] = set()
        #: start of a ``{{ }}`` tag -> the last line of the string literal its expression ends with
        self.literal_tail: dict[int, str] = {}
        #: every line of the template's own text (string literals and raw text) that a newline ends
        self.line_ends: set[str] = set()
        for data in ctx.nodes(A.Data):
            _add_line_ends(self.line_ends, data.text)
            after = ctx.tag_starting_at.get(data.span.end)
            if after is not None and after.name == "{{":
                head, newline, indent = data.text.rpartition("\n")
                if newline and not indent.strip(" \t") and head.strip():
                    self.embedded.add(after.span.start)
        for const in ctx.nodes(A.Const):
            if isinstance(const.value, str):
                _add_line_ends(self.line_ends, const.value)
        for output in ctx.nodes(A.Output):
            last = _last_literal(output.expr)
            if last is not None:
                self.literal_tail[output.tag.span.start] = last.rpartition("\n")[2]
        #: offset of the first thing written outside a macro or ``{% set %}`` block (the prompt's beginning)
        self.first_written = len(text)
        captured = sorted((n.span.start, n.span.end) for kind in (A.Macro, A.SetBlock) for n in ctx.nodes(kind))
        written = [n.span.start for n in ctx.nodes(A.Output)]
        written += [n.span.start for n in ctx.nodes(A.Data) if not _LAYOUT.issuperset(n.text)]
        written.sort()
        i = 0
        for at in written:
            while i < len(captured) and captured[i][1] <= at:
                i += 1
            if i < len(captured) and captured[i][0] <= at:
                continue  # inside a macro or a set block: captured, not written here
            self.first_written = at
            break


_LINE_END_CAP = 200  # characters of a line kept for the comparison (longer lines are prose, never a tag's tail)


def _add_line_ends(found: set[str], value: str) -> None:
    lines = value.split("\n")
    for line in lines[:-1]:
        if line and len(line) <= _LINE_END_CAP:
            found.add(line)


def _last_literal(expr) -> str | None:
    """The string literal an output expression ends with (``'a' + x + 'b'`` -> ``'b'``), None when it ends otherwise."""
    while True:
        if isinstance(expr, A.Const):
            return expr.value if isinstance(expr.value, str) else None
        if isinstance(expr, A.BinOp) and expr.op == "+":
            expr = expr.right
        elif isinstance(expr, A.Concat) and expr.items:
            expr = expr.items[-1]
        else:
            return None


def _text_facts(ctx: LintContext) -> _TextFacts:
    facts = ctx.scratch.get("WS001-text")
    if facts is None:
        facts = ctx.scratch["WS001-text"] = _TextFacts(ctx)
    return facts


def _arms(ctx: LintContext) -> dict[int, tuple[object, int, bool]]:
    """Each text node → (the node whose branch holds it, the branch's length, whether the branch raises); built once."""
    found = ctx.scratch.get("WS001")
    if found is None:
        found = {}
        for kind in _ARM_KINDS:
            for node in ctx.by_type.get(kind, ()):
                for name in ("body", "else_body"):
                    arm = getattr(node, name, None)
                    if not isinstance(arm, tuple) or not arm:
                        continue
                    raises = any(_raises(stmt) for stmt in arm)
                    for item in arm:
                        if isinstance(item, A.Data):
                            found[id(item)] = (node, len(arm), raises)
        ctx.scratch["WS001"] = found
    return found


# the node classes with a statement list (``body``, ``else_body``)
_ARM_KINDS = tuple(cls for cls in A.node_classes()
                   if any(name in ("body", "else_body") and many for name, many in child_fields(cls)))


def _raises(stmt) -> bool:
    expr = stmt.expr if isinstance(stmt, A.Output) else None
    return isinstance(expr, A.Call) and isinstance(expr.node, A.Name) and expr.node.name == "raise_exception"


def _deliberate(ctx: LintContext, data: A.Data) -> bool:
    """Whitespace the template writes on purpose, or never writes."""
    owner, length, raises = _arms(ctx).get(id(data), (None, 0, False))
    if length == 1 and isinstance(owner, (A.If, A.Elif, A.For)):
        return True  # "{% if not loop.last %}\\n\\n{% endif %}": a branch that exists to write this whitespace
    return raises  # a branch that raises writes nothing


def _fix(before: A.Tag | None, after: A.Tag | None) -> Fix | None:
    if after is not None and not after.strip_left:
        at = after.span.start + 2
        return Fix(f"Add '-' to '{open_text(after)}'", (Edit(at, at, "-"),), safe=False)
    if before is not None and not before.strip_right and after is None:
        at = before.span.end - 2
        return Fix(f"Add '-' to '{close_text(before)}'", (Edit(at, at, "-"),), safe=False)
    return None


def _where(tag: A.Tag | None, side: str) -> str:
    if tag is None:
        return "the start of the template" if side == "before" else "the end of the template"
    return f"'{close_text(tag)}'" if side == "before" else f"'{open_text(tag)}'"


def check(data: A.Data, ctx: LintContext) -> Iterable[Finding]:
    start, end = ctx.kept.get(data.span.start, (0, 0))
    if end <= start:
        return ()
    ws = ctx.text[start:end]
    return _findings(data, ctx, start, end, ws) if _LAYOUT.issuperset(ws) else ()


def _findings(data: A.Data, ctx: LintContext, start: int, end: int, ws: str) -> Iterator[Finding]:
    before = ctx.tag_ending_at.get(data.span.start)
    after = ctx.tag_starting_at.get(data.span.end)
    if _intended(ctx, before, after, ws, start) or _deliberate(ctx, data):
        return
    message = (
        f"whitespace {_describe(ws)} between {_where(before, 'before')} and {_where(after, 'after')} "
        "is written into the prompt (trim_blocks/lstrip_blocks do not remove it)"
    )
    yield Finding(start, end, message, _fix(before, after))


RULE = Rule("WS001", "leaked-whitespace", "warning", "Whitespace from template layout is written into the prompt",
            DOC, (A.Data,), check, fixable=True)
