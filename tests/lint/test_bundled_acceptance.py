"""Acceptance on the bundled templates: Mistral whitespace leaks flagged at line:column, fixed to the Basic String."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatjinja import apply_chat_template
from chatjinja.lint import fix_source, lint

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
MANIFEST = json.loads((TEMPLATES / "manifest.json").read_text(encoding="utf-8"))
ENTRIES = {e["name"]: e for e in MANIFEST["templates"]}
MISTRAL = ["mistral-v1", "mistral-v2-v3", "mistral-v3-tekken"]
DEVSTRAL = "devstral-small-2-24b-instruct-2512"


def _source(name: str) -> str:
    return (TEMPLATES / ENTRIES[name]["file"]).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", MISTRAL)
def test_mistral_whitespace_flagged_at_line_and_column(name: str) -> None:
    source = _source(name)
    lines = source.split("\n")
    found = [d for d in lint(source, name=name) if d.code == "WS001"]
    got = [(d.span.line, d.span.column, source[d.span.start : d.span.end]) for d in found]
    # Every line that ends in "}}" leaks its newline (at the column after the "}}"), and every indented
    # "{{ ... }}" line leaks its indentation (from column 1): lstrip_blocks never strips before "{{".
    # Not the raise_exception lines: a branch that raises writes nothing.
    expected = []
    for number, line in enumerate(lines, 1):
        if "raise_exception" in line:
            continue
        stripped = line.lstrip(" ")
        if stripped.startswith("{{") and line != stripped:
            expected.append((number, 1, line[: len(line) - len(stripped)]))
        if line.endswith("}}") and number < len(lines):
            expected.append((number, len(line) + 1, "\n"))
    assert got == expected
    assert len(expected) == 5


@pytest.mark.parametrize("name", MISTRAL)
def test_fixed_mistral_renders_the_basic_string(name: str) -> None:
    entry = ENTRIES[name]
    source = _source(name)
    conversation = MANIFEST["example_conversation"]
    verbatim = apply_chat_template(conversation, source, **entry["special_tokens"])
    assert verbatim != entry["basic_string"]  # the printed template leaks whitespace ...
    assert fix_source(source, select=["WS001"]) == source  # the whitespace fix changes the prompt: it is unsafe
    fixed = fix_source(source, select=["WS001"], unsafe=True)
    assert apply_chat_template(conversation, fixed, **entry["special_tokens"]) == entry["basic_string"]  # ... the fix does not
    assert [d for d in lint(fixed) if d.code == "WS001"] == []
    assert fix_source(source, unsafe=True) == fixed  # every fix together: the same


def test_devstral_has_no_whitespace_leak_and_markup_join_is_flagged() -> None:
    source = _source(DEVSTRAL)
    found = lint(source, name=DEVSTRAL)
    assert [d for d in found if d.code == "WS001"] == []
    markup = [d for d in found if d.code == "JN002"]
    assert len(markup) == 1
    d = markup[0]
    line = source.split("\n")[d.span.line - 1]
    assert "'[TOOL_CALLS]' + tool['function']['name'] + '[ARGS]' + arguments" in line
    assert source[d.span.start : d.span.end] == "arguments"
    assert line[d.span.column - 1 :].startswith("arguments }}")


def test_devstral_markup_join_really_escapes() -> None:
    """What JN002 warns about, shown through the renderer: a tool name with & and ' comes out HTML-escaped."""
    call = {"type": "function", "function": {"name": "get_a&b's", "arguments": {"q": 1}}}
    conversation = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    text = apply_chat_template(conversation, _source(DEVSTRAL), bos_token="<s>", eos_token="</s>")
    assert "get_a&amp;b&#39;s" in text


@pytest.mark.parametrize(
    "template",
    [
        "{%- set a = messages[0]['name']|safe %}{{- messages[0]['content'] + a }}",
        "{%- set a = messages[0]['name']|safe %}{{- a + messages[0]['content'] }}",
        "{%- set a = messages[0]['name']|safe %}{{- messages[0]['content'] ~ a }}",
        "{%- set a = messages[0]['name']|tojson|safe %}{{- messages[0]['content'] ~ '[ARGS]' ~ a }}",
        "{{- messages[0]['name']|safe + messages[0]['content'] }}",
        "{{- messages[0]['content'] ~ messages[0]['name']|safe }}",
        "{%- set a = messages[0]['name'] %}{{- messages[0]['content'] + a }}",
    ],
)
def test_markup_rule_agrees_with_the_renderer(template: str) -> None:
    """JN002 fires exactly when rendering HTML-escapes the plain side."""
    conversation = [{"role": "user", "content": "a&b's", "name": "n"}]
    escaped = "a&amp;b&#39;s" in apply_chat_template(conversation, template)
    flagged = any(d.code == "JN002" for d in lint(template))
    assert flagged == escaped


@pytest.mark.parametrize("name", MISTRAL)
def test_cli_fix_in_place_renders_the_basic_string(name: str, tmp_path, monkeypatch, capsys) -> None:
    from chatjinja.cli import main

    monkeypatch.chdir(tmp_path)
    path = tmp_path / f"{name}.jinja"
    path.write_text(_source(name), encoding="utf-8")
    main(["lint", str(path), "--fix"])
    assert path.read_text(encoding="utf-8") == _source(name)  # --fix alone applies safe fixes only: none here
    capsys.readouterr()
    main(["lint", str(path), "--fix", "--unsafe-fixes"])
    out = capsys.readouterr().out
    assert "WS001" not in out
    entry = ENTRIES[name]
    rendered = apply_chat_template(MANIFEST["example_conversation"], path.read_text(encoding="utf-8"), **entry["special_tokens"])
    assert rendered == entry["basic_string"]
