"""``lint(..., analyze=True)`` / ``chatjinja lint --deep``: rules read the analyser's facts."""

from __future__ import annotations

from chatjinja.analysis import analyze
from chatjinja.cli import main
from chatjinja.lint import lint

# The system branch exists but writes nothing: the lexical check sees 'system' named, the analyser sees
# that a system message never reaches the prompt.
EMPTY_SYSTEM = (
    "{%- for m in messages %}{%- if m.role == 'user' %}{{- '[U]' + m.content }}"
    "{%- elif m.role == 'assistant' %}{{- '[A]' + m.content }}{%- elif m.role == 'system' %}{%- endif %}{%- endfor %}"
)


def _rl002(template: str, **kwargs) -> list[str]:
    return [d.message for d in lint(template, select=["RL002"], **kwargs)]


def test_facts_find_what_the_lexical_check_cannot() -> None:
    assert _rl002(EMPTY_SYSTEM) == [
        "messages with role 'tool' match no branch of this role dispatch and nothing raises: they are silently dropped"
    ]
    deep = _rl002(EMPTY_SYSTEM, analyze=True)
    assert deep == [
        "messages with role 'system', 'tool' are not rendered (analyser facts) and nothing raises: they are silently dropped"
    ]
    assert _rl002(EMPTY_SYSTEM, capabilities=analyze(EMPTY_SYSTEM)) == deep


def test_facts_respect_raises() -> None:
    template = (
        "{%- for m in messages %}{%- if m.role == 'user' %}{{- m.content }}{%- elif m.role == 'assistant' %}"
        "{{- m.content }}{%- else %}{{- raise_exception('only user and assistant') }}{%- endif %}{%- endfor %}"
    )
    assert _rl002(template, analyze=True) == []


def test_unparsable_template_falls_back_to_lexical() -> None:
    assert [d.code for d in lint("{{ 'a' ", analyze=True)] == ["LN002"]


def test_cli_deep(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jinja").write_text(EMPTY_SYSTEM)
    assert main(["lint", "t.jinja", "--select", "RL002", "--deep"]) == 1
    assert "'system', 'tool' are not rendered (analyser facts)" in capsys.readouterr().out
