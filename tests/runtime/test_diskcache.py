"""The on-disk compile cache: used when sound, ignored (and the template recompiled) on any doubt."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import time
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


# -- the size limit ---------------------------------------------------------------------------------


def _sources(count: int) -> list[str]:
    return [SOURCE + "{# %d #}" % index for index in range(count)]


def _age(path: Path, seconds_ago: float) -> None:
    when = time.time() - seconds_ago
    os.utime(path, (when, when))


def _entries(cache: Path) -> set[str]:
    return {path.name for path in cache.glob("*.jcode") if not path.name.startswith(".")}


def _entry_of(cache: Path, source: str) -> Path:
    return cache / f"{diskcache.entry_key(source_hash(source))}.jcode"


def _size(path: Path) -> int:
    return diskcache.disk_bytes(path.stat())


def test_prune_deletes_the_least_recently_used_down_to_90_percent(cache: Path) -> None:
    sources = _sources(10)
    for source in sources:
        _fresh_process_compile(source)
    paths = [_entry_of(cache, source) for source in sources]
    for index, path in enumerate(paths):  # the first written is the least recently used
        _age(path, 10_000 - index)
    size = _size(paths[0])
    assert all(_size(path) == size for path in paths)
    limit = 8 * size + size // 2  # room for 8.5 entries: 10 is over it, 90% of it holds 7
    assert diskcache.prune(limit) == 3
    assert _entries(cache) == {path.name for path in paths[3:]}
    assert (cache / "key").exists()
    assert diskcache.prune(limit) == 0  # under the limit now: nothing more goes


def test_a_load_marks_the_entry_used(cache: Path, compiles: list[str]) -> None:
    old, new = _sources(2)
    _fresh_process_compile(old)
    _fresh_process_compile(new)
    _age(_entry_of(cache, old), 7200)
    _age(_entry_of(cache, new), 3600 + 60)
    aged = _entry_of(cache, old).stat().st_mtime
    assert _fresh_process_compile(old) == EXPECTED and len(compiles) == 2  # loaded from disk
    assert _entry_of(cache, old).stat().st_mtime >= aged + 7200 - 60  # marked used when loaded (aged 2 h before)
    assert diskcache.prune(_size(_entry_of(cache, old)) * 6 // 5) == 1  # room for one entry
    assert _entries(cache) == {_entry_of(cache, old).name}  # the entry not used since went first


def test_prune_touches_only_entries_and_stale_temporary_files(cache: Path, tmp_path: Path) -> None:
    _fresh_process_compile()
    entry = _entry(cache)
    outside = tmp_path / "outside.jcode"
    outside.write_bytes(b"x" * 100_000)
    (cache / ("a" * 64 + ".jcode")).symlink_to(outside)  # named like an entry, but a symlink
    (cache / "notes.txt").write_bytes(b"x" * 100_000)
    (cache / ("b" * 63 + ".jcode")).write_bytes(b"x" * 100_000)  # not an entry's name
    stale, fresh = cache / ".tmp-stale.jcode", cache / ".tmp-fresh.jcode"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    _age(stale, 7200)
    assert diskcache.prune(1) == 2  # the stale temporary file and the entry
    assert not entry.exists() and not stale.exists()
    assert fresh.exists() and outside.exists() and (cache / "notes.txt").exists() and (cache / "key").exists()
    assert (cache / ("b" * 63 + ".jcode")).exists() and (cache / ("a" * 64 + ".jcode")).is_symlink()


@pytest.fixture
def prunes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the looks at the directory's size (each still prunes)."""
    calls: list[int] = []
    original = diskcache.prune

    def counting(limit: Any = None) -> int:
        calls.append(1)
        return original(limit)

    monkeypatch.setattr(diskcache, "prune", counting)
    monkeypatch.setattr(diskcache, "_stores", 0)
    return calls


def test_store_prunes_when_no_process_has_for_a_while(cache: Path, prunes: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    sources = _sources(4)
    _fresh_process_compile(sources[0])
    assert len(prunes) == 1  # no process had looked: the first store does
    size = _size(_entry_of(cache, sources[0]))
    monkeypatch.setenv("CHATJINJA_CACHE_MAX_MB", str(1.5 * size / (1024 * 1024)))
    _fresh_process_compile(sources[1])
    _fresh_process_compile(sources[2])
    assert len(prunes) == 1 and len(_entries(cache)) == 3  # looked a moment ago: over the limit for a while
    for source in sources[:3]:
        _age(_entry_of(cache, source), 100)  # (all older than the next)
    _age(cache / "pruned", 601)
    _fresh_process_compile(sources[3])
    assert len(prunes) == 2 and _entries(cache) == {_entry_of(cache, sources[3]).name}


def test_store_prunes_every_so_many_stores(cache: Path, prunes: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diskcache, "_PRUNE_EVERY", 4)
    for source in _sources(9):
        _fresh_process_compile(source)
    assert len(prunes) == 3  # the first (no look yet), the 4th and the 8th


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", 128 * 1024 * 1024), ("0", None), ("1.5", 1536 * 1024), ("64", 64 * 1024 * 1024), ("lots", 128 * 1024 * 1024), ("-3", 128 * 1024 * 1024), ("nan", 128 * 1024 * 1024), ("inf", None)],
)
def test_limit_from_environment(monkeypatch: pytest.MonkeyPatch, value: str, expected: int | None) -> None:
    monkeypatch.setenv("CHATJINJA_CACHE_MAX_MB", value)
    assert diskcache.max_bytes() == expected


def test_no_limit_prunes_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_process_compile()
    monkeypatch.setenv("CHATJINJA_CACHE_MAX_MB", "0")
    assert diskcache.prune() == 0
    assert _entries(cache)
