"""The on-disk compile cache: used when sound, ignored (and the template recompiled) on any doubt."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chatjinja.runtime import diskcache
from chatjinja.runtime import environment as env_module
from chatjinja.runtime.budget import DEFAULT_BUDGETS
from chatjinja.runtime.environment import ChatTemplateEnvironment, clear_compile_cache, compile_template, source_hash

SOURCE = "{% for m in messages %}[{{ m.role }}] {{ m['content'] | trim }}{% if not loop.last %} | {% endif %}{% endfor %}"
MESSAGES = [{"role": "user", "content": " hi "}, {"role": "assistant", "content": "hello"}]
EXPECTED = "[user] hi | [assistant] hello"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("CHATJINJA_CACHE_DIR", str(directory))
    monkeypatch.delenv("CHATJINJA_NO_DISK_CACHE", raising=False)
    clear_compile_cache()
    yield directory
    clear_compile_cache()


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts real compiles from source (a load from disk is not one)."""
    calls: list[str] = []
    original = ChatTemplateEnvironment.compile_budgeted

    def counting(self: Any, source: str, max_nesting: Any) -> Any:
        calls.append(source)
        return original(self, source, max_nesting)

    monkeypatch.setattr(ChatTemplateEnvironment, "compile_budgeted", counting)
    return calls


def _fresh_process_compile(source: str = SOURCE, budgets: Any = None) -> str:
    """What a new process would do: nothing in memory, so the disk is asked first."""
    clear_compile_cache()
    return compile_template(source, budgets).render(messages=MESSAGES)


def _entry(cache: Path) -> Path:
    (entry,) = cache.glob("*.jcode")
    return entry


def test_second_process_loads_from_disk(cache: Path, compiles: list[str]) -> None:
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 1
    assert (cache.stat().st_mode & 0o777) == 0o700
    assert ((cache / "key").stat().st_mode & 0o777) == 0o600
    assert (_entry(cache).stat().st_mode & 0o777) == 0o600
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 1  # the second one came from disk


def test_budget_nesting_travels_with_the_entry(cache: Path, compiles: list[str]) -> None:
    assert _fresh_process_compile(budgets=DEFAULT_BUDGETS) == EXPECTED
    clear_compile_cache()
    template = compile_template(SOURCE, DEFAULT_BUDGETS)
    assert len(compiles) == 1
    assert isinstance(template.chatjinja_nesting, int)


def _damage_and_recompile(cache: Path, compiles: list[str], damage: Any) -> None:
    _fresh_process_compile()
    entry = _entry(cache)
    damage(entry)
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 2  # recompiled ...
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 2  # ... and the entry was rewritten, sound again


def test_corrupted_entry_is_recompiled(cache: Path, compiles: list[str]) -> None:
    def flip(entry: Path) -> None:
        blob = bytearray(entry.read_bytes())
        blob[-10] ^= 0xFF
        entry.write_bytes(bytes(blob))

    _damage_and_recompile(cache, compiles, flip)


def test_truncated_entry_is_recompiled(cache: Path, compiles: list[str]) -> None:
    _damage_and_recompile(cache, compiles, lambda entry: entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2]))


def test_empty_entry_is_recompiled(cache: Path, compiles: list[str]) -> None:
    _damage_and_recompile(cache, compiles, lambda entry: entry.write_bytes(b""))


def _hostile_code(marker: Path) -> Any:
    return compile(f"open({str(marker)!r}, 'w').write('pwned')\n", "<template>", "exec")


def test_hostile_entry_is_never_executed(cache: Path, compiles: list[str], tmp_path: Path) -> None:
    """A well-formed entry with a code object that is not ours: its MAC (under another key) fails."""
    marker = tmp_path / "marker"
    _fresh_process_compile()
    entry = _entry(cache)
    key = entry.name[: -len(".jcode")]
    payload = marshal.dumps((key, None, _hostile_code(marker)))
    forged_mac = diskcache._mac(b"x" * 32, key, payload)
    for mac in (forged_mac, b"\0" * 32):
        entry.write_bytes(diskcache._MAGIC + mac + payload)
        assert _fresh_process_compile() == EXPECTED
    assert not marker.exists()
    assert len(compiles) == 3


