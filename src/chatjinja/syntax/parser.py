"""Parse Jinja template text into the typed AST with the LALR parser built from ``jinja.lark``.

The lexer is a port of jinja2's modal lexer (data / ``{{ }}`` / ``{% %}`` / ``{# #}`` / raw
regions, bracket balancing, jinja2's token regexes in jinja2's order), because template data is
context-sensitive and jinja2's keywords are names tested by value. Keyword-spelled names become
keyword terminals only where the parser state accepts them. This module never imports jinja2.

Speed (about half of jinja2's own parse time): tokens are plain tuples made one tag at a time,
the cyclic garbage collector waits until the parse returns, and ``_Driver`` runs Lark's LALR table itself
(see its docstring); Lark's own loop, which gives the same trees and errors, remains available
for the tests (``parse(..., use_lark_loop=True)``).
"""

from __future__ import annotations

import gc
import re
import threading
from pathlib import Path
from typing import Any, Iterator

from lark import Lark
from lark.exceptions import UnexpectedToken
from lark.lexer import Lexer
from lark.parse_tree_builder import ChildFilterLALR
from lark.parsers.lalr_analysis import Shift

from ..errors import TemplateSyntaxError
from ..limits import BLOCK_OPENERS, MAX_SOURCE_CHARS, MAX_SOURCE_NESTING, MAX_SOURCE_TOKENS, StaticLimitExceeded
from ..source import LineIndex, Source, Span
from . import ast as A
from .transform import TAG_NAMES, ASTBuilder, ElseBranch, LarkToken, OpenTag, is_token, unescape

GRAMMAR_PATH = Path(__file__).with_name("jinja.lark")

_TAG_TERMINALS = {name: "TAG_" + name.upper() for name in TAG_NAMES}
# the keyword terminal each keyword-spelled name may become
KEYWORDS = {
    name: name.upper()
    for name in "if else and or not in is recursive as import with without context ignore missing scoped required".split()
}
OPERATORS = {
    "+": "PLUS", "-": "MINUS", "/": "DIV", "//": "FLOORDIV", "*": "MUL", "%": "MOD", "**": "POW",
    "~": "TILDE", "[": "LBRACKET", "]": "RBRACKET", "(": "LPAREN", ")": "RPAREN", "{": "LBRACE",
    "}": "RBRACE", "==": "EQ", "!=": "NE", ">": "GT", ">=": "GTEQ", "<": "LT", "<=": "LTEQ",
    "=": "ASSIGN", ".": "DOT", ":": "COLON", "|": "PIPE", ",": "COMMA", ";": "SEMICOLON",
}  # fmt: skip
# jinja2's operator regex tries the two-character operators first; one named group per terminal
_OPERATOR_RE = "|".join(
    f"(?P<{OPERATORS[op]}>{re.escape(op)})" for op in sorted(OPERATORS, key=len, reverse=True)
)
_OPENING = {"LPAREN": ")", "LBRACKET": "]", "LBRACE": "}"}
# how each token changes the nesting the renderer's source budget counts (brackets plus open blocks);
# ``set`` opens a block only when no ``=`` follows at bracket level 0 (see ``_within_nesting``)
_NESTING = {"LPAREN": 1, "LBRACKET": 1, "LBRACE": 1, "RPAREN": -1, "RBRACKET": -1, "RBRACE": -1}
_NESTING.update({"TAG_" + name.upper(): 1 for name in BLOCK_OPENERS})
_NESTING.update({"TAG_END" + name.upper(): -1 for name in BLOCK_OPENERS | {"set"}})
_NESTING.update({"TAG_SET": 0, "ASSIGN": 0, "BLOCK_END": 0})
_CLOSING = {"RPAREN", "RBRACKET", "RBRACE"}

_VAR_END = r"-\}\}|\}\}"
_BLOCK_END = r"\+%\}|-%\}|%\}"
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")  # only NAME starts so
_QUOTES = frozenset("'\"")

# integer literals this long go through ``int`` while lexing, as jinja2's lexer converts them: Python
# refuses decimal strings of more than ``sys.get_int_max_str_digits()`` digits (at least 640 when set)
_SHORT_INT = 640
_TAG_START = re.compile(r"\{[{%#]")
_RAW_BEGIN = re.compile(r"\{%([-+]?)\s*raw\s*(-?)%\}")
_RAW_END = re.compile(r"\{%[-+]?\s*endraw\s*(?:\+%\}|-%\}|%\})")
_SPACE = re.compile(r"\s*")

# tokens that stop the parse where the parser reaches them (jinja2 raises lexing errors lazily)
_FAIL = "!error"  # value: the TemplateSyntaxError
_UNKNOWN_TAG = "!unknown-tag"  # value: the tag name (the message names the open block)


