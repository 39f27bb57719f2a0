"""``chatjinja diff``: golden reports for a whitespace fix and for corpus templates of one family; exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chatjinja import load_template
from chatjinja.cli import main
from chatjinja.release import diff_templates
from chatjinja.release.diff import capability_changes
from chatjinja.release.report import diff_text
from tests import goldens
from tests.conftest import CORPUS, REPO, corpus_or_skip

HERE = Path(__file__).parent
GOLDENS = HERE / "goldens"
FIXED_V1 = HERE / "inputs" / "mistral-v1-fixed.jinja"


def check_golden(name: str, actual: str) -> None:
    goldens.check_golden(GOLDENS / name, actual)


def _stable(diff) -> str:
    """The golden form: capabilities, special tokens and renders (lint findings are compared live, below)."""
    report = diff.to_dict()
    report.pop("lint")
    report.pop("notes")
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else "corpus:" + str(path.relative_to(CORPUS / "templates"))


def _diff(old: Path, new: Path):
    """The diff with repo-relative (or corpus-relative) names, so goldens do not depend on the checkout's path."""
    from dataclasses import replace

    diff = diff_templates(load_template(old), load_template(new))
    return replace(diff, old_name=_relative(old), new_name=_relative(new))


def test_static_only_facts_are_reported_as_changes() -> None:
    old = load_template(FIXED_V1)
    new = old.__class__(source=old.source.replace("eos_token", "end_token"), name="renamed")
    diff = diff_templates(old, new)
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
        "now requires alternating user/assistant turns", "no longer handles the ipython role",
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
    assert "capabilities: no change" in out and "renders: 12 of 31 conversations of the space differ" in out
    assert main(["diff", v1, fixed, "--fail-on", "render"]) == 1
    assert "FAILED: render" in capsys.readouterr().out
    report = tmp_path / "diff.json"
    assert main(["diff", v1, fixed, "--format", "json", "-o", str(report), "--fail-on", "lost,render"]) == 1
    data = json.loads(report.read_text())
    assert data["failed"] == ["render"] and data["capabilities"] == [] and len(data["renders"]["differences"]) == 12
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


def _training_pairs() -> list[str]:
    """TRL's ``X_training.jinja`` (the Hub template plus ``{% generation %}`` tags) beside its original ``X.jinja``."""
    import json as _json

    from tests.conftest import CORPUS

    manifest = CORPUS / "manifest.json"
    if not manifest.is_file():
        return []
    files = {entry["file"] for entry in _json.loads(manifest.read_text(encoding="utf-8"))}
    return sorted(
        f.removeprefix("templates/trl/").removesuffix("_training.jinja")
        for f in files
        if f.startswith("templates/trl/") and f.endswith("_training.jinja") and f.replace("_training.jinja", ".jinja") in files
    )


TRAINING_PAIRS = _training_pairs()


def test_the_corpus_has_training_pairs() -> None:
    corpus_or_skip()
    assert len(TRAINING_PAIRS) >= 5, TRAINING_PAIRS


@pytest.mark.corpus
@pytest.mark.parametrize("name", TRAINING_PAIRS)
def test_removing_generation_tags_is_a_lost_capability(name: str) -> None:
    """The training template renders like the original (the tags print nothing), so only the analyser sees it."""
    trl = corpus_or_skip() / "templates" / "trl"
    diff = _diff(trl / f"{name}_training.jinja", trl / f"{name}.jinja")
    lost = [c for c in diff.lost if c.field == "generation_tags"]
    assert [(c.old, c.new) for c in lost] == [(True, False)]
    assert lost[0].message.startswith("stops marking assistant turns with {% generation %}")
    assert diff.triggered({"lost"}) == ["lost"] and diff.triggered({"changed"}) == ["changed"]
    back = diff_templates(load_template(trl / f"{name}.jinja"), load_template(trl / f"{name}_training.jinja"))
    assert [(c.change, c.old, c.new) for c in back.capability_changes if c.field == "generation_tags"] == [("gained", False, True)]


@pytest.mark.corpus
def test_training_pair_golden_and_cli(capsys: pytest.CaptureFixture) -> None:
    trl = corpus_or_skip() / "templates" / "trl"
    diff = _diff(trl / "qwen3_vl_training.jinja", trl / "qwen3_vl.jinja")
    check_golden("qwen3-vl-training-to-qwen3-vl.txt", diff_text(diff, include_lint=False))
    check_golden("qwen3-vl-training-to-qwen3-vl.json", _stable(diff))
    old, new = str(trl / "qwen3_vl_training.jinja"), str(trl / "qwen3_vl.jinja")
    assert main(["diff", old, new, "--fail-on", "lost,changed,render,lint"]) == 1
    out = capsys.readouterr().out
    assert "- stops marking assistant turns with {% generation %}" in out and "FAILED: lost, changed" in out
    assert "capabilities: no change" not in out


