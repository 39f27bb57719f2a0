"""The Lark transformer that turns parse-tree rules into AST dataclasses (run inline by the LALR parser).

It also performs jinja2's post-parse checks that a context-free grammar cannot express
(assignment targets, call blocks that must call, parameter order, required blocks, ...),
raising :class:`~chatjinja.errors.TemplateSyntaxError` with jinja2's wording.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from bisect import bisect_right
from operator import itemgetter
from typing import Any

from lark import Transformer

from ..errors import TemplateSyntaxError
from ..source import LineIndex, Span
from . import ast as A

_CONST_NAMES = {"true": True, "True": True, "false": False, "False": False, "none": None, "None": None}
TAG_NAMES = frozenset(
    """if elif else endif for endfor set endset macro endmacro call endcall filter endfilter with
    endwith autoescape endautoescape block endblock generation endgeneration break continue print
    include import from extends""".split()
)
_TAG_NAMES = {"TAG_" + name.upper(): name for name in TAG_NAMES}  # terminal -> tag name
_RAW_PARTS = re.compile(r"\{%([-+]?)\s*raw\s*(-?)%\}(.*?)\{%([-+]?)\s*endraw\s*([-+]?)%\}", re.S)


# A token is a plain tuple (type, value, start, end): the terminal name, the text and 0-based
# offsets (end exclusive); the callbacks below read tok[1], tok[2], tok[3]. Tuples are the
# cheapest objects to make, and most of what a parse makes is tokens.


class LarkToken(tuple):
    """A token as Lark's own parse loop (run by the tests beside the fast driver) reads it."""

    __slots__ = ()
    type = property(itemgetter(0))
    value = property(itemgetter(1))
    start_pos = property(itemgetter(2))
    end_pos = property(itemgetter(3))
    line = column = end_line = end_column = None  # what lark.Token.new_borrow_pos copies for $END


def is_token(x: Any) -> bool:
    """Is a parser stack value a token? (Other stack values are nodes, lists and helper objects;
    the only other tuples hold nodes or have another length.)"""
    return isinstance(x, tuple) and len(x) == 4 and type(x[0]) is str


def _span_maker():
    """``Span(line, column, end_line, end_column, start, end)``, about three times as fast.

    Span is a frozen slotted dataclass: its ``__init__`` stores each field through
    ``object.__setattr__``. A bare object of a plain slotted class with the same slots takes
    the fields by direct stores (no ``__init__`` call: calling a class with a Python
    ``__init__`` costs more than the stores), then becomes a Span by class assignment (same
    memory layout), giving an object equal in every way to one the constructor makes. If Span
    ever changes so that this no longer holds, the constructor is used.
    """
    names = ("line", "column", "end_line", "end_column", "start", "end")

    class _Unfrozen:
        __slots__ = names

    new = object.__new__

    def make(line: int, column: int, end_line: int, end_column: int, start: int, end: int) -> Span:
        span = new(_Unfrozen)
        span.line = line
        span.column = column
        span.end_line = end_line
        span.end_column = end_column
        span.start = start
        span.end = end
        span.__class__ = Span
        return span

    try:
        plain = tuple(f.name for f in dataclasses.fields(Span)) == names and not hasattr(Span, "__post_init__")
        made = make(1, 2, 3, 4, 5, 6) if plain else None
    except TypeError:  # the layouts differ
        made = None
    real = Span(1, 2, 3, 4, 5, 6)
    if made is None or type(made) is not Span or made != real or hash(made) != hash(real):
        return Span
    return make


new_span = _span_maker()


def cover(first: Span, last: Span) -> Span:
    """From the start of ``first`` to the end of ``last`` (no line lookup needed)."""
    return new_span(first.line, first.column, last.end_line, last.end_column, first.start, last.end)


def _start(x: Any) -> int:
    """Start offset of a token or a node."""
    return x[2] if isinstance(x, tuple) else x.span.start


def _end(x: Any) -> int:
    """End offset of a token or a node."""
    return x[3] if isinstance(x, tuple) else x.span.end


