"""Generation tags over the corpus, verified in every mode: how many templates are tagged, and what one call costs.

    .venv/bin/python benchmarks/tags_modes.py            # a summary and the refusals
    .venv/bin/python benchmarks/tags_modes.py --json     # one row per template

For each untagged corpus template with an assistant role (``../shared/corpus/templates``, the set
``tests/training/test_generation_tags_corpus.py`` measures), ``add_generation_tags`` tags it: the copy is
verified on the conversation space in the default mode and in each mode variant the analyser finds
(``chatjinja.analysis.modes_of``). A row: accepted or the refusal, the mode variants, the renders the
call made, what it spent of its budgets (``CALL_BUDGETS``: characters printed, fuel) and its wall time.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import chatjinja  # noqa: E402
from chatjinja.training import generation_tags  # noqa: E402

CORPUS = HERE.parent.parent / "shared" / "corpus" / "templates"
_TAG = re.compile(r"\{%([-+]?)\s*(?:end)?generation\s*([-+]?)%\}")


def measure(path: Path) -> dict | None:
    source = path.read_text(encoding="utf-8")
    if _TAG.search(source) or "assistant" not in chatjinja.probe(source).roles:
        return None
    taggers: list = []
    real = generation_tags._Tagger.__init__

    def init(self, *args, **kwargs):  # noqa: ANN001, ANN202 - keeps the call's tagger to read what it spent
        real(self, *args, **kwargs)
        taggers.append(self)

    generation_tags._Tagger.__init__ = init
    started = time.perf_counter()
    try:
        generation_tags.add_generation_tags(source)
        refusal = None
    except generation_tags.GenerationTagsRefused as exc:
        refusal = str(exc)
    finally:
        generation_tags._Tagger.__init__ = real
    seconds = time.perf_counter() - started
    tagger = taggers[0]
    return {"template": str(path.relative_to(CORPUS)), "refused": refusal, "variants": len(tagger.variants),
            "renders": tagger.renders, "output": tagger.budget.output, "steps": tagger.budget.steps,
            "seconds": round(seconds, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [row for path in sorted(CORPUS.rglob("*.jinja")) if (row := measure(path)) is not None]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    accepted = [r for r in rows if r["refused"] is None]
    moded = [r for r in rows if r["variants"]]
    print(f"{len(accepted)} of {len(rows)} templates with an assistant role tagged ({100 * len(accepted) / len(rows):.1f}%; "
          f"floor 98%), each copy verified in every mode")
    print(f"{sum(r['refused'] is None for r in moded)} of {len(moded)} templates with a mode variable tagged "
          f"({sum(r['variants'] for r in moded if r['refused'] is None)} mode variants verified besides the default)")
    print("\n| per call | median | most | template with the most | budget |\n|---|---|---|---|---|")
    budgets = {"renders": generation_tags.MAX_RENDERS, "output": generation_tags.CALL_BUDGETS["total_output_chars"],
               "steps": generation_tags.CALL_BUDGETS["total_steps"], "seconds": generation_tags.CALL_BUDGETS["total_seconds"]}
    def shown(value: float) -> str:
        return f"{int(value):,}" if float(value).is_integer() else f"{value:.2f}"

    for key, budget in budgets.items():
        values = [r[key] for r in rows]
        most = max(rows, key=lambda r: r[key])
        print(f"| {key} | {shown(statistics.median(values))} | {shown(most[key])} | {most['template']} | {shown(budget)} |")
    print("\nRefused:")
    for r in rows:
        if r["refused"] is not None:
            print(f"- {r['template']}: {r['refused']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
