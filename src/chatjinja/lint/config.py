"""``[tool.chatjinja]`` in ``pyproject.toml``: which rules run, per-file ignores, severity overrides, fail level.

Found by walking up from the linted file's directory (or the working directory) to the first
``pyproject.toml`` that has a ``[tool.chatjinja]`` table. Keys::

    [tool.chatjinja]
    select = ["ALL"]                 # codes, code prefixes ("SC") or rule names
    ignore = ["TK001"]
    fail-level = "warning"           # note | warning | error
    [tool.chatjinja.per-file-ignores]
    "templates/legacy/*.jinja" = ["WS001"]   # glob relative to the pyproject.toml's directory
    [tool.chatjinja.severity]
    TK001 = "warning"
"""

from __future__ import annotations

import fnmatch
import functools
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from ..errors import ChatJinjaError
from .diagnostic import SEVERITIES

__all__ = ["ConfigError", "LintConfig", "find_config", "load_config"]


class ConfigError(ChatJinjaError):
    """``[tool.chatjinja]`` is malformed (wrong type, unknown severity)."""


@dataclass(frozen=True)
class LintConfig:
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    severity: tuple[tuple[str, str], ...] = ()
    fail_level: str | None = None
    path: Path | None = None  # the pyproject.toml it came from

    def ignores_for(self, file: str | Path | None) -> tuple[str, ...]:
        """``ignore`` plus the per-file ignores whose glob matches ``file``."""
        out = list(self.ignore)
        if file is None or not self.per_file_ignores:
            return tuple(out)
        target = Path(file).resolve()
        base = self.path.parent.resolve() if self.path else Path.cwd().resolve()
        try:
            rel = PurePosixPath(target.relative_to(base).as_posix())
        except ValueError:
            rel = PurePosixPath(target.as_posix())
        for pattern, codes in self.per_file_ignores:
            if fnmatch.fnmatch(str(rel), pattern) or fnmatch.fnmatch(rel.name, pattern) or rel.match(pattern):
                out.extend(codes)
        return tuple(out)

    def severity_for(self, code: str, default: str) -> str:
        for selector, level in self.severity:
            if code.startswith(selector.upper()):
                return level
        return default


def _strings(value, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return tuple(value)


def _level(value, where: str) -> str:
    if value not in SEVERITIES:
        raise ConfigError(f"{where} must be one of {', '.join(SEVERITIES)}, got {value!r}")
    return value


def load_config(path: Path) -> LintConfig:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    table = data.get("tool", {}).get("chatjinja")
    if table is None:
        return LintConfig(path=path)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.chatjinja] must be a table")
    where = f"{path}: [tool.chatjinja]"
    select = _strings(table["select"], f"{where} select") if "select" in table else None
    ignore = _strings(table.get("ignore", []), f"{where} ignore")
    pfi = table.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{where} per-file-ignores must be a table")
    per_file = tuple((k, _strings(v, f"{where} per-file-ignores {k!r}")) for k, v in pfi.items())
    sev = table.get("severity", {})
    if not isinstance(sev, dict):
        raise ConfigError(f"{where} severity must be a table")
    severity = tuple((k, _level(v, f"{where} severity {k!r}")) for k, v in sev.items())
    fail_level = _level(table["fail-level"], f"{where} fail-level") if "fail-level" in table else None
    return LintConfig(select, ignore, per_file, severity, fail_level, path)


@functools.lru_cache(maxsize=256)
def _find_from(directory: Path) -> Path | None:
    for folder in (directory, *directory.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                with open(candidate, "rb") as f:
                    data = tomllib.load(f)
            except (OSError, tomllib.TOMLDecodeError):
                continue
            if isinstance(data.get("tool"), dict) and "chatjinja" in data["tool"]:
                return candidate
    return None


def find_config(start: str | Path | None = None) -> LintConfig:
    """The configuration for a file (or the working directory): the nearest ``[tool.chatjinja]``."""
    base = Path(start) if start is not None else Path.cwd()
    if base.is_file() or not base.exists():
        base = base.parent
    found = _find_from(base.resolve())
    return load_config(found) if found is not None else LintConfig()
