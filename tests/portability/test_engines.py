"""The engine adapters against the real engines: their known divergences from transformers, what each receives, and what is missing."""

from __future__ import annotations

import pytest

from chatjinja.portability import ENGINE_NAMES, EngineUnavailable, available_engines, engine, probe_cases, template_context
from chatjinja.portability import engines as engines_module
from chatjinja.portability.report import compare_engines

from .conftest import engine_or_skip

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
USER = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}


def test_every_engine_renders_chatml_as_transformers(any_engine):
    # a portable template: every probe conversation that transformers renders comes out the same
    # the same text wherever transformers renders; where it raises (content chunks concatenated to a
    # string) JavaScript and llama.cpp concatenate and render
    comparison = compare_engines(CHATML, {any_engine.name: any_engine})[any_engine.name]
    rendered = [case.status for case in comparison.cases if case.expected_error is None]
    assert rendered == ["identical"] * len(rendered) and len(rendered) >= 10
    failing = {case.status for case in comparison.cases if case.expected_error is not None}
    # (an assistant turn with content null beside its calls: transformers and @huggingface/jinja raise)
    assert failing == {"minijinja": {"both-fail"}, "hfjs": {"both-fail", "renders"}, "llamacpp": {"renders"}}[any_engine.name]


def test_every_engine_gets_the_globals_its_server_defines(any_engine):
    source = "{{ strftime_now('%Y') | length }}|{% if messages | length > 1 %}{{ raise_exception('two: ' ~ messages | length) }}{% endif %}ok"
    one, two = any_engine.render_many(source, [USER, {"messages": [{}, {}]}])
    assert one.text == "4|ok"
    assert two.text is None and "two: 2" in two.error


def test_every_engine_reads_tools_documents_and_special_tokens(any_engine):
    context = template_context([{"role": "user", "content": "q"}], tools=[{"type": "function", "function": {"name": "f"}}],
                               documents=[{"title": "t", "text": "x"}], bos_token="<s>")
    source = "{{ bos_token }}{{ tools[0].function.name }}{{ documents[0]['title'] }}{{ messages[0].content }}{{ add_generation_prompt }}"
    expected = "<s>ftqFalse" if any_engine.name == "minijinja" else None
    result = any_engine.render(source, context)
    assert result.text is not None, result.error
    assert result.text.startswith("<s>ftq")
    if expected:
        assert result.text == expected


def test_an_engine_parse_error_fails_every_case(any_engine):
    results = any_engine.render_many("{% for %}", [USER, USER])
    assert [r.text for r in results] == [None, None]
    assert all(r.error.startswith("parse error") for r in results)


# --- the known divergences, one engine each ----------------------------------------------------


def _status(name: str, source: str) -> dict[str, str]:
    found = engine_or_skip(name)
    return {case.name: case for case in compare_engines(source, {name: found})[name].cases}


def test_minijinja_has_python_methods_and_trims_blocks_as_its_servers_configure_it():
    # pycompat gives .strip(), .upper(), .replace(), str.join; trim_blocks/lstrip_blocks drop the tags' lines
    source = (
        "{% for m in messages %}\n  {% if m.content.strip().startswith('he') %}\n"
        "{{ m.role.upper() }}|{{ m.content.replace('l', 'L') }}|{{ '-'.join(['a', 'b']) }}\n  {% endif %}\n{% endfor %}"
    )
    cases = _status("minijinja", source)
    assert {case.status for case in cases.values()} == {"identical", "both-fail"}
    assert cases["alternating"].text == "USER|heLLo|a-b\n"


def test_minijinja_rejects_tojson_keyword_arguments():
    cases = _status("minijinja", "{{ messages[0]['content'] | tojson(ensure_ascii=False) }}")
    assert cases["user"].status == "fails"
    assert "ensure_ascii" in cases["user"].error or "argument" in cases["user"].error