def _within_nesting(chunks: Iterator[list[tuple]], limit: int | None, text: str) -> Iterator[list[tuple]]:
    """``chunks``, stopped with :class:`StaticLimitExceeded` where brackets plus open blocks nest deeper than ``limit``.

    The count is the renderer's (``max_source_nesting``): ``(``, ``[``, ``{`` and every block tag
    open one level, their closers close one (never below zero), and ``{% set x %}`` opens a block
    where ``{% set x = ... %}`` does not. A tag with no more tokens than the levels left cannot pass
    the limit with its brackets: only its block tag is looked at.
    """
    if limit is None:
        yield from chunks
        return
    state = [0, 0, False, False]  # brackets, blocks, in a set tag, that set tag opens a block
    for tokens in chunks:
        count = len(tokens)
        if state[0] == 0 and count + state[1] < limit:
            head = tokens[1] if count > 1 and tokens[0][0] == "DATA" else tokens[0]
            kind = head[0]
            if kind == "TAG_SET":
                opens = _set_opens_block(tokens) if tokens[-1][0] == "BLOCK_END" else None
                if opens is None:
                    _count_nesting(tokens, state, limit, text)
                elif opens:
                    state[1] += 1
            elif kind in _BLOCK_NESTING:
                state[1] = max(0, state[1] + _BLOCK_NESTING[kind])
        else:
            _count_nesting(tokens, state, limit, text)
        yield tokens


def _within_tokens(chunks: Iterator[list[tuple]], most: int, text: str) -> Iterator[list[tuple]]:
    """``chunks`` until the token past ``most``: there :class:`StaticLimitExceeded` (``max_source_tokens``), spanning that token.

    The count is the static half's own: every token of this lexer, template data included, counted a
    tag at a time (after the tag's nesting, so a template past both limits is refused for the
    renderer's), and the parser never sees a tag past the limit.
    """
    seen = 0
    for tokens in chunks:
        seen += len(tokens)
        if seen > most:
            token = tokens[len(tokens) - (seen - most)]
            raise StaticLimitExceeded("max_source_tokens", most, f"template has more than {most} tokens",
                                      span=LineIndex(text).span(token[2], token[3]))
        yield tokens


_BLOCK_NESTING = {kind: delta for kind, delta in _NESTING.items() if kind.startswith("TAG_") and delta}


def _set_opens_block(tokens: list[tuple]) -> bool | None:
    """Does a whole ``{% set %}`` tag open a block (no ``=`` outside brackets)? None: brackets first, count them."""
    for token in tokens:
        kind = token[0]
        if kind == "ASSIGN":
            return False
        if kind in _OPENING:
            return None
    return True


def _count_nesting(tokens: list[tuple], state: list, limit: int, text: str) -> None:
    """Every token of one tag through the nesting count (``state``: see ``_within_nesting``)."""
    nesting = _NESTING
    brackets, blocks, in_set, set_is_block = state
    for token in tokens:
        delta = nesting.get(token[0])
        if delta is None:
            continue
        kind = token[0]
        if kind[0] == "L" or kind[0] == "R":
            brackets = brackets + 1 if delta > 0 else max(0, brackets - 1)
        elif kind == "ASSIGN":
            if in_set and brackets == 0:
                set_is_block = False
            continue
        elif kind == "BLOCK_END":
            if in_set and set_is_block:
                blocks += 1
            in_set = False
        elif kind == "TAG_SET":
            in_set = set_is_block = True
            continue
        else:
            blocks = blocks + 1 if delta > 0 else max(0, blocks - 1)
        if brackets + blocks > limit:
            raise StaticLimitExceeded("max_source_nesting", limit, f"{brackets + blocks} nested brackets and blocks",
                                      span=LineIndex(text).span(token[2], token[3]))
    state[:] = brackets, blocks, in_set, set_is_block


def _without_groups(pattern: str) -> str:
    """``pattern`` with each capturing group made non-capturing (same matches, no group values)."""
    out = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            out.append(ch)
            i += 1
            if pattern[i : i + 1] == "^":
                out.append("^")
                i += 1
            if pattern[i : i + 1] == "]":  # a leading ] is a member of the class
                out.append("]")
                i += 1
            continue
        elif ch == "(":
            if pattern.startswith("(?P<", i):
                out.append("(?:")
                i = pattern.index(">", i) + 1
                continue
            if not pattern.startswith("(?", i):
                out.append("(?:")
                i += 1
                continue
        out.append(ch)
        i += 1
    plain = "".join(out)
    if re.compile(plain).groups:
        raise ValueError(f"groups left in {plain!r}")
    return plain


