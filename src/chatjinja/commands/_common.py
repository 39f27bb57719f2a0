"""What every command shares: reading TEMPLATE and JSON input, writing output atomically, one-line errors."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any, Iterator

from ..errors import ChatJinjaError

__all__ = ["InputError", "fail_for", "load_template_arg", "read_json_input", "template_line", "write_atomic"]


class InputError(ChatJinjaError):
    """Bad input to a command (unreadable file, malformed JSON, wrong shape): exit 1."""


class UsageError(ChatJinjaError):
    """Options that do not fit together: exit 2."""


def template_line(exc: BaseException) -> int | None:
    """The template line a jinja2 error happened on (syntax errors carry it; runtime errors in the traceback)."""
    lineno = getattr(exc, "lineno", None)
    if isinstance(lineno, int):
        return lineno
    line = None
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _where(exc: BaseException, default_name: str | None) -> str:
    if isinstance(exc, ChatJinjaError):
        if exc.span is not None or exc.source_name:
            return exc.location()
        return ""
    line = template_line(exc)
    name = getattr(exc, "template_name", None) or default_name
    if name and line:
        return f"{name}:{line}"
    return name or ""


def fail_for(exc: BaseException) -> tuple[str, int]:
    """One line saying what went wrong and where, and the exit code."""
    code = 2 if isinstance(exc, UsageError) else 1
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if not isinstance(exc, (ChatJinjaError, OSError, ValueError, TypeError, LookupError)):
        message = f"{type(exc).__name__}: {message}"
    elif type(exc).__module__.startswith("jinja2"):
        message = f"{type(exc).__name__}: {message}"
    where = _where(exc, getattr(exc, "chatjinja_template", None))
    if where and where not in message:
        message = f"{message} ({where})"
    return message, code


def load_template_arg(value: str) -> Any:
    """A TEMPLATE argument: bundled name, model name from the manifest, or a template file."""
    from ..loading import load_template

    return load_template(value)


def read_json_input(path: str | None) -> Any:
    """Parse JSON from a file or ``-`` (stdin); a syntax error names file, line and column."""
    if path is None or path == "-":
        name, text = "<stdin>", sys.stdin.read()
    else:
        name = path
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"input file not found: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read input {path}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} ({name}:{exc.lineno}:{exc.colno})") from None


def iter_jsonl(path: str) -> Iterator[tuple[int, str]]:
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            yield number, line


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write a whole file or nothing: a temporary file beside it, renamed into place."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
