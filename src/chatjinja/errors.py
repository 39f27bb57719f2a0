"""One exception hierarchy for chatjinja; every error that has a place in a template carries a Span.

Runtime errors keep the classes transformers raises (``jinja2.TemplateError``, ``ValueError``,
``TypeError``), so the classes defined here are only for what chatjinja adds: static syntax
errors, loading errors and (in ``chatjinja.runtime``) budget errors.
This module never imports jinja2, so the static half can use it.
"""

from __future__ import annotations

from .source import Span


class ChatJinjaError(Exception):
    """Base class of the errors chatjinja itself defines."""

    def __init__(self, message: str, *, span: Span | None = None, source_name: str | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.source_name = source_name

    def location(self) -> str:
        """``name:line:column`` (or as much of it as is known)."""
        parts = [self.source_name or "<string>"]
        if self.span is not None:
            parts += [str(self.span.line), str(self.span.column)]
        return ":".join(parts)


class TemplateSyntaxError(ChatJinjaError):
    """The Lark parser rejected a template: line, column, what was expected, which block is open."""

    def __init__(
        self,
        message: str,
        *,
        span: Span | None = None,
        source_name: str | None = None,
        expected: tuple[str, ...] = (),
        open_block: str | None = None,
    ):
        super().__init__(message, span=span, source_name=source_name)
        self.expected = expected
        self.open_block = open_block

    @property
    def lineno(self) -> int | None:
        return self.span.line if self.span else None

    @property
    def column(self) -> int | None:
        return self.span.column if self.span else None


class TemplateNotFound(ChatJinjaError, LookupError):
    """No bundled template, model name, file or folder matches what was asked for."""


class LoadError(ChatJinjaError, ValueError):
    """A template source exists but could not be read (bad JSON, wrong type, truncated file)."""
