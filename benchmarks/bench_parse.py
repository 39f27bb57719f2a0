"""Parse speed: chatjinja's Lark parser against jinja2's ``Environment.parse`` on the same templates.

    python benchmarks/bench_parse.py [--repeat N] [CORPUS_DIR]

Reads every ``templates/**/*.jinja`` under the corpus (default ``../shared/corpus``) plus the
templates bundled in ``templates/``; for each template takes the median of N timed parses with each
parser (after one warm-up parse), then prints the medians over all templates and their ratio.
jinja2 is configured as transformers configures it (sandbox, loopcontrols, generation tag).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))

from chatjinja.errors import TemplateSyntaxError  # noqa: E402
from chatjinja.syntax import parse  # noqa: E402
from tests.syntax.support import hf_environment  # noqa: E402  (jinja2 as transformers configures it)


def timed_pair(ours, theirs, text: str, repeat: int) -> tuple[float, float]:
    """Median seconds of each parser on ``text``, runs interleaved so load changes hit both alike."""
    ours(text)
    theirs(text)
    mine, other = [], []
    clock = time.perf_counter
    for _ in range(repeat):
        start = clock()
        ours(text)
        middle = clock()
        theirs(text)
        mine.append(middle - start)
        other.append(clock() - middle)
    return statistics.median(mine), statistics.median(other)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?", default=str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()

    paths = sorted(Path(args.corpus, "templates").rglob("*.jinja")) + sorted((REPO / "templates").glob("*.jinja"))
    if not paths:
        sys.exit(f"no templates found under {args.corpus}/templates or {REPO / 'templates'}")
    env = hf_environment()
    lark_times, jinja_times, ratios = [], [], []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        try:
            parse(text)
        except TemplateSyntaxError:
            continue  # rejected templates are not a speed comparison
        ours, theirs = timed_pair(parse, env.parse, text, args.repeat)
        lark_times.append(ours)
        jinja_times.append(theirs)
        ratios.append(ours / theirs)
        if path.name.startswith("devstral-small-2"):
            print(
                f"{path.name} ({len(text)} chars): lark {ours * 1e3:.2f} ms, jinja2 {theirs * 1e3:.2f} ms, ratio {ours / theirs:.2f}"
            )
    lark_median = statistics.median(lark_times)
    jinja_median = statistics.median(jinja_times)
    print(f"templates: {len(lark_times)}")
    print(f"median Lark parse time:   {lark_median * 1e3:.3f} ms")
    print(f"median jinja2 parse time: {jinja_median * 1e3:.3f} ms")
    print(f"ratio of medians (Lark / jinja2): {lark_median / jinja_median:.2f}")
    print(f"median per-template ratio:        {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
