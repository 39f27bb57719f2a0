"""``chatjinja portability``: verdicts per engine, the JSON and SARIF forms, exit codes, and engines that cannot run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatjinja.cli import main
from chatjinja.portability import engines as engines_module

from .conftest import engine_or_skip

PORTABLE = "{% for message in messages %}[{{ message['role'] }}] {{ message['content'] }}\n{% endfor %}"
# Python prints the list's repr (['user']), @huggingface/jinja prints JSON (["user"])
LIST_PRINT = "{{ messages | map(attribute='role') | list }}"


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "portable.jinja").write_text(PORTABLE)
    (tmp_path / "list.jinja").write_text(LIST_PRINT)
    return tmp_path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_a_portable_template_exits_0_with_every_engine_identical(files, capsys):
    engine_or_skip("minijinja")
    code, out, err = _run(["portability", "portable.jinja", "--engines", "minijinja", "--format", "json"], capsys)
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["template"] == "portable.jinja"
    assert list(report["engines"]) == ["minijinja"]
    minijinja = report["engines"]["minijinja"]
    assert minijinja["verdict"] == "identical"
    assert {case["status"] for case in minijinja["cases"]} == {"identical"}
    assert len(minijinja["cases"]) == 30


def test_a_difference_exits_1_and_shows_the_first_differing_characters(files, capsys):
    engine_or_skip("hfjs")
    code, out, err = _run(["portability", "list.jinja", "--engines", "hfjs"], capsys)
    assert (code, err) == (1, "")
    assert "hfjs 0.5.11: differs (30 differs)" in out
    assert "transformers «[⟦'⟧user']» | hfjs «[⟦\"⟧user\"]»" in out
    assert "cause: a list or dict printed as JSON instead of Python's repr (or the reverse)" in out
    assert out.rstrip().endswith("hfjs differs")


def test_json_names_each_case_status_and_difference(files, capsys):
    engine_or_skip("hfjs")
    code, out, _ = _run(["portability", "list.jinja", "--engines", "hfjs", "--format", "json"], capsys)
    case = json.loads(out)["engines"]["hfjs"]["cases"][0]
    assert code == 1
    assert case["name"] == "user" and case["status"] == "differs"
    assert (case["transformers"], case["engine"]) == ("['user']", '["user"]')
    assert case["difference"]["offset"] == 1


def test_a_failing_engine_case_is_status_fails_in_json(files, capsys):
    engine_or_skip("minijinja")
    (files / "tojson.jinja").write_text("{{ messages[0]['content'] | tojson(ensure_ascii=False) }}")
    code, out, _ = _run(["portability", "tojson.jinja", "--engines", "minijinja", "--format", "json"], capsys)
    minijinja = json.loads(out)["engines"]["minijinja"]
    assert code == 1 and minijinja["verdict"] == "differs"
    assert minijinja["counts"] == {"fails": 30}
    assert minijinja["cases"][0]["engine"] is None and minijinja["cases"][0]["engine_error"]


def test_sarif_has_one_rule_per_engine_and_a_result_per_differing_case(files, capsys):
    engine_or_skip("hfjs")
    code, out, _ = _run(["portability", "list.jinja", "--engines", "hfjs", "--format", "sarif"], capsys)
    run = json.loads(out)["runs"][0]
    assert code == 1
    assert [rule["id"] for rule in run["tool"]["driver"]["rules"]] == ["portability/hfjs"]
    assert len(run["results"]) == 30
    first = run["results"][0]
    assert first["ruleId"] == "portability/hfjs" and first["level"] == "warning"
    assert first["properties"]["case"] == "user" and first["properties"]["engine"] == "hfjs"
    assert first["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("list.jinja")


def test_an_engine_that_cannot_run_is_unavailable_with_its_reason(files, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(engines_module, "_ready", {})
    monkeypatch.setenv("CHATJINJA_ENGINES_DIR", str(tmp_path / "no-engines"))
    code, out, err = _run(["portability", "portable.jinja", "--engines", "hfjs,llamacpp", "--no-install", "--format", "json"], capsys)
    engines = json.loads(out)["engines"]
    assert code == 1 and err == ""  # nothing compared is not a pass
    assert {name: e["verdict"] for name, e in engines.items()} == {"hfjs": "unavailable", "llamacpp": "unavailable"}
    assert "installing it was not allowed" in engines["hfjs"]["reason"]
    code, out, _ = _run(["portability", "portable.jinja", "--engines", "hfjs", "--no-install"], capsys)
    assert "hfjs: unavailable (" in out and "no engine could run: nothing compared" in out


@pytest.mark.parametrize("value", ["jinja3", "minijinja,,nope", ","])
def test_an_unknown_engine_is_a_usage_error(files, capsys, value):
    code, _, err = _run(["portability", "portable.jinja", "--engines", value], capsys)
    assert code == 2
    assert err.startswith("error: --engines takes minijinja, hfjs, llamacpp") and err.count("\n") == 1


def test_a_missing_template_is_one_line_and_exit_1(files, capsys):
    code, out, err = _run(["portability", "missing.jinja"], capsys)
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and err.count("\n") == 1 and "missing.jinja" in err


def test_output_goes_to_a_file_whole(files, capsys):
    engine_or_skip("minijinja")
    code, out, _ = _run(["portability", "portable.jinja", "--engines", "minijinja", "--format", "json", "-o", "report.json"], capsys)
    assert (code, out) == (0, "")
    assert json.loads((files / "report.json").read_text())["engines"]["minijinja"]["verdict"] == "identical"


def test_an_install_says_so_on_stderr_once(files, capsys, monkeypatch, tmp_path):
    # a real npm install into an empty engines folder: the pinned integrity is checked on the way
    engine_or_skip("hfjs")
    (files / "roles.jinja").write_text("{% for message in messages %}{{ message['role'] }}\n{% endfor %}")
    monkeypatch.setattr(engines_module, "_ready", {})
    monkeypatch.setenv("CHATJINJA_ENGINES_DIR", str(tmp_path / "fresh"))
    code, _, err = _run(["portability", "roles.jinja", "--engines", "hfjs"], capsys)
    assert code == 0
    assert err == f"chatjinja: installing @huggingface/jinja 0.5.11 with npm into {tmp_path / 'fresh' / 'hfjs-0.5.11'} (once)\n"
    monkeypatch.setattr(engines_module, "_ready", {})
    code, _, err = _run(["portability", "roles.jinja", "--engines", "hfjs"], capsys)
    assert (code, err) == (0, "")


def test_the_run_has_one_time_budget_which_the_report_states(files, capsys):
    engine_or_skip("minijinja")
    code, out, _ = _run(["portability", "portable.jinja", "--engines", "minijinja", "--format", "json"], capsys)
    assert code == 0 and json.loads(out)["budget"]["seconds"] == 20.0 and json.loads(out)["cut"] == {}
    code, out, _ = _run(["portability", "portable.jinja", "--engines", "minijinja", "--format", "json", "--time-budget", "60"], capsys)
    assert code == 0 and json.loads(out)["budget"]["seconds"] == 60.0


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_time_budget_that_is_not_a_positive_number_is_a_usage_error(files, capsys, value):
    code, _, err = _run(["portability", "portable.jinja", "--time-budget", value], capsys)
    assert code == 2
    assert f"--time-budget: takes a number of seconds > 0, got {value!r}" in err
