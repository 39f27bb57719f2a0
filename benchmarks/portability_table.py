"""The README's portability table: every corpus template's probe conversations in each engine, beside transformers.

Usage: ``python benchmarks/portability_table.py [--corpus ../shared/corpus] [--engines minijinja,hfjs,llamacpp]
[--json FILE]``. Prints a Markdown table (per engine: templates whose every probe conversation renders as in
transformers, and template x conversation pairs that do: the same text, or both raise) and the most common
causes; ``--json`` writes each template's per-engine verdict and per-case statuses (what the PT rules are
measured against). The engines are installed on first use (see chatjinja.portability.engines).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from chatjinja.portability import ENGINE_NAMES, EngineUnavailable, available_engines, probe_cases  # noqa: E402
from chatjinja.portability.report import compare_engines  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    parser.add_argument("--engines", default=",".join(ENGINE_NAMES))
    parser.add_argument("--json", type=Path, default=None, metavar="FILE")
    parser.add_argument("--limit", type=int, default=None, help="only the first N templates (a quick look)")
    args = parser.parse_args()

    manifest = json.loads((args.corpus / "manifest.json").read_text())
    entries = sorted(manifest, key=lambda entry: entry["file"])[: args.limit]
    engines = available_engines(tuple(args.engines.split(",")))
    for name, found in engines.items():
        if isinstance(found, EngineUnavailable):
            print(f"{name}: unavailable ({found.reason})", file=sys.stderr)
    running = {name: found for name, found in engines.items() if not isinstance(found, EngineUnavailable)}

    templates = collections.Counter()
    pairs = collections.Counter()
    statuses: dict[str, collections.Counter] = {name: collections.Counter() for name in running}
    causes: dict[str, collections.Counter] = {name: collections.Counter() for name in running}
    seconds = collections.Counter()
    total_pairs = 0
    details = []
    for number, entry in enumerate(entries, 1):
        if number % 50 == 0:
            print(f"{number} / {len(entries)} templates", file=sys.stderr)
        source = (args.corpus / entry["file"]).read_text(encoding="utf-8")
        cases = probe_cases(source)
        total_pairs += len(cases)
        row = {"file": entry["file"], "engines": {}}
        for name, found in running.items():
            started = time.perf_counter()
            comparison = compare_engines(source, {name: found}, cases=cases)[name]
            seconds[name] += time.perf_counter() - started
            agreeing = sum(case.agrees for case in comparison.cases)
            pairs[name] += agreeing
            templates[name] += comparison.verdict == "identical"
            for case in comparison.cases:
                statuses[name][case.status] += 1
                if not case.agrees and case.cause:
                    causes[name][case.cause if case.status == "differs" else case.status + ": " + case.cause[:70]] += 1
            row["engines"][name] = {"verdict": comparison.verdict, "version": comparison.version,
                                    "cases": {case.name: case.status for case in comparison.cases}}
        details.append(row)

    count = len(entries)
    print(f"{count} corpus templates, the members of each one's conversation space ({total_pairs} pairs)\n")
    print("| engine | version | templates identical to transformers | pairs identical | differs | fails | renders | cut | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, found in running.items():
        s = statuses[name]
        print(f"| {name} | {found.version} | {templates[name]} / {count} ({100 * templates[name] / count:.0f}%) "
              f"| {pairs[name]} / {total_pairs} ({100 * pairs[name] / total_pairs:.0f}%) "
              f"| {s['differs']} | {s['fails']} | {s['renders']} | {s['cut']} | {seconds[name]:.0f} |")
    for name in running:
        print(f"\n{name}: most common causes")
        for cause, n in causes[name].most_common(8):
            print(f"  {n:5}  {cause}")
    if args.json:
        args.json.write_text(json.dumps(details, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
