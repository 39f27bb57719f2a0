"""The on-disk cache of compiled chat templates: authenticated Python bytecode, keyed by source and versions.

A compiled template is Python code, so a cache file is code: whoever can write one can run code in
every process that loads it. An entry is therefore only loaded when

- the cache directory belongs to the current user and is not group- or world-writable,
- the per-user secret (``key``, 32 random bytes, created ``0600`` in that directory) is a regular
  file of the current user that nobody else can read or write, and
- the entry's HMAC-SHA256 under that secret matches, checked *before* ``marshal.loads`` sees a byte.

The entry name and its MAC cover the source hash and the versions of chatjinja, jinja2, Python
(bytecode magic) and the code generator, so a stale, foreign, truncated or corrupted entry is never
used: any doubt means compile from source (and overwrite the entry).

Where: ``$CHATJINJA_CACHE_DIR``, else ``$XDG_CACHE_HOME/chatjinja``, else ``~/.cache/chatjinja``.
``CHATJINJA_NO_DISK_CACHE=1`` turns it off.

Size: the entries may take ``$CHATJINJA_CACHE_MAX_MB`` megabytes of disk (default 128; ``0`` for no
limit). Entries are never used again once chatjinja, jinja2 or Python changes, so without a limit
the directory would only grow. A load marks its entry used (its modification time, at most once an
hour). A store looks at the directory's size when no process has for ``_PRUNE_SECONDS`` (the
``pruned`` file's time says when one last did; a look at 16,000 entries takes about 0.15 s) and at
every ``_PRUNE_EVERY``-th store of a process; over the limit, the least recently used entries are
deleted down to 90% of it, and temporary files a writer left behind more than an hour ago.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import marshal
import os
import stat
import sys
import tempfile
import time
import types
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

import jinja2

from ..version import __version__

__all__ = [
    "CachedCode",
    "CodeRecorder",
    "cache_dir",
    "clear",
    "disk_bytes",
    "disk_cache_enabled",
    "entry_key",
    "load",
    "max_bytes",
    "prune",
    "recording_code",
    "status",
    "store",
    "usage",
]

_MAGIC = b"chatjinja-code-1\n"
_MAC_SIZE = 32
_SECRET_NAME = "key"
_SECRET_SIZE = 32
_MAX_ENTRY = 64 * 1024 * 1024
_SUFFIX = ".jcode"
_TMP_PREFIX = ".tmp-"
_DEFAULT_MAX_MB = 128
_PRUNE_SECONDS = 600  # a store looks at the directory's size when no process has for this long ...
_PRUNE_EVERY = 1024  # ... and at every this many stores of a process
_PRUNE_STAMP = "pruned"  # its modification time: when the size was last looked at
_STALE_TMP_SECONDS = 3600  # a temporary file this old was left by a writer that died
_TOUCH_SECONDS = 3600  # a load marks its entry used when the mark is older than this
_HEX = frozenset("0123456789abcdef")
_stores = 0


class CachedCode:
    """What an entry holds: the module code jinja2 compiled, and the source nesting measured for budgets."""

    __slots__ = ("code", "nesting")

    def __init__(self, code: types.CodeType, nesting: int | None):
        self.code = code
        self.nesting = nesting


_recorded: ContextVar[list[types.CodeType] | None] = ContextVar("chatjinja_recorded_code", default=None)


class CodeRecorder:
    """Environment mixin: while :func:`recording_code` is active, keeps the module code jinja2 compiles."""

    def _compile(self, source: str, filename: str) -> types.CodeType:
        code = super()._compile(source, filename)  # type: ignore[misc]
        recorded = _recorded.get()
        if recorded is not None:
            recorded.append(code)
        return code


@contextmanager
def recording_code() -> Iterator[list[types.CodeType]]:
    """Collect the code objects compiled (by a ``CodeRecorder`` environment) inside the block."""
    recorded: list[types.CodeType] = []
    token = _recorded.set(recorded)
    try:
        yield recorded
    finally:
        _recorded.reset(token)


def _off_reason() -> str | None:
    if os.environ.get("CHATJINJA_NO_DISK_CACHE", "").strip().lower() not in ("", "0", "false", "no"):
        return "CHATJINJA_NO_DISK_CACHE is set"
    if not (hasattr(os, "getuid") and hasattr(os, "O_NOFOLLOW")):
        return "this platform cannot check who owns a file (no getuid or O_NOFOLLOW)"
    return None


def disk_cache_enabled() -> bool:
    return _off_reason() is None


def cache_dir() -> Path:
    explicit = os.environ.get("CHATJINJA_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "chatjinja"


_fingerprint: str | None = None
# The modules whose source shapes the code jinja2 compiles (the code generator, the budget hooks it
# writes calls to): they sit beside this file, which reads them rather than importing them.
_CODE_GENERATOR_FILES = ("environment.py", "budget.py")


def _codegen_fingerprint() -> str:
    """Versions that change the compiled code: chatjinja, jinja2, Python's bytecode, the code generator's source."""
    global _fingerprint
    if _fingerprint is None:

        digest = hashlib.sha256()
        for name in _CODE_GENERATOR_FILES:
            path = Path(__file__).with_name(name)
            try:
                digest.update(path.read_bytes())
            except OSError:
                digest.update(str(path).encode())
        _fingerprint = (
            f"chatjinja={__version__};jinja2={jinja2.__version__};python={sys.implementation.cache_tag};"
            f"magic={importlib.util.MAGIC_NUMBER.hex()};codegen={digest.hexdigest()[:32]}"
        )
    return _fingerprint


def entry_key(source_hash: str) -> str:
    """The name of a template's entry: a hash of its source hash and every version that shapes the code."""
    return hashlib.sha256(f"{_codegen_fingerprint()};source={source_hash}".encode()).hexdigest()


