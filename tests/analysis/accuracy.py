"""The accuracy harness: static analysis against the probe on every corpus template, as a per-field table."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from chatjinja.analysis import PROBED_FIELDS, Capabilities, analyze, disagreements
from chatjinja.errors import TemplateSyntaxError
from chatjinja.probing import probe
from chatjinja.source import Source

from ..conftest import CORPUS, corpus_templates


@dataclass
class Comparison:
    name: str
    static: Capabilities
    probe: Capabilities
    parse_error: str | None = None
    differing: tuple[str, ...] = ()


@dataclass
class Accuracy:
    comparisons: list[Comparison]
    agree: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.comparisons)

    def field_rate(self, name: str) -> float:
        return self.agree[name] / self.total

    @property
    def cell_rate(self) -> float:
        return sum(self.agree.values()) / (self.total * len(PROBED_FIELDS))

    def table(self) -> str:
        lines = [f"static analysis vs probe over {self.total} corpus templates", "",
                 f"{'field':<22} {'agree':>7} {'rate':>8}  disagreeing templates"]
        for name in PROBED_FIELDS:
            names = [c.name for c in self.comparisons if name in c.differing]
            lines.append(f"{name:<22} {self.agree[name]:>7} {100 * self.field_rate(name):>7.1f}%  {len(names)}")
        lines.append("")
        lines.append(f"overall cell agreement: {100 * self.cell_rate:.2f}% "
                     f"({sum(self.agree.values())} of {self.total * len(PROBED_FIELDS)})")
        parse_errors = [c for c in self.comparisons if c.parse_error]
        lines.append(f"templates the parser rejects (all facts empty on both sides when rendering fails too): {len(parse_errors)}")
        for c in parse_errors:  # the parser's message is the parser's business: only the name here
            lines.append(f"  {c.name}")
        lines.append("")
        lines.append("disagreements (field: static / probe):")
        for c in self.comparisons:
            for d in disagreements(c.static, c.probe, c.differing):
                lines.append(f"  {c.name}  {d.field}: {d.static} / {d.probe}")
        return "\n".join(lines) + "\n"


def compare_template(path: Path) -> Comparison:
    name = str(path.relative_to(CORPUS / "templates"))
    text = path.read_text(encoding="utf-8")
    parse_error = None
    try:
        static = analyze(Source(text, name))
    except TemplateSyntaxError as exc:
        static, parse_error = Capabilities(source_name=name), str(exc).splitlines()[0]
    measured = probe(text)
    differing = tuple(d.field for d in disagreements(static, measured))
    return Comparison(name, static, measured, parse_error, differing)


@functools.cache
def corpus_accuracy() -> Accuracy:
    comparisons = [compare_template(path) for path in corpus_templates()]
    agree = {name: sum(name not in c.differing for c in comparisons) for name in PROBED_FIELDS}
    return Accuracy(comparisons, agree)
