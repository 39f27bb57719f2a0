"""The corpus round trip both acceptance tests read: which templates render tool calls or reasoning, and each one's derivation (cached per session)."""

from __future__ import annotations

import functools
from pathlib import Path

from chatjinja.probing import probe
from chatjinja.serving.derive import ResponseTemplateError, derive_source_format
from chatjinja.serving.emit import ReplyFormat, to_transformers
from chatjinja.serving.suite import SuiteObservation, observe_suite
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


# the reply format each template's response template was written from (every target's emitter reads it)
reply_formats: dict[Path, ReplyFormat] = {}


@functools.cache
def derived(path: Path) -> tuple[SuiteObservation, dict | None, str | None]:
    """(the suite rendered in every mode the template has, the derived response template or None, the reason
    it is None): the observation is the one the template was derived from (with tools given, or without
    when only that reads back)."""
    source = path.read_text(encoding="utf-8")
    try:
        observed, reply_formats[path] = derive_source_format(source, name_of(path), strict=True, tokens=())
        return observed, to_transformers(reply_formats[path]), None
    except ResponseTemplateError as exc:
        try:
            observed = observe_suite(source)
        except Exception:  # noqa: BLE001 - the prompt does not render: nothing observed
            observed = SuiteObservation(())
        return observed, None, exc.message
