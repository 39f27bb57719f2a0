"""Parse Jinja template text into the typed AST with the LALR parser built from ``jinja.lark``.

The lexer is a port of jinja2's modal lexer (data / ``{{ }}`` / ``{% %}`` / ``{# #}`` / raw
regions, bracket balancing, jinja2's token regexes in jinja2's order), because template data is
context-sensitive and jinja2's keywords are names tested by value. Keyword-spelled names become
keyword terminals only where the parser state accepts them. This module never imports jinja2.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any, Iterator

from lark import Lark, Token
from lark.exceptions import UnexpectedToken
from lark.lexer import Lexer
from lark.parsers.lalr_analysis import Shift

from ..errors import TemplateSyntaxError
from ..source import LineIndex, Source, Span
from . import ast as A
from .transform import ASTBuilder, ElseBranch, OpenTag, unescape

GRAMMAR_PATH = Path(__file__).with_name("jinja.lark")

TAG_NAMES = frozenset(
    """if elif else endif for endfor set endset macro endmacro call endcall filter endfilter with
    endwith autoescape endautoescape block endblock generation endgeneration break continue print
    include import from extends""".split()
)
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
_BRACKETS = {"(": ")", "[": "]", "{": "}"}
_OPERATOR_RE = r"//|\*\*|==|!=|>=|<=|[-+*/%~\[\](){}<>=.:|,;]"

_TAG_START = re.compile(r"\{[{%#]")
_RAW_BEGIN = re.compile(r"\{%([-+]?)\s*raw\s*(-?)%\}")
_RAW_END = re.compile(r"\{%[-+]?\s*endraw\s*(?:\+%\}|-%\}|%\})")

_new_token = Token._future_new


def _token(type_: str, value: str, start: int, end: int) -> Token:
    return _new_token(type_, value, start, None, None, None, None, end)


class _ParserView:
    """What the lexer reads of a running parser: the action table, the state and value stacks."""

    __slots__ = ("states", "state_stack", "value_stack")

    def __init__(self, states: dict, state_stack: list, value_stack: list):
        self.states = states
        self.state_stack = state_stack
        self.value_stack = value_stack


class JinjaLexer(Lexer):
    """Lark lexer (interface 2: it sees the parser state) that splits templates as jinja2 does."""

    __future_interface__ = 2

    def __init__(self, lexer_conf: Any):
        patterns = {t.name: t.pattern.to_regexp() for t in lexer_conf.terminals}
        body = (
            rf"(?P<ws>\s+)|(?P<FLOAT>{patterns['FLOAT']})|(?P<INT>{patterns['INT']})"
            rf"|(?P<NAME>{patterns['NAME']})|(?P<STRING>{patterns['STRING']})|(?P<OP>{_OPERATOR_RE})"
        )
        self._inner = re.compile(body).match
        self._var = re.compile(r"(?P<END>-\}\}|\}\})|" + body).match
        self._block = re.compile(r"(?P<END>\+%\}|-%\}|%\})|" + body).match
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

    def lex(self, lexer_state: Any, parser_state: Any) -> Iterator[Token]:
        text = lexer_state.text
        text = getattr(text, "text", text)
        view = _ParserView(parser_state.parse_conf.states, parser_state.state_stack, parser_state.value_stack)
        return self.tokens(text, view)

    def tokens(self, text: str, parser: "_ParserView") -> Iterator[Token]:
        """The token stream of ``text``; ``parser`` is read (never changed) to type keywords."""
        states = parser.states
        state_stack = parser.state_stack
        test_arg_states = self._test_arg_states(states)
        search_tag = _TAG_START.search
        n = len(text)
        pos = 0
        while pos < n:
            m = search_tag(text, pos)
            if m is None:
                yield _token("DATA", text[pos:], pos, n)
                return
            start = m.start()
            if start > pos:
                yield _token("DATA", text[pos:start], pos, start)
            kind = text[start + 1]
            if kind == "#":
                inner = start + 2
                if text[inner : inner + 1] in ("-", "+"):
                    inner += 1
                close = text.find("#}", inner)
                if close == -1:
                    line, column = LineIndex(text).position(start)
                    raise _error(
                        text,
                        f"unclosed comment opened at {line}:{column}, expected '#}}' (Missing end of comment tag)",
                        start,
                        inner,
                        open_block="comment",
                        expected=("'#}'",),
                    )
                pos = close + 2
                yield _token("COMMENT", text[start:pos], start, pos)
                continue
            if kind == "%":
                raw = _RAW_BEGIN.match(text, start)
                if raw is not None:
                    end = _RAW_END.search(text, raw.end())
                    if end is None:
                        line, column = LineIndex(text).position(start)
                        raise _error(
                            text,
                            f"unclosed 'raw' block opened at {line}:{column}, expected 'endraw'"
                            " (Missing end of raw directive)",
                            start,
                            raw.end(),
                            open_block="raw",
                            expected=("'endraw'",),
                        )
                    pos = end.end()
                    yield _token("RAW", text[start:pos], start, pos)
                    continue
                begin_end = start + 2
                if text[begin_end : begin_end + 1] in ("-", "+"):
                    begin_end += 1
                tokens, pos, error = self._lex_tag(text, begin_end, self._block, "BLOCK_END")
                yield from self._block_tokens(text, start, tokens, error, parser, states, state_stack, test_arg_states)
                continue
            begin_end = start + 2
            if text[begin_end : begin_end + 1] in ("-", "+"):
                begin_end += 1
            yield _token("VAR_BEGIN", text[start:begin_end], start, begin_end)
            tokens, pos, error = self._lex_tag(text, begin_end, self._var, "VAR_END")
            yield from self._expr_tokens(text, tokens, 0, error, states, state_stack, test_arg_states)

    def _lex_tag(self, text: str, pos: int, match_with_end, end_type: str):
        """The tokens of one tag up to and including its end token (names not yet typed as keywords).

        Returns (tokens, position after the tag, deferred error or None): like jinja2's lazy lexer,
        an error is raised only when the parser asks for the token where it happened.
        """
        tokens: list[Token] = []
        append = tokens.append
        balance: list[str] = []
        match_inner = self._inner
        new_token = _new_token
        n = len(text)
        while pos < n:
            m = match_inner(text, pos) if balance else match_with_end(text, pos)
            if m is None:
                return tokens, n, _error(text, f"unexpected character {text[pos]!r}", pos, pos + 1)
            kind = m.lastgroup
            end = m.end()
            if kind == "ws":
                pos = end
                continue
            value = m.group()
            if kind == "END":
                append(new_token(end_type, value, pos, None, None, None, None, end))
                return tokens, end, None
            if kind == "OP":
                if value in _BRACKETS:
                    balance.append(_BRACKETS[value])
                elif value in (")", "]", "}"):
                    if not balance:
                        return tokens, n, _error(text, f"unexpected {value!r}", pos, end)
                    expected = balance.pop()
                    if expected != value:
                        return tokens, n, _error(text, f"unexpected {value!r}, expected {expected!r}", pos, end)
                kind = OPERATORS[value]
            elif kind == "NAME":
                if not value.isidentifier():
                    return tokens, n, _error(text, "Invalid character in identifier", pos, end)
            elif kind == "STRING" and "\\" in value:
                try:
                    unescape(value[1:-1])
                except Exception as exc:  # same check and message as jinja2's lexer
                    return tokens, n, _error(text, str(exc).split(":")[-1].strip(), pos, end)
            append(new_token(kind, value, pos, None, None, None, None, end))
            pos = end
        return tokens, n, None

    def _block_tokens(self, text, start, tokens, error, parser_state, states, state_stack, test_arg_states):
        if not tokens:
            if error is not None:
                raise error
            raise _error(text, "tag name expected", start, len(text), expected=("a tag name",))
        first = tokens[0]
        if first.type != "NAME":
            raise _error(text, "tag name expected", first.start_pos, first.end_pos, expected=("a tag name",))
        value = first.value
        if value not in TAG_NAMES:
            raise _unknown_tag(text, value, start, first.end_pos, parser_state)
        yield _token("TAG_" + value.upper(), text[start : first.end_pos], start, first.end_pos)
        if value == "call" and len(tokens) > 1 and tokens[1].type == "LPAREN":
            tokens[1].type = "SIG_LPAREN"
        yield from self._expr_tokens(text, tokens, 1, error, states, state_stack, test_arg_states)

    def _expr_tokens(self, text, tokens, index, error, states, state_stack, test_arg_states):
        count = len(tokens)
        while index < count:
            token = tokens[index]
            if token.type == "NAME" and token.value in KEYWORDS:
                token.type = self._keyword_or_name(text, token, tokens, index, states, state_stack, test_arg_states)
            yield token
            index += 1
        if error is not None:
            raise error

    def _keyword_or_name(self, text, token, tokens, index, states, state_stack, test_arg_states):
        value = token.value
        position = state_stack[-1]
        actions = states[position]
        keyword = KEYWORDS[value]
        if position in test_arg_states:
            # jinja2's parse_test: a following name is the test's argument unless else/or/and
            if value in ("else", "or", "and"):
                return keyword
            if value == "is":
                raise _error(text, "You cannot chain multiple tests with is", token.start_pos, token.end_pos)
            return "NAME"
        if keyword not in actions:
            return "NAME"
        if "NAME" in actions:
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            if value == "not" and following is not None and following.type == "ASSIGN":
                return "NAME"  # f(not=1): a keyword argument named `not`
            if value in ("with", "without") and not (
                following is not None and following.type == "NAME" and following.value == "context"
            ):
                return "NAME"  # jinja2 looks one token ahead for `with context`
            if value == "ignore" and not (
                following is not None and following.type == "NAME" and following.value == "missing"
            ):
                return "NAME"
        return keyword


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
        elif type(value) is Token and value.type in ("TAG_ELSE", "TAG_ELIF"):
            opened.append(OpenTag(value.type[4:].lower(), None))  # its tag is not reduced yet
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


def _unknown_tag(text: str, name: str, start: int, end: int, parser_state: Any) -> TemplateSyntaxError:
    return _block_error(text, f"Encountered unknown tag {name!r}", start, end, parser_state.value_stack)


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


def _describe_token(token: Token) -> str:
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


def _convert_unexpected(token: Token, expected_names: Any, value_stack: list, text: str) -> TemplateSyntaxError:
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
        if type(value) is Token:
            if value.type.startswith("TAG_") or value.type == "VAR_BEGIN":
                return True
            if value.type in ("BLOCK_END", "VAR_END", "DATA"):
                return False
        elif isinstance(value, (OpenTag, tuple, A.Stmt)):
            return False
    return False


# ---- building and running the parser -----------------------------------------------------------


class _Driver:
    """Runs Lark's LALR table with Lark's rule callbacks; the loop skips chain (unit) reductions.

    Lark's own loop (``Lark.parse``) gives the same result (a test checks it); this one is about
    twice as fast because `?rule: x` reductions, most of an expression's precedence chain, are a
    single goto instead of a callback.
    """

    def __init__(self, lark: Lark, lexer: JinjaLexer):
        inner = lark.parser.parser.parser
        table = inner.parse_table
        callbacks = inner.callbacks
        self.start = table.start_states["start"]
        self.end = table.end_states["start"]
        rules: dict[int, tuple] = {}
        states: dict[int, dict[str, tuple]] = {}
        for state, actions in table.states.items():
            row = {}
            for term, (action, arg) in actions.items():
                term = str(term)  # Lark's names are Token objects, whose __eq__ is slow in dict probes
                if action is Shift:
                    row[term] = (True, arg)
                    continue
                info = rules.get(id(arg))
                if info is None:
                    unit = arg.options.expand1 and arg.alias is None and len(arg.expansion) == 1
                    info = rules[id(arg)] = (len(arg.expansion), str(arg.origin.name), None if unit else callbacks[arg])
                row[term] = (False, info)
            states[state] = row
        self.states = states
        self.lexer = lexer

    def expected(self, stack: list) -> list[str]:
        """The terminals that can really come next: LALR lookaheads checked against the stack."""
        return [
            term for term in self.states[stack[-1]] if term.isupper() or term == "$END" if self._accepts(stack, term)
        ]

    def _accepts(self, stack: list, term: str) -> bool:
        states = self.states
        stack = list(stack)
        while True:
            action = states[stack[-1]].get(term)
            if action is None:
                return False
            shift, arg = action
            if shift:
                return True
            size, origin, _ = arg
            del stack[len(stack) - size :]
            stack.append(states[stack[-1]][origin][1])
            if stack[-1] == self.end:
                return term == "$END"

    def parse(self, text: str) -> Any:
        states = self.states
        stack = [self.start]
        values: list = []
        tokens = self.lexer.tokens(text, _ParserView(states, stack, values))
        for token in tokens:
            kind = token.type
            while True:
                try:
                    shift, arg = states[stack[-1]][kind]
                except KeyError:
                    raise _convert_unexpected(token, self.expected(stack), values, text) from None
                if shift:
                    stack.append(arg)
                    values.append(token)
                    break
                size, origin, callback = arg
                if callback is None:
                    stack[-1] = states[stack[-2]][origin][1]
                    continue
                if size:
                    children = values[-size:]
                    del stack[-size:]
                    del values[-size:]
                else:
                    children = []
                value = callback(children)
                stack.append(states[stack[-1]][origin][1])
                values.append(value)
        end = self.end
        at = len(text)
        token = _token("$END", "", at, at)
        while True:
            try:
                shift, arg = states[stack[-1]]["$END"]
            except KeyError:
                raise _convert_unexpected(token, self.expected(stack), values, text) from None
            size, origin, callback = arg
            if callback is None:
                stack[-1] = states[stack[-2]][origin][1]
            else:
                if size:
                    children = values[-size:]
                    del stack[-size:]
                    del values[-size:]
                else:
                    children = []
                stack.append(states[stack[-1]][origin][1])
                values.append(callback(children))
            if stack[-1] == end:
                return values[-1]


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


def parse(source: str | Source, name: str | None = None, *, use_lark_loop: bool = False) -> A.Template:
    """Parse template text (or a :class:`Source`) into an :class:`~chatjinja.syntax.ast.Template`.

    Raises :class:`~chatjinja.errors.TemplateSyntaxError` exactly where jinja2 3.1.6 in the
    Hugging Face environment rejects the template's syntax. ``use_lark_loop`` runs Lark's own
    ``Lark.parse`` instead of the faster driver (same result; for tests).
    """
    if not isinstance(source, Source):
        source = Source(source, name or "<string>")
    elif name is not None:
        source = Source(source.text, name)
    lark, builder, driver = _parser()
    text = source.text
    with _lock:
        builder.lines = source.lines
        try:
            if use_lark_loop:
                try:
                    return lark.parse(text)
                except UnexpectedToken as exc:
                    state = exc.state
                    expected = driver.expected(state.state_stack)
                    raise _convert_unexpected(exc.token, expected, state.value_stack, text) from None
            return driver.parse(text)
        except TemplateSyntaxError as exc:
            exc.source_name = source.name
            raise


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
