"""Wall time and memory of a whole ``chatjinja portability`` run on hostile templates, each in a fresh process.

    .venv/bin/python benchmarks/bench_portability_budget.py                 # every case
    .venv/bin/python benchmarks/bench_portability_budget.py -k loop         # only the cases whose name contains "loop"
    .venv/bin/python benchmarks/bench_portability_budget.py --src OLD/src   # the same cases against another checkout (before)

The cases are those of ``tests/portability/hostile_templates.py`` (a loop of 1,000,000 iterations, one
of 999,999, a render of about 1 s, an output of 50 MB), run with the engines already installed
(``--no-install``). Per case: the wall time of ``cli.main``, the chatjinja process's peak RSS, the
largest peak RSS of an engine process, the processes left behind, and per engine its verdict with the
count of cases cut. The tests assert the report and the limits with an injected budget, never the time.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.portability import hostile_templates  # noqa: E402


def _engines(report: dict | None) -> str:
    if report is None:
        return "-"
    parts = []
    for name, engine in report["engines"].items():
        cut = engine.get("counts", {}).get("cut", 0)
        parts.append(f"{name} {engine['verdict']}" + (f" ({cut} cut)" if cut else ""))
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the cases whose name contains this")
    parser.add_argument("--src", type=Path, default=hostile_templates.SRC, help="the src folder of the chatjinja to run")
    args = parser.parse_args()
    cases = [case for case in hostile_templates.TEMPLATES if args.k in case]
    print(f"python {platform.python_version()}, src {args.src}")
    with tempfile.TemporaryDirectory(prefix="bench-portability-") as tmp:
        print("| case | seconds | chatjinja peak RSS MB | largest engine peak RSS MB | left behind | exit | engines |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for case in cases:
            workdir = Path(tmp) / case
            workdir.mkdir()
            result = hostile_templates.run_in_fresh_process(case, workdir, src=args.src)
            if result["code"] is None:
                last = result["stderr"].strip().splitlines()[-1][:120] if result["stderr"].strip() else "?"
                print(f"| {case} | - | - | - | {len(result['left'])} | - | child failed: {last} |")
                continue
            print(f"| {case} | {result['seconds']:.1f} | {result['peak'] / 2**20:.0f} | {result['engine_peak'] / 2**20:.0f} "
                  f"| {len(result['left'])} | {result['code']} | {_engines(result['report'])} |", flush=True)


if __name__ == "__main__":
    main()