def test_every_analyser_fact_is_compared() -> None:
    """Each field of Capabilities is probed, compared with its own words, or excluded with a reason."""
    from dataclasses import fields

    from chatjinja.analysis.facts import PROBED_FIELDS, Capabilities
    from chatjinja.release.diff import _NOT_COMPARED, _STATIC_FACTS, static_fact_fields

    names = {f.name for f in fields(Capabilities)}
    assert set(static_fact_fields()) == names - set(PROBED_FIELDS) - set(_NOT_COMPARED)
    unworded = set(static_fact_fields()) - set(_STATIC_FACTS)
    assert not unworded, f"give these analyser facts their words in release/diff.py _STATIC_FACTS: {sorted(unworded)}"
    assert set(_NOT_COMPARED) <= names and set(_STATIC_FACTS) <= names


def test_static_fact_changes_map_to_lost_gained_changed() -> None:
    from chatjinja.analysis.facts import Capabilities, RaiseSite, VariableUse
    from chatjinja.release.diff import static_fact_changes
    from chatjinja.source import Span

    span = Span(1, 1, 1, 2, 0, 1)
    before = Capabilities(
        generation_tags=True, uses_strftime_now=False, control_tokens=("<|im_end|>",), other_roles=("ipython",),
        special_tokens=("bos_token",), raises=(RaiseSite(span, "Roles must alternate", "'Roles must alternate'", None, "alternation"),),
        variable_uses=(VariableUse("tools", span, True),), variables=("tools",),
    )
    after = Capabilities(
        generation_tags=False, uses_strftime_now=True, control_tokens=("<|im_end|>", "<|eot|>"), other_roles=(),
        special_tokens=("bos_token", "eos_token"), raises=(), variable_uses=(VariableUse("tools", span, False),),
        variables=("tools",),
    )
    found = {(c.field, c.change, c.message) for c in static_fact_changes(before, after)}
    assert found == {
        ("generation_tags", "lost", "stops marking assistant turns with {% generation %} (return_assistant_tokens_mask no longer works)"),
        ("uses_strftime_now", "changed", "now writes the current date (strftime_now): the prompt changes from day to day"),
        ("control_tokens", "changed", "now writes control tokens <|eot|>"),
        ("other_roles", "lost", "no longer handles the ipython role"),
        ("special_tokens", "changed", "now reads eos_token"),
        ("raises", "changed", "no longer raises 'Roles must alternate'"),
        ("variable_uses", "changed", "tools becomes required (no longer read under is defined / default)"),
    }
    back = {(c.field, c.change) for c in static_fact_changes(after, before)}
    assert ("generation_tags", "gained") in back and ("other_roles", "gained") in back
    # moving a raise site (same message, same roles) is no change
    moved = Capabilities(raises=(RaiseSite(Span(9, 9, 9, 10, 80, 81), "Roles must alternate", "'Roles must alternate'", "x", "alternation"),))
    assert static_fact_changes(Capabilities(raises=before.raises), moved) == []


def test_a_new_analyser_fact_is_reported_before_it_has_words() -> None:
    from dataclasses import dataclass

    from chatjinja.analysis.facts import Capabilities
    from chatjinja.release.diff import static_fact_changes

    @dataclass(frozen=True)
    class Tomorrow(Capabilities):
        thinking_budget: tuple[str, ...] = ()

    changes = static_fact_changes(Tomorrow(), Tomorrow(thinking_budget=("max_thinking_tokens",)))
    assert [(c.field, c.change) for c in changes] == [("thinking_budget", "changed")]


@pytest.mark.parametrize("side", ["old", "new"])
def test_a_template_that_cannot_be_read(tmp_path: Path, capsys: pytest.CaptureFixture, side: str) -> None:
    good = tmp_path / "good.jinja"
    good.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for m in messages %}\n{{ m.content }\n{% endfor %}")
    args = [str(broken), str(good)] if side == "old" else [str(good), str(broken)]
    report = tmp_path / "report.json"
    assert main(["diff", *args, "--format", "json", "-o", str(report)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and not report.exists()
    assert captured.err == f"error: {side} template cannot be read: {broken}:2:14: unexpected '}}'\n"
    with pytest.raises(Exception, match=f"^{side} template cannot be read: "):
        diff_templates(*(load_template(a) for a in args))


def test_a_template_only_jinja2_rejects_is_reported_with_its_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Lark parser accepts what jinja2 accepts (tests/syntax); should they ever part, jinja2's line is given."""
    import jinja2

    from chatjinja.errors import TemplateSyntaxError
    from chatjinja.runtime import environment

    class Refusing:
        def parse(self, source: str) -> None:
            raise jinja2.TemplateSyntaxError("jinja2 says no", lineno=3)

    monkeypatch.setattr(environment, "default_environment", lambda: Refusing())
    good = tmp_path / "good.jinja"
    good.write_text("{{ messages[0]['content'] }}")
    with pytest.raises(TemplateSyntaxError, match=rf"^old template cannot be read: {re.escape(str(good))}:3: jinja2 says no$"):
        diff_templates(load_template(good), load_template(good))
