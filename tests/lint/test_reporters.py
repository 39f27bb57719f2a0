"""Reporters: golden outputs for text, JSON, SARIF and GitHub; SARIF validated against the 2.1.0 schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatjinja.lint import all_rules, lint
from chatjinja.report import github, sarif, text
from chatjinja.report import json as json_report
from tests import goldens
from tests.conftest import SHARED

HERE = Path(__file__).parent
GOLDENS = HERE / "goldens"
REPO = HERE.parents[1]
INPUTS = [
    ("mistral-v1", REPO / "templates" / "mistral-v1.jinja"),
    ("devstral", REPO / "templates" / "devstral-small-2-24b-instruct-2512.jinja"),
    ("tests/lint/hostile/sc003-bidi-override.jinja", HERE / "hostile" / "sc003-bidi-override.jinja"),
    ("tests/lint/hostile/sc002-format-fields.jinja", HERE / "hostile" / "sc002-format-fields.jinja"),
    ("odd path, with: spaces.jinja", None),
]
ODD = "{{- tools }}\n{{ messages[0].content.strip() }}\n"


def _inputs() -> tuple[list, dict[str, str]]:
    diagnostics, sources = [], {}
    for name, path in INPUTS:
        source = path.read_text(encoding="utf-8") if path else ODD
        sources[name] = source
        diagnostics.extend(lint(source, name=name))
    return diagnostics, sources


def check_golden(name: str, actual: str) -> None:
    goldens.check_golden(GOLDENS / name, actual)


def test_text_golden() -> None:
    diagnostics, sources = _inputs()
    out = text.render(diagnostics, sources=sources)
    assert "\u202e" not in out  # bidi controls are never written to a terminal
    check_golden("report.txt", out)


def test_text_clean() -> None:
    assert text.render([], sources={"a": "x"}) == "All checks passed (1 template).\n"


def test_json_golden() -> None:
    diagnostics, _ = _inputs()
    out = json_report.render(diagnostics, tool_version="test")
    document = json.loads(out)
    assert document["version"] == 1
    assert document["summary"]["total"] == len(diagnostics)
    check_golden("report.json", out)


def test_github_golden() -> None:
    diagnostics, _ = _inputs()
    out = github.render(diagnostics)
    for line in out.splitlines():
        assert line.startswith(("::error file=", "::warning file=", "::notice file="))
        assert "\n" not in line
    check_golden("report.github.txt", out)


def _sarif_schema() -> dict:
    path = SHARED / "schemas" / "sarif-schema-2.1.0.json"
    if not path.is_file():
        pytest.skip(f"SARIF schema not found at {path}")
    return json.loads(path.read_text(encoding="utf-8"))


def test_sarif_golden_and_schema() -> None:
    import jsonschema

    diagnostics, _ = _inputs()
    out = sarif.render(diagnostics, rules=all_rules(), tool_version="test")
    document = json.loads(out)
    jsonschema.validate(document, _sarif_schema())
    run = document["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert ids == [r.code for r in all_rules()]
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"] and rule["help"]["text"]
    for result in run["results"]:
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startColumn"] >= 1 and region["endColumn"] >= 1
        assert ids[result["ruleIndex"]] == result["ruleId"]
    check_golden("report.sarif", out)


def test_sarif_empty_run_validates() -> None:
    import jsonschema

    jsonschema.validate(json.loads(sarif.render([], rules=all_rules())), _sarif_schema())
