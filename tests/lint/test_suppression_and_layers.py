"""Suppression comments, configuration objects, and the static half's import boundary."""

from __future__ import annotations

import subprocess
import sys

from chatjinja.lint import LintConfig, lint

LEAK = "{{ 'a' }}\n{% if x %}{% endif %}"


def codes(template: str, **kwargs) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for d in lint(template, **kwargs)]


def test_next_line_suppression() -> None:
    assert codes(LEAK) == [("WS001", 1)]
    assert codes("{#- chatjinja: ignore[WS001] #}\n" + LEAK) == []
    assert codes("{#- chatjinja: ignore[WS] #}\n" + LEAK) == []  # a prefix works too
    # only the next line: a suppression two lines up does not apply
    assert codes("{#- chatjinja: ignore[WS001] #}\n{{- 'b' }}\n" + LEAK) == [("LN001", 1), ("WS001", 3)]


def test_file_suppression_and_unused() -> None:
    assert codes("{#- chatjinja: ignore-file[WS001] #}" + LEAK) == []
    assert codes("{#- chatjinja: ignore-file[WS001, SC002] #}" + LEAK) == [("LN001", 1)]
    found = lint("{#- chatjinja: ignore[QQ123] #}")
    assert [d.code for d in found] == ["LN001"] and "not a rule code" in found[0].message
    # a code whose rule is not selected in this run is not called unused
    assert codes("{#- chatjinja: ignore-file[SC002] #}" + LEAK, select=["WS", "LN"]) == [("WS001", 1)]


def test_syntax_finding_whatever_the_selection() -> None:
    assert [d.code for d in lint("{{ 'a' ", select=["SC"])] == ["LN002"]
    assert lint("{{ 'a' ", ignore=["LN002"]) == []


def test_config_objects() -> None:
    config = LintConfig(select=("WS",), severity=(("WS", "error"),))
    found = lint(LEAK, config=config)
    assert [(d.code, d.severity) for d in found] == [("WS001", "error")]
    assert lint(LEAK, config=config, select=["SC"]) == []  # explicit select overrides the configuration


def test_static_half_never_imports_jinja2_or_the_runtime() -> None:
    code = (
        "import sys, chatjinja.lint, chatjinja.report, chatjinja.commands.lint, chatjinja.commands.rules\n"
        "from chatjinja.lint import lint, fix_source, all_rules\n"
        "from chatjinja.report import render_report\n"
        "d = lint(open('templates/mistral-v1.jinja').read()); fix_source('{{ a }}\\n{% if b %}{% endif %}')\n"
        "for f in ('text', 'json', 'sarif', 'github'): render_report(f, d, rules=all_rules())\n"
        "bad = [m for m in sys.modules if m == 'jinja2' or m.startswith(('jinja2.', 'chatjinja.runtime', 'markupsafe'))]\n"
        "assert not bad, bad\n"
    )
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
