"""Batch throughput vs workers: ``chatjinja render TEMPLATE --batch in.jsonl -o out.jsonl --workers N``.

    .venv/bin/python benchmarks/bench_batch.py                 # 20,000 conversations, 1 and 2 workers
    .venv/bin/python benchmarks/bench_batch.py --workers 1,2,4 --dask

The input is made at run time from ``inputs/conversations.json`` (short, medium and long Devstral
conversations in turn, every other one with tools). Each run is the real CLI in a fresh process;
the rate is the CLI's own summary line (rendering and writing, without interpreter start-up), the
wall time includes everything. Every run's output must be byte-identical to the first one's.
``--dask`` adds ``render_jsonl_dask`` on a local cluster of 2 single-threaded worker processes.

On a shared machine the other jobs decide how much parallelism there is, so the script also measures
the ceiling: the speed-up of a pure-CPU loop in N processes over the same work in one, right before
the runs. ``speed-up / ceiling`` is the batch path's own parallel efficiency.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from timing import table  # noqa: E402

TEMPLATE = "devstral-small-2-24b-instruct-2512"


def write_input(path: Path, count: int) -> None:
    data = json.loads((HERE / "inputs" / "conversations.json").read_text(encoding="utf-8"))
    conversations = [data["conversations"][name] for name in ("short", "medium", "long")]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            record = {"messages": conversations[i % 3]}
            if i % 2:
                record["tools"] = data["tools"]
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def run_cli(input_path: Path, output_path: Path, workers: int) -> tuple[float, float, float, str]:
    import resource

    command = [sys.executable, "-m", "chatjinja", "render", TEMPLATE, "--batch", str(input_path), "-o", str(output_path), "--workers", str(workers)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"batch run failed ({done.returncode}): {done.stderr.strip()}")
    summary = done.stderr.strip().splitlines()[-1]
    rate = float(re.search(r"errors, (\d+)/s", summary).group(1))  # type: ignore[union-attr]
    return rate, wall, cpu, summary


def _burn(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def parallel_ceiling(workers: int, n: int = 5_000_000) -> float:
    """Speed-up of ``workers`` processes over one on pure-CPU work, as the machine allows right now."""
    import multiprocessing

    started = time.perf_counter()
    for _ in range(workers):
        _burn(n)
    serial = time.perf_counter() - started
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        started = time.perf_counter()
        pool.map(_burn, [n] * workers)
        parallel = time.perf_counter() - started
    return serial / parallel


def run_dask(input_path: Path, output_path: Path) -> tuple[float, float]:
    import distributed

    from chatjinja import load_template
    from chatjinja.batch import render_jsonl_dask

    template = load_template(TEMPLATE)
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, silence_logs=40
    ) as cluster, distributed.Client(cluster) as client:
        started = time.perf_counter()
        summary = render_jsonl_dask(template, str(input_path), output_path, blocksize="1MiB", scheduler=client)
        wall = time.perf_counter() - started
    return summary.rate, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--dask", action="store_true", help="also time the Dask path (needs the dask extra)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="chatjinja-bench-batch-") as tmp:
        input_path = Path(tmp) / "in.jsonl"
        write_input(input_path, args.count)
        size_mb = os.path.getsize(input_path) / 1e6
        rows, baseline, reference = [], None, None
        for workers in [int(w) for w in args.workers.split(",")]:
            output_path = Path(tmp) / f"out-{workers}.jsonl"
            ceiling = parallel_ceiling(workers) if workers > 1 else 1.0
            rate, wall, cpu, summary = run_cli(input_path, output_path, workers)
            print(summary, file=sys.stderr, flush=True)
            if reference is None:
                reference = output_path.read_bytes()
            elif output_path.read_bytes() != reference:
                raise SystemExit(f"--workers {workers} wrote a different file")
            baseline = baseline or rate
            rows.append(
                [f"render --batch --workers {workers}", f"{rate:.0f}", f"{wall:.1f}", f"{cpu:.1f}", f"{rate / baseline:.2f}", f"{ceiling:.2f}"]
            )
        if args.dask:
            output_path = Path(tmp) / "out-dask.jsonl"
            ceiling = parallel_ceiling(2)
            rate, wall = run_dask(input_path, output_path)
            if output_path.read_bytes() != reference:
                raise SystemExit("the Dask path wrote a different file")
            rows.append(["render_jsonl_dask, LocalCluster 2 procs", f"{rate:.0f}", f"{wall:.1f}", "-", f"{rate / baseline:.2f}", f"{ceiling:.2f}"])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{args.count} conversations ({size_mb:.1f} MB of JSONL), {os.cpu_count()} CPUs, load average {load:.1f} at the end; all outputs byte-identical\n")
    print(table(["run", "conversations/s", "wall s", "CPU s (all processes)", "speed-up", "machine ceiling"], rows))


if __name__ == "__main__":
    main()
