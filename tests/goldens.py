"""Golden files: an output is compared with its reviewed file; ``UPDATE_GOLDENS=1`` (re)writes the files, nothing else does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["UPDATE", "check_golden", "missing_golden"]

UPDATE = os.environ.get("UPDATE_GOLDENS") == "1"


def _command() -> str:
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    return f"UPDATE_GOLDENS=1 .venv/bin/python -m pytest {test or 'tests/...'!r}"


def missing_golden(path: Path) -> str:
    """What a test says when its golden file does not exist: how to create it."""
    return f"golden {path} is missing: create it with {_command()}, then review it (git diff / git add)"


def check_golden(path: Path, actual: str) -> None:
    """Fail unless ``path`` holds exactly ``actual``; with ``UPDATE_GOLDENS=1`` write it instead (and pass)."""
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8", newline="\n")
        return
    if not path.is_file():
        pytest.fail(missing_golden(path))
    with open(path, encoding="utf-8", newline="") as f:  # byte-faithful: a golden may hold a "\r" (PT007)
        expected = f.read()
    assert actual == expected, f"{path.name} changed: rerun with {_command()} and review the diff"
