"""Lint speed: ``chatjinja.lint.lint`` on every corpus template, one process, one core.

    python benchmarks/bench_lint.py [--repeat N] [CORPUS_DIR]

Reads every ``templates/**/*.jinja`` under the corpus (default ``../shared/corpus``) plus the
bundled ``templates/``. For each template: one warm-up lint, then N timed lints (all rules, the
default selection) taking the median; the same for jinja2's ``Environment.parse`` (configured as
transformers configures it) as the yardstick. Lint and parse are timed alternately per template, so
a noisy neighbour slows both alike. Prints the median and 90th percentile over templates of the
per-template wall time (``perf_counter``: median of the runs, and best of the runs, which is closest to
an idle core) and CPU time (``process_time``, which a busy shared machine inflates less), and the
ratio lint / jinja2 parse. The target is a median under 5 ms per template, parse and analysis included.

Then the budget shapes (``--no-shapes`` skips them): each hostile or limit-sized template of
tests/lint/test_lint_budgets.py linted once in this process, with its wall time, tracemalloc peak and
the codes found; the budget is 2 s and 512 MB, or one LN003.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_parse import hf_environment  # noqa: E402
from timing import table  # noqa: E402

from chatjinja.lint import lint  # noqa: E402


def _times(fn, repeat: int, clock) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = clock()
        fn()
        samples.append(clock() - started)
    return samples


def _median_time(fn, repeat: int, clock) -> float:
    return statistics.median(_times(fn, repeat, clock))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", default=str(REPO.parent / "shared" / "corpus"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-shapes", action="store_true", help="skip the budget shapes")
    args = parser.parse_args()
    paths = sorted((Path(args.corpus) / "templates").rglob("*.jinja")) + sorted((REPO / "templates").glob("*.jinja"))
    if not paths:
        raise SystemExit(f"no templates under {args.corpus}")
    env = hf_environment()
    wall, best, cpu, parse_wall, ratios = [], [], [], [], []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        lint(text)
        try:
            env.parse(text)
            parsable = True
        except Exception:  # noqa: BLE001 - a template jinja2 rejects has no yardstick
            parsable = False
        samples = _times(lambda: lint(text), args.repeat, time.perf_counter)
        w = statistics.median(samples)
        best.append(min(samples))
        c = _median_time(lambda: lint(text), args.repeat, time.process_time)
        wall.append(w)
        cpu.append(c)
        if parsable:
            p = _median_time(lambda: env.parse(text), args.repeat, time.perf_counter)
            parse_wall.append(p)
            ratios.append(w / p)

    def ms(values: list[float], q: float) -> str:
        ordered = sorted(values)
        return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.2f} ms"

    rows = [
        ["lint, wall (perf_counter)", ms(wall, 0.5), ms(wall, 0.9)],
        ["lint, wall, best of the runs", ms(best, 0.5), ms(best, 0.9)],
        ["lint, CPU (process_time)", ms(cpu, 0.5), ms(cpu, 0.9)],
        ["jinja2 Environment.parse, wall", ms(parse_wall, 0.5), ms(parse_wall, 0.9)],
        ["ratio lint / jinja2 parse", f"{statistics.median(ratios):.2f}x", f"{sorted(ratios)[int(0.9 * len(ratios))]:.2f}x"],
    ]
    print(f"{len(paths)} templates, median of {args.repeat} runs each\n")
    print(table(["per template", "median", "p90"], rows))
    if not args.no_shapes:
        print()
        print(table(["budget shape", "characters", "wall", "peak", "codes"], _shapes()))


def _shapes() -> list[list[str]]:
    import tracemalloc

    sys.path.insert(0, str(REPO))
    from tests.lint.test_lint_budgets import _CHAIN, _UNIT, SHAPES

    rows = []
    for name, expression in SHAPES.items():
        text = eval(expression, {"_UNIT": _UNIT, "_CHAIN": _CHAIN})  # noqa: S307 - the committed shape expressions of the budget test
        tracemalloc.start()
        started = time.perf_counter()
        found = lint(text)
        wall = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        codes = ",".join(sorted({d.code for d in found})) or "-"
        rows.append([name, f"{len(text):,}", f"{wall * 1000:.0f} ms", f"{peak / 2**20:.1f} MB", codes])
    return rows


if __name__ == "__main__":
    main()
