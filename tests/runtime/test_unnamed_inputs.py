"""Tools and documents a template never names are not walked or rebuilt: the template cannot reach them.

``template_names`` (every string constant of the compiled code) must hold every variable jinja2 says
a template reads, for every corpus template; and skipping an unnamed input must change no output.
"""

from __future__ import annotations

import copy

import jinja2
import jinja2.meta
import pytest

from chatjinja import BudgetExceeded, apply_chat_template
from chatjinja.runtime.environment import compile_template, default_environment, template_names
from tests.conftest import corpus_templates
from tests.reference import SPECIAL_TOKENS, hf_outcome, outcome

MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]


def _deep(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels):
        value = {"x": value}
    return value


@pytest.mark.corpus
def test_names_cover_every_variable_a_corpus_template_reads():
    checked = 0
    for path in corpus_templates():
        source = path.read_text(encoding="utf-8")
        try:
            template = compile_template(source)
            reads = jinja2.meta.find_undeclared_variables(default_environment().parse(source))
        except jinja2.TemplateError:
            continue
        assert reads <= template_names(template), (path.name, reads - template_names(template))
        checked += 1
    assert checked > 300


@pytest.mark.parametrize(
    "source",
    [
        "{% macro m() %}{{ tools|length }}{% endmacro %}{{ m() }}",
        "{% block b %}{{ documents|length }}{% endblock %}",
        "{% macro m() %}{{ caller() }}{% endmacro %}{% call m() %}{{ tools is defined }}{% endcall %}",
        "{% set t = tools %}{{ t|length }}",
        "{% for m in messages if tools %}{{ m.role }}{% endfor %}",
    ],
)
def test_names_reach_into_macros_blocks_and_loops(source):
    names = template_names(compile_template(source))
    assert "tools" in names or "documents" in names


def test_unnamed_tools_are_neither_walked_nor_change_the_output():
    tools = [{"type": "function", "function": {"name": "f", "parameters": _deep(300)}}]
    source = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    text = apply_chat_template(copy.deepcopy(MESSAGES), source, tools=tools, **SPECIAL_TOKENS)
    assert ("text", text) == hf_outcome(source, copy.deepcopy(MESSAGES), tools=tools, **SPECIAL_TOKENS)
    # a template that names them gets them walked: 300 levels pass the input depth budget
    with pytest.raises(BudgetExceeded) as error:
        apply_chat_template(copy.deepcopy(MESSAGES), source + "{{ tools|length }}", tools=tools, **SPECIAL_TOKENS)
    assert error.value.budget == "max_input_depth"


def test_named_tools_still_render_as_transformers_renders_them():
    tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}]
    source = "{{ tools|tojson }}|{{ documents|tojson }}|{% for m in messages %}{{ m.content }}{% endfor %}"
    documents = [{"title": "t", "text": "x"}]
    ours = outcome(lambda: apply_chat_template(copy.deepcopy(MESSAGES), source, tools=tools, documents=documents, **SPECIAL_TOKENS))
    assert ours == hf_outcome(source, copy.deepcopy(MESSAGES), tools=tools, documents=documents, **SPECIAL_TOKENS)


@pytest.mark.reference
@pytest.mark.parametrize("kind", [list, tuple, iter])
def test_tools_in_any_iterable_render_as_transformers_renders_them(kind):
    # a list of dicts is taken as it is (at C speed); a tuple or a one-pass iterator goes through the
    # same loop as transformers' and must not be consumed twice
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}, {"type": "function", "function": {"name": "g"}}]
    template = "{{ tools|length }}{% for t in tools %}{{ t.function.name }}{% endfor %}"
    ours = outcome(lambda: apply_chat_template(copy.deepcopy(MESSAGES), template, tools=kind(copy.deepcopy(tools)), **SPECIAL_TOKENS))
    assert ours == hf_outcome(template, MESSAGES, tools=kind(copy.deepcopy(tools)))
    assert ours == ("text", "2fg")
