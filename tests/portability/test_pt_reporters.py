"""PT rules through the linter's edges: opt-in selection, the ``engines`` of each diagnostic in JSON and SARIF, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from chatjinja.lint import all_rules, lint
from chatjinja.lint.rules.portability import ENGINES
from chatjinja.portability import ENGINE_NAMES
from chatjinja.report import json as json_report
from chatjinja.report import sarif
from tests.conftest import REPO, SHARED

TEMPLATE = "{{- tools|tojson(ensure_ascii=False) }}{{- '%s' % eos_token }}"


def test_the_linter_names_the_engines_the_adapters_run() -> None:
    assert ENGINES == ENGINE_NAMES


def test_pt_is_off_by_default_and_on_when_selected() -> None:
    assert not [d for d in lint(TEMPLATE) if d.code.startswith("PT")]
    assert {d.code for d in lint(TEMPLATE, select=["PT"])} == {"PT002", "PT004"}
    assert {d.code for d in lint(TEMPLATE, select=["ALL"])} >= {"PT002", "PT004"}
    assert {d.code for d in lint(TEMPLATE, select=["tojson-arguments"])} == {"PT002"}


def test_each_diagnostic_names_its_engines() -> None:
    by_code = {d.code: d for d in lint(TEMPLATE, select=["PT"])}
    assert by_code["PT002"].engines == ("minijinja",)  # ensure_ascii: minijinja alone rejects it
    assert by_code["PT004"].engines == ENGINES
    for rule in all_rules():
        assert bool(rule.engines) == rule.code.startswith("PT")


def test_json_has_engines_for_pt_only() -> None:
    found = lint(TEMPLATE + "{{ bos_token }}", select=["PT", "TK001"])
    document = json.loads(json_report.render(found, tool_version="test"))
    engines = {d["code"]: d.get("engines") for d in document["diagnostics"]}
    assert engines == {"PT002": ["minijinja"], "PT004": list(ENGINES), "TK001": None}


def test_sarif_carries_engines_and_validates() -> None:
    import jsonschema

    schema_path = SHARED / "schemas" / "sarif-schema-2.1.0.json"
    if not schema_path.is_file():
        pytest.skip(f"SARIF schema not found at {schema_path}")
    found = lint(TEMPLATE, select=["PT"])
    document = json.loads(sarif.render(found, rules=all_rules(), tool_version="test"))
    jsonschema.validate(document, json.loads(schema_path.read_text(encoding="utf-8")))
    run = document["runs"][0]
    assert {r["ruleId"]: r["properties"]["engines"] for r in run["results"]} == {"PT002": ["minijinja"], "PT004": list(ENGINES)}
    descriptors = {r["id"]: r["properties"] for r in run["tool"]["driver"]["rules"]}
    assert descriptors["PT002"] == {"tags": ["portability"], "engines": ["minijinja", "llamacpp"]}
    assert "engines" not in descriptors["CT002"]


def test_cli_select_pt_needs_no_engine(tmp_path) -> None:
    path = tmp_path / "chat_template.jinja"
    path.write_text(TEMPLATE, encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "chatjinja", "lint", str(path), "--select", "PT", "--format", "json"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120,
                            env={"PYTHONPATH": str(REPO / "src"), "PATH": "/nonexistent"})  # no node, no compiler
    assert result.returncode == 1, result.stderr
    assert {d["code"]: d["engines"] for d in json.loads(result.stdout)["diagnostics"]} == {
        "PT002": ["minijinja"], "PT004": list(ENGINES)}


def test_pt_rules_stay_in_the_static_half() -> None:
    """Linting with every PT rule loads neither jinja2, the runtime nor the engine adapters."""
    code = ("import sys; from chatjinja.lint import lint; lint(" + repr(TEMPLATE) + ", select=['PT']); "
            "print(sorted(m for m in sys.modules if m == 'jinja2' or m.startswith(('jinja2.', 'chatjinja.runtime', "
            "'chatjinja.portability'))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={"PYTHONPATH": str(REPO / "src")})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
