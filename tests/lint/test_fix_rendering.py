"""Fixes only change the rendered prompt the way their rule says: rendered before and after on probe conversations."""

from __future__ import annotations

import pytest

from chatjinja.lint import fix_source, lint
from tests.conftest import corpus_or_skip, corpus_templates
from tests.reference import our_outcome

PROBES = [
    ([{"role": "user", "content": "Hello, how are you?"}], {"add_generation_prompt": True}),
    (
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Bye"},
        ],
        {},
    ),
]


def only_whitespace_removed(before: str, after: str) -> bool:
    """``after`` is ``before`` with some whitespace characters deleted and nothing else changed."""
    j = 0
    for ch in before:
        if j < len(after) and after[j] == ch:
            j += 1
        elif not ch.isspace():
            return False
    return j == len(after)


def _assert_whitespace_fix(source: str) -> None:
    assert fix_source(source, select=["WS001"]) == source  # unsafe: not applied without unsafe=True
    fixed = fix_source(source, select=["WS001"], unsafe=True)
    assert fixed != source
    for conversation, kwargs in PROBES:
        before = our_outcome(source, conversation, **kwargs)
        after = our_outcome(fixed, conversation, **kwargs)
        assert before[0] == after[0], (before, after)
        if before[0] == "text":
            assert only_whitespace_removed(before[1], after[1]), (before[1], after[1])
        else:
            assert before[1] == after[1]


def test_only_whitespace_removed_helper() -> None:
    assert only_whitespace_removed("a \n b", "a b")
    assert only_whitespace_removed("ab", "ab")
    assert not only_whitespace_removed("ab", "a")
    assert not only_whitespace_removed("a b", "ab c")


@pytest.mark.parametrize("name", ["mistral-v1", "mistral-v2-v3", "mistral-v3-tekken"])
def test_bundled_whitespace_fix(name: str) -> None:
    from chatjinja import load_template

    _assert_whitespace_fix(load_template(name).source)


@pytest.mark.corpus
def test_corpus_whitespace_fixes_only_remove_whitespace() -> None:
    corpus_or_skip()
    fixed_count = 0
    for path in corpus_templates():
        source = path.read_text(encoding="utf-8")
        if not any(d.code == "WS001" and d.fix for d in lint(source, select=["WS001"])):
            continue
        _assert_whitespace_fix(source)
        fixed_count += 1
    assert fixed_count > 20


def test_method_name_fix_reads_the_key() -> None:
    """JN001's purpose: ``x.items`` (the dict method) becomes ``x['items']`` (the JSON-schema key)."""
    source = "{%- for tool in tools %}{{- tool.function.parameters.items|tojson }}{%- endfor %}"
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "array", "items": {"type": "string"}}}}]
    conversation = [{"role": "user", "content": "hi"}]
    before = our_outcome(source, conversation, tools=tools)
    assert fix_source(source, select=["JN001"]) == source  # it changes the output: unsafe
    fixed = fix_source(source, select=["JN001"], unsafe=True)
    after = our_outcome(fixed, conversation, tools=tools)
    assert after == ("text", '{"type": "string"}')
    assert before != after
    # where the template never touched the key, the output is unchanged
    plain = "{{- messages[0].content }}"
    assert fix_source(plain, select=["JN001"], unsafe=True) == plain


def _planted(source: str) -> str:
    """``source`` with a suppression planted at the start of its middle line (so LN001 has a safe fix to make)."""
    lines = source.split("\n")
    middle = len(lines) // 2
    lines[middle] = "{#- chatjinja: ignore[SC001, WS001] #}" + lines[middle]
    return "\n".join(lines)


def _probe_outcomes(source: str) -> dict:
    from chatjinja.probing import run_probes

    return {name: (o.text, o.error) for name, o in run_probes(source).outcomes.items()}


@pytest.mark.corpus
def test_safe_fixes_never_change_a_render() -> None:
    """ruff's definition: a safe fix cannot change any render. Every safe fix on every corpus template (with a
    suppression planted in it, whose unused codes LN001 removes) leaves every probe conversation's output as it was."""
    corpus_or_skip()
    fixed_count = 0
    for path in corpus_templates():
        source = _planted(path.read_text(encoding="utf-8"))
        fixed = fix_source(source)
        if fixed == source:
            continue
        fixed_count += 1
        assert _probe_outcomes(fixed) == _probe_outcomes(source), path.name
    assert fixed_count > 300
