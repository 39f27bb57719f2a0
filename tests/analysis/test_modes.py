"""Modes: the analyser finds a template's mode variables and says which facts change in each variant;
the probe measures the same by rendering; both agree with transformers' renders, made at test time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatjinja.analysis import analyze, modes_of
from chatjinja.analysis.modes import MODE_SHAPES, Mode, mode_variants
from chatjinja.observation import Outcome, probe_conversations
from chatjinja.probing import ProbeRun, capabilities_from_run, probe
from chatjinja.source import Source

from tests.conftest import CORPUS, corpus_templates
from tests.reference import SPECIAL_TOKENS, hf_outcome


def _moded() -> list[Path]:
    out = []
    for path in corpus_templates():
        if modes_of(Source(path.read_text(encoding="utf-8"), path.name)):
            out.append(path)
    return out


MODED = _moded() if (CORPUS / "templates").is_dir() else []


def test_modes_come_from_conditions_with_the_values_compared():
    source = (
        "{% if enable_thinking is defined and enable_thinking is false %}A{% endif %}"
        "{% if reasoning_effort == 'high' or reasoning_effort in ['low', 'medium'] %}B{% endif %}"
        "{{ 'x' if thinking | default(false) else 'y' }}{{ date_string }}{{ bos_token }}"
        "{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}"
    )
    assert modes_of(source) == (
        Mode("enable_thinking", (True, False)),
        Mode("reasoning_effort", ("high", "low", "medium")),
        Mode("thinking", (True, False)),
    )
    # printed, never tested: not a mode; messages, special tokens and the fixed variables never are
    assert [m.name for m in modes_of("{{ date_string }}{% if add_generation_prompt %}x{% endif %}")] == []
    # nor a name transformers cannot pass as a variable at all (render_jinja_template's own parameter)
    assert modes_of("{% if conversations %}x{% endif %}{% if continue_final_message %}y{% endif %}") == ()


def test_deepseek_v4_reasons_in_thinking_mode_only(corpus_dir):
    """The issue's case: the default renders no reasoning; thinking mode does, and the facts say so."""
    source = (corpus_dir / "templates/llama.cpp/deepseek-ai-DeepSeek-V4.jinja").read_text(encoding="utf-8")
    for facts in (analyze(source), probe(source)):
        assert facts.reasoning is False
        when = {m.name: m.facts for m in facts.in_modes}
        assert when["thinking=true"] == {"reasoning": True}
        report = facts.to_dict()
        assert {"when": {"thinking": True}, "facts": {"reasoning": True}} in report["in_modes"]
        assert {"name": "thinking", "values": [True, False]} in report["modes"]


def _reference_run(source: str, variants: list) -> ProbeRun:
    """The probe's run with every render made by transformers' ``apply_chat_template``."""
    def render(messages: list, options: dict, variables: dict) -> Outcome:
        result = hf_outcome(source, messages, **options, **variables)
        if result[0] == "text":
            return Outcome(result[1])
        return Outcome(None, f"{result[1]}: {result[2]}")

    shapes = probe_conversations("Zq7needle")
    assert "Zq7needle" not in source
    outcomes = {name: render(messages, options, {}) for name, (messages, options) in shapes.items()}
    in_modes = []
    for variables in variants:
        fresh = probe_conversations("Zq7needle")
        in_modes.append((variables, {name: render(*fresh[name], dict(variables)) for name in MODE_SHAPES if name in fresh}))
    return ProbeRun("Zq7needle", outcomes, tuple(in_modes), modes=("set",))


@pytest.mark.corpus
@pytest.mark.parametrize("path", MODED, ids=[str(p.relative_to(CORPUS / "templates")) for p in MODED])
def test_facts_in_every_mode_agree_with_transformers(path):
    source = path.read_text(encoding="utf-8")
    modes = modes_of(source)
    reference = capabilities_from_run(_reference_run(source, mode_variants(modes)[:8]))
    want = {m.name: m.facts for m in reference.in_modes}
    assert {m.name: m.facts for m in probe(source).in_modes} == want
    assert {m.name: m.facts for m in analyze(Source(source, path.name)).in_modes} == want


def test_the_corpus_has_templates_with_modes(corpus_dir):
    assert len(MODED) >= 100
    # and facts that change with them (DeepSeek-V4's reasoning, ...)
    assert sum(1 for p in MODED if probe(p.read_text(encoding="utf-8")).in_modes) >= 10


def test_mode_facts_in_json(corpus_dir):
    source = (corpus_dir / "templates/llama.cpp/deepseek-ai-DeepSeek-V4.jinja").read_text(encoding="utf-8")
    report = json.loads(json.dumps(analyze(source).to_dict()))
    assert report["reasoning"] is False and report["in_modes"]


THINKING = ("{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' and thinking %}"
            "<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}{% endfor %}")


def test_analyze_text_names_the_mode_a_fact_holds_in(tmp_path, capsys):
    from chatjinja.cli import main

    path = tmp_path / "thinking.jinja"
    path.write_text(THINKING, encoding="utf-8")
    assert main(["analyze", str(path), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "reasoning          ✗  (✓ when thinking=true)" in out
    assert "modes              thinking (true)" in out  # (only tested for truth: false renders as unset)


def test_diff_says_a_capability_lost_in_a_mode(tmp_path):
    from chatjinja import load_template
    from chatjinja.release import diff_templates

    (tmp_path / "old.jinja").write_text(THINKING, encoding="utf-8")
    (tmp_path / "new.jinja").write_text(THINKING.replace("{{ m.reasoning_content }}", ""), encoding="utf-8")
    old, new = load_template(tmp_path / "old.jinja"), load_template(tmp_path / "new.jinja")
    changes = [c.to_dict() for c in diff_templates(old, new).capability_changes]
    assert {"field": "reasoning", "change": "lost", "old": True, "new": False, "mode": "thinking=true",
            "message": "stops rendering reasoning when thinking=true"} in changes
