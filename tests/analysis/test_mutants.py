"""Beyond the corpus as it is: the analyser against the probe on semantic mutants of corpus templates.

The corpus agrees cell for cell, so this checks the analyser is not fitted to it: each mutation
changes what a template supports (swapped role names, negated type tests, inverted alternation or
generation-prompt tests, dumps without ``tojson``, raise calls turned into output, ...). A
deterministic sample (every 12th template) keeps it fast; COMPATIBILITY.md gives the full run.
"""

from __future__ import annotations

from typing import Callable

import pytest

from chatjinja.analysis import PROBED_FIELDS, analyze, disagreements
from chatjinja.errors import TemplateSyntaxError
from chatjinja.probing import probe

from ..conftest import CORPUS, corpus_templates

MUTATIONS: dict[str, Callable[[str], str]] = {
    "swap-system-developer": lambda s: s.replace("'system'", "'@@'").replace("'developer'", "'system'").replace("'@@'", "'developer'"),
    "negate-is-string": lambda s: s.replace("is string", "is not string"),
    "negate-generation-prompt": lambda s: s.replace("if add_generation_prompt", "if not add_generation_prompt"),
    "odd-alternation": lambda s: s.replace("% 2 == 0", "% 2 == 1"),
    "drop-tojson": lambda s: s.replace("| tojson", "").replace("|tojson", ""),
    "tool-role-renamed": lambda s: s.replace("'tool'", "'function'"),
    "raise-becomes-output": lambda s: s.replace("raise_exception(", "("),
    "negate-is-mapping": lambda s: s.replace("is mapping", "is not mapping"),
    "negate-is-defined": lambda s: s.replace("is defined", "is not defined"),
    "last-for-first": lambda s: s.replace("messages[0]", "messages[-1]"),
}
SAMPLE_EVERY = 12

pytestmark = pytest.mark.corpus


def test_mutants_agree_with_probe(corpus_dir):
    compared = 0
    disagreeing: list[str] = []
    per_field = {name: 0 for name in PROBED_FIELDS}
    for path in corpus_templates()[::SAMPLE_EVERY]:
        original = path.read_text(encoding="utf-8")
        for name, mutate in MUTATIONS.items():
            source = mutate(original)
            if source == original:
                continue
            try:
                static = analyze(source)
            except TemplateSyntaxError:
                continue
            compared += 1
            for d in disagreements(static, probe(source)):
                per_field[d.field.split(" (")[0]] += 1  # (a mode variant's disagreement counts for its field)
                disagreeing.append(f"{path.relative_to(CORPUS / 'templates')} [{name}] {d.field}: {d.static} / {d.probe}")
    print(f"\n{compared} mutants compared; disagreeing cells: {len(disagreeing)}")
    print("\n".join(disagreeing))
    assert compared > 100
    cells = compared * len(PROBED_FIELDS)
    assert (cells - len(disagreeing)) / cells >= 0.99, disagreeing
    assert all((compared - n) / compared >= 0.97 for n in per_field.values()), per_field