class OpenTag:
    """A block's opening tag, reduced before its body is parsed (errors name the open blocks)."""

    __slots__ = ("kind", "tag", "payload")

    def __init__(self, kind: str, tag: A.Tag, payload: Any = None):
        self.kind = kind
        self.tag = tag
        self.payload = payload


class ElseBranch:
    """``{% else %}`` and the body after it, until the enclosing if/for is complete."""

    __slots__ = ("tag", "body")

    def __init__(self, tag: A.Tag, body: tuple):
        self.tag = tag
        self.body = body


class _Args:
    """The parsed contents of ``( ... )`` after a callee, filter or test."""

    __slots__ = ("args", "kwargs", "dyn_args", "dyn_kwargs", "start", "end")

    def __init__(self, args, kwargs, dyn_args, dyn_kwargs, start, end):
        self.args = args
        self.kwargs = kwargs
        self.dyn_args = dyn_args
        self.dyn_kwargs = dyn_kwargs
        self.start = start
        self.end = end


class _Dotted:
    """A dotted filter or test name with its extent."""

    __slots__ = ("name", "start", "end")

    def __init__(self, name: str, start: int, end: int):
        self.name = name
        self.start = start
        self.end = end


# a backslash that may not start a valid escape, or an octal escape past \377 (the decoder
# warns about those)
_ODD_ESCAPE = re.compile(rb"\\(?:(?![\\'\"abfnrtvxNuU0-7\n])|[4-7][0-7][0-7])")


def unescape(body: str) -> str:
    """A string literal's value, decoded as jinja2's lexer does (it raises on a bad escape)."""
    data = body.replace("\r\n", "\n").replace("\r", "\n").encode("ascii", "backslashreplace")
    if _ODD_ESCAPE.search(data) is None:
        return data.decode("unicode-escape")
    with warnings.catch_warnings():  # (slow: only where the decoder would warn)
        warnings.simplefilter("ignore", DeprecationWarning)  # "invalid escape sequence", as in Python
        return data.decode("unicode-escape")


def _decode_string(token: tuple) -> str:
    body = token[1][1:-1]
    if "\\" not in body:
        return body
    return unescape(body)


def _can_assign(node: A.Node) -> bool:
    if isinstance(node, (A.Name, A.NSRef)):
        return True
    if isinstance(node, A.Tuple):
        return all(_can_assign(item) for item in node.items)
    return False


