"""What the modes cost ``probe``: a template probed in its default mode only (what probe did before the
conversation space had modes) and in every mode variant, side by side in one process, first call
(nothing compiled or parsed yet, the disk cache off), CPU time of this process (``time.process_time``:
the other processes of a busy machine do not count).

    CHATJINJA_NO_DISK_CACHE=1 .venv/bin/python benchmarks/bench_probe_modes.py [--rounds 3]

Corpus templates with modes (``../shared/corpus``). The acceptance: every one within 2x.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("CHATJINJA_NO_DISK_CACHE", "1")
CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "templates"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from chatjinja.analysis import modes_of
    from chatjinja.probing import SPECIAL_TOKENS, capabilities_from_run, run_probes
    from chatjinja.runtime import provenance
    from chatjinja.runtime.environment import clear_compile_cache

    def first_call(source: str, with_modes: bool) -> float:
        clear_compile_cache()
        provenance._cache.clear()
        start = time.process_time()
        modes = modes_of(source) if with_modes else ()
        capabilities_from_run(run_probes(source, SPECIAL_TOKENS, modes))
        return time.process_time() - start

    rows = []
    for path in sorted(glob.glob(str(CORPUS / "**" / "*.jinja"), recursive=True)):
        source = Path(path).read_text(encoding="utf-8")
        if not modes_of(source):
            continue
        before, after = [], []
        for _ in range(args.rounds):  # interleaved
            before.append(first_call(source, False))
            after.append(first_call(source, True))
        rows.append((statistics.median(after) / statistics.median(before), statistics.median(before),
                     statistics.median(after), str(Path(path).relative_to(CORPUS))))
    rows.sort()
    ratios = [r[0] for r in rows]
    print(f"{len(rows)} corpus templates with modes; probe with modes / default mode only (first call, CPU time):")
    print(f"  median {statistics.median(ratios):.2f}x, 90th percentile {ratios[int(0.9 * len(ratios))]:.2f}x, "
          f"max {ratios[-1]:.2f}x; over 2x: {sum(r > 2 for r in ratios)}")
    for ratio, before, after, name in rows[-8:]:
        print(f"  {ratio:5.2f}x  {before * 1000:7.1f} ms -> {after * 1000:7.1f} ms  {name}")


if __name__ == "__main__":
    sys.exit(main())
