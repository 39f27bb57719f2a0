"""tools/test-with-hogs.sh: the README's pytest command beside CPU hogs; pytest's exit code; the hogs always stopped.

The script runs here with a stub interpreter (hogs that sleep, a "pytest" that exits or waits), so no CPU is burnt.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "tools" / "test-with-hogs.sh"
STUB = """#!/bin/sh
if [ "$1" = "-c" ]; then echo $$ >> "$STUB_DIR/hogs"; exec sleep 300; fi
echo $$ > "$STUB_DIR/pytest.pid"
echo "$@" > "$STUB_DIR/args"
if [ -n "${STUB_WAIT:-}" ]; then exec sleep 300; fi
exit "$STUB_EXIT"
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes (its parent has not reaped it yet)
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.fixture
def stub(tmp_path: Path):
    python = tmp_path / "python"
    python.write_text(STUB)
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "STUB_DIR": str(tmp_path), "STUB_EXIT": "3"}
    yield env, tmp_path
    for pid in _pids(tmp_path / "hogs") + _pids(tmp_path / "pytest.pid"):
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_runs_the_readme_pytest_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    command = re.findall(r"```sh\n(.*?)\n```", readme.split("## Quick start", 1)[1], flags=re.S)[1]
    pytest_part = command.split(" && ")[-1]
    assert pytest_part == ".venv/bin/python -m pytest -n 2 -q"
    script = SCRIPT.read_text(encoding="utf-8")
    assert 'PYTHON=${PYTHON:-.venv/bin/python}' in script
    assert '"$PYTHON" -m pytest -n 2 -q "$@" &' in script
    assert "tools/test-with-hogs.sh" in readme


def test_exit_code_arguments_and_hogs(stub) -> None:
    env, tmp = stub
    done = subprocess.run([str(SCRIPT), "-x", "-k", "readme"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert (tmp / "args").read_text() == "-m pytest -n 2 -q -x -k readme\n"
    hogs = _pids(tmp / "hogs")
    assert len(hogs) == 2 and not any(_alive(pid) for pid in hogs)
    assert re.search(r"^test-with-hogs: pytest exited 3 after \d+s beside 2 CPU-bound processes$", done.stderr, re.M)


def test_a_signal_stops_pytest_and_the_hogs(stub) -> None:
    env, tmp = stub
    process = subprocess.Popen([str(SCRIPT)], env={**env, "STUB_WAIT": "1"}, stderr=subprocess.PIPE, text=True)
    for _ in range(200):  # wait (bounded by count) until the stub pytest has started
        if (tmp / "pytest.pid").exists() and len(_pids(tmp / "hogs")) == 2:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 143
    for pid in _pids(tmp / "hogs") + _pids(tmp / "pytest.pid"):
        for _ in range(100):
            if not _alive(pid):
                break
            time.sleep(0.05)
        assert not _alive(pid), pid
