"""Where jinja2 places an error at the end of the template: at the start of its last token.

jinja2 drops one trailing newline, then its end-of-template token takes the line of the last token
before it (a text run, a string, a tag's closing delimiter; comments are not in its token stream). The parser's errors at the end of the text
point at the end; :func:`last_token_start` gives the offset jinja2's line number refers to.
"""

from __future__ import annotations

from .parser import _FAIL, _UNKNOWN_TAG, _parser

__all__ = ["last_token_start"]


def last_token_start(text: str) -> int:
    """The offset of the first character of the last token jinja2 lexes from ``text`` (0 for an empty text)."""
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith(("\n", "\r")):
        text = text[:-1]
    lexer = _parser()[2].lexer
    last = None
    for tokens in lexer.chunks(text):
        for token in tokens:
            if token[0] not in (_FAIL, _UNKNOWN_TAG, "COMMENT"):  # jinja2's stream skips comments
                last = token
    if last is None:
        return 0
    start = last[2]
    if last[0] == "DATA":
        before = text[:start]
        data = text[start : last[3]]
        if before.endswith(("-%}", "-}}", "-#}")):
            if not data.strip():
                return start - 3  # the "-" swallows the whitespace: the closing delimiter is the last token
            return start + len(data) - len(data.lstrip())  # the text starts after the whitespace it swallows
        if before.endswith(("%}", "#}")) and not before.endswith(("+%}", "+#}")):
            # trim_blocks: the newline after the tag belongs to the tag's end, the text starts after it
            start += 2 if data.startswith("\r\n") else 1 if data.startswith(("\n", "\r")) else 0
            if start >= last[3]:
                return len(before) - (3 if before[-3:-2] in ("-", "+") else 2)  # no text left: the delimiter
    return min(start, len(text))
