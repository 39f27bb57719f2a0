"""Counts of findings per rule over the corpus (every rule, the opt-in PT ones too), kept in corpus_counts.txt (UPDATE_GOLDENS=1 rewrites it)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from chatjinja.lint import all_rules, lint
from tests.conftest import CORPUS, corpus_or_skip, corpus_templates
from tests.goldens import check_golden

GOLDEN = Path(__file__).parent / "corpus_counts.txt"


def corpus_counts() -> str:
    findings: Counter[str] = Counter()
    files: Counter[str] = Counter()
    templates = corpus_templates()
    for path in templates:
        codes = [d.code for d in lint(path.read_text(encoding="utf-8"), name=str(path.relative_to(CORPUS)), select=["ALL"])]
        findings.update(codes)
        files.update(set(codes))
    lines = [f"# chatjinja lint over ../shared/corpus: {len(templates)} templates", "# code   name                           findings  templates"]
    for rule in all_rules():
        lines.append(f"{rule.code}    {rule.name:<30} {findings[rule.code]:>8}  {files[rule.code]:>9}")
    return "\n".join(lines) + "\n"


@pytest.mark.corpus
def test_corpus_counts_golden() -> None:
    corpus_or_skip()
    text = corpus_counts()
    check_golden(GOLDEN, text)