def test_minijinja_has_no_generation_tag():
    # transformers defines {% generation %} (assistant masks); minijinja cannot parse the template at all
    cases = _status("minijinja", "{% for m in messages %}{% generation %}{{ m['content'] }}{% endgeneration %}{% endfor %}")
    assert cases["user"].status == "fails"
    assert cases["user"].error.startswith("parse error: ") and "generation" in cases["user"].error


def test_llamacpp_refuses_a_loop_over_a_string():
    cases = _status("llamacpp", "{% for ch in messages[0]['content'] %}{{ ch }}.{% endfor %}")
    assert cases["user"].status == "fails"
    assert "for loop" in cases["user"].error


def test_hfjs_prints_a_list_as_json_where_python_prints_its_repr():
    cases = _status("hfjs", "{{ messages | map(attribute='role') | list }}")
    case = cases["user"]
    assert (case.status, case.expected, case.text) == ("differs", "['user']", '["user"]')
    assert case.cause == "a list or dict printed as JSON instead of Python's repr (or the reverse)"
    assert case.difference.offset == 1


def test_hfjs_keeps_carriage_returns_that_python_drops():
    cases = _status("hfjs", "{% for message in messages %}{{ message['content'] }}\r\n{% endfor %}")
    case = cases["user"]
    assert case.status == "differs"
    assert "\r" in case.text and "\r" not in case.expected
    assert case.cause.startswith("line endings differ")


def test_hfjs_refuses_a_loop_over_a_string():
    cases = _status("hfjs", "{% for ch in messages[0]['content'] %}{{ ch }}.{% endfor %}")
    assert cases["user"].status == "fails"


def test_llamacpp_prints_a_float_without_its_fraction_in_tojson():
    found = engine_or_skip("llamacpp")
    case = compare_engines("{{ {'t': 1.0, 'n': 2} | tojson }}", {"llamacpp": found})["llamacpp"].cases[0]
    assert (case.status, case.expected, case.text) == ("differs", '{"t": 1.0, "n": 2}', '{"t": 1, "n": 2}')
    assert case.cause == "a float printed without its .0 (or an integer with one)"


# --- when an engine cannot run -------------------------------------------------------------------


@pytest.fixture
def fresh_engines(monkeypatch, tmp_path):
    monkeypatch.setattr(engines_module, "_ready", {})
    monkeypatch.setenv("CHATJINJA_ENGINES_DIR", str(tmp_path / "engines"))
    return tmp_path / "engines"


def test_without_node_hfjs_says_so(fresh_engines, monkeypatch):
    real = engines_module.shutil.which
    monkeypatch.setattr(engines_module.shutil, "which", lambda name: None if name == "node" else real(name))
    found = available_engines(("hfjs",))["hfjs"]
    assert isinstance(found, EngineUnavailable)
    assert found.reason == "node is not installed (it runs @huggingface/jinja)"


def test_without_a_compiler_llamacpp_says_so(fresh_engines, monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(engines_module.shutil, "which", lambda name: None)
    with pytest.raises(EngineUnavailable, match="no C.. compiler"):
        engine("llamacpp")


def test_no_install_leaves_a_missing_engine_missing(fresh_engines):
    found = available_engines(("hfjs", "llamacpp"), install=False)
    assert all(isinstance(f, EngineUnavailable) and "not allowed" in f.reason for f in found.values())
    assert not fresh_engines.exists()


def test_without_the_minijinja_package_it_says_what_to_install(fresh_engines, monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(EngineUnavailable, match=r"pip install 'chatjinja\[portability\]'"):
        engine("minijinja")


def test_an_unknown_engine_name_is_a_value_error():
    with pytest.raises(ValueError, match="minijinja, hfjs, llamacpp"):
        engine("jinja3")
    assert ENGINE_NAMES == ("minijinja", "hfjs", "llamacpp")


def test_probe_cases_hold_transformers_renderings():
    cases = probe_cases(CHATML)
    user = next(case for case in cases if case.name == "user")
    assert user.text.startswith("<|im_start|>user\n")
    assert user.context["add_generation_prompt"] is False and user.context["bos_token"] == "<s>"