def _dir_problem(directory: Path, create: bool = True) -> str | None:
    """Why entries may not be kept in the directory, or None when it is ours and nobody else may write
    into it (created 0700 first when ``create``; without it, a directory not there yet is fine)."""
    try:
        if create:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.stat(directory)
    except FileNotFoundError:
        return None if not create else f"{directory} cannot be created"
    except FileExistsError:
        return f"{directory} is not a directory"
    except OSError as exc:
        return f"{directory} cannot be used: {exc.strerror or exc}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{directory} is not a directory"
    if info.st_uid != os.getuid():
        return f"{directory} belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"{directory} is writable by others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def _private_dir(directory: Path) -> bool:
    """Create the directory 0700 if needed; True when it is ours and nobody else may write into it."""
    return _dir_problem(directory) is None


def _secret_problem(info: os.stat_result) -> str | None:
    """Why a file may not be the secret, or None."""
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if info.st_uid != os.getuid():
        return f"belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o077:
        return f"may be read or written by others (mode {stat.S_IMODE(info.st_mode):04o})"
    if info.st_size != _SECRET_SIZE:
        return f"is {info.st_size} bytes, not {_SECRET_SIZE}"
    return None


def _read_secret(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if _secret_problem(os.fstat(fd)) is not None:
            return None
        secret = os.read(fd, _SECRET_SIZE + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return secret if len(secret) == _SECRET_SIZE else None


def _create_secret(path: Path) -> bytes | None:
    secret = os.urandom(_SECRET_SIZE)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return _read_secret(path)  # another process made it first
    except OSError:
        return None
    try:
        os.write(fd, secret)
    except OSError:
        os.close(fd)
        return None
    os.close(fd)
    return _read_secret(path)


def _secret(directory: Path) -> bytes | None:
    """The per-user secret of a directory that passes the checks (made on first use), else None.

    Checked on every load and store: those happen once per template per process, a stat and a
    32-byte read are nothing next to a compile, and a directory whose mode changed is noticed.
    """
    if not _private_dir(directory):
        return None
    path = directory / _SECRET_NAME
    secret = _read_secret(path)
    if secret is None and not os.path.lexists(path):
        secret = _create_secret(path)
    return secret


def _mac(secret: bytes, key: str, payload: bytes) -> bytes:
    return hmac.new(secret, _MAGIC + key.encode() + b"\n" + payload, hashlib.sha256).digest()


def load(source_hash: str) -> CachedCode | None:
    """The cached code of a template, or None (no entry, cache off, or anything about the entry in doubt)."""
    if not disk_cache_enabled():
        return None
    directory = cache_dir()
    secret = _secret(directory)
    if secret is None:
        return None
    key = entry_key(source_hash)
    try:
        fd = os.open(directory / (key + _SUFFIX), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size > _MAX_ENTRY:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            # the size fstat gave (plus one: a file that grew since is refused below, by its MAC), not
            # the maximum: read(n) allocates n bytes up front, 64 MiB on every load
            blob = f.read(info.st_size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    header = len(_MAGIC) + _MAC_SIZE
    if len(blob) <= header or not blob.startswith(_MAGIC):
        return None
    mac, payload = blob[len(_MAGIC) : header], blob[header:]
    if not hmac.compare_digest(mac, _mac(secret, key, payload)):
        return None
    try:
        stored_key, nesting, code = marshal.loads(payload)
    except Exception:  # noqa: BLE001 - authenticated but unreadable (e.g. a different Python): recompile
        return None
    if stored_key != key or not isinstance(code, types.CodeType) or not (nesting is None or type(nesting) is int):
        return None
    if time.time() - info.st_mtime > _TOUCH_SECONDS:  # used: the last to go when the cache is pruned
        try:
            os.utime(directory / (key + _SUFFIX), follow_symlinks=False)
        except (OSError, NotImplementedError):
            pass
    return CachedCode(code, nesting)


def store(source_hash: str, code: types.CodeType, nesting: int | None = None) -> bool:
    """Write an entry atomically (a temporary file renamed into place); any failure is ignored."""
    if not disk_cache_enabled():
        return False
    directory = cache_dir()
    secret = _secret(directory)
    if secret is None:
        return False
    key = entry_key(source_hash)
    try:
        payload = marshal.dumps((key, nesting, code))
    except ValueError:
        return False
    blob = _MAGIC + _mac(secret, key, payload) + payload
    try:
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=_SUFFIX, dir=directory)  # created 0600
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, directory / (key + _SUFFIX))
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    global _stores
    _stores += 1
    if _stores % _PRUNE_EVERY == 0 or _prune_due(directory):
        prune()
    return True


def _prune_due(directory: Path) -> bool:
    try:
        info = os.stat(directory / _PRUNE_STAMP, follow_symlinks=False)
    except OSError:
        return True
    return not stat.S_ISREG(info.st_mode) or abs(time.time() - info.st_mtime) > _PRUNE_SECONDS


def max_bytes() -> int | None:
    """The most the entries may take (``$CHATJINJA_CACHE_MAX_MB`` megabytes, default 128), or None for no limit."""
    raw = os.environ.get("CHATJINJA_CACHE_MAX_MB", "").strip()
    try:
        megabytes = float(raw) if raw else _DEFAULT_MAX_MB
    except ValueError:  # (the cache never fails a render: a value that is not a number is ignored)
        megabytes = _DEFAULT_MAX_MB
    if megabytes != megabytes or megabytes < 0:  # NaN, negative: ignored too
        megabytes = _DEFAULT_MAX_MB
    return None if megabytes == 0 or megabytes == float("inf") else int(megabytes * 1024 * 1024)


def _is_entry_name(name: str) -> bool:
    return len(name) == 64 + len(_SUFFIX) and name.endswith(_SUFFIX) and _HEX.issuperset(name[:64])


def prune(limit: int | None = None, failed: list[str] | None = None) -> int:
    """Keep the entries within ``limit`` bytes (default :func:`max_bytes`): when they take more, delete
    the least recently used down to 90% of it. Also deletes temporary files a writer left behind more
    than an hour ago. Only regular files named like an entry or a temporary file are touched (never
    the secret, a symlink or anything else), and only in a directory that passes the checks a store
    makes. Returns the number of files deleted; each one that could not be is added to ``failed``
    as ``"path: why"``."""
    if limit is None:
        limit = max_bytes()
        if limit is None:
            return 0
    directory = cache_dir()
    if not disk_cache_enabled() or not directory.is_dir() or not _private_dir(directory):
        return 0
    now = time.time()
    entries: list[tuple[float, str, int]] = []
    total = removed = 0
    _mark_pruned(directory)
    for name, info in _regular_files(directory):
        if _is_entry_name(name):
            size = disk_bytes(info)
            entries.append((info.st_mtime, name, size))
            total += size
        elif name.startswith(_TMP_PREFIX) and name.endswith(_SUFFIX) and now - info.st_mtime > _STALE_TMP_SECONDS:
            removed += _unlink(directory / name, failed)
    if total <= limit:
        return removed
    target = limit * 9 // 10
    entries.sort()  # least recently used first
    for _, name, size in entries:
        if total <= target:
            break
        removed += _unlink(directory / name, failed)
        total -= size  # (also when another process deleted it first)
    return removed


def _regular_files(directory: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(name, stat) of the regular files in the directory (not through symlinks; none if it cannot be read)."""
    try:
        scan = os.scandir(directory)
    except OSError:
        return
    with scan:
        for entry in scan:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                yield entry.name, info


def disk_bytes(info: os.stat_result) -> int:
    """The disk space a file takes (its blocks: a 2 KB entry takes 4 KB on most file systems), else its size."""
    blocks = getattr(info, "st_blocks", None)
    return info.st_size if blocks is None else blocks * 512


def _mark_pruned(directory: Path) -> None:
    path = directory / _PRUNE_STAMP
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
        os.utime(path, follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass


def _unlink(path: Path, failed: list[str] | None = None) -> int:
    try:
        path.unlink()
    except FileNotFoundError:
        return 0  # another process deleted it first
    except OSError as exc:
        if failed is not None:
            failed.append(f"{path}: {exc.strerror or exc}")
        return 0
    return 1


def status() -> tuple[bool, str | None]:
    """``(True, None)`` when loads and stores use the cache directory, else ``(False, why not)``: the
    checks :func:`load` and :func:`store` make, without creating the directory or the secret."""
    reason = _off_reason()
    if reason is not None:
        return False, reason
    directory = cache_dir()
    reason = _dir_problem(directory, create=False)
    if reason is not None:
        return False, reason
    path = directory / _SECRET_NAME
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True, None  # made on first use
    except OSError as exc:
        return False, f"the secret {path} cannot be read: {exc.strerror or exc}"
    problem = _secret_problem(info)
    if problem is None and _read_secret(path) is None:
        problem = "cannot be read"
    return (True, None) if problem is None else (False, f"the secret {path} {problem}")


def usage() -> dict:
    """What ``chatjinja cache`` shows: the directory, whether the cache is used (and if not, why), its
    entries and the disk space they take, and the limit (None: no limit)."""
    directory = cache_dir()
    sizes = [disk_bytes(info) for name, info in _regular_files(directory) if _is_entry_name(name)]
    enabled, reason = status()
    return {
        "directory": str(directory),
        "enabled": enabled,
        "reason": reason,
        "entries": len(sizes),
        "bytes": sum(sizes),
        "limit": max_bytes(),
    }


def clear(failed: list[str] | None = None) -> int:
    """Delete every entry (not the secret) from the cache directory; the number deleted. Each file
    that could not be deleted (and a directory that cannot be listed) is added to ``failed`` as
    ``"path: why"``."""
    removed = 0
    directory = cache_dir()
    if not directory.is_dir():
        return 0
    try:
        paths = [directory / name for name in os.listdir(directory) if name.endswith(_SUFFIX)]
    except OSError as exc:
        if failed is not None:
            failed.append(f"{directory}: {exc.strerror or exc}")
        return 0
    for path in paths:
        removed += _unlink(path, failed)
    return removed
