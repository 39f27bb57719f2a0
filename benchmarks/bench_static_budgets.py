"""Wall time and peak RSS of the static half on the attack payloads of ``tests/analysis/test_static_budgets.py``.

    .venv/bin/python benchmarks/bench_static_budgets.py [--lint] [--only SUBSTRING]

Each payload runs in a fresh process (``chatjinja.analyze``, or with ``--lint`` ``chatjinja.lint.lint``)
under a 4 GiB address-space limit and a 120 s guard; the child reports the time of the call alone
(and of a full garbage collection after it, which collects what the paused collector left; the
objects alive before the call are frozen out of it),
the CPU time of the call (``process_time``: the number to read on a shared machine), its peak RSS
(``ru_maxrss``, the interpreter and the import included) and the outcome (``ok`` and
``refused`` as in the test, or the limit or error that stopped it). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

_CHILD = r"""
import gc, json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
sys.path.insert(0, {repo!r})
from tests.analysis.test_static_budgets import PAYLOADS
source = PAYLOADS[{name!r}][0]
import chatjinja
from chatjinja.lint import lint
chatjinja.analyze("{{{{ x }}}}")  # the grammar built before the clock starts
gc.collect()
gc.freeze()  # (what is alive now is not the call's: the collection after it scans only what the call left)
started, cpu_started = time.perf_counter(), time.process_time()
try:
    if {lint!r}:
        lint(source)
        outcome = "ok"
    else:
        outcome = "ok" if chatjinja.analyze(source).content_string else "refused"
except BaseException as exc:
    outcome = getattr(exc, "limit", None) or type(exc).__name__
gc.collect()  # (the analysis pauses the collector: the cycles it leaves are collected here, on the clock)
elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
print(json.dumps([outcome, elapsed, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))
"""


def measure(name: str, lint: bool) -> tuple[str, float | None, float | None, int | None]:
    code = _CHILD.format(repo=str(REPO), name=name, lint=lint)
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    except subprocess.TimeoutExpired:
        return "over 120 s (stopped)", None, None, None
    if result.returncode != 0 or not result.stdout.strip():
        return f"died (exit {result.returncode})", None, None, None
    outcome, elapsed, cpu, rss_kib = json.loads(result.stdout.strip().splitlines()[-1])
    return outcome, elapsed, cpu, rss_kib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lint", action="store_true", help="time chatjinja.lint.lint instead of chatjinja.analyze")
    parser.add_argument("--only", default="", help="only the payloads whose name contains this")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tests.analysis.test_static_budgets import PAYLOADS

    what = "lint" if args.lint else "analyze"
    print(f"| payload | expected (analyze) | {what} outcome | seconds | CPU seconds | peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    for name, (_source, expected) in PAYLOADS.items():
        if args.only not in name:
            continue
        outcome, elapsed, cpu, rss = measure(name, args.lint)
        seconds = "-" if elapsed is None else f"{elapsed:.2f}"
        cpu_seconds = "-" if cpu is None else f"{cpu:.2f}"
        memory = "-" if rss is None else f"{rss / 1024:.0f}"
        print(f"| {name} | {expected} | {outcome} | {seconds} | {cpu_seconds} | {memory} |", flush=True)


if __name__ == "__main__":
    main()
