"""Lexical model of a template for the linter: tags, text runs and the whitespace jinja2 keeps.

This models jinja2 3.1's lexer with the options transformers uses (``trim_blocks=True``,
``lstrip_blocks=True``, ``keep_trailing_newline=False``): ``trim_blocks`` removes the first
newline after a block or comment tag's ``%}``/``#}``; ``lstrip_blocks`` removes spaces and tabs
from the start of a line up to a block or comment tag (never ``{{``); a ``-`` marker strips all
whitespace on its side and a ``+`` marker turns the option off for its side. The linter needs
the exact text that survives, which the AST does not keep, so the model lives here (a test checks
it against jinja2's own lexer). No jinja2 import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Tag", "Text", "Token", "Scan", "scan", "ScanError"]

# jinja2.lexer's expression token patterns (names are ASCII identifiers as in jinja2 < 3 compat mode
# plus Unicode identifiers; strings with backslash escapes; operators longest first).
_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<name>[^\W\d]\w*)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<float>(?<!\.)(?:\d+_)*\d+(?:\.(?:\d+_)*\d+(?:[eE][+\-]?(?:\d+_)*\d+)?|[eE][+\-]?(?:\d+_)*\d+))
  | (?P<int>0[bB](?:_?[01])+|0[oO](?:_?[0-7])+|0[xX](?:_?[\da-fA-F])+|(?:[1-9](?:_?\d)*|0(?:_?0)*))
  | (?P<op>//|\*\*|==|!=|>=|<=|[+\-/*%~\[\](){}><=.:|,;])
    """,
    re.S | re.X,
)


