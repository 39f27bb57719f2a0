"""``chatjinja conform``: the bundled templates against mistral-common itself (run at test time, never recorded)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mistral_common", reason="the [mistral] extra (mistral-common) is needed for conformance tests")

from chatjinja import ChatTemplate  # noqa: E402
from chatjinja.conform import (  # noqa: E402
    ConversationCase,
    builtin_suite,
    conform,
    format_text,
    load_reference,
)
from chatjinja.conform.compare import first_difference, visible  # noqa: E402
from chatjinja.conform.explain import WHITESPACE_CAUSE  # noqa: E402
from chatjinja import load_template  # noqa: E402
from chatjinja.loading import bundled_manifest  # noqa: E402

GOLDENS = Path(__file__).parent / "goldens"
UPDATE = os.environ.get("UPDATE_GOLDENS") == "1"
REPO = Path(__file__).resolve().parents[2]

DOCUMENT_TEMPLATES = [("mistral-v1", "v1"), ("mistral-v2-v3", "v2"), ("mistral-v2-v3", "v3"), ("mistral-v3-tekken", "v3-tekken")]
PLAIN_FEATURES = {"plain", "multi-turn", "whitespace", "same-role", "ends-assistant"}


def lint_fixed(template: ChatTemplate, workdir: Path) -> ChatTemplate:
    """The template as ``chatjinja lint --fix --unsafe-fixes`` rewrites its file (the whitespace fix changes the
    prompt, so it is unsafe)."""
    from chatjinja.cli import main

    path = workdir / Path(template.path).name
    path.write_text(template.source, encoding="utf-8")
    assert main(["lint", "--fix", "--unsafe-fixes", str(path)]) in (0, 1)
    source = path.read_text(encoding="utf-8")
    assert source != template.source, "lint --fix --unsafe-fixes changed nothing"
    return ChatTemplate(source, f"{template.name} (lint --fix --unsafe-fixes)", special_tokens=dict(template.special_tokens))


def derived_fix(template: ChatTemplate, workdir: Path | None = None) -> ChatTemplate:
    """The whitespace fix derived here: a ``-`` marker on every tag, so no layout whitespace reaches the output."""
    source = re.sub(r"\{([{%])(?!-)", r"{\1-", template.source)
    return ChatTemplate(source, f"{template.name} (fixed)", special_tokens=dict(template.special_tokens))


def documented_case() -> list[ConversationCase]:
    return [case for case in builtin_suite(images=False) if case.name == "documented-conversation"]


def check_golden(name: str, text: str) -> None:
    path = GOLDENS / name
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"golden {path} missing: run with UPDATE_GOLDENS=1 and review it")
        path.write_text(text, encoding="utf-8")
        return
    assert text == path.read_text(encoding="utf-8"), f"{name} changed: rerun with UPDATE_GOLDENS=1 and review the diff"


@pytest.mark.parametrize("name,version", DOCUMENT_TEMPLATES)
def test_verbatim_document_template_differs_only_by_whitespace(name: str, version: str) -> None:
    report = conform(name, version, documented_case())
    case = report.case("documented-conversation")
    assert case.status == "mismatch"
    assert case.causes == [WHITESPACE_CAUSE]
    assert case.difference is not None and "↵" in case.difference.template_excerpt
    assert re.sub(r"\s", "", case.template_text) == re.sub(r"\s", "", case.reference_text)


@pytest.mark.parametrize("name,version", DOCUMENT_TEMPLATES)
@pytest.mark.parametrize("fix", [derived_fix, lint_fixed], ids=["derived-fix", "lint-fix"])
def test_fixed_document_template_matches_token_for_token(name: str, version: str, fix, tmp_path: Path) -> None:
    template = fix(load_template(name), tmp_path)
    report = conform(template, version, documented_case())
    case = report.case("documented-conversation")
    assert (case.status, case.level) == ("match", "tokens"), format_text(report, verbose=True)
    # Independently of the template: the reference text is the document's Basic String.
    entry = next(e for e in bundled_manifest()["templates"] if e["name"] == name)
    assert case.reference_text == entry["basic_string"]
    reference = load_reference(version)
    encoded = reference.encode(documented_case()[0].copy_messages(), None)
    assert reference.tokenize(case.template_text) == encoded.tokens


@pytest.mark.parametrize("name,version", DOCUMENT_TEMPLATES)
def test_fixed_document_template_plain_cases_match_or_have_a_cause(name: str, version: str, tmp_path: Path) -> None:
    report = conform(lint_fixed(load_template(name), tmp_path), version)
    for case in report.cases:
        if not case.agrees:
            assert case.causes and not case.causes[0].startswith("unexplained"), case.name
    plain = [c for c, s in zip(report.cases, builtin_suite(images=False)) if set(s.features) <= PLAIN_FEATURES]
    assert plain and all(c.status == "match" or c.causes for c in plain)
    assert report.case("single-user").status == "match"


def test_known_mistral_common_differences_are_named() -> None:
    v3 = conform(derived_fix(load_template("mistral-v2-v3")), "v3")
    assert "strips trailing whitespace" in v3.case("assistant-trailing-space").causes[0]
    assert "merges consecutive messages" in v3.case("consecutive-user").causes[0]
    assert "last user turn" in v3.case("system-multi-turn").causes[0]
    v1 = conform(derived_fix(load_template("mistral-v1")), "v1")
    assert "first user turn" in v1.case("system-multi-turn").causes[0]
    assert v1.case("assistant-trailing-space").status == "match"  # V1 keeps trailing spaces, as the template does


@pytest.mark.parametrize("name,version", [("mistral-v1", "v1"), ("mistral-v2-v3", "v3"), ("mistral-v3-tekken", "v3-tekken")])
def test_verbatim_document_template_report_golden(name: str, version: str) -> None:
    check_golden(f"{name}-{version}.txt", format_text(conform(name, version)))


def test_devstral_against_generated_v13_golden() -> None:
    report = conform("devstral-small-2-24b-instruct-2512", "mistral-common:v13")
    assert report.form == "template"
    differing = [case for case in report.cases if not case.agrees]
    assert differing and all(case.causes for case in differing)
    check_golden("devstral-small-2-24b-instruct-2512-v13.txt", format_text(report))


def test_first_difference_shows_whitespace() -> None:
    difference = first_difference("<s>\n  [INST]", "<s>[INST]")
    assert difference is not None and difference.offset == 3
    assert "⟦↵⟧" in difference.template_excerpt and "⟦[⟧" in difference.reference_excerpt
    assert visible(" \n\t") == "␠↵⇥"
    assert first_difference("same", "same") is None


def test_sentencepiece_segment_without_prefix_space_is_compared_as_text() -> None:
    reference = load_reference("v3")
    assert reference.tokenize("<s>[INST] Hi[/INST]") is not None
    assert reference.tokenize("<s>[INST]Hi[/INST]") is None
    assert load_reference("v3-tekken").tokenize("<s>[INST]Hi[/INST]") is not None


def test_reference_rejection_is_reported() -> None:
    permissive = ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}", "permissive")
    report = conform(permissive, "v3", [{"name": "starts-with-assistant", "messages": [{"role": "assistant", "content": "hi"}]}])
    case = report.case("starts-with-assistant")
    assert case.status == "reference-rejected" and case.reference_error
    assert not report.ok


def test_user_conversations_file_through_the_cli(tmp_path: Path) -> None:
    conversations = tmp_path / "conversations.json"
    conversations.write_text(json.dumps([{"name": "hello", "messages": [{"role": "user", "content": "Hello"}]}]))
    result = run_cli("conform", "devstral-small-2-24b-instruct-2512", "--against", "mistral-common:v13",
                     "--conversations", str(conversations), "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] and [c["status"] for c in data["cases"]] == ["match"]
    assert [c.status for c in conform("devstral-small-2-24b-instruct-2512", "v13", conversations).cases] == ["match"]


def test_cli_exit_codes() -> None:
    result = run_cli("conform", "mistral-v3-tekken", "--against", "mistral-common:v3-tekken")
    assert result.returncode == 1 and "whitespace only" in result.stdout
    result = run_cli("conform", "mistral-v3-tekken", "--against", "mistral-common:v99")
    assert result.returncode == 2 and result.stderr.startswith("error: unknown mistral-common tokenizer version")
    assert "Traceback" not in result.stderr


def test_cli_without_mistral_common_exits_2_with_install_hint() -> None:
    code = (
        "import sys; sys.modules['mistral_common'] = None\n"
        "from chatjinja.cli import main\n"
        "sys.exit(main(['conform', 'mistral-v1', '--against', 'mistral-common:v1']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'chatjinja[mistral]'" in lines[0]
    assert result.stdout == ""


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chatjinja", *args], capture_output=True, text=True, cwd=REPO, timeout=300)


def test_same_text_different_tokens_is_a_token_level_mismatch() -> None:
    from chatjinja.conform.reference import Reference
    from chatjinja.conform.runner import compare_case

    class SplitDifferently(Reference):
        """v3-tekken whose tokenization of the template's text repeats one token (same text, other tokens)."""

        def tokenize(self, text: str, images: bool = False) -> list[int] | None:
            tokens = super().tokenize(text, images)
            return tokens[:3] + [tokens[3], tokens[3]] + tokens[4:]

    reference = SplitDifferently(version="v3-tekken", form="tokenizer")
    case = documented_case()[0]
    result = compare_case(derived_fix(load_template("mistral-v3-tekken")), reference, case)
    assert result.status == "mismatch" and result.level == "tokens"
    assert result.template_text == result.reference_text
    assert result.difference.offset == -1 and result.difference.token_index == 4
    assert "same text, first differing token 4" in result.difference.describe()


def test_generated_template_form_for_a_sentencepiece_version() -> None:
    report = conform(derived_fix(load_template("mistral-v2-v3")), "v3", form="template")
    assert report.form == "template"
    assert report.case("documented-conversation").status == "match"
    assert report.case("system-prompt").cause_codes == ["system-in-last-user"]


def test_cli_bundled_json_to_output_file(tmp_path: Path) -> None:
    output = tmp_path / "conformance.json"
    result = run_cli("conform", "--bundled", "--format", "json", "--output", str(output))
    assert result.returncode == 1 and result.stdout == "", result.stderr  # the verbatim templates differ
    reports = json.loads(output.read_text(encoding="utf-8"))
    assert [(r["template"], r["against"]) for r in reports] == [
        ("mistral-v1", "mistral-common:v1"),
        ("mistral-v2-v3", "mistral-common:v3"),
        ("mistral-v3-tekken", "mistral-common:v3-tekken"),
        ("devstral-small-2-24b-instruct-2512", "mistral-common:v13"),
    ]
    assert all(case["status"] and "cause_codes" in case for r in reports for case in r["cases"])
