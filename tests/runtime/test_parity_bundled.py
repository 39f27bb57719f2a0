"""Differential test: the four bundled templates, chatjinja vs transformers 5.25.0, on the conversation suite."""

from __future__ import annotations

import pytest

from chatjinja import ChatTemplate
from chatjinja.loading import bundled_names, load_bundled
from tests.reference import hf_outcome, our_outcome
from tests.runtime.conversations import bundled_cases

CASES = bundled_cases()
NAMES = bundled_names()


def test_suite_is_large_enough():
    assert len(CASES) >= 40
    assert sorted(NAMES) == ["devstral-small-2-24b-instruct-2512", "mistral-v1", "mistral-v2-v3", "mistral-v3-tekken"]


@pytest.mark.reference
@pytest.mark.parametrize("name", NAMES)
def test_bundled_template_matches_transformers(name):
    template = load_bundled(name)
    mismatches = []
    texts = errors = 0
    for case_id, conversation, kwargs in CASES:
        expected = hf_outcome(template.source, conversation, **kwargs)
        actual = our_outcome(template.source, conversation, **kwargs)
        if expected[0] == "text":
            texts += 1
        else:
            errors += 1
        if actual != expected:
            mismatches.append((case_id, expected, actual))
    print(f"\n{name}: {len(CASES)} cases, {texts} rendered, {errors} raised, {len(mismatches)} mismatches")
    assert not mismatches, mismatches[:3]


@pytest.mark.reference
def test_chat_template_render_passes_its_special_tokens():
    template = ChatTemplate.of(load_bundled("mistral-v3-tekken"))
    conversation = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    assert ("text", template.render(conversation)) == hf_outcome(template.source, conversation)
    overridden = template.render(conversation, eos_token="<END>")
    assert overridden.endswith("yo<END>\n") or "<END>" in overridden
    assert ("text", overridden) == hf_outcome(template.source, conversation, eos_token="<END>")
