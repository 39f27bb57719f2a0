"""``chatjinja check MODEL_FOLDER``: every template is checked, conflicts and undefined special tokens are found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatjinja.cli import main
from chatjinja.release import check_model
from tests.loading.test_folders import LAYOUTS, tpl, write_folder

GOOD = (
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}[INST] {{ m.content }} [/INST]"
    "{% elif m.role == 'assistant' %}{{ m.content }}{{ eos_token }}{% endif %}{% endfor %}"
)


def codes(check) -> list[str]:
    return sorted(f.code for f in check.findings if f.code.startswith("MF"))


def test_clean_folder(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", {"chat_template.jinja": GOOD, "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>"}})
    check = check_model(folder)
    assert codes(check) == []
    assert [(t.name, t.used) for t in check.templates] == [("default", True)]
    assert check.templates[0].tokens_read == ("bos_token", "eos_token")
    assert "roles assistant/user" in check.templates[0].capabilities


def test_conflicting_jinja_and_config(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", {
        "chat_template.jinja": GOOD,
        "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>", "chat_template": GOOD.replace("[INST] ", "[INST]")},
    })
    check = check_model(folder)
    assert codes(check) == ["MF001"]
    finding = next(f for f in check.findings if f.code == "MF001")
    assert finding.severity == "warning"
    assert finding.path == f"{folder / 'tokenizer_config.json'}#chat_template"
    assert "differs from" in finding.message and "chat_template.jinja" in finding.message
    assert [(t.where.rsplit('/', 1)[-1], t.used) for t in check.templates] == [
        ("chat_template.jinja", True), ("tokenizer_config.json#chat_template", False)]


def test_identical_copy_is_a_note(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", {
        "chat_template.jinja": GOOD, "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>", "chat_template": GOOD}})
    check = check_model(folder)
    assert codes(check) == ["MF002"] and check.worst() in ("note", "warning", "error")
    assert next(f for f in check.findings if f.code == "MF002").severity == "note"


def test_processor_and_tokenizer_disagree(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", {
        "chat_template.jinja": GOOD, "chat_template.json": {"chat_template": GOOD + "!"},
        "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>"}})
    assert codes(check_model(folder)) == ["MF003"]


def test_undefined_special_token(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", {"chat_template.jinja": GOOD, "tokenizer_config.json": {"bos_token": "<s>"}})
    check = check_model(folder)
    assert codes(check) == ["MF004"]
    assert "eos_token" in next(f for f in check.findings if f.code == "MF004").message


def test_special_tokens_map_disagrees(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", {
        "chat_template.jinja": GOOD, "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "<old>"},
        "special_tokens_map.json": {"eos_token": {"content": "</s>"}}})
    check = check_model(folder)
    assert codes(check) == ["MF005"]
    assert check.special_tokens["eos_token"] == "</s>"


def test_no_default_template(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", LAYOUTS["additional-only-drops-config"])
    check = check_model(folder)
    assert "MF006" in codes(check) and "MF001" in codes(check)  # and the dropped config template is reported
    assert check.worst() == "error"


def test_every_named_template_is_checked(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "m", LAYOUTS["jinja-plus-additional"])
    check = check_model(folder)
    assert sorted(t.name for t in check.templates) == ["default", "rag", "tool_use"]


def test_gguf(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf", reason="GGUF checks need the optional gguf package")
    path = tmp_path / "m.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_token_list(["<unk>", "<s>", "</s>"])
    writer.add_bos_token_id(1)
    writer.add_chat_template(GOOD)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    check = check_model(path)
    assert codes(check) == ["MF004"]  # eos_token is read but the GGUF defines no eos id


def test_cli_check(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    clean = write_folder(tmp_path / "clean", {"chat_template.jinja": GOOD, "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>"}})
    code = main(["check", str(clean), "--fail-level", "error"])
    out = capsys.readouterr().out
    assert code == 0 and "checked 1 template(s)" in out
    broken = write_folder(tmp_path / "broken", {"chat_template.jinja": GOOD, "tokenizer_config.json": {"bos_token": "<s>"}})
    assert main(["check", str(broken)]) == 1
    assert "MF004" in capsys.readouterr().out
    report = tmp_path / "check.json"
    assert main(["check", str(broken), "--format", "json", "-o", str(report), "--fail-level", "never"]) == 0
    data = json.loads(report.read_text())
    assert any(f["code"] == "MF004" for f in data["findings"]) and data["rule"].startswith("tokenizer rule")
    bad = write_folder(tmp_path / "bad", {"tokenizer_config.json": '{"chat_template": '})
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: invalid JSON in ") and "tokenizer_config.json:1:" in err and err.count("\n") == 1
    assert main(["check", str(tmp_path / "nothing")]) == 1
    assert "not a model folder" in capsys.readouterr().err


def test_check_sarif_is_valid(tmp_path: Path) -> None:
    import jsonschema

    from tests.conftest import SHARED

    schema_path = SHARED / "schemas" / "sarif-schema-2.1.0.json"
    folder = write_folder(tmp_path / "m", {
        "chat_template.jinja": GOOD,
        "tokenizer_config.json": {"bos_token": "<s>", "chat_template": GOOD.replace("[INST] ", "[INST]")},
    })
    out = tmp_path / "check.sarif"
    assert main(["check", str(folder), "--format", "sarif", "-o", str(out)]) == 1
    document = json.loads(out.read_text())
    if schema_path.is_file():
        jsonschema.validate(document, json.loads(schema_path.read_text()))
    results = document["runs"][0]["results"]
    by_rule = {r["ruleId"]: r for r in results}
    assert {"MF001", "MF004"} <= set(by_rule)
    assert by_rule["MF001"]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("tokenizer_config.json")
    rule_ids = [r["id"] for r in document["runs"][0]["tool"]["driver"]["rules"]]
    assert all(result["ruleIndex"] == rule_ids.index(result["ruleId"]) for result in results)


def test_check_github_format(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = write_folder(tmp_path / "m", {
        "chat_template.jinja": GOOD,
        "tokenizer_config.json": {"bos_token": "<s>", "chat_template": GOOD.replace("[INST] ", "[INST]")},
    })
    assert main(["check", str(folder), "--format", "github"]) == 1
    lines = capsys.readouterr().out.splitlines()
    by_code = {line.split("::")[2].split()[0]: line for line in lines}
    assert by_code["MF004"].startswith(f"::warning file={folder / 'chat_template.jinja'},line=1,col=1,")
    assert "title=MF004 undefined-special-token::MF004 the template reads eos_token" in by_code["MF004"]
    assert by_code["MF001"].startswith(f"::warning file={folder / 'tokenizer_config.json'},")  # file#key -> file
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
    # the same lines lint writes for the template's own findings
    assert main(["lint", str(folder / "chat_template.jinja"), "--format", "github", "--no-config"]) in (0, 1)
    lint_lines = [line.split(",endLine=")[0] for line in capsys.readouterr().out.splitlines()]
    ours = [line.split(",endLine=")[0] for line in lines
            if not line.split("::")[2].startswith("MF") and "chat_template.jinja," in line]
    assert sorted(ours) == sorted(lint_lines)


def test_check_fail_level_and_output_mean_what_they_mean_in_lint(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from chatjinja.commands.check import LEVELS
    from chatjinja.commands.lint import FAIL_LEVELS

    assert set(LEVELS) == set(FAIL_LEVELS) | {"never"}
    # a note (MF002) and nothing worse: only --fail-level note fails
    folder = write_folder(tmp_path / "m", {
        "chat_template.jinja": GOOD, "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>", "chat_template": GOOD}})
    worst = check_model(folder).worst()
    expected = {"note": 1, "warning": int(worst in ("warning", "error")), "error": int(worst == "error"), "never": 0}
    for level, code in expected.items():
        assert main(["check", str(folder), "--fail-level", level]) == code, level
    capsys.readouterr()
    with pytest.raises(SystemExit) as usage:
        main(["check", str(folder), "--fail-level", "loud"])
    assert usage.value.code == 2 and "invalid choice" in capsys.readouterr().err
    out = tmp_path / "report.txt"
    assert main(["check", str(folder), "--format", "github", "--output", str(out), "--fail-level", "never"]) == 0
    assert capsys.readouterr().out == "" and "MF002" in out.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []  # no temporary file left


def test_shadowed_template_says_what_the_loaded_one_does_differently(tmp_path: Path) -> None:
    """The TRL case: the config keeps the training template ({% generation %}), chat_template.jinja the plain one."""
    training = GOOD.replace("{{ m.content }}{{ eos_token }}", "{% generation %}{{ m.content }}{{ eos_token }}{% endgeneration %}")
    folder = write_folder(tmp_path / "m", {
        "chat_template.jinja": GOOD, "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>", "chat_template": training}})
    check = check_model(folder)
    assert codes(check) == ["MF001"]
    message = next(f.message for f in check.findings if f.code == "MF001")
    assert message.endswith("; the loaded one stops marking assistant turns with {% generation %} "
                            "(return_assistant_tokens_mask no longer works)"), message
    summaries = {t.used: t.capabilities for t in check.templates}
    assert "{% generation %} tags" in summaries[False] and "{% generation %} tags" not in summaries[True]


def test_check_says_in_which_mode_a_fact_holds_in_every_format(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    thinking = ("{% for m in messages %}[{{ m.role }}]{% if m.role == 'assistant' and enable_thinking %}"
                "<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}{% endfor %}"
                "{% if add_generation_prompt %}[assistant]{% endif %}")
    folder = write_folder(tmp_path / "m", {"chat_template.jinja": thinking, "tokenizer_config.json": {"eos_token": "</s>"}})
    main(["check", str(folder), "--format", "json"])
    summary = json.loads(capsys.readouterr().out)["templates"][0]["capabilities"]
    assert "reasoning when enable_thinking=true" in summary and ", reasoning," not in f", {summary},"
    out = tmp_path / "check.sarif"
    main(["check", str(folder), "--format", "sarif", "-o", str(out)])
    templates = json.loads(out.read_text())["runs"][0]["properties"]["templates"]
    assert templates[0]["capabilities"] == summary
