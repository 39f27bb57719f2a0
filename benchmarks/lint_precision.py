"""Lint precision review: a deterministic sample of each rule's findings on the corpus, printed with context.

    python benchmarks/lint_precision.py [--rule WS001] [--per-rule 10] [--ws001 30] [CORPUS_DIR]

For every rule, the findings on ``templates/**/*.jinja`` under the corpus (default ``../shared/corpus``)
are ordered by a hash of (template path, offset) and the first N are printed (all of them when fewer):
the template, line:column, the message, and the source lines around the span with the span marked
``⟦...⟧``. Whether each one is a real problem or a false positive is the reviewer's judgement; the
result of a review is the precision table in benchmarks/README.md ("Lint precision").
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from chatjinja.lint import all_rules, lint  # noqa: E402


def _key(path: str, offset: int) -> str:
    return hashlib.sha256(f"{path}:{offset}".encode()).hexdigest()


def _context(text: str, start: int, end: int, lines: int = 1) -> str:
    line_start = start
    for _ in range(lines + 1):
        line_start = text.rfind("\n", 0, max(line_start - 1, 0)) + 1 if line_start > 0 else 0
    line_end = end
    for _ in range(lines + 1):
        nxt = text.find("\n", line_end + 1)
        line_end = len(text) if nxt == -1 else nxt
    marked = text[line_start:start] + "⟦" + text[start:end] + "⟧" + text[end:line_end]
    return "\n".join("    | " + line for line in marked.split("\n"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", default=str(REPO.parent / "shared" / "corpus"))
    parser.add_argument("--rule", action="append", help="only these rule codes (repeatable)")
    parser.add_argument("--per-rule", type=int, default=10, help="findings sampled per rule (default 10)")
    parser.add_argument("--ws001", type=int, default=30, help="findings sampled for WS001 (default 30)")
    args = parser.parse_args()
    root = Path(args.corpus)
    paths = sorted((root / "templates").rglob("*.jinja"))
    if not paths:
        raise SystemExit(f"no templates under {root}")
    by_rule: dict[str, list] = {}
    texts: dict[str, str] = {}
    for path in paths:
        name = str(path.relative_to(root))
        text = path.read_text(encoding="utf-8")
        texts[name] = text
        for d in lint(text, name=name, add_bos_token=None):
            by_rule.setdefault(d.code, []).append(d)
    for rule in all_rules():
        if args.rule and rule.code not in args.rule:
            continue
        found = sorted(by_rule.get(rule.code, []), key=lambda d: _key(d.path, d.span.start))
        n = args.ws001 if rule.code == "WS001" else args.per_rule
        sample = found[:n]
        templates = len({d.path for d in found})
        print(f"## {rule.code} {rule.name}: {len(found)} findings in {templates} templates, {len(sample)} sampled\n")
        for i, d in enumerate(sample, 1):
            print(f"{rule.code}-{i:02d} {d.path}:{d.span.line}:{d.span.column}: {d.message}")
            print(_context(texts[d.path], d.span.start, d.span.end))
            print()


if __name__ == "__main__":
    main()