class JinjaLexer(Lexer):
    """Splits templates as jinja2's lexer does; also Lark's lexer (interface 2: it sees the parser state)."""

    __future_interface__ = 2

    def __init__(self, lexer_conf: Any):
        patterns = {t.name: t.pattern.to_regexp() for t in lexer_conf.terminals}
        # each match is the whitespace before a token and the token (its group names its terminal)
        body = (
            rf"(?P<FLOAT>{patterns['FLOAT']})|(?P<INT>{patterns['INT']})"
            rf"|(?P<NAME>{patterns['NAME']})|(?P<STRING>{patterns['STRING']})|{_OPERATOR_RE}"
        )
        self._inner = re.compile(rf"\s*(?:{body})").match
        self._var = re.compile(rf"\s*(?:(?P<VAR_END>{_VAR_END})|{body})").match
        self._block = re.compile(rf"\s*(?:(?P<BLOCK_END>{_BLOCK_END})|{body})").match
        # the same token alternatives, without groups, for the fast path of _lex_tag: findall
        # over a tag gives (whitespace, token) pairs; a last alternative takes any other character
        plain = _without_groups(body)
        self._fast = {
            end_type: (
                re.compile(rf"(\s*)({end}|{plain}|\S)").findall,
                close,
                {**OPERATORS, **ends},  # token text -> terminal, where the text alone says it
            )
            for end_type, end, close, ends in (
                ("VAR_END", _VAR_END, "}}", {"}}": "VAR_END", "-}}": "VAR_END"}),
                ("BLOCK_END", _BLOCK_END, "%}", {"%}": "BLOCK_END", "-%}": "BLOCK_END", "+%}": "BLOCK_END"}),
            )
        }
        self._test_arg: dict[int, set] = {}

    # -- per-parse-table facts ---------------------------------------------------------------------

    def _test_arg_states(self, states: dict) -> set:
        """States right after a test name, where jinja2 reads any name (bar else/or/and) as its argument."""
        found = self._test_arg.get(id(states))
        if found is None:
            # the only states where a name (an argument) and `and` (after the test) both fit
            found = self._test_arg[id(states)] = {s for s, acts in states.items() if "NAME" in acts and "AND" in acts}
        return found

    # -- lexing ------------------------------------------------------------------------------------

    def lex(self, lexer_state: Any, parser_state: Any) -> Iterator[LarkToken]:
        """Lark's interface: the tokens, keywords typed against Lark's running parser."""
        text = lexer_state.text
        text = getattr(text, "text", text)
        states = parser_state.parse_conf.states
        state_stack = parser_state.state_stack
        test_arg_states = self._test_arg_states(states)
        for tokens in self.chunks(text):
            for index, token in enumerate(tokens, 1):
                kind = token[0]
                if kind == "NAME" and token[1] in KEYWORDS:
                    following = tokens[index] if index < len(tokens) else None
                    state = state_stack[-1]
                    kind = keyword_or_name(text, token, following, states[state], state, test_arg_states)
                elif kind[0] == "!":
                    raise _stop(text, token, parser_state.value_stack)
                yield LarkToken((kind, token[1], token[2], token[3]))

    def chunks(self, text: str) -> Iterator[list[tuple]]:
        """The tokens of ``text``, one list per tag (with the template data before it).

        Keyword-spelled names are still NAME: the parser types them, looking ahead only within
        the tag. An error becomes a last ``_FAIL`` or ``_UNKNOWN_TAG`` token: like jinja2's
        lazy lexer, it is raised only if the parser gets that far. (Lists per tag, not one list,
        so the tokens the parser is done with are freed early: fewer garbage-collector passes.)
        """
        search_tag = _TAG_START.search
        n = len(text)
        pos = 0
        while pos < n:
            tokens: list[tuple] = []
            append = tokens.append
            m = search_tag(text, pos)
            if m is None:
                append(("DATA", text[pos:], pos, n))
                yield tokens
                return
            start = m.start()
            if start > pos:
                append(("DATA", text[pos:start], pos, start))
            kind = text[start + 1]
            if kind == "#":
                inner = start + 2
                if text[inner : inner + 1] in ("-", "+"):
                    inner += 1
                close = text.find("#}", inner)
                if close == -1 and text[inner:] in ("", "\n", "\r\n", "\r"):
                    # jinja2 drops the final newline first, then its lexer stops at the end of the
                    # source before the comment rule can fail: an unclosed comment at the very end
                    # is accepted and ends the template
                    append(("COMMENT", text[start:n], start, n))
                    yield tokens
                    return
                if close == -1:
                    line, column = LineIndex(text).position(start)
                    error = _error(
                        text,
                        f"unclosed comment opened at {line}:{column}, expected '#}}' (Missing end of comment tag)",
                        start,
                        inner,
                        open_block="comment",
                        expected=("'#}'",),
                    )
                    append((_FAIL, error, start, inner))
                    yield tokens
                    return
                pos = close + 2
                append(("COMMENT", text[start:pos], start, pos))
                yield tokens
                continue
            begin_end = start + 2
            if text[begin_end : begin_end + 1] in ("-", "+"):
                begin_end += 1
            if kind == "{":
                append(("VAR_BEGIN", text[start:begin_end], start, begin_end))
                pos, error = self._lex_tag(text, begin_end, tokens, self._var, "VAR_END")
                if error is not None:
                    append((_FAIL, error, error.span.start, error.span.end))
                    yield tokens
                    return
                yield tokens
                continue
            raw = _RAW_BEGIN.match(text, start)
            if raw is not None:
                end = _RAW_END.search(text, raw.end())
                if end is None:
                    line, column = LineIndex(text).position(start)
                    error = _error(
                        text,
                        f"unclosed 'raw' block opened at {line}:{column}, expected 'endraw'"
                        " (Missing end of raw directive)",
                        start,
                        raw.end(),
                        open_block="raw",
                        expected=("'endraw'",),
                    )
                    append((_FAIL, error, start, raw.end()))
                    yield tokens
                    return
                pos = end.end()
                append(("RAW", text[start:pos], start, pos))
                yield tokens
                continue
            first = len(tokens)
            pos, error = self._lex_tag(text, begin_end, tokens, self._block, "BLOCK_END")
            if len(tokens) == first:
                if error is None:
                    error = _error(text, "tag name expected", start, n, expected=("a tag name",))
                append((_FAIL, error, error.span.start, error.span.end))
                yield tokens
                return
            head = tokens[first]
            if head[0] != "NAME":
                error = _error(text, "tag name expected", head[2], head[3], expected=("a tag name",))
                tokens[first:] = [(_FAIL, error, head[2], head[3])]
                yield tokens
                return
            name = head[1]
            terminal = _TAG_TERMINALS.get(name)
            if terminal is None:
                tokens[first:] = [(_UNKNOWN_TAG, name, start, head[3])]
                yield tokens
                return
            tokens[first] = (terminal, text[start : head[3]], start, head[3])
            if name == "call" and len(tokens) > first + 1 and tokens[first + 1][0] == "LPAREN":
                tokens[first + 1] = ("SIG_LPAREN",) + tokens[first + 1][1:]
            if error is not None:
                append((_FAIL, error, error.span.start, error.span.end))
                yield tokens
                return
            yield tokens

    def _lex_tag(self, text: str, pos: int, tokens: list, match_with_end, end_type: str):
        """Append the tokens of one tag, up to and including its end token, to ``tokens``.

        Returns (position after the tag, error or None); an error ends the template's tokens.
        """
        append = tokens.append
        balance: list[str] = []
        # Fast path: all the tokens up to the first end-of-tag mark, by one findall. A token its
        # text does not type (a number, a name not starting with an ASCII letter) is typed by the
        # exact regex; anything unusual (an error, an end mark inside brackets or a string, no end
        # mark) leaves the rest of the tag to the exact loop below, from the token where it began.
        findall, close, kinds = self._fast[end_type]
        stop = text.find(close, pos)
        if stop != -1:
            for space, value in findall(text, pos, stop + len(close)):
                start = pos + len(space)
                end = start + len(value)
                kind = kinds.get(value)
                if kind is None:
                    first = value[0]
                    if first in _NAME_START:
                        if not value.isidentifier():
                            break
                        kind = "NAME"
                    elif first in _QUOTES and end - start > 1:
                        if "\\" in value:
                            try:
                                unescape(value[1:-1])
                            except Exception:  # noqa: BLE001 - the exact loop makes the error
                                break
                        kind = "STRING"
                    elif value.isdigit() and value.isascii() and len(value) <= _SHORT_INT:
                        kind = "INT"  # (FLOAT, tried first, needs a '.' or an 'e'; INT takes any digit)
                    else:
                        m = (self._inner if balance else match_with_end)(text, pos)
                        if m is None or m.end() != end or m.lastgroup in (end_type, "NAME", "STRING") or (
                                m.lastgroup == "INT" and len(value) > _SHORT_INT):
                            break  # (a NAME, STRING or long INT here needs its checks: the exact loop does them)
                        kind = m.lastgroup
                elif kind == end_type:
                    if balance:
                        break
                    append((kind, value, start, end))
                    return end, None
                elif kind in _OPENING:
                    balance.append(_OPENING[kind])
                elif kind in _CLOSING:
                    if not balance or balance[-1] != value:
                        break
                    balance.pop()
                append((kind, value, start, end))
                pos = end
        match = self._inner if balance else match_with_end
        while True:
            m = match(text, pos)
            if m is None:
                pos = _SPACE.match(text, pos).end()
                if pos == len(text):
                    return pos, None  # the tag is still open at the end of the template
                return pos, _error(text, f"unexpected character {text[pos]!r}", pos, pos + 1)
            kind = m.lastgroup
            end = m.end()
            value = m.group(kind)
            start = end - len(value)
            if kind == end_type:
                append((kind, value, start, end))
                return end, None
            if kind == "NAME":
                if not value.isidentifier():
                    return end, _error(text, "Invalid character in identifier", start, end)
            elif kind == "INT" and len(value) > _SHORT_INT:
                try:  # jinja2's lexer converts it here, and Python limits the digits of a decimal int
                    int(value.replace("_", ""), 0)
                except ValueError as exc:  # jinja2 raises the ValueError itself
                    return end, _error(text, str(exc), start, end)
            elif kind == "STRING":
                if "\\" in value:
                    try:
                        unescape(value[1:-1])
                    except Exception as exc:  # same check and message as jinja2's lexer
                        return end, _error(text, str(exc).split(":")[-1].strip(), start, end)
            elif kind in _OPENING:
                balance.append(_OPENING[kind])
                match = self._inner
            elif kind in _CLOSING:
                if not balance:
                    return end, _error(text, f"unexpected {value!r}", start, end)
                expected = balance.pop()
                if expected != value:
                    return end, _error(text, f"unexpected {value!r}, expected {expected!r}", start, end)
                if not balance:
                    match = match_with_end
            append((kind, value, start, end))
            pos = end


