"""Analysis speed: ``chatjinja.analyze`` (parse + capability facts) vs jinja2's ``Environment.parse`` alone.

    .venv/bin/python benchmarks/bench_analyze.py [--rounds 5] [--limit N]
    .venv/bin/python benchmarks/bench_analyze.py --opcodes [--every 4]

Every corpus template (``../shared/corpus``, read at run time) and the bundled ones; per template
the two are timed round-robin (see ``timing.py``) and the medians compared. jinja2 only builds a
syntax tree; ``analyze`` builds a spanned tree *and* derives the facts, so the ratio is the price
of the analysis over bare parsing. "analysis alone" times ``collect`` on a tree parsed beforehand
(the symbolic runs and the facts, without the parse).

``--opcodes`` counts instead the Python bytecodes one ``analyze`` executes (``sys.settrace`` opcode
events, as ``bench_budgets_opcodes.py`` counts them) for every ``--every``-th template, with the
source files they run in: deterministic, so the number to compare two checkouts by on a busy
machine (run it with ``PYTHONPATH=<checkout>/src``). Bytecodes are not time (a C call counts one).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPUS = REPO.parent / "shared" / "corpus"
sys.path.insert(0, str(HERE))

from timing import interleaved, table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--limit", type=int, default=0, help="only the first N templates (0: all)")
    parser.add_argument("--opcodes", action="store_true", help="count bytecodes per analyze instead of timing")
    parser.add_argument("--every", type=int, default=4, help="with --opcodes: every N-th template")
    args = parser.parse_args()

    import chatjinja
    from chatjinja.runtime.environment import ChatTemplateEnvironment
    from chatjinja.analysis import source_of
    from chatjinja.analysis.collect import collect
    from chatjinja.syntax import parse

    env = ChatTemplateEnvironment()
    paths = sorted((REPO / "templates").glob("*.jinja"))
    if (CORPUS / "templates").is_dir():
        paths += sorted((CORPUS / "templates").rglob("*.jinja"))
    if args.limit:
        paths = paths[: args.limit]
    if args.opcodes:
        _count(paths[:: args.every], chatjinja.analyze)
        return
    analyse_ms, parse_ms, lark_ms, ratios, lark_ratios, skipped = [], [], [], [], [], 0
    collect_ms, collect_ratios = [], []
    for path in paths:
        source = path.read_text(encoding="utf-8")
        try:
            chatjinja.analyze(source)
            env.parse(source)
        except Exception:  # noqa: BLE001 - only templates both accept
            skipped += 1
            continue
        text = source_of(source)
        tree = parse(text)
        times = interleaved(
            {"analyze": lambda: chatjinja.analyze(source), "jinja2.parse": lambda: env.parse(source),
             "syntax.parse": lambda: parse(source), "collect": lambda: collect(tree, text)},
            rounds=args.rounds,
            target=0.005,
        )
        analyse_ms.append(times["analyze"] * 1e3)
        parse_ms.append(times["jinja2.parse"] * 1e3)
        lark_ms.append(times["syntax.parse"] * 1e3)
        ratios.append(times["analyze"] / times["jinja2.parse"])
        lark_ratios.append(times["syntax.parse"] / times["jinja2.parse"])
        collect_ms.append(times["collect"] * 1e3)
        collect_ratios.append(times["collect"] / times["jinja2.parse"])
    print(f"\n{len(ratios)} templates ({skipped} skipped: rejected by either)\n")
    print(
        table(
            ["", "median ms", "p90 ms"],
            [
                ["chatjinja.analyze", f"{statistics.median(analyse_ms):.2f}", f"{statistics.quantiles(analyse_ms, n=10)[-1]:.2f}"],
                ["jinja2 Environment.parse", f"{statistics.median(parse_ms):.2f}", f"{statistics.quantiles(parse_ms, n=10)[-1]:.2f}"],
                ["chatjinja.syntax.parse (the parse part of analyze)", f"{statistics.median(lark_ms):.2f}", f"{statistics.quantiles(lark_ms, n=10)[-1]:.2f}"],
                ["ratio syntax.parse / jinja2 parse (per template)", f"{statistics.median(lark_ratios):.2f}", f"{statistics.quantiles(lark_ratios, n=10)[-1]:.2f}"],
                ["analysis alone (collect on a parsed tree)", f"{statistics.median(collect_ms):.2f}", f"{statistics.quantiles(collect_ms, n=10)[-1]:.2f}"],
                ["ratio analysis alone / jinja2 parse (per template)", f"{statistics.median(collect_ratios):.2f}", f"{statistics.quantiles(collect_ratios, n=10)[-1]:.2f}"],
                ["ratio analyze / parse (per template)", f"{statistics.median(ratios):.2f}", f"{statistics.quantiles(ratios, n=10)[-1]:.2f}"],
            ],
        )
    )


def _count(paths: list[Path], analyze) -> None:
    """Bytecodes per ``analyze`` call: median, total, the total of ``collect`` alone and the total by source file."""
    import collections

    from bench_budgets_opcodes import count_opcodes

    from chatjinja.analysis import source_of
    from chatjinja.analysis.collect import collect
    from chatjinja.syntax import parse

    per_template, by_file, analysis = [], collections.Counter(), 0
    for path in paths:
        source = path.read_text(encoding="utf-8")
        try:
            analyze(source)
        except Exception:  # noqa: BLE001 - only templates it analyses
            continue
        counts = count_opcodes(lambda source=source: analyze(source))
        per_template.append(sum(counts.values()))
        for (filename, _line, _name), number in counts.items():
            by_file[filename.split("/src/")[-1]] += number
        text = source_of(source)
        tree = parse(text)
        analysis += sum(count_opcodes(lambda tree=tree, text=text: collect(tree, text)).values())
    print(f"bytecodes per analyze over {len(per_template)} templates: median {statistics.median(per_template):,.0f}, "
          f"total {sum(per_template):,}; collect alone (on a parsed tree) {analysis:,}")
    for filename, number in by_file.most_common(8):
        print(f"  {number:>12,}  {filename}")


if __name__ == "__main__":
    main()
