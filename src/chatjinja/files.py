"""What chatjinja reads and writes: bounded reads under an input cap, atomic writes, JSON that is valid UTF-8.

Both halves and the CLI use it (it imports nothing of chatjinja but the error base class), so the
CLI's ``--output``, ``lint --fix`` and ``render --batch -o`` write files one way:

- a new file gets the mode a plain ``open(path, "w")`` gives (``0666`` less the umask); a file that
  exists keeps its mode (and, where allowed, its owner);
- a symlink is followed: the file it points to is rewritten and the link stays a link;
- a device or a pipe (``-o /dev/stdout``, ``/dev/null``, a FIFO) is written in place, never replaced;
- the text goes into a temporary file in the target's real directory, is fsynced and renamed over
  the target, so a reader sees the old file or the new one, never half of one;
- a failure is one :class:`FileError` naming the path the caller gave (never the temporary file).

JSON output (:func:`json_text`) keeps text readable (``ensure_ascii=False``) but writes a lone
surrogate (``"\\udcff"`` in the input JSON, which Python decodes to a string UTF-8 cannot encode)
back as the same ``\\udcff`` escape, so the output is always valid UTF-8 and reads back equal.
"""

from __future__ import annotations

import contextvars
import json
import os
import re
import secrets
import stat
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from .errors import ChatJinjaError

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "UNENCODABLE",
    "FileError",
    "atomic_text_file",
    "input_limit",
    "limited_inputs",
    "json_text",
    "read_capped",
    "too_large",
    "write_atomic",
]

# The most the CLI reads from one input file or stdin (a JSON conversation, a template, one batch
# line). Far above any real conversation (the largest model context, 1M tokens, is ~4 MiB of text;
# a tool-heavy agent transcript a few MiB), yet small enough that a mistaken `-i /dev/zero` or a
# multi-gigabyte file stops at once instead of filling memory: JSON parsing needs ~5-10x the bytes.
DEFAULT_MAX_INPUT_BYTES = 64 * 1024 * 1024

# The cap the loaders read model and template files under (``tokenizer_config.json``, a template
# file, ``tokenizer.json``): the CLI's ``--max-input-bytes`` for the command that runs, else the default
_INPUT_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar("max_input_bytes", default=DEFAULT_MAX_INPUT_BYTES)


def input_limit() -> int | None:
    """The cap a loader reads one file under (``None``: no cap): :data:`DEFAULT_MAX_INPUT_BYTES` unless
    :func:`limited_inputs` set another."""
    return _INPUT_LIMIT.get()


@contextmanager
def limited_inputs(limit: int | None) -> Iterator[None]:
    """Within the block, loaders read each file under ``limit`` bytes (the CLI's ``--max-input-bytes``)."""
    token = _INPUT_LIMIT.set(limit)
    try:
        yield
    finally:
        _INPUT_LIMIT.reset(token)


# How text is written: UTF-8, where a lone surrogate (the only thing UTF-8 cannot encode) becomes its
# \udcff escape; inside a JSON string that is the same character, in a text report a visible mark
UNENCODABLE = "backslashreplace"


class FileError(ChatJinjaError, OSError):
    """A file could not be read or written, or holds more than the input cap; the message names the path given."""


def too_large(name: str, limit: int) -> FileError:
    return FileError(f"{name} is larger than the input limit of {limit} bytes (raise it with --max-input-bytes)")


def read_capped(path: str | os.PathLike | None, limit: int | None = DEFAULT_MAX_INPUT_BYTES) -> tuple[str, bytes]:
    """``(name, bytes)`` of a file, or of stdin for ``None`` / ``-``; never reads more than ``limit + 1`` bytes.

    A regular file larger than ``limit`` is refused by its size before a byte is read; a stream (a
    pipe, ``/dev/zero``) is read up to ``limit + 1`` bytes and refused when it has more.
    """
    if path is None or os.fspath(path) == "-":
        # (a text stream standing in for stdin, as tests and embedders use, is read the same way)
        return "<stdin>", _read_stream(getattr(sys.stdin, "buffer", sys.stdin), "<stdin>", limit)
    name = os.fspath(path)
    try:
        f = open(path, "rb", buffering=0)
    except FileNotFoundError:
        raise FileError(f"input file not found: {name}") from None
    except IsADirectoryError:
        raise FileError(f"{name} is a directory, not a file") from None
    except OSError as exc:
        raise FileError(f"cannot read {name}: {exc.strerror or exc}") from None
    with f:
        try:
            info = os.fstat(f.fileno())
            if stat.S_ISDIR(info.st_mode):
                raise FileError(f"{name} is a directory, not a file")
            if limit is not None and stat.S_ISREG(info.st_mode) and info.st_size > limit:
                raise too_large(name, limit)
            return name, _read_stream(f, name, limit)
        except OSError as exc:
            if isinstance(exc, FileError):
                raise
            raise FileError(f"cannot read {name}: {exc.strerror or exc}") from None