def test_entry_of_another_template_is_refused(cache: Path, compiles: list[str]) -> None:
    other = "{{ 'other' }}"
    _fresh_process_compile()
    _fresh_process_compile(other)
    own, theirs = diskcache.entry_key(source_hash(SOURCE)), diskcache.entry_key(source_hash(other))
    (cache / f"{own}.jcode").write_bytes((cache / f"{theirs}.jcode").read_bytes())  # a valid MAC, the wrong name
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 3


def test_wrong_secret_means_recompile(cache: Path, compiles: list[str]) -> None:
    _fresh_process_compile()
    (cache / "key").write_bytes(os.urandom(32))
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 2


def test_foreign_entry_file_is_refused(cache: Path, compiles: list[str], tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("changing a file's owner needs root")
    _fresh_process_compile()
    os.chown(_entry(cache), 65534, 65534)
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 2


def test_symlinked_entry_is_refused(cache: Path, compiles: list[str], tmp_path: Path) -> None:
    _fresh_process_compile()
    entry = _entry(cache)
    elsewhere = tmp_path / "elsewhere.jcode"
    elsewhere.write_bytes(entry.read_bytes())
    entry.unlink()
    entry.symlink_to(elsewhere)
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 2


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_shared_directory_is_not_used(cache: Path, compiles: list[str], mode: int) -> None:
    _fresh_process_compile()
    cache.chmod(mode)
    try:
        assert _fresh_process_compile() == EXPECTED
        assert _fresh_process_compile() == EXPECTED
        assert len(compiles) == 3  # nothing loaded from (or trusted in) a directory others can write
    finally:
        cache.chmod(0o700)


def test_readable_secret_is_not_used(cache: Path, compiles: list[str]) -> None:
    _fresh_process_compile()
    (cache / "key").chmod(0o644)
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 2


def test_symlinked_secret_is_not_used(cache: Path, compiles: list[str], tmp_path: Path) -> None:
    _fresh_process_compile()
    secret = cache / "key"
    outside = tmp_path / "planted-key"
    outside.write_bytes(secret.read_bytes())
    outside.chmod(0o600)
    secret.unlink()
    secret.symlink_to(outside)
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 2


def test_other_versions_do_not_share_entries(cache: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_process_compile()
    monkeypatch.setattr(diskcache, "_fingerprint", diskcache._codegen_fingerprint().replace("jinja2=", "jinja2=0.0-"))
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 2
    assert len(list(cache.glob("*.jcode"))) == 2


def test_disabled_by_environment(cache: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATJINJA_NO_DISK_CACHE", "1")
    _fresh_process_compile()
    _fresh_process_compile()
    assert len(compiles) == 2
    assert not cache.exists()


def test_unwritable_location_falls_back_to_compiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiles: list[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("CHATJINJA_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("CHATJINJA_NO_DISK_CACHE", raising=False)
    assert _fresh_process_compile() == EXPECTED
    assert _fresh_process_compile() == EXPECTED
    assert len(compiles) == 2


def test_default_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CHATJINJA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert diskcache.cache_dir() == tmp_path / "xdg" / "chatjinja"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert diskcache.cache_dir() == tmp_path / "home" / ".cache" / "chatjinja"


def test_import_stays_light() -> None:
    """``import chatjinja`` loads neither jinja2 nor the runtime (names are imported on first use)."""
    code = "import sys, chatjinja; print(sorted(m for m in sys.modules if m.split('.')[0] in ('jinja2', 'lark', 'chatjinja')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["chatjinja"]  # noqa: S307 - our own subprocess's repr of a list of names


def test_module_reference_is_what_compile_uses() -> None:
    # compile_template's disk hooks are the ones this file exercises
    assert env_module._diskcache is diskcache
