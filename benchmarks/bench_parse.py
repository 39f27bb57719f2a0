"""Parse speed: chatjinja's Lark parser against jinja2's ``Environment.parse`` on the same templates.

    python benchmarks/bench_parse.py [--repeat N] [--src PATH] [CORPUS_DIR]
    python benchmarks/bench_parse.py --shapes [--repeat N] [--only SUBSTRING] [--src PATH] [--paused]

Reads every ``templates/**/*.jinja`` under the corpus (default ``../shared/corpus``) plus the
templates bundled in ``templates/``; for each template takes the median of N timed parses with each
parser (after one warm-up parse), then prints the medians over all templates and their ratio.
jinja2 is configured as transformers configures it (sandbox, loopcontrols, generation tag).

``--shapes`` times the parse alone of the static budgets' templates instead: the 1 MiB shapes
(``LINT_SHAPES`` of ``bench_static_budgets.py``) and the attack payloads of
``tests/analysis/test_static_budgets.py``, each the median of N (default 5) parses with each parser,
wall and CPU seconds, with the outcome (``ok``, the limit that stops it, or the error); prints a
Markdown table. The static half's token limit is lifted there (``max_source_tokens=None``), so the 1 MiB
shapes are parsed whole, as jinja2 parses them; ``--token-limit`` keeps it. ``--paused`` pauses Python's cyclic garbage collector around each of chatjinja's
parses, as ``analyze`` and ``lint`` do (the parser pauses it itself since it does so: the same
figures). ``--src`` measures another checkout's ``src`` (default: this one's).
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

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


def _outcome(parse_fn, text: str) -> str:
    try:
        parse_fn(text)
    except Exception as exc:  # noqa: BLE001 - a refusal is a result here
        return getattr(exc, "limit", None) or type(exc).__name__
    return "ok"


def _medians(parse_fn, text: str, repeat: int) -> tuple[float, float, str]:
    """(median wall seconds, median CPU seconds, outcome) of ``repeat`` parses after a warm-up."""
    outcome = _outcome(parse_fn, text)
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        _outcome(parse_fn, text)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), outcome


def _paused(parse_fn):
    """``parse_fn`` with the cyclic collector paused around each call (as analyze and lint call the parser)."""

    def parse_paused(text: str):
        gc.disable()
        try:
            return parse_fn(text)
        finally:
            gc.enable()

    return parse_paused


def shapes(repeat: int, only: str, paused: bool, token_limit: bool = False) -> None:
    """The ``--shapes`` table: parse alone of the 1 MiB shapes and the attack payloads, both parsers."""
    from chatjinja.syntax import parse

    if not token_limit:
        parse = functools.partial(parse, max_source_tokens=None)
    ours = _paused(parse) if paused else parse

    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_static_budgets as shapes_module

    from tests.analysis.test_static_budgets import PAYLOADS

    rows = [(name, eval(expr, vars(shapes_module))) for name, expr in shapes_module.LINT_SHAPES.items()]  # noqa: S307
    rows += [(name, source) for name, (source, _expected) in PAYLOADS.items()]
    env = hf_environment()
    parse("{{ x }}")  # the grammar built before the clock starts
    print(f"chatjinja from {Path(sys.modules['chatjinja'].__file__).parent}\n")
    print("| template | characters | chatjinja outcome | seconds | CPU seconds | jinja2 outcome | jinja2 seconds"
          " | jinja2 CPU seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for name, text in rows:
        if only not in name:
            continue
        wall, cpu, outcome = _medians(ours, text, repeat)
        their_wall, their_cpu, their_outcome = _medians(env.parse, text, repeat)
        print(f"| {name} | {len(text):,} | {outcome} | {wall:.3f} | {cpu:.3f} | {their_outcome} | {their_wall:.3f}"
              f" | {their_cpu:.3f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?", default=str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--repeat", type=int, default=None, help="timed parses per template (15; 5 with --shapes)")
    ap.add_argument("--shapes", action="store_true", help="the 1 MiB shapes and attack payloads instead of the corpus")
    ap.add_argument("--only", default="", help="with --shapes: only the templates whose name contains this")
    ap.add_argument("--token-limit", action="store_true",
                    help="with --shapes: keep the static half's token limit (MAX_SOURCE_TOKENS)")
    ap.add_argument("--paused", action="store_true", help="with --shapes: the collector paused around each parse")
    ap.add_argument("--src", type=Path, default=REPO / "src", help="the chatjinja source tree to measure")
    args = ap.parse_args()
    sys.path.insert(0, str(args.src))
    from chatjinja.errors import TemplateSyntaxError
    from chatjinja.syntax import parse

    if args.shapes:
        shapes(args.repeat or 5, args.only, args.paused, args.token_limit)
        return
    args.repeat = args.repeat or 15

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
