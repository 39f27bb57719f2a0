"""Wall time and memory of every resource attack: each DoS payload of ``tests/security`` in a fresh process.

    .venv/bin/python benchmarks/bench_attacks.py                 # every DoS payload, slowest first
    .venv/bin/python benchmarks/bench_attacks.py -k single_      # only those whose name contains "single_"
    .venv/bin/python benchmarks/bench_attacks.py --top 10        # the 10 slowest only

The payloads are those ``tests/security/test_payloads.py`` runs (``payloads/*.jinja`` whose header
expects ``BudgetExceeded``, and the generated ones), with the default budgets. Each is rendered in a
new process (forked from a server that has chatjinja imported, as the test does), after a warm-up
render; the row gives the wall time of the render, the growth of the process's peak RSS, and how it
ended. The test asserts the outcome and the memory (512 MB); the time, which depends on the machine,
is measured only here (SECURITY.md promises 2 s).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import platform
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.security import test_payloads  # noqa: E402


def _timed(source: str, input_spec: object) -> dict:
    """In the child: warm up, render the payload once, measure."""
    from chatjinja import apply_chat_template

    apply_chat_template(test_payloads.hostile_inputs.conversation(None), test_payloads.BENIGN_TEMPLATE)
    conversation = test_payloads._make_input(input_spec)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    outcome = test_payloads._ours(source, conversation)
    seconds = time.perf_counter() - start
    extra = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    return {"seconds": seconds, "extra_mb": extra, "outcome": outcome[1] if outcome[0] == "error" else "text"}


def cases() -> list[tuple[str, str, tuple[str, ...], object]]:
    found = [(p.name, p.source, p.budgets, p.input) for p in test_payloads.DOS]
    found += [(name, source, (budget,), spec) for name, (source, budget, spec) in sorted(test_payloads.GENERATED.items())]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the payloads whose name contains this")
    parser.add_argument("--top", type=int, default=0, help="print only the N slowest (0: all)")
    args = parser.parse_args()

    import chatjinja
    from chatjinja.runtime import _implementation

    selected = [case for case in cases() if args.k in case[0]]
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["chatjinja.runtime.render", "tests.security.hostile_inputs"])
    rows = []
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context, max_tasks_per_child=1) as pool:
        for name, source, budgets, spec in selected:
            result = pool.submit(_timed, source, spec).result(timeout=600)
            expected = result["outcome"] in [f"BudgetExceeded:{budget}" for budget in budgets]
            rows.append((result["seconds"], result["extra_mb"], name, result["outcome"], expected))
    rows.sort(reverse=True)
    print(
        f"{len(rows)} payloads, chatjinja {chatjinja.__version__} ({_implementation.DESCRIPTION} hooks), Python {platform.python_version()}, "
        f"{platform.machine()}, {multiprocessing.cpu_count()} CPUs, load {' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}"
    )
    print("| payload | seconds | extra MB | outcome |")
    print("|---|---:|---:|---|")
    for seconds, extra, name, outcome, expected in rows[: args.top or None]:
        print(f"| {name} | {seconds:.2f} | {extra:.0f} | {outcome}{'' if expected else ' (UNEXPECTED)'} |")
    print(f"slowest {rows[0][0]:.2f} s, most memory {max(r[1] for r in rows):.0f} MB" if rows else "no payloads")


if __name__ == "__main__":
    main()
