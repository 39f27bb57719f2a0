"""Rules read the analyser's facts on every run (there is no ``--deep``): RL002 sees a branch that renders nothing."""

from __future__ import annotations

from chatjinja.analysis import analyze
from chatjinja.cli import main
from chatjinja.lint import lint

# The system branch exists but writes nothing: the comparisons name 'system', the analyser sees
# that a system message never reaches the prompt.
EMPTY_SYSTEM = (
    "{%- for m in messages %}{%- if m.role == 'user' %}{{- '[U]' + m.content }}"
    "{%- elif m.role == 'assistant' %}{{- '[A]' + m.content }}{%- elif m.role == 'system' %}{%- endif %}{%- endfor %}"
)
EXPECTED = "messages with role 'system', 'tool' are not rendered by this role dispatch and nothing raises: they are silently dropped"


def _rl002(template: str, **kwargs) -> list[str]:
    return [d.message for d in lint(template, select=["RL002"], **kwargs)]


def test_facts_find_what_the_comparisons_cannot() -> None:
    assert _rl002(EMPTY_SYSTEM) == [EXPECTED]
    assert _rl002(EMPTY_SYSTEM, capabilities=analyze(EMPTY_SYSTEM)) == [EXPECTED]


def test_facts_respect_raises() -> None:
    template = (
        "{%- for m in messages %}{%- if m.role == 'user' %}{{- m.content }}{%- elif m.role == 'assistant' %}"
        "{{- m.content }}{%- else %}{{- raise_exception('only user and assistant') }}{%- endif %}{%- endfor %}"
    )
    assert _rl002(template) == []


def test_cli_has_no_deep_option(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jinja").write_text(EMPTY_SYSTEM)
    assert main(["lint", "t.jinja", "--select", "RL002"]) == 1
    assert "'system', 'tool' are not rendered" in capsys.readouterr().out
    try:
        code = main(["lint", "t.jinja", "--deep"])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