def _read_stream(stream: IO[bytes], name: str, limit: int | None) -> bytes:
    """Everything in ``stream``, or :func:`too_large` after reading exactly ``limit + 1`` bytes from it
    (unbuffered reads: a buffered one would take up to a buffer more from the descriptor)."""
    if limit is None:
        return _as_bytes(stream.read())
    raw = getattr(stream, "raw", stream)
    data = bytearray()
    while len(data) <= limit:
        chunk = raw.read(min(limit + 1 - len(data), 1 << 20))
        if not chunk:
            return bytes(data)
        data += _as_bytes(chunk)
    raise too_large(name, limit)


def _as_bytes(chunk: bytes | str) -> bytes:
    return chunk.encode("utf-8", "surrogateescape") if isinstance(chunk, str) else chunk


def _real_target(path: Path) -> Path:
    """The file a write to ``path`` should replace: symlinks followed (a dangling one: the file it names)."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _writable_dir(given: str, directory: Path) -> None:
    if not directory.exists():
        raise FileError(f"cannot write {given}: directory {directory} does not exist")
    if not directory.is_dir():
        raise FileError(f"cannot write {given}: {directory} is not a directory")


@contextmanager
def atomic_text_file(path: str | os.PathLike, *, newline: str | None = "") -> Iterator[IO[str]]:
    """A text file (UTF-8) that replaces ``path`` when the block ends cleanly, and is gone when it does not."""
    given = os.fspath(path)
    try:
        old: os.stat_result | None = os.stat(given)  # through symlinks
    except (FileNotFoundError, NotADirectoryError):
        old = None  # (a missing or non-directory parent is named below)
    except OSError as exc:
        raise FileError(f"cannot write {given}: {exc.strerror or exc}") from None
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise FileError(f"cannot write {given}: it is a directory")
    if old is not None and not stat.S_ISREG(old.st_mode):
        # a device or a pipe (-o /dev/stdout, /dev/null, a FIFO): written in place, never replaced
        yield from _write_in_place(given, newline)
        return
    target = _real_target(Path(given))
    directory = target.parent
    _writable_dir(given, directory)
    tmp = directory / f".{target.name}.{secrets.token_hex(4)}.tmp"
    try:
        # 0666 less the umask, as open(path, "w") gives; a file that exists keeps its mode below
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as exc:
        raise FileError(f"cannot write {given}: {exc.strerror or exc}") from None
    try:
        if old is not None and stat.S_ISREG(old.st_mode):
            if hasattr(os, "fchmod"):
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
            else:  # pragma: no cover - Windows
                os.chmod(tmp, stat.S_IMODE(old.st_mode))
            if hasattr(os, "fchown") and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
                try:
                    os.fchown(fd, old.st_uid, old.st_gid)
                except OSError:
                    pass  # not allowed to give it away: the new file is ours, with the old mode
        with os.fdopen(fd, "w", encoding="utf-8", errors=UNENCODABLE, newline=newline) as f:
            fd = -1
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, FileError):
            raise FileError(f"cannot write {given}: {exc.strerror or exc}") from None
        raise
    _fsync_dir(directory)


def _write_in_place(given: str, newline: str | None) -> Iterator[IO[str]]:
    try:
        f = open(given, "w", encoding="utf-8", errors=UNENCODABLE, newline=newline)
    except OSError as exc:
        raise FileError(f"cannot write {given}: {exc.strerror or exc}") from None
    try:
        with f:
            yield f
    except OSError as exc:
        if isinstance(exc, FileError):
            raise
        raise FileError(f"cannot write {given}: {exc.strerror or exc}") from None


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (best effort: not every platform or file system can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write a whole file or nothing (see the module docstring: modes, symlinks, errors)."""
    with atomic_text_file(path) as f:
        f.write(text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(value: object, **options: object) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)`` with lone surrogates written as ``\\uXXXX`` escapes.

    A surrogate can only be inside a JSON string there, where its escape means the same character.
    """
    text = json.dumps(value, ensure_ascii=False, **options)  # type: ignore[arg-type]
    if text.isascii():
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
