"""Synthesised generation tags beside the hand-tagged ones: how close ``add_generation_tags`` comes to what a maintainer merges.

    .venv/bin/python benchmarks/tags_review.py            # a markdown table, one row per hand-tagged corpus template
    .venv/bin/python benchmarks/tags_review.py --json

For each hand-tagged template of the corpus (``../shared/corpus/templates/**/*_training.jinja``, TRL's copies),
the ``{% generation %}`` / ``{% endgeneration %}`` tags are taken off and ``add_generation_tags`` tags the
result again. A row compares the synthesised copy with the hand-written one, each against the untagged text:
blocks (pairs of tags), changed lines (lines removed plus lines added, ``difflib``), empty blocks
(``{% generation %}`` directly followed by ``{% endgeneration %}``) and ``'' +`` artefacts. The issue's floor:
no empty block and no ``'' +`` in any copy; blocks <= hand + 1 and changed lines <= hand + 2 for >= 90% of the
pairs (a refused template counts against it).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from chatjinja.training.generation_tags import add_generation_tags  # noqa: E402

CORPUS = HERE.parent.parent / "shared" / "corpus" / "templates"
_TAG = re.compile(r"\{%-?\s*(?:end)?generation\s*-?%\}")
_OPEN = re.compile(r"\{%-?\s*generation\s*-?%\}")
_EMPTY = re.compile(r"\{%-?\s*generation\s*-?%\}\s*\{%-?\s*endgeneration\s*-?%\}")
_EMPTY_PLUS = re.compile(r"''\s*\+|\+\s*''")


def _changed(before: str, after: str) -> int:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return sum(1 for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---")))


def review(path: Path) -> dict:
    hand = path.read_text(encoding="utf-8")
    untagged = _TAG.sub("", hand)
    row = {
        "template": str(path.relative_to(CORPUS)),
        "hand_blocks": len(_OPEN.findall(hand)),
        "hand_changed": _changed(untagged, hand),
    }
    try:
        copy = add_generation_tags(untagged)
    except Exception as exc:  # noqa: BLE001 - a refusal is a row too
        row.update(refused=f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
        return row
    row.update(
        refused=None,
        blocks=len(_OPEN.findall(copy)),
        changed=_changed(untagged, copy),
        empty_blocks=len(_EMPTY.findall(copy)),
        empty_plus=len(_EMPTY_PLUS.findall(copy)) - len(_EMPTY_PLUS.findall(untagged)),
    )
    row["within"] = row["blocks"] <= row["hand_blocks"] + 1 and row["changed"] <= row["hand_changed"] + 2
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [review(path) for path in sorted(CORPUS.rglob("*_training.jinja"))]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("| template | hand blocks | blocks | hand changed lines | changed lines | empty blocks | `'' +` | within |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["refused"]:
            print(f"| {r['template']} | {r['hand_blocks']} | refused: {r['refused']} | {r['hand_changed']} | | | | no |")
        else:
            print(f"| {r['template']} | {r['hand_blocks']} | {r['blocks']} | {r['hand_changed']} | {r['changed']} | "
                  f"{r['empty_blocks']} | {r['empty_plus']} | {'yes' if r['within'] else 'no'} |")
    within = sum(1 for r in rows if not r["refused"] and r["within"])
    empty = sum(r.get("empty_blocks", 0) for r in rows)
    plus = sum(max(r.get("empty_plus", 0), 0) for r in rows)
    refused = sum(1 for r in rows if r["refused"])
    print(f"\n{within} of {len(rows)} pairs within the floor ({100 * within / len(rows):.0f}%; floor 90%); "
          f"{refused} refused; {empty} empty blocks and {plus} `'' +` in the copies (floor: 0 and 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