def keyword_or_name(
    text: str, token: tuple, following: tuple | None, actions: dict, state: int, test_arg_states: set
) -> str:
    """The terminal a keyword-spelled name becomes in parser state ``state`` (``actions``: its row)."""
    value = token[1]
    keyword = KEYWORDS[value]
    if state in test_arg_states:
        # jinja2's parse_test: a following name is the test's argument unless else/or/and
        if value in ("else", "or", "and"):
            return keyword
        if value == "is":
            raise _error(text, "You cannot chain multiple tests with is", token[2], token[3])
        return "NAME"
    if keyword not in actions:
        return "NAME"
    if "NAME" in actions:
        if value == "not" and following is not None and following[0] == "ASSIGN":
            return "NAME"  # f(not=1): a keyword argument named `not`
        if value in ("with", "without") and not (
            following is not None and following[0] == "NAME" and following[1] == "context"
        ):
            return "NAME"  # jinja2 looks one token ahead for `with context`
        if value == "ignore" and not (
            following is not None and following[0] == "NAME" and following[1] == "missing"
        ):
            return "NAME"
    return keyword


def _stop(text: str, token: tuple, value_stack: list) -> TemplateSyntaxError:
    """The error a ``_FAIL`` or ``_UNKNOWN_TAG`` token stands for, now that the parser reached it."""
    kind, value, start, end = token
    if kind == _FAIL:
        return value
    return _unknown_tag(text, value, start, end, value_stack)


