"""Work measured deterministically: the Python lines a call executes (never its time), and what a command costs in
a fresh process (its peak memory; its wall time, printed by benchmarks and never asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable

__all__ = ["cli_in_fresh_process", "executed_lines"]

SRC = Path(__file__).resolve().parents[1] / "src"


def executed_lines(call: Callable[[], Any], expected: tuple[type[BaseException], ...] = ()) -> int:
    """Python lines executed by ``call()`` (loops in comprehensions too); an ``expected`` exception ends it quietly."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        count += event == "line"
        return trace

    sys.settrace(trace)
    try:
        call()
    except expected:
        pass
    finally:
        sys.settrace(None)
    return count


def cli_in_fresh_process(argv: list[str], *, src: Path = SRC, address_space: int | None = None,
                         env: dict[str, str] | None = None, timeout: float = 900) -> dict:
    """Run ``chatjinja argv`` (``cli.main``, in-process there) in a new interpreter importing ``src``:
    ``{"code", "stderr", "seconds", "peak", "children_peak"}``. ``peak`` is the interpreter's own high-water mark
    (``VmHWM``: ``ru_maxrss`` would keep the parent's across exec), ``children_peak`` the largest of the processes it
    waited for (``RUSAGE_CHILDREN``); ``address_space`` is a hard limit (``RLIMIT_AS``), so a regression fails there
    with ``MemoryError`` instead of taking the machine down. A process that dies gives ``None`` values and its
    stderr's end."""
    limit = f"resource.setrlimit(resource.RLIMIT_AS, ({address_space}, {address_space}))" if address_space else ""
    script = textwrap.dedent(f"""
        import contextlib, io, json, resource, sys, time
        {limit}
        sys.path.insert(0, {str(src)!r})
        from chatjinja.cli import main
        err = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stderr(err):
            code = main({argv!r})
        seconds = time.perf_counter() - start
        with open("/proc/self/status") as f:
            peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) * 1024
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        print(json.dumps({{"code": code, "stderr": err.getvalue(), "seconds": seconds, "peak": peak, "children_peak": children}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else dict(os.environ))
    if done.returncode != 0 or not done.stdout.strip():
        return {"code": None, "stderr": done.stderr[-2000:], "seconds": None, "peak": None, "children_peak": None}
    return json.loads(done.stdout.strip().splitlines()[-1])
