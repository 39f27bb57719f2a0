"""``chatjinja diff``: golden reports for a whitespace fix and for corpus templates of one family; exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chatjinja import load_template
from chatjinja.cli import main
from chatjinja.release import diff_templates
from chatjinja.release.diff import capability_changes
from chatjinja.release.report import diff_text
from tests.conftest import CORPUS, REPO, corpus_or_skip

HERE = Path(__file__).parent
GOLDENS = HERE / "goldens"
FIXED_V1 = HERE / "inputs" / "mistral-v1-fixed.jinja"
UPDATE = os.environ.get("UPDATE_GOLDENS") == "1"


def check_golden(name: str, actual: str) -> None:
    path = GOLDENS / name
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
    assert path.is_file(), f"golden {path} missing: run with UPDATE_GOLDENS=1 and review it"
    assert actual == path.read_text(encoding="utf-8")


def _stable(diff) -> str:
    """The golden form: capabilities, special tokens and renders (lint findings are compared live, below)."""
    report = diff.to_dict()
    report.pop("lint")
    report.pop("notes")
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else "corpus:" + str(path.relative_to(CORPUS / "templates"))


def _diff(old: Path, new: Path):
    """The diff with repo-relative names and without the static-only facts (those are the analyser's, tested below)."""
    from dataclasses import replace

    diff = diff_templates(load_template(old), load_template(new))
    probed = tuple(c for c in diff.capability_changes if c.change != "changed")
    return replace(diff, old_name=_relative(old), new_name=_relative(new), capability_changes=probed)


def test_static_only_facts_are_reported_as_changes() -> None:
    old = load_template(FIXED_V1)
    new = old.__class__(source=old.source.replace("eos_token", "end_token"), name="renamed")
    diff = diff_templates(old, new)
    try:
        from chatjinja.analysis import analyze  # noqa: F401
    except ImportError:
        assert any("static analysis not available" in n for n in diff.notes)
        return
    static = {(c.field, c.message) for c in diff.capability_changes if c.change == "changed"}
    assert ("special_tokens", "now reads end_token; no longer reads eos_token") in static or (
        "variables", "now reads end_token; no longer reads eos_token") in static, static


def test_fixed_v1_renders_the_basic_string() -> None:
    """The whitespace-fixed fixture is the right fix: it renders the manifest's Basic String exactly."""
    entry = next(e for e in json.loads((REPO / "templates" / "manifest.json").read_text())["templates"] if e["name"] == "mistral-v1")
    conversation = [
        {"role": "user", "content": "Hello, how are you?"},
        {"role": "assistant", "content": "Fine, and you?"},
        {"role": "user", "content": "I'm doing great!"},
        {"role": "assistant", "content": "Glad to hear!"},
    ]
    fixed = load_template(FIXED_V1).render(conversation, bos_token="<s>", eos_token="</s>")
    assert fixed == entry["basic_string"]
    assert load_template("mistral-v1").render(conversation) != entry["basic_string"]


def test_whitespace_fix_changes_renders_not_capabilities() -> None:
    diff = _diff(REPO / "templates" / "mistral-v1.jinja", FIXED_V1)
    assert diff.capability_changes == ()
    assert diff.render_differences and all(d.old.startswith("<s>\n") for d in diff.render_differences)
    assert diff.triggered({"lost"}) == [] and diff.triggered({"render"}) == ["render"]
    check_golden("mistral-v1-whitespace-fix.txt", diff_text(diff, include_lint=False))
    check_golden("mistral-v1-whitespace-fix.json", _stable(diff))


FAMILY_PAIRS = {
    # Qwen3 renders reasoning_content of the last assistant turn; Qwen2.5 has no reasoning at all
    "qwen3-to-qwen2.5": ("llama.cpp/Qwen-Qwen3-0.6B.jinja", "llama.cpp/Qwen-Qwen2.5-7B-Instruct.jinja"),
    # Qwen1.5's template has no tools branch: definitions, calls, parallel calls and arguments are gone
    "qwen2.5-to-qwen1.5": ("llama.cpp/Qwen-Qwen2.5-7B-Instruct.jinja", "huggingface.js/Qwen_Qwen1.5-72B-Chat.jinja"),
    # the community Llama-3 template raises on non-alternating turns and has no tool/ipython role
    "llama3.3-to-llama3-community": ("llama.cpp/meta-llama-Llama-3.3-70B-Instruct.jinja", "chujiezheng/llama-3-instruct.jinja"),
}

EXPECTED_LOSSES = {
    "qwen3-to-qwen2.5": {"stops rendering reasoning"},
    "qwen2.5-to-qwen1.5": {
        "stops rendering tool definitions", "stops rendering tool calls", "drops parallel tool calls",
        "stops rendering tool call arguments",
    },
    "llama3.3-to-llama3-community": {
        "drops the tool role", "drops the developer role", "stops rendering tool definitions",
        "stops rendering tool calls", "stops rendering tool call arguments",
        "now requires alternating user/assistant turns",
    },
}


@pytest.mark.corpus
@pytest.mark.parametrize("pair", sorted(FAMILY_PAIRS))
def test_family_pair_capability_changes(pair: str) -> None:
    corpus = corpus_or_skip()
    old, new = (corpus / "templates" / p for p in FAMILY_PAIRS[pair])
    diff = _diff(old, new)
    assert {c.message for c in diff.lost} == EXPECTED_LOSSES[pair]
    assert diff.triggered({"lost"}) == ["lost"]
    check_golden(f"{pair}.txt", diff_text(diff, include_lint=False))
    check_golden(f"{pair}.json", _stable(diff))
    # the reverse direction turns every loss into a gain
    back = diff_templates(load_template(new), load_template(old))
    assert {c.field for c in back.capability_changes if c.change == "gained"} >= {c.field for c in diff.lost}


def test_lint_findings_new_and_fixed() -> None:
    old, new = load_template(REPO / "templates" / "mistral-v1.jinja"), load_template(FIXED_V1)
    try:
        from chatjinja.lint import lint
    except ImportError:
        assert diff_templates(old, new).lint_changes is None
        return
    fixed = {d.code for d in lint(old.source)} - {d.code for d in lint(new.source)}
    forward = diff_templates(old, new)
    assert {c.code for c in forward.lint_changes if c.status == "fixed"} >= fixed
    assert not [c for c in forward.lint_changes if c.status == "new" and c.code in fixed]
    backward = diff_templates(new, old)
    assert {c.code for c in backward.lint_changes if c.status == "new"} >= fixed
    assert backward.triggered({"lint"}) == (["lint"] if fixed else [])


def test_capability_messages() -> None:
    from chatjinja.analysis.facts import Capabilities

    before = Capabilities(tool_call_arguments=("object", "string"), requires_alternation=False, reasoning=True)
    after = Capabilities(tool_call_arguments=("object",), requires_alternation=True, reasoning=False)
    messages = {(c.change, c.message) for c in capability_changes(before, after)}
    assert messages == {
        ("lost", "now requires object arguments (string arguments no longer render)"),
        ("lost", "now requires alternating user/assistant turns"),
        ("lost", "stops rendering reasoning"),
    }
    messages = {(c.change, c.message) for c in capability_changes(after, before)}
    assert messages == {
        ("gained", "now also accepts string arguments"),
        ("gained", "no longer requires alternating user/assistant turns"),
        ("gained", "now renders reasoning"),
    }


def test_cli_diff_exit_codes_and_formats(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    v1, fixed = str(REPO / "templates" / "mistral-v1.jinja"), str(FIXED_V1)
    assert main(["diff", v1, fixed]) == 0
    out = capsys.readouterr().out
    assert "capabilities: no change" in out and "renders: 6 of 12 probe conversations differ" in out
    assert main(["diff", v1, fixed, "--fail-on", "render"]) == 1
    assert "FAILED: render" in capsys.readouterr().out
    report = tmp_path / "diff.json"
    assert main(["diff", v1, fixed, "--format", "json", "-o", str(report), "--fail-on", "lost,render"]) == 1
    data = json.loads(report.read_text())
    assert data["failed"] == ["render"] and data["capabilities"] == [] and len(data["renders"]["differences"]) == 6
    assert main(["diff", v1, fixed, "--fail-on", "bogus"]) == 2
    assert "error: --fail-on takes" in capsys.readouterr().err
    assert main(["diff", v1, str(tmp_path / "missing.jinja")]) == 1
    assert capsys.readouterr().err.startswith("error: file not found: ")


def test_cli_diff_lost_capability_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    old = tmp_path / "old.jinja"
    old.write_text("{% for m in messages %}{{ m.role }}: {{ m.content }}{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}\n{% endfor %}")
    new = tmp_path / "new.jinja"
    new.write_text("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    assert main(["diff", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "- stops rendering reasoning" in out and "FAILED: lost" in out
    assert main(["diff", str(old), str(new), "--fail-on", "never"]) == 0