def _error(text: str, message: str, start: int, end: int, **extra: Any) -> TemplateSyntaxError:
    return TemplateSyntaxError(message, span=LineIndex(text).span(start, end), **extra)


def _innermost(value_stack: list) -> tuple[str, A.Tag, tuple[str, ...]] | None:
    """(block name, opening tag, tags that may come next) of the innermost unclosed block."""
    # parts of an if/for already reduced before the error showed (LALR reduces on a merged
    # lookahead) still say which branch is open: an Elif node or an else branch
    opened = []
    for value in value_stack:
        if isinstance(value, OpenTag):
            opened.append(value)
        elif isinstance(value, A.Elif):
            opened.append(OpenTag("elif", value.tag))
        elif isinstance(value, ElseBranch):
            opened.append(OpenTag("else", value.tag))
        elif is_token(value) and value[0] in ("TAG_ELSE", "TAG_ELIF"):
            opened.append(OpenTag(value[0][4:].lower(), None))  # its tag is not reduced yet
    if not opened:
        return None
    last = opened[-1]
    if last.kind == "if":
        return "if", last.tag, ("'elif'", "'else'", "'endif'")
    if last.kind == "for":
        return "for", last.tag, ("'else'", "'endfor'")
    if last.kind not in ("elif", "else"):
        return last.kind, last.tag, (f"'end{last.kind}'",)
    # an elif/else belongs to the nearest if/for below it
    owner = next(prev for prev in reversed(opened[:-1]) if prev.kind in ("if", "for"))
    if last.kind == "else":
        return owner.kind, owner.tag, (f"'end{owner.kind}'",)
    return owner.kind, owner.tag, ("'elif'", "'else'", "'endif'")


def _block_error(text: str, message: str, start: int, end: int, value_stack: list) -> TemplateSyntaxError:
    """An error at a tag or at the end of the template: name the innermost unclosed block."""
    inner = _innermost(value_stack)
    if inner is None:
        return _error(text, message, start, end)
    kind, tag, expected = inner
    where = f"unclosed {kind!r} block opened at {tag.span.line}:{tag.span.column}, expected 'end{kind}'"
    message = f"{message}; {where}" if message else where
    return _error(text, message, start, end, expected=expected, open_block=kind)


def _unknown_tag(text: str, name: str, start: int, end: int, value_stack: list) -> TemplateSyntaxError:
    return _block_error(text, f"Encountered unknown tag {name!r}", start, end, value_stack)


# ---- describing tokens for messages ------------------------------------------------------------

_EXPR_START = {"NAME", "STRING", "INT", "FLOAT", "LPAREN", "LBRACKET", "LBRACE", "MINUS", "PLUS", "NOT"}
_STRUCTURE = {
    "VAR_END": "'}}'",
    "BLOCK_END": "'%}'",
    "VAR_BEGIN": "'{{'",
    "DATA": "template data",
    "$END": "end of template",
}
_BINARY = {"PLUS", "MINUS", "MUL", "DIV", "FLOORDIV", "MOD", "POW", "TILDE", "EQ", "NE", "GT", "GTEQ", "LT", "LTEQ",
           "PIPE", "IS", "IN", "NOT", "AND", "OR", "IF", "DOT", "LBRACKET", "LPAREN"}  # fmt: skip