class ScanError(ValueError):
    """The template has a tag that never closes (or a stray character inside a tag)."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


@dataclass(slots=True)
class Token:
    """One expression token inside a tag: kind is name, string, int, float or op."""

    kind: str
    value: str
    start: int
    end: int

    def is_op(self, *ops: str) -> bool:
        return self.kind == "op" and self.value in ops

    def is_name(self, *names: str) -> bool:
        return self.kind == "name" and (not names or self.value in names)

    @property
    def literal(self) -> str:
        """The value of a string token (escape sequences decoded as jinja2 does)."""
        body = self.value[1:-1]
        if "\\" not in body:
            return body
        try:
            return body.encode("utf-8", "backslashreplace").decode("unicode-escape")
        except UnicodeDecodeError:
            return body


@dataclass(slots=True)
class Tag:
    """A ``{% %}``, ``{{ }}`` or ``{# #}`` tag; ``left``/``right`` are the ``-``/``+`` markers or ``''``."""

    kind: str  # "block" | "var" | "comment"
    start: int  # offset of "{"
    end: int  # offset just after "}" (before any whitespace the tag end swallows)
    inner_start: int
    inner_end: int
    left: str
    right: str
    tokens: list[Token] = field(default_factory=list)
    keyword: str = ""  # first name of a block tag ("if", "for", "endif", ...)
    index: int = 0
    scope: tuple = ()  # enclosing Branch objects, outermost first (filled by lint.model)

    @property
    def open_text(self) -> str:
        return {"block": "{%", "var": "{{", "comment": "{#"}[self.kind]

    @property
    def close_text(self) -> str:
        return {"block": "%}", "var": "}}", "comment": "#}"}[self.kind]


@dataclass(slots=True)
class Text:
    """Template data between tags: ``start:end`` in the source and the part jinja2 emits."""

    start: int
    end: int
    kept_start: int
    kept_end: int
    before: Tag | None  # the tag just before (None at the start of the template)
    after: Tag | None  # the tag just after (None at the end)
    raw: bool = False  # inside {% raw %}
    # Why each trimmed side was trimmed: "-", "trim", "lstrip", "eof" or "" (nothing removed).
    left_reason: str = ""
    right_reason: str = ""
    right_kept_by_plus: bool = False  # a "+" marker kept whitespace lstrip_blocks would have removed
    left_kept_by_plus: bool = False  # a "+%}" kept the newline trim_blocks would have removed


@dataclass
class Scan:
    text: str
    tags: list[Tag]
    texts: list[Text]


_OPEN_RE = re.compile(r"\{([%{#])([-+]?)")
_RAW_OPEN_RE = re.compile(r"\{%([-+]?)\s*raw\s*([-+]?)%\}")
_ENDRAW_RE = re.compile(r"\{%([-+]?)\s*endraw\s*([-+]?)%\}")
_WS = re.compile(r"\s*")


def _tokenize_tag(text: str, pos: int, close: str) -> tuple[list[Token], int]:
    """Tokens of a tag's inside from ``pos`` up to its closing ``close`` (``-``/``+`` marker included in the offset).

    Like jinja2's lexer, the closing delimiter only counts outside brackets.
    """
    tokens: list[Token] = []
    depth = 0
    n = len(text)
    match = _TOKEN_RE.match
    startswith = text.startswith
    while True:
        if pos >= n:
            raise ScanError(f"tag is never closed with {close!r}", n)
        if depth == 0:
            ch = text[pos]
            if ch == close[0] and startswith(close, pos):
                return tokens, pos
            if (ch == "-" or (ch == "+" and close == "%}")) and startswith(close, pos + 1):
                return tokens, pos + (1 if ch == "+" else 0)
        m = match(text, pos)
        if m is None:
            raise ScanError(f"unexpected character {text[pos]!r} in tag", pos)
        kind = m.lastgroup
        end = m.end()
        if kind != "ws":
            value = m.group()
            if kind == "op":
                if value in "([{":
                    depth += 1
                elif value in ")]}" and depth:
                    depth -= 1
            tokens.append(Token(kind, value, pos, end))  # type: ignore[arg-type]
        pos = end


def scan(text: str) -> Scan:
    """Split a template into tags and text runs, and work out the whitespace jinja2 keeps."""
    # jinja2 drops one trailing newline (keep_trailing_newline=False) and normalises \r\n; we keep
    # offsets into the original text, so the trailing newline is treated as trimmed ("eof").
    n = len(text)
    tags: list[Tag] = []
    raw_ranges: list[tuple[int, int]] = []
    pieces: list[tuple[int, int, bool]] = []  # text runs (start, end, raw)
    pos = 0
    while pos < n:
        m = _OPEN_RE.search(text, pos)
        if m is None:
            pieces.append((pos, n, False))
            break
        start = m.start()
        raw = _RAW_OPEN_RE.match(text, start)
        if raw is not None:
            pieces.append((pos, start, False))
            tag = Tag("block", start, raw.end(), start + 2 + len(raw.group(1)), raw.end() - 2 - len(raw.group(2)),
                      raw.group(1), raw.group(2), keyword="raw")
            tag.tokens = [Token("name", "raw", tag.inner_start, tag.inner_end)]
            tags.append(tag)
            close = _ENDRAW_RE.search(text, raw.end())
            if close is None:
                raise ScanError("{% raw %} is never closed with {% endraw %}", start)
            pieces.append((raw.end(), close.start(), True))
            end_tag = Tag("block", close.start(), close.end(), close.start() + 2 + len(close.group(1)),
                          close.end() - 2 - len(close.group(2)), close.group(1), close.group(2), keyword="endraw")
            end_tag.tokens = [Token("name", "endraw", end_tag.inner_start, end_tag.inner_end)]
            tags.append(end_tag)
            raw_ranges.append((raw.end(), close.start()))
            pos = close.end()
            continue
        pieces.append((pos, start, False))
        sigil, left = m.group(1), m.group(2)
        inner_start = m.end()
        if sigil == "#":
            close_at = text.find("#}", inner_start)
            if close_at == -1 and text[inner_start:] in ("", "\n", "\r\n"):
                # jinja2 accepts "{#" as the very last thing in a template (an empty, unclosed comment);
                # the one trailing newline it drops first does not count
                tag = Tag("comment", start, n, n, n, left, "")
                tags.append(tag)
                pos = n
                continue
            if close_at == -1:
                raise ScanError("comment is never closed with '#}'", start)
            right = ""
            inner_end = close_at
            if close_at > inner_start and text[close_at - 1] in "-+":
                right = text[close_at - 1]
                inner_end = close_at - 1
            tag = Tag("comment", start, close_at + 2, inner_start, inner_end, left, right)
        else:
            close = "%}" if sigil == "%" else "}}"
            tokens, close_at = _tokenize_tag(text, inner_start, close)
            right = ""
            if text[close_at] == "-":
                right = "-"
                end = close_at + 3
            else:
                end = close_at + 2
                if sigil == "%" and close_at > inner_start and text[close_at - 1] == "+" and (
                    not tokens or tokens[-1].end <= close_at - 1
                ):
                    right = "+"
                    close_at -= 1
            tag = Tag("block" if sigil == "%" else "var", start, end, inner_start, close_at, left, right, tokens)
            if sigil == "%" and tokens and tokens[0].kind == "name":
                tag.keyword = tokens[0].value
        tags.append(tag)
        pos = tag.end
    for i, tag in enumerate(tags):
        tag.index = i
    return Scan(text, tags, _texts(text, tags, pieces))


def _texts(text: str, tags: list[Tag], pieces: list[tuple[int, int, bool]]) -> list[Text]:
    by_start = {t.start: t for t in tags}
    by_end = {t.end: t for t in tags}
    out: list[Text] = []
    n = len(text)
    for start, end, raw in pieces:
        before = by_end.get(start)
        after = by_start.get(end)
        if raw:
            # raw content: only the endraw tag's own left marker/lstrip applies (rare; modelled the same way)
            pass
        kept_start, kept_end = start, end
        left_reason = right_reason = ""
        left_kept_by_plus = right_kept_by_plus = False
        # -- left side: what the previous tag end swallowed
        if before is not None:
            if before.right == "-":
                ws = _WS.match(text, kept_start, kept_end)
                if ws.end() > kept_start:
                    left_reason = "-"
                kept_start = ws.end()
            elif before.kind in ("block", "comment") and before.right != "+" and before.keyword != "raw":
                if text.startswith("\n", kept_start) and kept_start < kept_end:
                    kept_start += 1
                    left_reason = "trim"
                elif text.startswith("\r\n", kept_start) and kept_start + 1 < kept_end:
                    kept_start += 2
                    left_reason = "trim"
            elif before.right == "+" and text.startswith(("\n", "\r\n"), kept_start) and kept_start < kept_end:
                left_kept_by_plus = True
        # -- right side: what the next tag start strips
        if after is not None:
            if after.left == "-":
                stripped = text[kept_start:kept_end].rstrip()
                new_end = kept_start + len(stripped)
                if new_end < kept_end:
                    right_reason = "-"
                kept_end = new_end
            elif after.kind in ("block", "comment") and kept_end > kept_start:
                segment = text[kept_start:kept_end]
                l_pos = segment.rfind("\n") + 1
                line_starting = before is None or (kept_start > before.end and text[kept_start - 1] == "\n")
                tail = segment[l_pos:]
                if (l_pos > 0 or line_starting) and tail and not tail.strip():
                    if after.left == "+":
                        right_kept_by_plus = True
                    else:
                        kept_end = kept_start + l_pos
                        right_reason = "lstrip"
            elif after.kind in ("block", "comment") and kept_end == kept_start:
                pass
        elif end == n and kept_end > kept_start:
            # keep_trailing_newline=False: the last newline of the template is dropped
            if text.endswith("\r\n", kept_start, kept_end):
                kept_end -= 2
                right_reason = "eof"
            elif text.endswith("\n", kept_start, kept_end):
                kept_end -= 1
                right_reason = "eof"
        if kept_end < kept_start:
            kept_end = kept_start
        out.append(Text(start, end, kept_start, kept_end, before, after, raw, left_reason, right_reason,
                        right_kept_by_plus, left_kept_by_plus))
    return out
