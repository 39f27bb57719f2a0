"""The corpus round trip both acceptance tests read: which templates render tool calls or reasoning, and each one's derivation (cached per session)."""

from __future__ import annotations

import functools
from pathlib import Path

from chatjinja.probing import probe
from chatjinja.serving.derive import ResponseTemplateError, derive
from chatjinja.serving.suite import SuiteRenders, render_suite
from tests.conftest import CORPUS, corpus_templates


def name_of(path: Path) -> str:
    return str(path.relative_to(CORPUS / "templates"))


@functools.cache
def selected() -> tuple[Path, ...]:
    """Every corpus template whose probe says it renders tool calls or reasoning."""
    chosen = []
    for path in corpus_templates():
        capabilities = probe(path.read_text(encoding="utf-8"))
        if capabilities.tool_calls or capabilities.reasoning:
            chosen.append(path)
    return tuple(chosen)


@functools.cache
def derived(path: Path) -> tuple[SuiteRenders, dict | None, str | None]:
    """(the suite renders, the derived response template or None, the reason it is None)."""
    renders = render_suite(path.read_text(encoding="utf-8"))
    try:
        return renders, derive(renders, name_of(path)), None
    except ResponseTemplateError as exc:
        return renders, None, exc.message
