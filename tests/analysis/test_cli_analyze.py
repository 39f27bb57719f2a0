"""``chatjinja analyze`` as a user runs it: text table, JSON report(s), --verify and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from chatjinja import analyze, load_template


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chatjinja", "analyze", *args], capture_output=True, text=True, timeout=120)


def test_text_table_for_a_bundled_template():
    result = run_cli("mistral-v1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "mistral-v1"
    assert "  roles              assistant, user" in lines
    assert "  alternation        required" in lines
    assert any(line.startswith("    11:12  'Only user and assistant roles are supported!'") for line in lines)
    assert "tools              definitions ✗  calls ✗  parallel ✗  ids ✗" in result.stdout


def test_json_is_the_report_and_a_list_for_several():
    single = run_cli("mistral-v1", "--format", "json")
    assert single.returncode == 0, single.stderr
    assert json.loads(single.stdout) == analyze(load_template("mistral-v1")).to_dict()
    several = run_cli("mistral-v1", "devstral-small-2-24b-instruct-2512", "--format", "json")
    reports = json.loads(several.stdout)
    assert [r["template"] for r in reports] == ["mistral-v1", "devstral-small-2-24b-instruct-2512"]
    assert reports[1]["tool_call_arguments"] == ["object", "string"]


def test_verify_agreement_exits_zero():
    result = run_cli("devstral-small-2-24b-instruct-2512", "--verify")
    assert result.returncode == 0, result.stderr
    assert "verify: static analysis and probe agree on every field" in result.stdout


def test_verify_disagreement_exits_one_with_evidence(tmp_path: Path):
    # Whether the content is printed depends on its length: the analyser cannot know it and says
    # "printed" (it follows both branches); the probe's needle is 9 characters, so it is not.
    template = tmp_path / "length.jinja"
    template.write_text("{% for m in messages %}{% if m.content | length == 5 %}{{ m.content }}{% endif %}{% endfor %}")
    result = run_cli(str(template), "--verify")
    assert result.returncode == 1
    assert "DISAGREE content_string: static true probe false" in result.stdout
    assert f"{template}:1:56  user: prints needle" in result.stdout
    as_json = json.loads(run_cli(str(template), "--verify", "--format", "json").stdout)
    assert {d["field"] for d in as_json["verify"]} >= {"content_string", "roles"}


def test_errors_are_one_line_with_exit_codes(tmp_path: Path):
    missing = run_cli(str(tmp_path / "nope.jinja"))
    assert missing.returncode == 1 and missing.stderr.startswith("error: ") and len(missing.stderr.splitlines()) == 1
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for m in messages %}{{ m.content }}")
    result = run_cli(str(broken))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert f"{broken}:1:" in result.stderr
    usage = run_cli("mistral-v1", "--format", "yaml")
    assert usage.returncode == 2
