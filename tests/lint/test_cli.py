"""``chatjinja lint`` and ``chatjinja rules``: exit codes, formats, --output, --fix, --diff, configs, tokenizer_config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatjinja.cli import main

LEAKY = "{% for m in messages %}\n    {{ m.role }}\n{% endfor %}"
CLEAN = "{%- for m in messages %}{{- '[INST]' }}{%- endfor %}"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above tmp_path has [tool.chatjinja]
    return tmp_path


def test_exit_codes(capsys, workdir: Path) -> None:
    (workdir / "leaky.jinja").write_text(LEAKY)
    (workdir / "clean.jinja").write_text(CLEAN)
    code, out, _ = run(capsys, "lint", "clean.jinja")
    assert code == 0 and "All checks passed" in out
    code, out, _ = run(capsys, "lint", "leaky.jinja")
    assert code == 1
    assert "leaky.jinja:2:1: WS001" in out and out.rstrip().endswith("2 fixable with --fix --unsafe-fixes (they change the prompt).")
    assert run(capsys, "lint", "leaky.jinja", "--fail-level", "error")[0] == 0
    assert run(capsys, "lint", "leaky.jinja", "--ignore", "WS001,GP001")[0] == 0
    assert run(capsys, "lint", "leaky.jinja", "--select", "SC")[0] == 0


def test_usage_errors_exit_2(capsys, workdir: Path) -> None:
    (workdir / "t.jinja").write_text(CLEAN)
    code, _, err = run(capsys, "lint", "t.jinja", "--select", "XX999")
    assert code == 2 and err.startswith("error: unknown rule code") and "Traceback" not in err
    code, _, err = run(capsys, "lint", "mistral-v1", "--fix")
    assert code == 2
    code, _, _ = run(capsys, "rules", "NOPE1")
    assert code == 2


def test_unreadable_input_exits_1_as_in_every_command(capsys, workdir: Path) -> None:
    code, _, err = run(capsys, "lint", "no-such-template")
    assert code == 1 and err.startswith("error: no template file") and err.count("\n") == 1
    (workdir / "bad.jinja").write_bytes(b"\xff\xfe{{ x }}")
    code, _, err = run(capsys, "lint", "bad.jinja")
    assert code == 1 and "not UTF-8" in err
    (workdir / "bad.json").write_text('{"chat_template": ')
    code, _, err = run(capsys, "lint", "bad.json")
    assert code == 1 and err.startswith("error: malformed JSON") and "bad.json:1:" in err


def test_an_input_over_the_cap_is_refused_unread(capsys, workdir: Path) -> None:
    (workdir / "big.jinja").write_text("{{ x }}" * 100)
    code, _, err = run(capsys, "lint", "big.jinja", "--max-input-bytes", "100")
    assert (code, err) == (1, "error: big.jinja is larger than the input limit of 100 bytes (raise it with --max-input-bytes)\n")
    assert run(capsys, "lint", "big.jinja", "--max-input-bytes", "700")[0] == 0


def test_fail_level_never(capsys, workdir: Path) -> None:
    (workdir / "leaky.jinja").write_text(LEAKY)
    code, out, _ = run(capsys, "lint", "leaky.jinja", "--fail-level", "never")
    assert code == 0 and "WS001" in out  # the findings are still reported


def test_fix_follows_a_symlink_and_keeps_the_mode(capsys, workdir: Path) -> None:
    real = workdir / "real"
    real.mkdir()
    target = real / "leaky.jinja"
    target.write_text(LEAKY)
    target.chmod(0o640)
    link = workdir / "link.jinja"
    link.symlink_to(target)
    code, _, _ = run(capsys, "lint", "link.jinja", "--fix", "--unsafe-fixes", "--select", "WS001")
    assert code == 0
    assert link.is_symlink() and link.resolve() == target  # the link stays a link ...
    assert target.read_text() == "{% for m in messages %}\n    {{- m.role }}\n{%- endfor %}"  # ... its target is fixed
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in real.iterdir()) == ["leaky.jinja"]  # no temporary file left


def test_syntax_error_is_a_finding(capsys, workdir: Path) -> None:
    (workdir / "broken.jinja").write_text("{{ 'a' ")
    code, out, _ = run(capsys, "lint", "broken.jinja", "--select", "SC")
    assert code == 1 and "LN002" in out


def test_output_file_and_formats(capsys, workdir: Path) -> None:
    (workdir / "leaky.jinja").write_text(LEAKY)
    code, out, _ = run(capsys, "lint", "leaky.jinja", "--format", "json", "--output", "report.json")
    assert code == 1 and out == ""
    document = json.loads((workdir / "report.json").read_text())
    assert {d["code"] for d in document["diagnostics"]} == {"WS001", "GP001"}
    assert not list(workdir.glob(".report.json.*"))  # no temporary file left behind
    code, out, _ = run(capsys, "lint", "leaky.jinja", "--format", "sarif")
    assert json.loads(out)["runs"][0]["results"]
    code, out, _ = run(capsys, "lint", "leaky.jinja", "--format", "github")
    assert out.startswith("::warning file=leaky.jinja,line=")


def test_fix_in_place_and_diff(capsys, workdir: Path) -> None:
    path = workdir / "leaky.jinja"
    path.write_text(LEAKY)
    code, out, _ = run(capsys, "lint", "leaky.jinja", "--diff")
    assert code == 1 and out.startswith("# unsafe fixes, they change the rendered prompt (--fix --unsafe-fixes): leaky.jinja\n"
                                        "--- a/leaky.jinja") and "+    {{- m.role }}" in out
    assert path.read_text() == LEAKY  # --diff changes nothing
    code, out, _ = run(capsys, "lint", "leaky.jinja", "--fix", "--select", "WS001")
    assert code == 1 and path.read_text() == LEAKY  # WS001's fix is unsafe: --fix alone leaves it
    code, out, _ = run(capsys, "lint", "leaky.jinja", "--fix", "--unsafe-fixes", "--select", "WS001")
    assert code == 0
    assert path.read_text() == "{% for m in messages %}\n    {{- m.role }}\n{%- endfor %}"
    assert run(capsys, "lint", "leaky.jinja", "--diff", "--select", "WS001") == (0, "", "")


def test_diff_marks_safe_and_unsafe_fixes(capsys, workdir: Path) -> None:
    path = workdir / "both.jinja"
    path.write_text("{#- chatjinja: ignore[SC001] #}\n" + LEAKY)
    code, out, _ = run(capsys, "lint", "both.jinja", "--diff")
    assert code == 1
    safe, unsafe = out.split("# unsafe fixes")
    assert safe.startswith("# safe fixes (--fix): both.jinja\n") and "+{#- #}" in safe and "{{-" not in safe
    assert "+    {{- m.role }}" in unsafe
    assert run(capsys, "lint", "both.jinja", "--unsafe-fixes")[0] == 2  # --unsafe-fixes needs --fix
    run(capsys, "lint", "both.jinja", "--fix")
    assert path.read_text() == "{#- #}\n" + LEAKY  # only the safe fix


def test_bundled_name_and_directory(capsys, workdir: Path) -> None:
    code, out, _ = run(capsys, "lint", "mistral-v1", "--select", "WS001")
    assert code == 1 and out.startswith("mistral-v1:1:16: WS001")
    (workdir / "d").mkdir()
    (workdir / "d" / "a.jinja").write_text(CLEAN)
    (workdir / "d" / "b.jinja").write_text(LEAKY)
    code, out, _ = run(capsys, "lint", "d")
    assert code == 1 and "b.jinja:2:1" in out and "in 2 templates" in out


def test_tokenizer_config(capsys, workdir: Path) -> None:
    config = {"add_bos_token": True, "chat_template": "{{- bos_token }}{{ messages[0]['content'] }}"}
    (workdir / "tokenizer_config.json").write_text(json.dumps(config))
    code, out, _ = run(capsys, "lint", "tokenizer_config.json")
    assert code == 1
    assert "tokenizer_config.json:1:5: TK001 " in out and "(2 warnings)" in out  # add_bos_token: true: TK001 warns
    assert "(position in the chat_template string)" in out
    named = {"chat_template": [{"name": "default", "template": CLEAN}, {"name": "tool_use", "template": "{{ tools }}"}]}
    (workdir / "named.json").write_text(json.dumps(named))
    code, out, _ = run(capsys, "lint", "named.json")
    assert code == 1 and "CT002" in out and "(position in chat_template 'tool_use')" in out
    code, _, err = run(capsys, "lint", "tokenizer_config.json", "--fix")
    assert code == 2  # --fix on a template it cannot rewrite: a usage error


def test_template_beside_tokenizer_config(capsys, workdir: Path) -> None:
    (workdir / "model").mkdir()
    (workdir / "model" / "tokenizer_config.json").write_text('{"add_bos_token": true}')
    (workdir / "model" / "chat_template.jinja").write_text("{{- bos_token }}")
    code, out, _ = run(capsys, "lint", "model/chat_template.jinja")
    assert code == 1 and "TK001 the template writes bos_token and the tokenizer config sets add_bos_token: true" in out


def test_model_folder(capsys, workdir: Path) -> None:
    folder = workdir / "model"
    (folder / "additional_chat_templates").mkdir(parents=True)
    (folder / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": True, "chat_template": "{{- bos_token }}"}))
    (folder / "additional_chat_templates" / "tool_use.jinja").write_text("{{- tools }}")
    (folder / "special_tokens_map.json").write_text("{}")
    code, out, _ = run(capsys, "lint", "model")
    assert code == 1
    assert "tool_use.jinja:1:5: CT002" in out and "tokenizer_config.json:1:5: TK001 " in out and "(2 warnings)" in out
    assert "in 2 templates" in out


def test_pyproject_config(capsys, workdir: Path) -> None:
    (workdir / "pyproject.toml").write_text(
        '[tool.chatjinja]\nselect = ["WS", "TK"]\nfail-level = "note"\n'
        '[tool.chatjinja.per-file-ignores]\n"legacy/*.jinja" = ["WS001"]\n'
        '[tool.chatjinja.severity]\nTK001 = "error"\n'
    )
    (workdir / "legacy").mkdir()
    (workdir / "legacy" / "old.jinja").write_text(LEAKY)
    (workdir / "new.jinja").write_text("{{- bos_token }}")
    code, out, _ = run(capsys, "lint", "legacy/old.jinja")
    assert code == 0 and "GP001" not in out  # GP001 not selected, WS001 ignored for legacy/
    code, out, _ = run(capsys, "lint", "new.jinja")
    assert code == 1 and "TK001 " in out and "(1 error)" in out
    code, out, _ = run(capsys, "lint", "new.jinja", "--no-config")
    assert "TK001 " in out and "(1 note)" in out and code == 0
    (workdir / "pyproject.toml").write_text('[tool.chatjinja]\nselect = "WS001"\nfail-level = "loud"\n')
    code, _, err = run(capsys, "lint", "new.jinja")
    assert code == 2 and "fail-level" in err


def test_rules_command(capsys) -> None:
    code, out, _ = run(capsys, "rules")
    assert code == 0 and out.startswith("WS001  leaked-whitespace")
    assert len(out.splitlines()) >= 19
    code, out, _ = run(capsys, "rules", "SC002")
    assert code == 0 and out.startswith("# SC002 sandbox-escape") and "## Use instead" in out
    code, out, _ = run(capsys, "rules", "leaked-whitespace", "--json")
    assert json.loads(out)["code"] == "WS001"


def test_reports_are_valid_utf8_when_the_template_holds_a_lone_surrogate(workdir: Path) -> None:
    """A chat_template string in JSON may hold "\\udcff": reports write it as that escape, never as a bad byte
    (in the C locale too, where Python's stdout would write the surrogate as the raw byte 0xff)."""
    import os
    import subprocess
    import sys

    (workdir / "sur.json").write_text('{"chat_template": "{{ messages[0].content }} \\udcff"}')
    for args in (["--format", "json"], ["--format", "sarif"], [], ["--format", "json", "--output", "r.json"]):
        result = subprocess.run([sys.executable, "-m", "chatjinja", "lint", "sur.json", *args],
                                capture_output=True, timeout=120, env={**os.environ, "LC_ALL": "C"})
        assert result.returncode == 1, result.stderr
        text = (workdir / "r.json").read_bytes().decode("utf-8") if "--output" in args else result.stdout.decode("utf-8")
        if args:
            json.loads(text)
        else:  # the text report quotes the source line
            assert "{{ messages[0].content }} \\udcff" in text
