"""What every command shares: reading TEMPLATE and JSON input, writing output atomically, one-line errors."""

from __future__ import annotations

import argparse
import json
import sys
from types import TracebackType
from typing import Any

from ..errors import ChatJinjaError
from ..files import DEFAULT_MAX_INPUT_BYTES, UNENCODABLE, json_text, read_capped, write_atomic

__all__ = [
    "TEMPLATE_HELP",
    "InputError",
    "UsageError",
    "add_input_cap",
    "fail_for",
    "input_cap",
    "json_text",
    "load_template_arg",
    "read_json_input",
    "template_line",
    "write_atomic",
    "write_stdout",
]

# What a TEMPLATE argument may be (chatjinja.loading.load_template), for every command's help
TEMPLATE_HELP = (
    "a template file (.jinja), a model folder, a tokenizer_config.json or chat_template.json, a GGUF file, "
    "a bundled template or model name (chatjinja templates), or hf:org/name[@revision] from the Hugging Face "
    "cache; a #name suffix picks a named template (model#tool_use)"
)


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
    """A TEMPLATE argument (see ``TEMPLATE_HELP``)."""
    from ..loading import load_template  # lazy: the CLI imports every command to build its parser

    return load_template(value)


def add_input_cap(parser: argparse.ArgumentParser) -> None:
    """``--max-input-bytes N``: the most read from one input file (template and model files too), stdin or batch line."""
    parser.add_argument(
        "--max-input-bytes", type=_byte_count, default=DEFAULT_MAX_INPUT_BYTES, metavar="N",
        help="the most bytes read from one file (template, model file, input), stdin or --batch line (default: 64 MiB)",
    )


def _byte_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a whole number of bytes, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"takes a number of bytes >= 1, got {value}")
    return value


def input_cap(args: argparse.Namespace) -> int:
    return getattr(args, "max_input_bytes", DEFAULT_MAX_INPUT_BYTES)


def read_json_input(path: str | None, limit: int = DEFAULT_MAX_INPUT_BYTES) -> Any:
    """Parse JSON from a file or ``-`` (stdin), at most ``limit`` bytes; a syntax error names file, line and column."""
    name, data = read_capped(path, limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name} is not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} ({name}:{exc.lineno}:{exc.colno})") from None
    except RecursionError:
        raise InputError(f"malformed JSON: nested too deeply ({name})") from None


def write_stdout(text: str) -> None:
    """Text to stdout as UTF-8 whatever the locale; a lone surrogate is written as its escape (files.UNENCODABLE)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text stream standing in for stdout
        sys.stdout.write(text)
    else:
        sys.stdout.flush()
        buffer.write(text.encode("utf-8", UNENCODABLE))
    sys.stdout.flush()
