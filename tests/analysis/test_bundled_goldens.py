"""Golden JSON reports for the four bundled templates, and the facts their documents state, checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatjinja import analyze, load_template, probe
from chatjinja.analysis import PROBED_FIELDS
from chatjinja.loading import bundled_names
from tests.goldens import check_golden

GOLDENS = Path(__file__).parent / "goldens"
MISTRAL = ["mistral-v1", "mistral-v2-v3", "mistral-v3-tekken"]
DEVSTRAL = "devstral-small-2-24b-instruct-2512"


@pytest.mark.parametrize("name", bundled_names())
def test_golden_report(name):
    report = json.dumps(analyze(load_template(name)).to_dict(), indent=2, ensure_ascii=False) + "\n"
    check_golden(GOLDENS / f"{name}.json", report)


@pytest.mark.parametrize("name", bundled_names())
def test_golden_agrees_with_probe(name):
    template = load_template(name)
    static, measured = analyze(template).probed(), probe(template).probed()
    assert {f: static[f] for f in PROBED_FIELDS} == {f: measured[f] for f in PROBED_FIELDS}


@pytest.mark.parametrize("name", MISTRAL)
def test_mistral_documented_facts(name):
    """Documents: user and assistant string content only, alternation required, any other role raises."""
    c = analyze(load_template(name))
    assert c.roles == ("assistant", "user")
    assert c.content_string is True
    assert c.chunk_types == ()
    assert c.requires_alternation is True
    assert not (c.tool_definitions or c.tool_calls or c.parallel_tool_calls or c.tool_call_ids)
    assert c.tool_call_arguments == ()
    assert not (c.generation_prompt or c.reasoning or c.documents)
    assert c.variables == ("bos_token", "eos_token")
    assert c.special_tokens == ("bos_token", "eos_token")
    role_site = next(s for s in c.raises if s.message == "Only user and assistant roles are supported!")
    assert (role_site.span.line, role_site.span.column) == (11, 12)
    assert role_site.kind == "role"
    assert role_site.roles == ("developer", "system", "tool")
    assert role_site.condition == "not (message['role'] == 'user') and not (message['role'] == 'assistant')"
    alternation = next(s for s in c.raises if s.kind == "alternation")
    assert (alternation.span.line, alternation.span.column) == (4, 12)
    assert alternation.condition == "(message['role'] == 'user') != (loop.index0 % 2 == 0)"
    assert "[INST]" in c.control_tokens and "[/INST]" in c.control_tokens


def test_devstral_documented_facts():
    """Document: system string or text chunks; user chunks text/image/image_url; tools, calls with object and
    string arguments, parallel calls and tool results; no tool-call ids; add_generation_prompt ignored."""
    c = analyze(load_template(DEVSTRAL))
    assert c.roles == ("assistant", "system", "tool", "user")
    assert c.content_string is True
    assert c.chunk_types == ("image", "image_url", "text")
    assert c.tool_definitions and c.tool_calls and c.parallel_tool_calls
    assert c.tool_call_arguments == ("object", "string")
    assert c.tool_call_ids is False
    assert c.generation_prompt is False
    assert c.requires_alternation is True
    assert not (c.reasoning or c.documents)
    system_chunks = next(s for s in c.raises if s.message == "Only text chunks are supported in system message contents.")
    assert system_chunks.kind == "content" and system_chunks.roles == ("system",)
    other_roles = next(s for s in c.raises if s.message_source.startswith("'Only user, assistant and tool roles"))
    assert other_roles.message is None  # the message is built from the role: not a constant
    assert other_roles.roles == ("developer", "system")
    assert {"[INST]", "[TOOL_CALLS]", "[ARGS]", "[AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[IMG]"} <= set(c.control_tokens)
