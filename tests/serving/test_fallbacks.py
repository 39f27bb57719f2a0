"""Acceptance 2: on the corpus templates of the families transformers ships a fallback for, the derived template reads every suite case as the fallback does."""

from __future__ import annotations

import re

import pytest

from chatjinja.serving.derive import ResponseTemplateError, derive
from chatjinja.serving.suite import TOOLS, expected_problem
from tests.conftest import corpus_or_skip
from tests.serving.corpus_round_trip import derived, name_of, selected

pytestmark = [pytest.mark.corpus, pytest.mark.reference]
chat_parsing = pytest.importorskip("transformers.utils.chat_parsing")
serving_utils = pytest.importorskip("transformers.cli.serving.utils")


def _fallback(model_type: str) -> dict:
    return next(v for types, v in serving_utils._RESPONSE_TEMPLATE_FALLBACKS.items() if model_type in types)


def _family(name: str, call_render: str | None) -> str | None:
    """The fallback a template's model would get: by its name, and (Qwen) by the call format it writes."""
    if re.search(r"gemma-?4", name, re.IGNORECASE) and "functiongemma" not in name:
        return "gemma4"
    if re.search(r"qwen|qwq", name, re.IGNORECASE) and not re.search(r"xlam|deepseek", name, re.IGNORECASE):
        return "qwen3_5" if call_render is not None and "<function=" in call_render else "qwen3"
    return None


def _parse(response: str, template: dict, prefix: str) -> object:
    try:
        return chat_parsing.parse_response(response, template, prefix=prefix, tools=TOOLS)
    except ValueError as exc:
        return f"ValueError: {exc}"


def test_derived_reads_as_the_fallback_does() -> None:
    corpus_or_skip()
    compared, differing = 0, []
    fallback_raises: set[tuple[str, str]] = set()
    fallback_misreads: set[tuple[str, str]] = set()
    templates, underived = set(), []
    for path in selected():
        observed, template, _ = derived(path)
        if not observed.modes:
            continue
        renders = observed.default  # the fallbacks read the default mode's replies (no mode variables)
        family = _family(name_of(path), renders.rendered().get("call_object"))
        if family is None or not renders.rendered():  # nothing renders after the prompt: nothing to compare
            continue
        if template is None:  # a case no template reads: the one that reads the most
            try:
                template = derive(renders, name_of(path), strict=False)
            except ResponseTemplateError as exc:
                underived.append((name_of(path), exc.message))
                continue
        templates.add(family)
        fallback = _fallback(family)
        for case, response in renders.rendered().items():
            # as the model writes it: generation stops at the end-of-turn token, before the newline the
            # template adds after it (on which the fallbacks drop the content: their close leaves it unread)
            response = response.rstrip()
            compared += 1
            ours, theirs = _parse(response, template, renders.prefix), _parse(response, fallback, renders.prefix)
            if isinstance(theirs, str) and isinstance(ours, dict) and expected_problem(case, ours, response) is None:
                # the fallback raises where the derived template reads the message back: not a difference
                # in reading, a reply the fallback cannot read (COMPATIBILITY.md "Parsing replies")
                fallback_raises.add((family, case))
            elif isinstance(theirs, dict) and isinstance(ours, dict) and expected_problem(case, ours, response) is None \
                    and expected_problem(case, theirs, response) is not None:
                # the fallback reads another message than the one the template wrote (Qwen 3.6's string
                # arguments written as JSON inside <function=...>: the qwen3_5 fallback reads no arguments)
                fallback_misreads.add((family, case))
            elif ours != theirs:
                differing.append((name_of(path), case, ours, theirs))
    assert underived == []
    assert templates == {"qwen3", "qwen3_5", "gemma4"} and compared >= 150, (templates, compared)
    assert differing == []
    # Gemma 4's string arguments (``call:f{{"city": ...}}``): transformers' own fallback raises on them
    assert fallback_raises == {("gemma4", "call_string")}
    assert fallback_misreads <= {("qwen3_5", "call_string")}, fallback_misreads
