"""PT rules vs the real engines: per engine, the confusion table of "some PT finding names it" against "it renders the conversation space differently".

    .venv/bin/python benchmarks/pt_agreement.py [--engines minijinja,hfjs,llamacpp] [--limit N] [--list FP,FN] [CORPUS_DIR]

For every corpus template (``templates/**/*.jinja`` under ``../shared/corpus`` by default) and every
available engine: every member of the template's conversation space (the probe and client shapes, in
each mode: ``chatjinja portability``'s cases) goes through the engine's adapter and is compared with
transformers as ``chatjinja portability`` compares them (``compare_engines``). The template *diverges*
in that engine when its verdict is ``differs``: some case renders another text, or fails in one and not
the other (a case both refuse agrees). The rules *predict* a divergence when
``lint(source, select=["PT"])`` has a diagnostic whose ``engines`` name the engine. TP: predicted and
diverges; FP: predicted, renders identically; FN: diverges, not predicted; TN: neither. Agreement is
(TP + TN) / templates, over the whole space: the acceptance's measure. Per rule, the script also
prints how many of the (template, engine) pairs a rule's findings name render the space differently.

Some difference classes cannot be predicted from the template's text (``UNPREDICTABLE``, each named
in COMPATIBILITY.md, "Portability rules"): the script also prints, per class, the templates whose
every differing case in an engine falls in it, and the table again over what remains (those cases set
aside). ``--list FP,FN`` prints the templates in those cells (with the unpredictable classes that
explain an FN).
``tests/portability/test_pt_agreement.py`` imports this module and asserts the floor on a sample.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
sys.path.insert(0, str(REPO / "src"))

from chatjinja.lint import lint  # noqa: E402
from chatjinja.portability import ENGINE_NAMES, EngineUnavailable, available_engines  # noqa: E402
from chatjinja.portability.report import CaseComparison, compare_engines  # noqa: E402

CELLS = ("TP", "FP", "FN", "TN")


def _transformers_raises(pattern: str) -> Callable[[CaseComparison], bool]:
    found = re.compile(pattern)
    return lambda case: case.status == "renders" and bool(found.search(case.expected_error or ""))


#: The difference classes no PT rule predicts, by name (COMPATIBILITY.md, "Portability rules", says why):
#: a test of one case's comparison. Each is an outcome that depends on the data, not the template's text,
#: or a fault outside the template.
UNPREDICTABLE: dict[str, Callable[[CaseComparison], bool]] = {
    # jinja2's Undefined raises where it is used, the engines render it as nothing: a variable the caller
    # must pass (``functions``), an attribute a tool or message lacks (not a message's content: PT016)
    "undefined-variable": _transformers_raises(r"^UndefinedError: '\w+' is undefined$"),
    "undefined-attribute": _transformers_raises(r"^UndefinedError: .* has no attribute '(?!content')"),
    # ``|first`` of an empty list: jinja2's Undefined refuses it, the engines give nothing
    "first-of-empty": _transformers_raises(r"No first item, sequence was empty"),
    # a mode variable of the space that transformers' ``render_jinja_template`` takes as its own parameter
    "transformers-parameter": _transformers_raises(r"got multiple values for keyword argument"),
    # a JavaScript TypeError inside @huggingface/jinja itself
    "engine-internal-error": lambda case: case.status == "fails" and (case.error or "").startswith(
        "TypeError: Cannot read properties of undefined"),
}


def unpredictable_class(case: CaseComparison) -> str | None:
    """The name of the unpredictable class a differing case falls in, or None."""
    return next((name for name, test in UNPREDICTABLE.items() if test(case)), None)


def predicted_engines(source: str) -> set[str]:
    """The engines some PT finding names (an empty set when the template is portable as far as PT sees)."""
    return {name for engines in predictions(source).values() for name in engines}


def predictions(source: str) -> dict[str, set[str]]:
    """Per PT rule with findings, the engines they name."""
    found: dict[str, set[str]] = {}
    for d in lint(source, select=["PT"]):
        found.setdefault(d.code, set()).update(d.engines)
    return found


def differing_cases(source: str, engines: dict) -> dict[str, list[CaseComparison]]:
    """Per engine, the cases of the space that do not agree with transformers (``chatjinja portability``'s comparison)."""
    return {name: [case for case in found.cases if not case.agrees]
            for name, found in compare_engines(source, engines).items()}


def diverging_engines(source: str, engines: dict) -> set[str]:
    """The engines whose verdict on the conversation space is ``differs``."""
    return {name for name, cases in differing_cases(source, engines).items() if cases}


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

    @property
    def precision(self) -> float:
        """TP / (TP + FP): how often a prediction is right."""
        predicted = self.count("TP") + self.count("FP")
        return self.count("TP") / predicted if predicted else 1.0


def corpus_templates(corpus: Path, limit: int = 0) -> list[tuple[str, str]]:
    paths = sorted((corpus / "templates").rglob("*.jinja"))
    if limit:
        paths = paths[:limit]
    return [(str(p.relative_to(corpus / "templates")), p.read_text(encoding="utf-8")) for p in paths]


@dataclass
class Agreement:
    """The tables over the whole space, the tables over what remains without the unpredictable classes, and per
    engine and class the templates whose every differing case is in that class."""

    whole: dict[str, Table]
    remaining: dict[str, Table]
    explained: dict[str, dict[str, list[str]]]
    by_rule: dict[str, list[int]] = field(default_factory=dict)  # code -> [pairs that differ, pairs identical]


def agreement(templates: list[tuple[str, str]], engines: dict) -> Agreement:
    """``engines``: name → adapter (``chatjinja.portability.engine``); the tables of each engine."""
    whole = {name: Table(name) for name in engines}
    remaining = {name: Table(name) for name in engines}
    explained: dict[str, dict[str, list[str]]] = {cls: {name: [] for name in engines} for cls in UNPREDICTABLE}
    by_rule: dict[str, list[int]] = {}
    for name, source in templates:
        rules = predictions(source)
        predicted = {engine for named in rules.values() for engine in named}
        differing = differing_cases(source, engines)
        for code, named in rules.items():
            for engine_name in named & set(differing):
                by_rule.setdefault(code, [0, 0])[0 if differing[engine_name] else 1] += 1
        for engine_name, cases in differing.items():
            classes = [unpredictable_class(case) for case in cases]
            whole[engine_name].add(name, engine_name in predicted, bool(cases))
            remaining[engine_name].add(name, engine_name in predicted, None in classes)
            if cases and None not in classes:
                for cls in sorted(set(classes)):
                    explained[cls][engine_name].append(name)
    return Agreement(whole, remaining, explained, dict(sorted(by_rule.items())))


def agreement_tables(templates: list[tuple[str, str]], engines: dict) -> dict[str, Table]:
    """The tables over the whole space (``agreement(...).whole``)."""
    return agreement(templates, engines).whole


def _print_table(tables: dict[str, Table]) -> None:
    print("| engine | templates | TP | FP | FN | TN | agreement | precision |")
    print("|---|---|---|---|---|---|---|---|")
    for table in tables.values():
        counts = " | ".join(str(table.count(cell)) for cell in CELLS)
        print(f"| {table.engine} | {table.total} | {counts} | {table.agreement:.1%} | {table.precision:.1%} |")


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
    found = agreement(corpus_templates(args.corpus, args.limit), engines)
    print("Over the whole conversation space:")
    print()
    _print_table(found.whole)
    print()
    print("Templates whose every differing case is in a class the rules cannot predict (COMPATIBILITY.md):")
    print()
    print("| class | " + " | ".join(engines) + " |")
    print("|---|" + "---|" * len(engines))
    for cls, by_engine in found.explained.items():
        print(f"| {cls} | " + " | ".join(str(len(by_engine[name])) for name in engines) + " |")
    print()
    print("Over what remains (the cases of those classes set aside):")
    print()
    _print_table(found.remaining)
    print()
    print("Per rule: the (template, engine) pairs its findings name, and those whose space renders differently:")
    print()
    print("| rule | pairs | differ | identical | share that differ |")
    print("|---|---|---|---|---|")
    for code, (differ, same) in found.by_rule.items():
        print(f"| {code} | {differ + same} | {differ} | {same} | {differ / (differ + same):.0%} |")
    for cell in filter(None, args.list.split(",")):
        for table in found.whole.values():
            for name in table.cells[cell]:
                classes = sorted(cls for cls, by_engine in found.explained.items() if name in by_engine[table.engine])
                print(f"{table.engine} {cell} {name}" + (f" ({', '.join(classes)})" if classes else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