_OPERATOR_NAMES = {v: k for k, v in OPERATORS.items()}
_OPERATOR_NAMES["SIG_LPAREN"] = "("


def _describe_terminal(name: str) -> str:
    if name in _STRUCTURE:
        return _STRUCTURE[name]
    if name.startswith("TAG_"):
        return repr(name[4:].lower())
    if name in _OPERATOR_NAMES:
        return repr(_OPERATOR_NAMES[name])
    if name == "NAME":
        return "a name"
    if name in ("STRING", "INT", "FLOAT"):
        return {"STRING": "a string", "INT": "an integer", "FLOAT": "a float"}[name]
    if name in ("RAW", "COMMENT"):
        return name.lower()
    return repr(name.lower())


def _describe_expected(names: Any) -> tuple[str, ...]:
    names = {n for n in names if n.isupper() or n == "$END"}
    out: list[str] = []
    if {"NAME", "INT", "STRING"} <= names:
        out.append("an expression")
        names -= _EXPR_START
    if len(names & _BINARY) > 3:
        names -= _BINARY  # after a complete operand: any operator would do; name the closers
        if not names:
            out.append("an operator")
    if names >= {"DATA", "VAR_BEGIN"}:
        names -= {"DATA", "VAR_BEGIN", "COMMENT", "RAW"}
        names = {n for n in names if not n.startswith("TAG_") or not _is_statement_start(n)}
    out.extend(sorted(_describe_terminal(n) for n in names))
    return tuple(out)


_STATEMENT_TAGS = {
    "TAG_IF", "TAG_FOR", "TAG_SET", "TAG_MACRO", "TAG_CALL", "TAG_FILTER", "TAG_WITH", "TAG_AUTOESCAPE",
    "TAG_BLOCK", "TAG_GENERATION", "TAG_BREAK", "TAG_CONTINUE", "TAG_PRINT", "TAG_INCLUDE", "TAG_IMPORT",
    "TAG_FROM", "TAG_EXTENDS",
}  # fmt: skip


def _is_statement_start(name: str) -> bool:
    return name in _STATEMENT_TAGS


def _describe_token(token: Any) -> str:
    kind = token.type
    if kind == "$END":
        return "end of template"
    if kind.startswith("TAG_"):
        return f"tag {kind[4:].lower()!r}"
    if kind == "DATA":
        return "template data"
    if kind in ("NAME", "INT", "FLOAT", "STRING") or kind in KEYWORDS.values():
        return repr(str(token.value))
    return _describe_terminal(kind)


def _convert_unexpected(token: Any, expected_names: Any, value_stack: list, text: str) -> TemplateSyntaxError:
    if type(token) is tuple:
        token = LarkToken(token)  # (lark's own loop hands over a LarkToken or a lark.Token)
    if token.type.startswith("TAG_"):
        name = token.type[4:].lower()
        return _block_error(text, f"Encountered unknown tag {name!r}", token.start_pos, token.end_pos, value_stack)
    if token.type == "$END" and not _in_open_tag(value_stack) and _innermost(value_stack) is not None:
        return _block_error(text, "", len(text), len(text), value_stack)
    expected = _describe_expected(expected_names)
    if token.type == "$END":
        message = "unexpected end of template"
    else:
        message = f"unexpected {_describe_token(token)}"
    if expected:
        message += f", expected {' or '.join(expected)}"
    return _error(text, message, token.start_pos, token.end_pos, expected=expected)


def _in_open_tag(value_stack: list) -> bool:
    """True when the parse stopped inside a tag (its opening token is still on the stack)."""
    for value in reversed(value_stack):
        if is_token(value):
            if value[0].startswith("TAG_") or value[0] == "VAR_BEGIN":
                return True
            if value[0] in ("BLOCK_END", "VAR_END", "DATA"):
                return False
        elif isinstance(value, (OpenTag, tuple, A.Stmt)):
            return False
    return False


# ---- building and running the parser -----------------------------------------------------------


