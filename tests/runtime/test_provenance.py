"""The provenance render: the same text as the plain render, sites covering every character, and every
message value where provenance says it is (on every corpus template, over its whole conversation space)."""

from __future__ import annotations

import pytest

from chatjinja.observation import observe, space_of
from chatjinja.runtime.environment import compile_template, default_environment
from chatjinja.runtime.messages import alias_reasoning_fields, plain_messages
from chatjinja.runtime.render import render_source

from tests.conftest import CORPUS, corpus_templates

TEMPLATES = corpus_templates() if (CORPUS / "templates").is_dir() else []


def _value(messages: list, path: tuple) -> str:
    value = messages
    for key in path[1:]:  # (path[0] is "messages")
        value = value[key]
    return value


def check(source: str, messages: list, options: dict | None = None, variables: dict | None = None) -> int:
    """Assert the provenance invariants of one render; the number of stretches printed from message values."""
    options, variables = options or {}, {"bos_token": "<s>", "eos_token": "</s>", **(variables or {})}
    try:
        plain = render_source(messages, source, variables=variables, **options)
    except Exception as exc:  # noqa: BLE001 - the traced render must fail the same way
        with pytest.raises(type(exc)) as caught:
            render_source(messages, source, variables=variables, traced=True, **options)
        assert str(caught.value) == str(exc)
        return 0
    traced = render_source(messages, source, variables=variables, traced=True, **options)
    assert traced.text == plain and type(traced.text) is str
    at = 0
    for start, end, site, _origin in traced.segments:
        assert start == at and end > start and 0 <= site < len(traced.sites)
        at = end
    assert at == len(plain)
    chat = alias_reasoning_fields(plain_messages(messages))
    count = 0
    for start, end, path, offset in traced.origins():
        assert plain[start:end] == _value(chat, path)[offset:offset + end - start], (path, plain[start:end])
        count += 1
    return count


def test_sites_and_origins_of_a_small_template():
    source = ("{%- set sys = messages[0].content | trim -%}{% macro f(a) %}<{{ a }}>{% endmacro %}"
              "{{ bos_token }}S:{{ sys }}\n{% for m in messages[1:] %}[{{ m.role }}]{{ f(m.content.split('</think>')[-1]) + '!' }}"
              "{{ m.tool_calls | tojson if m.tool_calls else '' }}{% endfor %}")
    messages = [{"role": "system", "content": "  rules "}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "<think>x</think>yes"}]
    assert check(source, messages) == 5
    traced = render_source(messages, source, variables={"bos_token": "<s>"}, traced=True)
    assert traced.text == "<s>S:rules\n[user]<hi>![assistant]<yes>!"
    origins = [(traced.text[a:b], path, offset) for a, b, path, offset in traced.origins()]
    assert origins == [("rules", ("messages", 0, "content"), 2), ("user", ("messages", 1, "role"), 0),
                       ("hi", ("messages", 1, "content"), 0), ("assistant", ("messages", 2, "role"), 0),
                       ("yes", ("messages", 2, "content"), 16)]
    by_kind = {traced.sites[traced.at(i)[2]].kind for i in range(len(traced.text))}
    assert by_kind == {"text", "expression"}
    assert traced.sites[traced.at(traced.text.index("[user"))[2]].text == "["


@pytest.mark.parametrize("source, messages", [
    ("{{ messages[0].content + [1] }}", [{"role": "user", "content": "a"}]),
    ("{{ messages[0].content.items() }}", [{"role": "user", "content": "a"}]),
    ("{{ messages[0].content + messages[0].missing }}", [{"role": "user", "content": "a"}]),
    ("{{ [1] + messages[0].content }}", [{"role": "user", "content": "a"}]),
    ("{{ messages[0].content ~ none ~ 1 }}{{ messages[0].content * 2 }}{{ messages[0].content[1:] }}", [{"role": "user", "content": "ab"}]),
    ("{% generation %}{{ messages[0].content }}{% endgeneration %}", [{"role": "user", "content": "a"}]),
])
def test_errors_and_odd_operations_are_the_plain_renders(source, messages):
    """A traced string is named ``str`` in every error message and behaves as one."""
    check(source, messages)


def test_continue_final_message_cuts_the_provenance_with_the_text():
    source = "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "partial"}]
    assert check(source, messages, {"continue_final_message": True}) == 5  # user, q, user, assistant, partial


def test_provenance_off_compiles_and_runs_the_code_it_always_ran():
    """Free when off: the default environment's code has no tracing in it (the traced code is another compile)."""
    source = "{% for m in messages %}{{ m.content }}{% endfor %}"
    assert "trace_text" not in default_environment().compile(source, raw=True)
    render_source([{"role": "user", "content": "x"}], source, traced=True)
    assert not hasattr(compile_template(source).environment, "trace_text")


@pytest.mark.corpus
@pytest.mark.parametrize("path", TEMPLATES, ids=[str(p.relative_to(CORPUS / "templates")) for p in TEMPLATES])
def test_provenance_on_every_corpus_template_over_its_space(path):
    source = path.read_text(encoding="utf-8")
    for member in space_of(source):
        plain, traced = observe(source, member), observe(source, member, traced=True)
        assert (plain.text, plain.error) == (traced.text, traced.error), member.name
        if plain.ok:
            check(source, member.messages, member.options, {**dict(member.variables)})


def test_a_copy_of_a_traced_string_is_the_plain_string():
    import copy
    import pickle

    from chatjinja.runtime.provenance import Traced

    traced = Traced("abc", [(0, 3, None, (("messages", 0, "content"), 0))])
    for copied in (copy.copy(traced), copy.deepcopy(traced), pickle.loads(pickle.dumps(traced))):
        assert copied == "abc" and type(copied) is str


def test_values_inside_tojson_and_printed_containers_keep_their_origins():
    source = ("{% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.arguments | tojson }}"
              "{{ c.function.arguments }}{{ [c.function.name] }}{% endfor %}{% endfor %}")
    messages = [{"role": "assistant", "content": None, "tool_calls": [
        {"function": {"name": "get", "arguments": {"city": "Paris", "q": "a \"b\"", "n": None}}}]}]
    assert check(source, messages) == 4
    traced = render_source(messages, source, traced=True)
    # tojson escapes the quotes of q (its text is not the value's: no origin there); repr does not
    assert [path[-1] for _, _, path, _ in traced.origins()] == ["city", "city", "q", "name"]


def test_a_traced_render_of_many_tiny_parts_stops_at_the_segment_budget(monkeypatch):
    """Segments are memory the output budget does not count: one traced render may make MAX_SEGMENTS."""
    from chatjinja.runtime import provenance
    from chatjinja.runtime.budget import BudgetExceeded

    monkeypatch.setattr(provenance, "MAX_SEGMENTS", 1000)
    source = "{% for i in range(600) %}{{ 'a' }}b{% endfor %}"
    assert render_source([{"role": "user", "content": "x"}], source) == "ab" * 600
    with pytest.raises(BudgetExceeded, match="max_provenance_segments"):
        render_source([{"role": "user", "content": "x"}], source, traced=True)
    assert render_source([{"role": "user", "content": "x"}], source.replace("600", "400"), traced=True).text == "ab" * 400
