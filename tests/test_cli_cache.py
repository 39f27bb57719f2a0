"""``chatjinja cache`` as a user runs it: where the cache is and how big, prune and clear, usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_cli(cache: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "CHATJINJA_CACHE_DIR": str(cache), **env}
    environ.pop("CHATJINJA_NO_DISK_CACHE", None)
    return subprocess.run([sys.executable, "-m", "chatjinja", *args], capture_output=True, text=True, env=environ, timeout=120)


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    """A cache directory with three entries, written by renders of three templates in a new process."""
    cache = tmp_path / "cache"
    code = (
        "import chatjinja\n"
        "for n in range(3):\n"
        "    chatjinja.apply_chat_template([{'role': 'user', 'content': 'hi'}], '{{ messages[0].content }}' + '!' * n)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "CHATJINJA_CACHE_DIR": str(cache)}, timeout=120)
    assert len(list(cache.glob("*.jcode"))) == 3
    return cache


def test_info_says_where_and_how_big(filled: Path) -> None:
    result = run_cli(filled, "cache", "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["directory"] == str(filled) and info["enabled"] is True
    assert info["entries"] == 3 and info["bytes"] >= sum(p.stat().st_size for p in filled.glob("*.jcode"))
    assert info["limit"] == 128 * 1024 * 1024
    text = run_cli(filled, "cache", CHATJINJA_CACHE_MAX_MB="0").stdout
    assert f"directory: {filled}\n" in text and "entries:   3, " in text and "(limit none)" in text


def test_prune_to_a_limit_and_clear(filled: Path) -> None:
    result = run_cli(filled, "cache", "prune", "--max-mb", "0.000001", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["deleted"] == 3 and not list(filled.glob("*.jcode"))
    assert (filled / "key").exists()  # the secret stays


def test_clear_deletes_every_entry(filled: Path) -> None:
    result = run_cli(filled, "cache", "clear")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("deleted 3 file(s)\n") and "entries:   0, " in result.stdout
    assert not list(filled.glob("*.jcode"))


@pytest.mark.parametrize("args", [["prune", "--max-mb", "-1"], ["prune", "--max-mb", "nan"], ["info", "--max-mb", "5"], ["tidy"]])
def test_usage_errors_are_one_line_exit_2(tmp_path: Path, args: list[str]) -> None:
    result = run_cli(tmp_path / "cache", "cache", *args)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: ") and "Traceback" not in result.stderr
