"""What the engines receive is what transformers' template receives: the probe contexts against transformers 5.25.0's own render call."""

from __future__ import annotations

import pytest

from chatjinja.observation import SPECIAL_TOKENS, needle_for, probe_conversations, space_of
from chatjinja.portability import probe_cases

from ..reference import hf_tokenizer

pytestmark = pytest.mark.reference


def test_every_probe_context_is_what_transformers_passes_to_the_template(monkeypatch):
    from transformers.utils import chat_template_utils

    seen: list[dict] = []

    class Recorder:
        def render(self, **variables):
            seen.append(variables)
            return ""

    monkeypatch.setattr(chat_template_utils, "_compile_jinja_template", lambda source: Recorder())
    source = "{{ messages }}{{ tools }}{{ documents }}"
    cases = probe_cases(source)
    members = [m for m in space_of(source) if not m.options.get("continue_final_message")]
    assert [case.name for case in cases] == [m.name for m in members]
    assert {m.shape for m in members} >= set(probe_conversations(needle_for(source)))
    for case, member in zip(cases, members):
        seen.clear()
        hf_tokenizer().apply_chat_template(member.messages, chat_template=source, tokenize=False, **member.options,
                                           **dict(member.variables))
        assert seen == [case.context], case.name
    assert set(cases[0].context) == {"messages", "tools", "documents", "add_generation_prompt", *SPECIAL_TOKENS}

