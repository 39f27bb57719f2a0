"""Helpers for the syntax tests: the corpus, the golden cases and jinja2's Hugging Face environment."""

from __future__ import annotations

import json
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
SYNTAX_CASES = Path(__file__).resolve().parent / "cases"


def hf_environment():
    """jinja2 configured as transformers configures it for chat templates."""
    import jinja2
    import jinja2.ext
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationTag(jinja2.ext.Extension):
        """transformers' AssistantTracker, reduced to its parser."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

        def _generation_support(self, caller):
            return caller()

    return ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, GenerationTag]
    )


def corpus_sources() -> list[tuple[str, str]]:
    """(id, text) of every corpus template and render-case template; [] when the corpus is absent."""
    if not CORPUS.is_dir():
        return []
    out = []
    for path in sorted((CORPUS / "templates").rglob("*.jinja")):
        out.append((str(path.relative_to(CORPUS)), path.read_text(encoding="utf-8")))
    cases = CORPUS / "render_cases.json"
    if cases.is_file():
        for case in json.loads(cases.read_text(encoding="utf-8")):
            out.append((f"render_cases.json:{case['key']}", case["template"]))
    return out
