"""Fixtures for the syntax tests: the corpus and a jinja2 acceptance check (tests only)."""

from __future__ import annotations

import warnings

import pytest

from tests.syntax.support import CORPUS, corpus_sources, hf_environment


@pytest.fixture(scope="session")
def jinja2_accepts():
    """``accepts(text) -> (bool, message)``: does jinja2's parser accept the template?"""
    import jinja2

    env = hf_environment()

    def accepts(text: str) -> tuple[bool, str]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # jinja2's own "invalid escape sequence"
                env.parse(text)
        except jinja2.TemplateSyntaxError as exc:
            return False, str(exc)
        return True, ""

    return accepts


@pytest.fixture(scope="session")
def corpus():
    templates = corpus_sources()
    if not templates:
        pytest.skip(f"../shared/corpus not found: {CORPUS}")
    return templates
