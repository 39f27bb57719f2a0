"""Lint precision review: a deterministic sample of each rule's findings on the corpus, printed with context.

    python benchmarks/lint_precision.py [--rule WS001] [--per-rule 10] [--ws001 30] [--check REVIEW.md] [CORPUS_DIR]

For every rule, the findings on ``templates/**/*.jinja`` under the corpus (default ``../shared/corpus``)
are ordered by a hash of (template path, offset) and the first N are printed (all of them when fewer):
the template, line:column, the message, and the source lines around the span with the span marked
``⟦...⟧``. WS001 has a second set, every finding on the official folders (``OFFICIAL``: Hub copies
kept by llama.cpp, unsloth, TRL, huggingface.js, ollama and mistral-common). Whether each one is a real
problem or a false positive is the reviewer's judgement; the review is ``benchmarks/lint_precision.md``,
one table row per finding (``| ID | path:line:column | real or false positive | reason |``), and
``--check`` says whether that file still lists exactly the findings this script samples today.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from chatjinja.lint import all_rules, lint  # noqa: E402


#: corpus folders of official templates (Hub copies), whose WS001 findings are all reviewed
OFFICIAL = ("llama.cpp", "unsloth", "trl", "huggingface.js", "ollama", "mistral-common")


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
    parser.add_argument("--check", metavar="REVIEW", help="check that this review lists exactly today's sample")
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
    samples: list[tuple[str, str, list]] = []  # (section id prefix, title, findings)
    for rule in all_rules():
        if args.rule and rule.code not in args.rule:
            continue
        found = sorted(by_rule.get(rule.code, []), key=lambda d: _key(d.path, d.span.start))
        n = args.ws001 if rule.code == "WS001" else args.per_rule
        templates = len({d.path for d in found})
        samples.append((rule.code, f"{rule.code} {rule.name}: {len(found)} findings in {templates} templates", found[:n]))
        if rule.code == "WS001":
            official = [d for d in sorted(found, key=lambda d: (d.path, d.span.start))
                        if Path(d.path).parts[1] in OFFICIAL]
            samples.append(("WS001-official", f"WS001 on the official folders ({', '.join(OFFICIAL)}): "
                            f"{len(official)} findings in {len({d.path for d in official})} templates", official))
    if args.check:
        _check(Path(args.check), samples)
        return
    for prefix, title, sample in samples:
        print(f"## {title}, {len(sample)} sampled\n")
        for i, d in enumerate(sample, 1):
            print(f"{prefix}-{i:02d} {d.path}:{d.span.line}:{d.span.column}: {d.message}")
            print(_context(texts[d.path], d.span.start, d.span.end))
            print()


_ROW_ID = re.compile(r"^[A-Z]{2}\d{3}(-official)?-\d{2}$")


def _check(review: Path, samples: list) -> None:
    """Exit 1 unless the review's rows name exactly the sampled findings, in order, each with a verdict."""
    rows = {}
    for line in review.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and _ROW_ID.match(cells[0]):
            rows[cells[0]] = cells
    problems = []
    for prefix, _title, sample in samples:
        for i, d in enumerate(sample, 1):
            ident, where = f"{prefix}-{i:02d}", f"{d.path}:{d.span.line}:{d.span.column}"
            row = rows.pop(ident, None)
            if row is None or row[1].strip("`") != where:
                problems.append(f"{ident}: the sample has {where}, the review has {row[1] if row else 'nothing'}")
            elif row[2] not in ("real", "false positive") or not row[3]:
                problems.append(f"{ident}: no verdict and reason")
    problems += [f"{ident}: reviewed but no longer sampled" for ident in rows]
    for problem in problems:
        print(f"{review}: {problem}")
    if problems:
        raise SystemExit(1)
    print(f"{review}: every sampled finding is reviewed")

if __name__ == "__main__":
    main()