class _Driver:
    """Runs Lark's LALR table with the AST builder's callbacks, faster than Lark's own loop.

    Lark's own loop (``Lark.parse``) gives the same result (a test checks it). This one is faster
    because: the lexer's tokens come as one list, typed by one loop; a run of `?rule: x` (unit)
    reductions, most of an expression's precedence chain, is a single lookup in a table built
    from the parse table (``_units``); actions are plain ints (a state to shift to, or ``~rule``);
    and optional items (``[x]``) are filled with None by generated code instead of Lark's
    generic child filter.
    """

    def __init__(self, lark: Lark, lexer: JinjaLexer):
        inner = lark.parser.parser.parser
        table = inner.parse_table
        callbacks = inner.callbacks
        self.start = table.start_states["start"]
        self.end = table.end_states["start"]
        rules: list[tuple] = []  # (number of children, rule name, callback or None for a unit rule)
        numbers: dict[int, int] = {}
        states: dict[int, dict[str, int]] = {}
        for state, actions in table.states.items():
            row = {}
            for term, (action, arg) in actions.items():
                term = str(term)  # Lark's names are Token objects, whose __eq__ is slow in dict probes
                if action is Shift:
                    row[term] = arg
                    continue
                number = numbers.get(id(arg))
                if number is None:
                    number = numbers[id(arg)] = len(rules)
                    rules.append(_reduction(arg, callbacks[arg]))
                row[term] = ~number
            states[state] = row
        self.states = states  # state -> {terminal or rule name: action}
        self.rows = [states[state] for state in range(len(states))]
        self.rules = rules
        self.lexer = lexer
        self._units = self._unit_runs()  # [top state][lookahead][state below] -> top state

    def _unit_runs(self) -> list[dict[str, dict[int, int]]]:
        """[top state][lookahead][state below] -> top state after the unit reductions that follow.

        Unit reductions replace only the top of the stack, and each new top is the goto of the
        state below it, so where a run of them ends depends on those three things alone.
        """
        rows, rules = self.rows, self.rules
        # per state: lookahead -> the rule a unit reduction on it goes to
        unit_origins = [
            {term: rules[~action][1] for term, action in row.items() if action < 0 and rules[~action][2] is None}
            for row in rows
        ]
        below_states: dict[str, list[int]] = {}
        for state, row in enumerate(rows):
            for symbol in row:
                if not (symbol.isupper() or symbol == "$END"):
                    below_states.setdefault(symbol, []).append(state)
        units: list[dict[str, dict[int, int]]] = [{} for _ in rows]
        for top, origins in enumerate(unit_origins):
            for term, origin in origins.items():
                for below in below_states[origin]:
                    goto = rows[below]
                    state = goto[origin]
                    while True:
                        next_origin = unit_origins[state].get(term)
                        if next_origin is None:
                            break
                        state = goto[next_origin]
                    units[top].setdefault(term, {})[below] = state
        return units

    def expected(self, stack: list) -> list[str]:
        """The terminals that can really come next: LALR lookaheads checked against the stack."""
        return [
            term for term in self.states[stack[-1]] if term.isupper() or term == "$END" if self._accepts(stack, term)
        ]

    def _accepts(self, stack: list, term: str) -> bool:
        rows = self.rows
        stack = list(stack)
        while True:
            action = rows[stack[-1]].get(term)
            if action is None:
                return False
            if action >= 0:
                return True
            size, origin, _ = self.rules[~action]
            del stack[len(stack) - size :]
            stack.append(rows[stack[-1]][origin])
            if stack[-1] == self.end:
                return term == "$END"

    def parse(self, text: str, max_nesting: int | None = None, max_tokens: int | None = None) -> Any:
        rows = self.rows
        rules = self.rules
        units = self._units
        test_arg_states = self.lexer._test_arg_states(self.states)
        state = self.start  # always stack[-1]
        stack = [state]
        values: list = []
        chunks = _within_nesting(self.lexer.chunks(text), max_nesting, text)
        if max_tokens is not None:
            chunks = _within_tokens(chunks, max_tokens, text)
        for tokens in chunks:
            index = 0
            for token in tokens:
                index += 1
                kind = token[0]
                if kind == "NAME" and token[1] in KEYWORDS:
                    following = tokens[index] if index < len(tokens) else None
                    kind = keyword_or_name(text, token, following, rows[state], state, test_arg_states)
                    if kind != "NAME":
                        token = (kind, token[1], token[2], token[3])
                while True:
                    try:
                        action = rows[state][kind]
                    except KeyError:
                        if kind[0] == "!":
                            raise _stop(text, token, values) from None
                        raise _convert_unexpected(token, self.expected(stack), values, text) from None
                    if action >= 0:
                        state = action
                        stack.append(state)
                        values.append(token)
                        break
                    size, origin, callback = rules[~action]
                    if callback is None:
                        state = stack[-1] = units[state][kind][stack[-2]]
                        continue
                    if size == 1:
                        children = [values.pop()]
                        stack.pop()
                    elif size:
                        children = values[-size:]
                        del stack[-size:]
                        del values[-size:]
                    else:
                        children = []
                    values.append(callback(children))
                    state = rows[stack[-1]][origin]
                    stack.append(state)
        end = self.end
        at = len(text)
        token = ("$END", "", at, at)
        while True:
            action = rows[stack[-1]].get("$END")
            if action is None:
                raise _convert_unexpected(token, self.expected(stack), values, text)
            size, origin, callback = rules[~action]
            if callback is None:
                stack[-1] = units[stack[-1]]["$END"][stack[-2]]
            else:
                if size:
                    children = values[-size:]
                    del stack[-size:]
                    del values[-size:]
                else:
                    children = []
                values.append(callback(children))
                stack.append(rows[stack[-1]][origin])
            if stack[-1] == end:
                return values[-1]


