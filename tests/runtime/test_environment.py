"""The HF environment pieces: folding off, tojson, globals, namespace, generation spans, compile cache."""

from __future__ import annotations

import pickle

import jinja2
import jinja2.sandbox
import pytest

from chatjinja import ChatTemplate, apply_chat_template, load_template
from chatjinja.runtime.environment import ChatTemplateEnvironment, compile_template
from tests.reference import SPECIAL_TOKENS, hf_outcome, our_outcome

U = [{"role": "user", "content": "hi"}]


@pytest.fixture
def no_folding(monkeypatch):
    """Compiling must evaluate no expression that can be expensive: any attempt fails the test (a
    count, where a clock would only show it took long)."""
    attempts = []

    def refuse(self, *args, **kwargs):
        attempts.append(type(self).__name__)
        raise AssertionError(f"{type(self).__name__} evaluated while compiling")

    for node in (jinja2.nodes.Pow, jinja2.nodes.Mul, jinja2.nodes.Filter, jinja2.nodes.Call):
        monkeypatch.setattr(node, "as_const", refuse)
    yield attempts
    monkeypatch.undo()
    assert attempts == []


def test_loading_never_runs_template_code(no_folding):
    source = "{% if false %}{{ 7 ** 30000000 }}{% endif %}"
    template = ChatTemplateEnvironment().from_string(source)  # (compiled here, never from a cache)
    assert template.render() == ""
    assert apply_chat_template(U, source) == ""


def test_folded_filters_are_not_run_at_load_either(no_folding):
    source = "{% if false %}{{ 'x' | center(300000000) }}{{ ('a' * 100000000) | length }}{% endif %}ok"
    ChatTemplateEnvironment().from_string(source)
    assert apply_chat_template(U, source) == "ok"


def test_plain_jinja2_would_fold_it():
    # The reason for the change: jinja2's optimizer evaluates the constant while compiling (and here
    # fails writing its 254,000-digit repr), although the branch can never run
    source = "{% if false %}{{ 7 ** 300000 }}{% endif %}"
    with pytest.raises(ValueError, match="integer string conversion"):
        jinja2.sandbox.ImmutableSandboxedEnvironment().from_string(source)
    assert compile_template(source).render() == ""


def test_tojson_does_not_escape_html():
    assert apply_chat_template(U, "{{ '<b>' | tojson }}") == '"<b>"'
    assert jinja2.Environment().from_string("{{ '<b>' | tojson }}").render() == '"\\u003cb\\u003e"'


@pytest.mark.reference
@pytest.mark.parametrize(
    "source",
    [
        "{{ {'b': 1, 'a': [1, 2]} | tojson(indent=2, sort_keys=True) }}",
        "{{ 'é' | tojson }}{{ 'é' | tojson(ensure_ascii=True) }}",
        "{{ [1, 2] | tojson(separators=(',', ':')) }}",
        "{{ raise_exception('boom: ' ~ messages[0].content) }}",
        "{% set ns = namespace(count=0) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% endfor %}{{ ns.count }}",
        "{% set ns = namespace(_secret=1) %}{{ ns._secret }}",
        "{% set ns = namespace() %}{% set ns._x = 1 %}",
        "{{ dict(a=1, b=2) }}{{ dict.fromkeys(['x', 'y'], 0) }}",
        "{{ dict.__class__ }}|{{ dict.items }}",
        "{{ ''.__class__ }}|{{ messages.append }}|{{ messages.pop() }}",
        "{% for m in messages %}{% if loop.first %}{% continue %}{% endif %}{{ m.role }}{% break %}{% endfor %}done",
        "{{ strftime_now('%Y') | length }}",
        "{{ range(3) | list }}{{ lipsum(1, html=False) | length > 0 }}{{ cycler('a', 'b').next() }}",
        "  {% if true %}\n  x\n  {% endif %}\n",
        "{% generation %}{{ messages[0].content }}{% endgeneration %}",
        "{{ messages[0].content | upper }} {{ 'x' * 3 }} {{ 7 // 2 }} {{ 2 ** 10 }} {{ 1.0 }} {{ none }} {{ true }}",
        "{{ undefined_var }}|{{ undefined_var.attr }}",
        "{% for x in 5 %}{% endfor %}",
        "{% if %}",
        "{% include 'other.jinja' %}",
    ],
)
def test_environment_matches_transformers(source):
    assert our_outcome(source, U) == hf_outcome(source, U)


@pytest.mark.reference
@pytest.mark.parametrize(
    "source",
    [
        "{% for m in messages %}{{ m.role }}: {% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}",
        "{% generation %}{% endgeneration %}x{% generation %}{{ bos_token }}{% endgeneration %}",
        "no generation tag here",
    ],
)
def test_generation_spans_match_transformers(source):
    from transformers.utils.chat_template_utils import render_jinja_template

    conversation = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "answer"}, {"role": "user", "content": "q2"}]
    texts, indices = render_jinja_template(
        conversations=[conversation], chat_template=source, return_assistant_tokens_mask=True, **SPECIAL_TOKENS
    )
    text, spans = apply_chat_template(conversation, source, return_assistant_spans=True, **SPECIAL_TOKENS)
    assert text == texts[0]
    assert spans == [tuple(span) for span in indices[0]]
    for start, end in spans:
        assert text[start:end] in ("answer", "<s>", "")


def test_batch_spans_shape():
    source = "{% generation %}{{ messages[-1].content }}{% endgeneration %}"
    texts, spans = apply_chat_template([U, [{"role": "user", "content": "yo"}]], source, return_assistant_spans=True)
    assert texts == ["hi", "yo"] and spans == [[(0, 2)], [(0, 2)]]


def test_compiled_templates_are_cached_by_source():
    source = "{{ messages | length }} cached"
    assert compile_template(source) is compile_template(str(source))


def test_environment_options_are_hf():
    env = ChatTemplateEnvironment()
    assert env.trim_blocks and env.lstrip_blocks and not env.optimized
    assert isinstance(env, jinja2.sandbox.ImmutableSandboxedEnvironment)
    assert {"range", "lipsum", "cycler", "joiner"} <= set(env.globals)


def test_chat_template_is_picklable_and_renders_after_unpickling():
    template = load_template("mistral-v3-tekken")
    compile_template(template.source)
    clone = pickle.loads(pickle.dumps(template))
    assert clone == template
    assert clone.render(U) == template.render(U)


def test_chat_template_from_source():
    template = ChatTemplate("{{ bos_token }}{{ messages[0].content }}", special_tokens={"bos_token": "<s>"})
    assert template.render(U) == "<s>hi"
    assert template.render(U, bos_token="") == "hi"


def test_caller_messages_are_not_mutated():
    conversation = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "partial", "extra": None}]
    snapshot = repr(conversation)
    apply_chat_template(conversation, "{% for m in messages %}{{ m.content }}{% endfor %}", continue_final_message=True)
    assert repr(conversation) == snapshot


def test_caller_content_chunks_are_not_mutated():
    # plain values reach the template without a copy; continuing a chunk list must edit a copy of it
    conversation = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "text", "text": "partial"}]}]
    snapshot = repr(conversation)
    text = apply_chat_template(
        conversation, "{% for m in messages %}{{ m.content if m.content is string else m.content[0].text }}|{% endfor %}",
        continue_final_message=True,
    )
    assert text == "hi|partial"
    assert repr(conversation) == snapshot
