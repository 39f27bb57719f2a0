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
    assert info["directory"] == str(filled) and (info["enabled"], info["reason"]) == (True, None)
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


def test_clear_names_each_file_it_could_not_delete_and_exits_1(
    filled: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from chatjinja.cli import main

    monkeypatch.setenv("CHATJINJA_CACHE_DIR", str(filled))
    monkeypatch.delenv("CHATJINJA_NO_DISK_CACHE", raising=False)
    kept = sorted(filled.glob("*.jcode"))[0]
    original = Path.unlink

    def refuse(self: Path, missing_ok: bool = False) -> None:
        if self == kept:  # root ignores permission bits: refuse as a read-only directory would
            raise PermissionError(13, "Permission denied")
        original(self, missing_ok)

    monkeypatch.setattr(Path, "unlink", refuse)
    assert main(["cache", "clear"]) == 1
    out, err = capsys.readouterr()
    assert err == f"error: could not delete {kept}: Permission denied\n"
    assert out.startswith("deleted 2 file(s), 1 could not be deleted\n")
    assert list(filled.glob("*.jcode")) == [kept]
    assert main(["cache", "prune", "--max-mb", "0.000001", "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["failed"] == [f"{kept}: Permission denied"] and err.count("\n") == 1


@pytest.mark.parametrize("kind", ["a file", "world-writable", "foreign-owned"])
def test_info_says_when_and_why_the_cache_is_ignored(tmp_path: Path, kind: str) -> None:
    cache = tmp_path / "cache"
    if kind == "a file":
        cache.write_text("")
        reason = f"{cache} is not a directory"
    elif kind == "world-writable":
        cache.mkdir()
        cache.chmod(0o777)
        reason = f"{cache} is writable by others (mode 0777)"
    else:
        cache.mkdir(mode=0o700)
        os.chown(cache, os.getuid() + 1, -1)  # the tests run as root, who may give a directory away
        reason = f"{cache} belongs to another user (uid {os.getuid() + 1})"
    info = json.loads(run_cli(cache, "cache", "--json").stdout)
    assert (info["enabled"], info["reason"]) == (False, reason)
    assert f"directory: {cache} (not used: {reason})\n" in run_cli(cache, "cache").stdout