class ASTBuilder(Transformer):
    """Callbacks named after the grammar's rules and aliases; ``lines`` is set per parse."""

    lines: LineIndex
    _starts: list  # the offsets where lines start, then a sentinel past any offset

    def begin(self, lines: LineIndex) -> None:
        """Set the template about to be parsed (its line index turns offsets into spans)."""
        self.lines = lines
        self._starts = lines._starts + [1 << 62]

    # ---- helpers --------------------------------------------------------------------------------

    def _span(self, start: int, end: int) -> Span:
        """``self.lines.span(start, end)``, inlined: spans are made for nearly every node."""
        starts = self._starts
        line = bisect_right(starts, start)
        first = starts[line - 1]
        if end < starts[line]:
            return new_span(line, start - first + 1, line, end - first + 1, start, end)
        end_line = bisect_right(starts, end)
        return new_span(line, start - first + 1, end_line, end - starts[end_line - 1] + 1, start, end)

    def _from(self, start: int, last: Span) -> Span:
        """From offset ``start`` (at or before ``last``) to the end of ``last``."""
        starts = self._starts
        line = last.line
        first = starts[line - 1]
        if start < first:
            line = bisect_right(starts, start)
            first = starts[line - 1]
        return new_span(line, start - first + 1, last.end_line, last.end_column, start, last.end)

    def _until(self, first: Span, end: int) -> Span:
        """From the start of ``first`` to offset ``end`` (at or after ``first``)."""
        starts = self._starts
        line = first.end_line
        if end >= starts[line]:
            line = bisect_right(starts, end)
        return new_span(first.line, first.column, line, end - starts[line - 1] + 1, first.start, end)

    def _fail(self, message: str, start: int, end: int) -> None:
        raise TemplateSyntaxError(message, span=self._span(start, end))

    def _tag(self, open_tok: tuple, end_tok: tuple) -> A.Tag:
        mark = open_tok[1][2:3]
        name = _TAG_NAMES[open_tok[0]]  # the token's text is {% or {%- or {%+, spaces, the name
        close = end_tok[1]
        return A.Tag(
            self._span(open_tok[2], end_tok[3]),
            name,
            mark == "-",
            mark == "+",
            close[:1] == "-",
            close[:1] == "+",
        )

    def _target(self, items: list, trailing: tuple | None = None) -> A.Expr:
        if len(items) == 1 and trailing is None:
            target = items[0]
        else:
            end = trailing[3] if trailing is not None else _end(items[-1])
            target = A.Tuple(self._span(_start(items[0]), end), tuple(items))
        self._check_assign(target)
        return target

    def _check_assign(self, target: A.Expr) -> None:
        if not _can_assign(target):
            bad = target
            if isinstance(target, A.Tuple):
                bad = next(item for item in target.items if not _can_assign(item))
                if isinstance(bad, A.Tuple):
                    bad = target
            kind = type(bad).__name__.lower()
            self._fail(f"can't assign to {kind!r}", bad.span.start, bad.span.end)

    def _plain_name(self, token: tuple) -> str:
        if token[1] in _CONST_NAMES:
            self._fail("can't assign to 'name'", token[2], token[3])
        return token[1]

    def _tuple_or_single(self, items: list, comma: tuple | None) -> A.Expr:
        if len(items) == 1 and comma is None:
            return items[0]
        end = comma[3] if comma is not None else _end(items[-1])
        return A.Tuple(self._span(_start(items[0]), end), tuple(items))

    def _block(self, cls, opened: OpenTag, body: tuple, end_tag: A.Tag, *fields):
        span = cover(opened.tag.span, end_tag.span)
        return cls(span, *fields, body, opened.tag, end_tag)

    # ---- lists (left-recursive rules build one Python list) -------------------------------------

    def _list(self, c):
        if len(c) == 1:
            return [c[0]]
        c[0].append(c[2])
        return c[0]

    cond_items = or_items = target_items = print_items = pairs = _list
    arg_items = import_names = with_items = set_targets = filter_chain = _list

    def _list_2(self, c):
        """``x, y`` starts a list of two or more; then each ``, z`` adds one."""
        if type(c[0]) is list:
            c[0].append(c[2])
            return c[0]
        return [c[0], c[2]]

    cond_items_2 = sub_items_2 = _list_2

    def params(self, c):
        params = self._list(c)
        if len(params) > 1 and params[-1].default is None and params[-2].default is not None:
            bad = params[-1]
            self._fail("non-default argument follows default argument", bad.span.start, bad.span.end)
        return params

    def set_filters(self, c):
        if len(c) == 2:
            return [c[1]]
        c[0].append(c[2])
        return c[0]

    # ---- template -------------------------------------------------------------------------------

    def start(self, c):
        body = c[0]
        return A.Template(self._span(0, len(self.lines.text)), body)

    def body(self, c):
        return tuple(c[0]) if c else ()

    def elements(self, c):
        if len(c) == 1:
            return [c[0]]
        c[0].append(c[1])
        return c[0]

    elif_branches = compare_ops = elements

    def concat_items(self, c):
        if type(c[0]) is list:
            c[0].append(c[2])
            return c[0]
        return [c[0], c[2]]

    def data(self, c):
        tok = c[0]
        return A.Data(self._span(tok[2], tok[3]), tok[1])

    def comment(self, c):
        tok = c[0]
        value = tok[1]
        left = value[2:3] if value[2:3] in ("-", "+") else ""
        inner_start = 2 + len(left)
        span = self._span(tok[2], tok[3])
        if not value.endswith("#}"):  # unclosed at the very end of the template (the lexer's rule)
            return A.Comment(span, value[inner_start:], A.Tag(span, "{#", left == "-", left == "+", False, False))
        right = value[-3] if len(value) - 3 >= inner_start and value[-3] in "-+" else ""
        tag = A.Tag(span, "{#", left == "-", left == "+", right == "-", right == "+")
        return A.Comment(span, value[inner_start : len(value) - 2 - len(right)], tag)

    def raw(self, c):
        tok = c[0]
        m = _RAW_PARTS.match(tok[1])
        base = tok[2]
        open_tag = A.Tag(
            self._span(base, base + m.start(3)), "raw", m.group(1) == "-", m.group(1) == "+", m.group(2) == "-", False
        )
        end_tag = A.Tag(
            self._span(base + m.end(3), tok[3]),
            "endraw",
            m.group(4) == "-",
            m.group(4) == "+",
            m.group(5) == "-",
            m.group(5) == "+",
        )
        return A.Raw(self._span(tok[2], tok[3]), m.group(3), open_tag, end_tag)

    def output(self, c):
        begin, expr, end = c
        mark = begin[1][2:3]
        span = self._span(begin[2], end[3])
        tag = A.Tag(span, "{{", mark == "-", mark == "+", end[1][:1] == "-", False)
        return A.Output(span, expr, tag)

    # ---- simple statements ----------------------------------------------------------------------

    def break_stmt(self, c):
        tag = self._tag(c[0], c[1])
        return A.Break(tag.span, tag)

    def continue_stmt(self, c):
        tag = self._tag(c[0], c[1])
        return A.Continue(tag.span, tag)

    def print_stmt(self, c):
        tag = self._tag(c[0], c[2])
        return A.Print(tag.span, tuple(c[1] or ()), tag)

    def context_mod(self, c):
        return c[0][1] == "with"

    def include_stmt(self, c):
        tok, template, ignore, _missing, context, end = c
        tag = self._tag(tok, end)
        return A.Include(tag.span, template, ignore is not None, True if context is None else context, tag)

    def import_stmt(self, c):
        tok, template, _as, name, context, end = c
        tag = self._tag(tok, end)
        return A.Import(tag.span, template, self._plain_name(name), bool(context), tag)

    def import_name(self, c):
        name, _as, alias = c
        if name[1].startswith("_"):
            self._fail("names starting with an underline can not be imported", name[2], name[3])
        self._plain_name(name)
        end = alias if alias is not None else name
        if alias is not None:
            self._plain_name(alias)
        return A.ImportName(
            self._span(name[2], end[3]), name[1], alias[1] if alias is not None else None
        )

    def from_names(self, c):
        if len(c) == 1:
            return [], c[0]
        if len(c) == 2:
            return c[0], c[1]
        return c[0], c[2]

    def from_stmt(self, c):
        tok, template, _import, (names, context), end = c
        tag = self._tag(tok, end)
        return A.FromImport(tag.span, template, tuple(names), bool(context), tag)

    def extends_stmt(self, c):
        tag = self._tag(c[0], c[2])
        return A.Extends(tag.span, c[1], tag)

    def set_stmt(self, c):
        tok, targets, _assign, value, end = c
        tag = self._tag(tok, end)
        return A.Set(tag.span, self._target(targets), value, tag)

    def nsref(self, c):
        name, _dot, attr = c
        if name[1] in _CONST_NAMES:
            self._fail("can't assign to 'const'", name[2], name[3])
        return A.NSRef(self._span(name[2], attr[3]), name[1], attr[1])

    # ---- opening and closing tags ---------------------------------------------------------------

    def _close(self, c):
        return self._tag(c[0], c[-1])

    if_close = for_close = set_close = macro_close = call_close = filter_close = _close
    with_close = autoescape_close = generation_close = _close

    def block_close(self, c):
        return self._tag(c[0], c[2]), c[1]

    def if_test(self, c):
        return self._tuple_or_single(c[0], None)

    def test_trailing_comma(self, c):
        return self._tuple_or_single(c[0], c[1])

    def if_open(self, c):
        return OpenTag("if", self._tag(c[0], c[2]), c[1])

    def elif_open(self, c):
        return OpenTag("elif", self._tag(c[0], c[2]), c[1])

    def else_open(self, c):
        return OpenTag("else", self._tag(c[0], c[2]))

    def elif_branch(self, c):
        opened, body = c
        last = body[-1].span if body else opened.tag.span
        return A.Elif(cover(opened.tag.span, last), opened.payload, body, opened.tag)

    def else_branch(self, c):
        return ElseBranch(c[0].tag, c[1])

    def if_stmt(self, c):
        opened, body, elifs, else_branch, end_tag = c
        elifs = tuple(elifs or ())
        else_tag, else_body = (else_branch.tag, else_branch.body) if else_branch is not None else (None, ())
        span = cover(opened.tag.span, end_tag.span)
        return A.If(span, opened.payload, body, elifs, else_body, opened.tag, else_tag, end_tag)

    def for_iter(self, c):
        items, _if, condition, recursive, _colon = c
        return self._tuple_or_single(items, None), condition, recursive is not None

    def iter_trailing_comma(self, c):
        return self._tuple_or_single(c[0], c[1]), None, False

    def for_open(self, c):
        tok, targets, _in, (iterable, condition, recursive), end = c
        return OpenTag("for", self._tag(tok, end), (self._target(targets), iterable, condition, recursive))

    def for_stmt(self, c):
        opened, body, else_branch, end_tag = c
        target, iterable, condition, recursive = opened.payload
        else_tag, else_body = (else_branch.tag, else_branch.body) if else_branch is not None else (None, ())
        span = cover(opened.tag.span, end_tag.span)
        return A.For(span, target, iterable, condition, recursive, body, else_body, opened.tag, else_tag, end_tag)

    def set_open(self, c):
        tok, targets, filters, _colon, end = c
        return OpenTag("set", self._tag(tok, end), (self._target(targets), tuple(filters or ())))

    def set_open_trailing_comma(self, c):
        tok, targets, comma, end = c
        return OpenTag("set", self._tag(tok, end), (self._target(targets, comma), ()))

    def set_block(self, c):
        opened, body, end_tag = c
        target, filters = opened.payload
        return self._block(A.SetBlock, opened, body, end_tag, target, filters)

    def param(self, c):
        name, _assign, default = c
        end = default if default is not None else name
        return A.Param(self._span(name[2], _end(end)), self._plain_name(name), default)

    def macro_open(self, c):
        tok, name, _lp, params, _rp, _colon, end = c
        return OpenTag("macro", self._tag(tok, end), (self._plain_name(name), tuple(params or ())))

    def macro_stmt(self, c):
        opened, body, end_tag = c
        name, params = opened.payload
        return self._block(A.Macro, opened, body, end_tag, name, params)

    def call_open(self, c):
        tok, _lp, params, _rp, call, _colon, end = c
        if not isinstance(call, A.Call):
            self._fail("expected call", call.span.start, call.span.end)
        return OpenTag("call", self._tag(tok, end), (call, tuple(params or ())))

    def call_block(self, c):
        opened, body, end_tag = c
        call, params = opened.payload
        return self._block(A.CallBlock, opened, body, end_tag, call, params)

    def filter_call(self, c):
        name, args = c
        if args is None:
            return A.Filter(self._span(name.start, name.end), None, name.name, (), (), None, None)
        return A.Filter(
            self._span(name.start, args.end), None, name.name, args.args, args.kwargs, args.dyn_args, args.dyn_kwargs
        )

    def filter_open(self, c):
        return OpenTag("filter", self._tag(c[0], c[3]), tuple(c[1]))

    def filtered(self, c):
        node, _pipe, name = c
        return A.Filter(self._span(_start(node), name.end), node, name.name, (), (), None, None)

    def filter_block(self, c):
        opened, body, end_tag = c
        return self._block(A.FilterBlock, opened, body, end_tag, opened.payload)

    def with_item(self, c):
        targets, _assign, value = c
        return self._target(targets), value

    def with_open(self, c):
        tok, items, end = c
        items = items or []
        return OpenTag("with", self._tag(tok, end), (tuple(t for t, _ in items), tuple(v for _, v in items)))

    def with_stmt(self, c):
        opened, body, end_tag = c
        targets, values = opened.payload
        return self._block(A.With, opened, body, end_tag, targets, values)

    def autoescape_open(self, c):
        return OpenTag("autoescape", self._tag(c[0], c[3]), c[1])

    def autoescape_stmt(self, c):
        opened, body, end_tag = c
        return self._block(A.Autoescape, opened, body, end_tag, opened.payload)

    def block_open(self, c):
        tok, name, scoped, required, _colon, end = c
        return OpenTag("block", self._tag(tok, end), (name[1], scoped is not None, required is not None))

    def block_stmt(self, c):
        opened, body, (end_tag, end_name) = c
        name, scoped, required = opened.payload
        if end_name is not None and end_name[1] != name:
            self._fail(
                f"expected token 'end of statement block', got {end_name[1]!r}", end_name[2], end_name[3]
            )
        if required:
            for node in body:
                text = None
                if isinstance(node, A.Data):
                    text = node.text
                elif isinstance(node, A.Raw):
                    text = node.text
                elif isinstance(node, A.Comment):
                    continue
                if text is None or (text and not text.isspace()):
                    self._fail(
                        "Required blocks can only contain comments or whitespace", node.span.start, node.span.end
                    )
        return self._block(A.Block, opened, body, end_tag, name, scoped, required)

    def generation_open(self, c):
        return OpenTag("generation", self._tag(c[0], c[2]))

    def generation_stmt(self, c):
        opened, body, end_tag = c
        return self._block(A.Generation, opened, body, end_tag)

    # ---- expressions ----------------------------------------------------------------------------

    def tuple_expr(self, c):
        return self._tuple_or_single(c[0], c[1])

    def tuple_one(self, c):
        return self._tuple_or_single([c[0]], c[1])

    def cond_else(self, c):
        expr1, _if, test, _else, expr2 = c
        return A.CondExpr(cover(expr1.span, expr2.span), test, expr1, expr2)

    def cond_noelse(self, c):
        expr1, _if, test = c
        return A.CondExpr(cover(expr1.span, test.span), test, expr1, None)

    def or_(self, c):
        return A.Or(cover(c[0].span, c[2].span), c[0], c[2])

    def and_(self, c):
        return A.And(cover(c[0].span, c[2].span), c[0], c[2])

    def not_(self, c):
        return A.Not(self._from(c[0][2], c[1].span), c[1])

    def compare_op(self, c):
        if len(c) == 3:
            return A.Operand(self._from(c[0][2], c[2].span), "not in", c[2])
        return A.Operand(self._from(c[0][2], c[1].span), c[0][1], c[1])

    def compare(self, c):
        expr, ops = c
        return A.Compare(cover(expr.span, ops[-1].span), expr, tuple(ops))

    def binop(self, c):
        left, op, right = c
        return A.BinOp(cover(left.span, right.span), op[1], left, right)

    def concat(self, c):
        items = c[0]
        return A.Concat(cover(items[0].span, items[-1].span), tuple(items))

    def filter_with_args(self, c):
        f, args = c
        return A.Filter(
            self._until(f.span, args.end), f.node, f.name, args.args, args.kwargs, args.dyn_args, args.dyn_kwargs
        )

    def tested(self, c):
        node, _is, negated, name = c
        return A.Test(self._until(node.span, name.end), node, name.name, (), (), None, None, negated is not None)

    def test_with_args(self, c):
        t, args = c
        return A.Test(
            self._until(t.span, args.end),
            t.node,
            t.name,
            args.args,
            args.kwargs,
            args.dyn_args,
            args.dyn_kwargs,
            t.negated,
        )

    def tested_with_arg(self, c):
        t, arg = c
        return A.Test(cover(t.span, arg.span), t.node, t.name, (arg,), (), None, None, t.negated)

    def dotted_name(self, c):
        if len(c) == 1:
            return _Dotted(c[0][1], c[0][2], c[0][3])
        c[0].name += "." + c[2][1]
        c[0].end = c[2][3]
        return c[0]

    test_name = dotted_name

    def call(self, c):
        node, args = c
        return A.Call(
            self._until(node.span, args.end), node, args.args, args.kwargs, args.dyn_args, args.dyn_kwargs
        )

    def unary_op(self, c):
        return A.UnaryOp(self._from(c[0][2], c[1].span), c[0][1], c[1])

    def getattr(self, c):
        return A.Getattr(self._until(c[0].span, c[2][3]), c[0], c[2][1])

    def getattr_int(self, c):
        tok = c[2]
        const = A.Const(self._span(tok[2], tok[3]), int(tok[1].replace("_", ""), 0))
        return A.Getitem(self._until(c[0].span, tok[3]), c[0], const)

    def getitem(self, c):
        node, lb, arg, rb = c
        if arg is None:
            arg = A.Tuple(self._span(lb[2], rb[3]), ())
        return A.Getitem(self._until(node.span, rb[3]), node, arg)

    def subscripts(self, c):
        items = c[0]
        if len(items) == 1:
            return items[0]
        return A.Tuple(self._span(_start(items[0]), _end(items[-1])), tuple(items))

    def slice(self, c):
        start, colon, stop, colon2, step = c
        first = start if start is not None else colon
        last = step or colon2 or stop or colon
        return A.Slice(self._span(_start(first), _end(last)), start, stop, step)

    def empty_tuple(self, c):
        return A.Tuple(self._span(c[0][2], c[1][3]), ())

    def paren(self, c):
        inner = c[1]
        if isinstance(inner, A.Tuple):
            return A.Tuple(self._span(c[0][2], c[2][3]), inner.items)
        return inner

    def name(self, c):
        tok = c[0]
        span = self._span(tok[2], tok[3])
        value = tok[1]
        if value in _CONST_NAMES:
            return A.Const(span, _CONST_NAMES[value])
        return A.Name(span, value)

    def strings(self, c):
        if len(c) == 1:
            tok = c[0]
            return A.Const(self._span(tok[2], tok[3]), _decode_string(tok))
        left, tok = c
        return A.Const(self._until(left.span, tok[3]), left.value + _decode_string(tok))

    def int_(self, c):
        tok = c[0]
        return A.Const(self._span(tok[2], tok[3]), int(tok[1].replace("_", ""), 0))

    def float_(self, c):
        tok = c[0]
        return A.Const(self._span(tok[2], tok[3]), float(tok[1].replace("_", "")))

    def list_items(self, c):
        return c[0]

    dict_items = list_items

    def list_(self, c):
        return A.List(self._span(c[0][2], c[2][3]), tuple(c[1] or ()))

    def dict_(self, c):
        return A.Dict(self._span(c[0][2], c[2][3]), tuple(c[1] or ()))

    def pair(self, c):
        return A.Pair(cover(c[0].span, c[2].span), c[0], c[2])

    # ---- call arguments -------------------------------------------------------------------------

    def positional_arg(self, c):
        return c[0]

    def keyword_arg(self, c):
        return A.Keyword(self._from(c[0][2], c[2].span), c[0][1], c[2])

    def star_arg(self, c):
        return ("*", c[1], c[0])

    def star_star_arg(self, c):
        return ("**", c[1], c[0])

    def call_args(self, c):
        lp, rp = c[0], c[-1]
        items = c[1] if len(c) == 4 else ()
        args: list = []
        kwargs: list = []
        dyn_args = dyn_kwargs = None
        for item in items or ():
            if type(item) is tuple:
                kind, value, tok = item
                if kind == "*":
                    ok = dyn_args is None and dyn_kwargs is None
                    dyn_args = value
                else:
                    ok = dyn_kwargs is None
                    dyn_kwargs = value
                start = tok[2]
            elif isinstance(item, A.Keyword):
                ok = dyn_kwargs is None
                kwargs.append(item)
                start = item.span.start
            else:
                ok = dyn_args is None and dyn_kwargs is None and not kwargs
                args.append(item)
                start = item.span.start
            if not ok:
                self._fail("invalid syntax for function call expression", start, start + 1)
        return _Args(tuple(args), tuple(kwargs), dyn_args, dyn_kwargs, lp[2], rp[3])
