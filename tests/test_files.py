"""``chatjinja.files``: output files get the modes users expect, symlinks are followed, writes are atomic,
errors name the path given; reads stop at the input cap; JSON output is valid UTF-8."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chatjinja.files import FileError, json_text, read_capped, write_atomic


@pytest.fixture
def umask():
    """Set the process umask for one test (and put the old one back)."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda value: os.umask(value)
    os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_default_mode_under_the_umask(tmp_path: Path, umask, mask: int, mode: int) -> None:
    umask(mask)
    path = tmp_path / "out.json"
    write_atomic(path, "{}\n")
    assert path.read_text() == "{}\n"
    assert path.stat().st_mode & 0o777 == mode


def test_rewriting_a_file_keeps_its_mode(tmp_path: Path, umask) -> None:
    umask(0o022)
    path = tmp_path / "report.txt"
    path.write_text("old")
    path.chmod(0o640)
    write_atomic(path, "new")
    assert path.read_text() == "new" and path.stat().st_mode & 0o777 == 0o640
    path.chmod(0o755)
    write_atomic(path, "newer")
    assert path.stat().st_mode & 0o777 == 0o755


def test_a_symlink_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "t.jinja"
    target.write_text("old")
    target.chmod(0o600)
    link = tmp_path / "link.jinja"
    link.symlink_to(Path("real") / "t.jinja")  # relative, as ln -s makes them
    write_atomic(link, "new")
    assert link.is_symlink() and os.readlink(link) == os.path.join("real", "t.jinja")
    assert target.read_text() == "new" and target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["t.jinja"]  # the temp file was beside the target
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "real" / "created.txt")
    write_atomic(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "real" / "created.txt").read_text() == "made"


def test_a_missing_directory_is_one_line_naming_the_path_given(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileError) as caught:
        write_atomic("no/such/out.json", "x")
    assert str(caught.value) == "cannot write no/such/out.json: directory no/such does not exist"
    (tmp_path / "a-file").write_text("")
    with pytest.raises(FileError) as caught:
        write_atomic("a-file/out.json", "x")
    assert str(caught.value) == "cannot write a-file/out.json: a-file is not a directory"
    (tmp_path / "a-dir").mkdir()
    with pytest.raises(FileError) as caught:
        write_atomic("a-dir", "x")
    assert str(caught.value) == "cannot write a-dir: it is a directory"


def test_an_unwritable_directory_names_the_path_given_and_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    """Root writes into a read-only directory anyway, so the refusal is the one the kernel gives a user:
    os.open raising EACCES for the temporary file (checked for real below when not root)."""
    out = tmp_path / "out.json"
    if os.getuid() != 0:
        tmp_path.chmod(0o555)
    else:
        real_open = os.open

        def refuse(path, flags, mode=0o777, **kwargs):
            if os.path.dirname(os.fspath(path)) == str(tmp_path):
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return real_open(path, flags, mode, **kwargs)

        monkeypatch.setattr(os, "open", refuse)
    try:
        with pytest.raises(FileError) as caught:
            write_atomic(out, "x")
    finally:
        tmp_path.chmod(0o755)
    assert str(caught.value) == f"cannot write {out}: Permission denied"
    assert ".tmp" not in str(caught.value) and list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "keep.txt"
    path.write_text("old")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(FileError, match=r"^cannot write .*keep.txt: No space left on device$"):
        write_atomic(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_reads_stop_at_the_cap(tmp_path: Path) -> None:
    with pytest.raises(FileError) as caught:
        read_capped("/dev/zero", 1 << 20)  # a stream: read cap + 1 bytes, then refused
    assert str(caught.value) == "/dev/zero is larger than the input limit of 1048576 bytes (raise it with --max-input-bytes)"
    sparse = tmp_path / "sparse.json"
    with open(sparse, "wb") as f:
        f.truncate(8 << 30)  # 8 GiB that take no disk: refused by its size, before a byte is read
    with pytest.raises(FileError, match="sparse.json is larger than the input limit of 67108864 bytes"):
        read_capped(sparse)
    exact = tmp_path / "exact.json"
    exact.write_bytes(b"x" * 100)
    assert read_capped(exact, 100) == (str(exact), b"x" * 100)
    with pytest.raises(FileError, match="larger than the input limit of 99 bytes"):
        read_capped(exact, 99)
    with pytest.raises(FileError, match="^input file not found: .*missing.json$"):
        read_capped(tmp_path / "missing.json")
    with pytest.raises(FileError, match="is a directory, not a file$"):
        read_capped(tmp_path)


def test_a_stream_over_the_cap_costs_cap_plus_one_bytes(tmp_path: Path) -> None:
    """stdin holding 10 MiB, cap 1 MiB: the reader takes cap + 1 bytes from the descriptor and stops
    (the file offset of fd 0 says how much was read: a count, not a time)."""
    big = tmp_path / "big"
    big.write_bytes(b"0" * (10 << 20))
    code = (
        "import os\n"
        "from chatjinja.files import read_capped, FileError\n"
        "try:\n"
        "    read_capped('-', 1 << 20)\n"
        "except FileError as e:\n"
        "    print(e)\n"
        "print(os.lseek(0, 0, os.SEEK_CUR))\n"
    )
    with open(big, "rb") as stdin:
        result = subprocess.run([sys.executable, "-c", code], stdin=stdin, capture_output=True, text=True, timeout=60)
    lines = result.stdout.splitlines()
    assert lines[0] == "<stdin> is larger than the input limit of 1048576 bytes (raise it with --max-input-bytes)"
    assert int(lines[1]) == (1 << 20) + 1


def test_json_text_escapes_lone_surrogates_only() -> None:
    value = {"text": "caf\u00e9 \U0001f600 " + json.loads('"\\udcff"') + " \u4e2d"}
    text = json_text(value)
    assert text == '{"text": "caf\u00e9 \U0001f600 \\udcff \u4e2d"}'  # readable, one escape
    text.encode("utf-8")  # valid UTF-8
    assert json.loads(text) == value  # and reads back the same
    assert json_text({"k": "\ud83d"}, indent=2) == '{\n  "k": "\\ud83d"\n}'


def test_a_device_or_pipe_is_written_in_place_never_replaced(tmp_path: Path) -> None:
    """``-o /dev/null`` or a FIFO: a rename over it would put a regular file where the device was (as
    root, in /dev). Checked on a null device made in tmp_path, so a regression cannot touch /dev/null."""
    import stat

    null = tmp_path / "null"
    try:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    write_atomic(null, "discarded")
    assert null.is_char_device() and null.stat().st_size == 0
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    write_atomic(fifo, "through the pipe\n")
    assert reader.communicate(timeout=30)[0] == b"through the pipe\n"
    assert fifo.is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "null"]