def _reduction(rule: Any, callback: Any) -> tuple[int, str, Any]:
    """(number of children, rule name, callback) of a rule; the callback is None for a unit rule."""
    size = len(rule.expansion)
    origin = str(rule.origin.name)
    if rule.options.expand1 and rule.alias is None and size == 1 and not rule.options.empty_indices:
        return size, origin, None
    if isinstance(callback, ChildFilterLALR) and not any(expand for _, expand, _ in callback.to_include):
        # Lark's filter puts None where an optional item is missing; the same as one list display
        items = []
        for index, _, nones in callback.to_include:
            items += ["None"] * nones + [f"c[{index}]"]
        items += ["None"] * callback.append_none
        callback = eval(f"lambda c: build([{', '.join(items)}])", {"build": callback.node_builder})  # noqa: S307
    return size, origin, callback


_lock = threading.Lock()
_built: tuple[Lark, ASTBuilder, _Driver] | None = None


def build_parser(*, strict: bool = False) -> tuple[Lark, ASTBuilder]:
    """A new LALR parser for ``jinja.lark`` with the inline AST transformer (``strict`` for CI)."""
    builder = ASTBuilder()
    grammar = GRAMMAR_PATH.read_text(encoding="utf-8")
    lark = Lark(
        grammar,
        parser="lalr",
        lexer=JinjaLexer,
        transformer=builder,
        maybe_placeholders=True,
        strict=strict,
        propagate_positions=False,
    )
    return lark, builder


def _parser() -> tuple[Lark, ASTBuilder, _Driver]:
    global _built
    if _built is None:
        with _lock:
            if _built is None:
                lark, builder = build_parser()
                lexer = JinjaLexer(lark.lexer_conf)
                _built = (lark, builder, _Driver(lark, lexer))
    return _built


def parse(source: str | Source, name: str | None = None, *, use_lark_loop: bool = False,
          max_source_chars: int | None = MAX_SOURCE_CHARS, max_source_nesting: int | None = MAX_SOURCE_NESTING,
          max_source_tokens: int | None = MAX_SOURCE_TOKENS) -> A.Template:
    """Parse template text (or a :class:`Source`) into an :class:`~chatjinja.syntax.ast.Template`.

    Raises :class:`~chatjinja.errors.TemplateSyntaxError` exactly where jinja2 3.1.6 in the
    Hugging Face environment rejects the template's syntax. ``use_lark_loop`` runs Lark's own
    ``Lark.parse`` instead of the faster driver (same result; for tests).

    The renderer's source budgets apply, with its defaults (:mod:`chatjinja.limits`): a source
    longer than ``max_source_chars`` or nesting brackets and blocks deeper than
    ``max_source_nesting`` raises :class:`~chatjinja.limits.StaticLimitExceeded`, and so does one
    of more than ``max_source_tokens`` tokens, the static half's own limit, which bounds the
    parse's work and all that follows it (``None`` turns a limit off; the nesting and token limits
    apply to the faster driver).

    Python's cyclic garbage collector is paused while the parse runs (the parse makes no reference
    cycles) and left as it was.
    """
    if not isinstance(source, Source):
        source = Source(source, name or "<string>")
    elif name is not None:
        source = Source(source.text, name)
    text = source.text
    if max_source_chars is not None and len(text) > max_source_chars:
        raise StaticLimitExceeded("max_source_chars", max_source_chars, f"template source has {len(text)} characters",
                                  source_name=source.name)
    lark, builder, driver = _parser()
    with _lock:
        # Nothing a parse allocates is garbage before it returns (tokens and nodes form no cycles,
        # so reference counting frees what is dropped): each pass of the cyclic collector would only
        # scan the growing tree again, more than half the time of a large parse. It waits until the
        # parse is done, and is left as it was (a caller may have paused it already).
        collecting = gc.isenabled()
        gc.disable()
        builder.begin(source.lines)
        try:
            if use_lark_loop:
                try:
                    return lark.parse(text)
                except UnexpectedToken as exc:
                    state = exc.state
                    expected = driver.expected(state.state_stack)
                    raise _convert_unexpected(exc.token, expected, state.value_stack, text) from None
            return driver.parse(text, max_source_nesting, max_source_tokens)
        except (TemplateSyntaxError, StaticLimitExceeded) as exc:
            exc.source_name = source.name
            raise
        finally:
            if collecting:
                gc.enable()


def format_error(error: TemplateSyntaxError, source: str | Source | None = None) -> str:
    """``name:line:column: message`` followed by the source line and a caret under the column."""
    head = f"{error.location()}: {error.message}"
    if error.span is None or source is None:
        return head
    text = source.text if isinstance(source, Source) else source
    lines = LineIndex(text)
    span: Span = error.span
    if span.line > lines.line_count:
        return head
    line_text = lines.line_text(span.line)
    gutter = f"{span.line:>4} | "
    prefix = "".join(ch if ch == "\t" else " " for ch in line_text[: span.column - 1])
    width = 1
    if span.end_line == span.line and span.end_column > span.column:
        width = span.end_column - span.column
    return f"{head}\n{gutter}{line_text}\n{' ' * (len(gutter) - 2)}| {prefix}{'^' * width}"
