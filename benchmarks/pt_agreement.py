"""PT rules vs the real engines: per engine, the confusion table of "some PT finding names it" against "it renders the probe suite differently".

    .venv/bin/python benchmarks/pt_agreement.py [--engines minijinja,hfjs,llamacpp] [--limit N] [--list FP,FN] [CORPUS_DIR]

For every corpus template (``templates/**/*.jinja`` under ``../shared/corpus`` by default) and every
available engine: the probe conversations go through the engine's adapter and are compared with
transformers as ``chatjinja portability`` compares them (``compare_engines``). The template *diverges*
in that engine when its verdict is ``differs``: some case renders another text, or fails in one and not
the other (a case both refuse agrees). The rules *predict* a divergence when
``lint(source, select=["PT"])`` has a diagnostic whose ``engines`` name the engine. TP: predicted and
diverges; FP: predicted, renders identically; FN: diverges, not predicted; TN: neither. Agreement is
(TP + TN) / templates. ``--list FP,FN`` prints the templates in those cells with the codes found.
``tests/portability/test_pt_agreement.py`` imports this module and asserts the floor on a sample.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
sys.path.insert(0, str(REPO / "src"))

from chatjinja.lint import lint  # noqa: E402
from chatjinja.portability import ENGINE_NAMES, EngineUnavailable, available_engines  # noqa: E402
from chatjinja.portability.report import compare_engines  # noqa: E402

CELLS = ("TP", "FP", "FN", "TN")


def predicted_engines(source: str) -> set[str]:
    """The engines some PT finding names (an empty set when the template is portable as far as PT sees)."""
    return {name for d in lint(source, select=["PT"]) for name in d.engines}


def diverging_engines(source: str, engines: dict) -> set[str]:
    """The engines whose verdict on the probe suite is not ``identical`` (``chatjinja portability``'s comparison)."""
    return {name for name, found in compare_engines(source, engines).items() if found.verdict == "differs"}


@dataclass
class Table:
    """One engine's confusion table, and the templates in each cell."""

    engine: str
    cells: dict[str, list[str]] = field(default_factory=lambda: {cell: [] for cell in CELLS})

    def add(self, name: str, predicted: bool, actual: bool) -> None:
        cell = ("T" if predicted == actual else "F") + ("P" if predicted else "N")
        self.cells[cell].append(name)

    def count(self, cell: str) -> int:
        return len(self.cells[cell])

    @property
    def total(self) -> int:
        return sum(self.count(cell) for cell in CELLS)

    @property
    def agreement(self) -> float:
        return (self.count("TP") + self.count("TN")) / self.total if self.total else 1.0


def corpus_templates(corpus: Path, limit: int = 0) -> list[tuple[str, str]]:
    paths = sorted((corpus / "templates").rglob("*.jinja"))
    if limit:
        paths = paths[:limit]
    return [(str(p.relative_to(corpus / "templates")), p.read_text(encoding="utf-8")) for p in paths]


def agreement_tables(templates: list[tuple[str, str]], engines: dict) -> dict[str, Table]:
    """``engines``: name → adapter (``chatjinja.portability.engine``); one table per engine."""
    tables = {name: Table(name) for name in engines}
    for name, source in templates:
        predicted = predicted_engines(source)
        diverging = diverging_engines(source, engines)
        for engine_name in engines:
            tables[engine_name].add(name, engine_name in predicted, engine_name in diverging)
    return tables


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=CORPUS)
    parser.add_argument("--engines", default=",".join(ENGINE_NAMES))
    parser.add_argument("--limit", type=int, default=0, help="only the first N templates (0: all)")
    parser.add_argument("--list", default="", help="cells whose templates to print, e.g. FP,FN")
    args = parser.parse_args()
    engines = {}
    for name, found in available_engines(tuple(args.engines.split(","))).items():
        if isinstance(found, EngineUnavailable):
            print(f"skipped {name}: {found.reason}", file=sys.stderr)
        else:
            engines[name] = found
    if not engines:
        print("no engine is available", file=sys.stderr)
        return 1
    tables = agreement_tables(corpus_templates(args.corpus, args.limit), engines)
    print("| engine | templates | TP | FP | FN | TN | agreement |")
    print("|---|---|---|---|---|---|---|")
    for table in tables.values():
        counts = " | ".join(str(table.count(cell)) for cell in CELLS)
        print(f"| {table.engine} | {table.total} | {counts} | {table.agreement:.1%} |")
    for cell in filter(None, args.list.split(",")):
        for table in tables.values():
            for name in table.cells[cell]:
                print(f"{table.engine} {cell} {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
