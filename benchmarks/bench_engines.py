"""What the portability engines cost: installing each into an empty folder (download, npm, compile), its size, and one probe batch.

Usage: ``python benchmarks/bench_engines.py [--rounds 5]``. Installs every engine into a fresh temporary
``CHATJINJA_ENGINES_DIR`` (so the llama.cpp sdist is downloaded and compiled again), prints the wall time
of each install, the size of what it leaves, and the median wall time of rendering the 22 probe
conversations of a ChatML template in one ``render_many`` call (one subprocess per call).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chatjinja-engines-") as folder:
        os.environ["CHATJINJA_ENGINES_DIR"] = folder
        from chatjinja.portability import ENGINE_NAMES, EngineUnavailable, engine, probe_cases

        contexts = [case.context for case in probe_cases(CHATML)]
        print("| engine | version | install (s) | left on disk | 22 probe renders, one batch (ms, median) |")
        print("|---|---|---|---|---|")
        for name in ENGINE_NAMES:
            started = time.perf_counter()
            try:
                found = engine(name)
            except EngineUnavailable as missing:
                print(f"| {name} | unavailable: {missing.reason} | | | |")
                continue
            install = time.perf_counter() - started
            on_disk = sum(_size(p) for p in Path(folder).iterdir() if p.name.startswith(name) and p.is_dir())
            times = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                results = found.render_many(CHATML, contexts)
                times.append(time.perf_counter() - started)
            disk = f"{on_disk / 1e6:.1f} MB" if on_disk else "- (the Python package)"
            print(f"| {name} | {found.version} | {install:.1f} | {disk} | {1000 * statistics.median(times):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
