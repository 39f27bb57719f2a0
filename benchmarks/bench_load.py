"""Load speed: compiling a template cold vs from the disk cache vs from memory; and ``import chatjinja``.

    .venv/bin/python benchmarks/bench_load.py

Cold is jinja2 parsing and compiling the source (chatjinja's compile, with the default nesting
budget check, and transformers' ``_compile_jinja_template`` with its lru_cache cleared). Disk is
a fresh process's first ``compile_template`` when the entry exists (memory cache cleared, the
entry authenticated and unmarshalled). Memory is every later call. The cache directory is a
temporary one, so the user's own cache is not touched.
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPUS = REPO.parent / "shared" / "corpus"
sys.path.insert(0, str(HERE))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ["CHATJINJA_CACHE_DIR"] = tempfile.mkdtemp(prefix="chatjinja-bench-cache-")
atexit.register(shutil.rmtree, os.environ["CHATJINJA_CACHE_DIR"], ignore_errors=True)
os.environ.pop("CHATJINJA_NO_DISK_CACHE", None)

from timing import table  # noqa: E402


def _median_ms(fn: Callable[[], object], setup: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        setup()
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3


def load_times(source: str, repeat: int) -> dict[str, float]:
    from transformers.utils.chat_template_utils import _compile_jinja_template

    from chatjinja.runtime import diskcache
    from chatjinja.runtime.budget import DEFAULT_BUDGETS
    from chatjinja.runtime.environment import clear_compile_cache, compile_template

    def no_disk() -> None:
        os.environ["CHATJINJA_NO_DISK_CACHE"] = "1"
        clear_compile_cache()

    def with_disk() -> None:
        os.environ.pop("CHATJINJA_NO_DISK_CACHE", None)
        clear_compile_cache()

    times = {
        "chatjinja cold": _median_ms(lambda: compile_template(source, DEFAULT_BUDGETS), no_disk, repeat),
        "transformers cold": _median_ms(lambda: _compile_jinja_template(source), _compile_jinja_template.cache_clear, repeat),
    }
    with_disk()
    compile_template(source, DEFAULT_BUDGETS)  # writes the entry
    assert diskcache.load(__import__("chatjinja.runtime.environment", fromlist=["x"]).source_hash(source)) is not None
    times["chatjinja disk"] = _median_ms(lambda: compile_template(source, DEFAULT_BUDGETS), with_disk, repeat)
    times["chatjinja memory"] = _median_ms(lambda: compile_template(source, DEFAULT_BUDGETS), lambda: None, repeat * 10)
    times["transformers memory"] = _median_ms(lambda: _compile_jinja_template(source), lambda: None, repeat * 10)
    return times


def import_time_ms(statement: str, repeat: int = 7) -> float:
    """Median wall time of a fresh interpreter running ``statement``, minus a bare interpreter's."""

    def run(code: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - started

    run(statement)  # warm-up: writes any missing .pyc files, as a first import after installing would
    bare = statistics.median(run("pass") for _ in range(repeat))
    return (statistics.median(run(statement) for _ in range(repeat)) - bare) * 1e3


def importtime_self_us() -> int:
    """Cumulative microseconds ``python -X importtime`` reports for ``chatjinja`` itself."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import chatjinja"], capture_output=True, text=True, check=True)
    for line in out.stderr.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == "chatjinja":
            return int(parts[1])
    return -1


def main() -> None:
    sources = {"devstral": (REPO / "templates" / "devstral-small-2-24b-instruct-2512.jinja").read_text(encoding="utf-8")}
    if (CORPUS / "templates").is_dir():
        paths = sorted((CORPUS / "templates").rglob("*.jinja"), key=lambda p: p.stat().st_size)
        for label, path in (("corpus median-size", paths[len(paths) // 2]), ("corpus largest", paths[-1])):
            sources[f"{label} ({path.name}, {path.stat().st_size} B)"] = path.read_text(encoding="utf-8")
    columns = ["chatjinja cold", "transformers cold", "chatjinja disk", "chatjinja memory", "transformers memory"]
    rows = []
    for name, source in sources.items():
        times = load_times(source, repeat=15)
        rows.append([name] + [f"{times[c]:.3f}" for c in columns])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print("\nMedian milliseconds per load\n")
    print(table(["template"] + columns, rows))
    print("\nImport cost (fresh interpreter, minus a bare one)\n")
    print(
        table(
            ["statement", "ms"],
            [
                ["import chatjinja", f"{import_time_ms('import chatjinja'):.1f}"],
                ["import chatjinja; chatjinja.apply_chat_template", f"{import_time_ms('import chatjinja; chatjinja.apply_chat_template'):.1f}"],
                ["import transformers", f"{import_time_ms('import transformers'):.1f}"],
            ],
        )
    )
    print(f"\n`python -X importtime -c 'import chatjinja'`: chatjinja cumulative {importtime_self_us()} µs")


if __name__ == "__main__":
    main()
