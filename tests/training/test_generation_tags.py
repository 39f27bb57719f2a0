"""add_generation_tags and ``chatjinja generation-tags`` on small templates: where the tags go, what is refused and why."""

from __future__ import annotations

import re

import pytest

import chatjinja
from chatjinja.observation import render as observation_render
from chatjinja.cli import main
from chatjinja.training import generation_tags
from chatjinja.training.tag_check import ASSISTANT_OUTSIDE
from chatjinja.training.generation_tags import (
    GenerationTagsRefused,
    add_generation_tags,
    same_failure,
)

QWEN = (
    "{%- for message in messages %}\n"
    "    {%- if message.role == 'user' %}\n"
    "        {{- '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'assistant' %}\n"
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}\n"
)
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LLAMA3 = (
    "{% for message in messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
CONVERSATION = [
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello, human"},
    {"role": "user", "content": "Bye"},
    {"role": "assistant", "content": "Goodbye"},
]


def _span_texts(source: str, messages: list) -> list[str]:
    text, spans = chatjinja.apply_chat_template(messages, source, return_assistant_spans=True)
    return [text[a:b] for a, b in spans]


def test_tags_hold_content_and_end_marker_not_the_header() -> None:
    tagged = add_generation_tags(QWEN)
    assert "{% generation %}" in tagged or re.search(r"\{%[-+]? generation", tagged)
    assert chatjinja.apply_chat_template(CONVERSATION, tagged) == chatjinja.apply_chat_template(CONVERSATION, QWEN)
    assert [t.strip() for t in _span_texts(tagged, CONVERSATION)] == ["Hello, human<|im_end|>", "Goodbye<|im_end|>"]


def test_a_template_printing_every_role_in_one_expression_gets_a_role_test() -> None:
    tagged = add_generation_tags(CHATML)
    assert "['role'] == 'assistant'" in tagged
    for add_generation_prompt in (False, True):
        assert chatjinja.apply_chat_template(CONVERSATION, tagged, add_generation_prompt=add_generation_prompt) == \
            chatjinja.apply_chat_template(CONVERSATION, CHATML, add_generation_prompt=add_generation_prompt)
    assert [t.strip() for t in _span_texts(tagged, CONVERSATION)] == ["Hello, human<|im_end|>", "Goodbye<|im_end|>"]


def test_splitting_a_header_off_keeps_a_non_string_content_an_error() -> None:
    # '<|im_start|>...' + [list] raises TypeError; the split copy's second half, ``content + '<|im_end|>'``, raises one
    # too (in the other operand order's words), and never prints the list
    tagged = add_generation_tags(CHATML)
    assert "'' +" not in tagged and "{% generation %}{{ message['content'] + '<|im_end|>'" in tagged
    chunks = [{"role": "user", "content": "a"}, {"role": "assistant", "content": [{"type": "text", "text": "x"}]}]
    with pytest.raises(TypeError) as original:
        chatjinja.apply_chat_template(chunks, CHATML)
    with pytest.raises(TypeError) as copy:
        chatjinja.apply_chat_template(chunks, tagged)
    assert str(original.value) == 'can only concatenate str (not "list") to str'
    assert str(copy.value) == 'can only concatenate list (not "str") to list'
    assert same_failure(f"TypeError: {original.value}", f"TypeError: {copy.value}")
    assert not same_failure(f"TypeError: {original.value}", "UndefinedError: 'content' is undefined")


def test_a_lone_content_after_the_header_keeps_the_template_s_error() -> None:
    # {{ header + content }}: without '' + the copy would print a list of parts where the template raises
    template = ("{% for m in messages %}{% if m.role == 'assistant' %}{{ '<|assistant|>' + m.content }}{{ '<|end|>' }}"
                "{% else %}{{ '<|user|>' + m.content + '<|end|>' }}{% endif %}{% endfor %}"
                "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}")
    tagged = add_generation_tags(template)
    assert "{{ '' + m.content }}" in tagged
    parts = [{"role": "user", "content": "a"}, {"role": "assistant", "content": [{"type": "text", "text": "x"}]}]
    with pytest.raises(TypeError) as original:
        chatjinja.apply_chat_template(parts, template)
    with pytest.raises(TypeError) as copy:
        chatjinja.apply_chat_template(parts, tagged)
    assert str(copy.value) == str(original.value)


def _lone(setting: str) -> str:
    """A template printing ``header + content`` after ``setting`` (what it does with ``content``)."""
    return ("{% for m in messages %}" + setting + "{% if m.role == 'assistant' %}{{ '<|assistant|>' + content }}"
            "{{ '<|end|>' }}{% else %}{{ '<|user|>' + m.content + '<|end|>' }}{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}")


@pytest.mark.parametrize("setting, proved", [
    ("{% set content = m.content | trim %}", True),  # Qwen3.5's shape: a string filter
    ("{% set content = m.content.strip() %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1]"
     ".lstrip() %}{% endif %}", True),  # Qwen3's split, every assignment a string
    ("{% set content = m.content %}", False),  # the message's value: None or a list of parts would print
    ("{% if m.role == 'assistant' %}{% set content = m.content | trim %}{% endif %}", False),  # set around, not before
    ("{% set content = m.content | trim %}{% for content in [m.content] %}{% endfor %}", False),  # a loop binds it too
])
def test_a_lone_name_after_the_header_is_split_bare_only_where_it_is_proved_a_string(setting, proved) -> None:
    template = _lone(setting)
    tagged = add_generation_tags(template)
    assert ("{{ '' + content }}" not in tagged) is proved, tagged
    for content in ("hi", [{"type": "text", "text": "x"}]):
        chat = [{"role": "user", "content": "a"}, {"role": "assistant", "content": content}]
        try:
            expected = chatjinja.apply_chat_template(chat, template)
        except Exception as exc:  # noqa: BLE001 - the copy must fail the same way
            with pytest.raises(type(exc)):
                chatjinja.apply_chat_template(chat, tagged)
        else:
            assert chatjinja.apply_chat_template(chat, tagged) == expected


def test_a_turn_built_in_one_string_is_refused_with_the_reason() -> None:
    with pytest.raises(GenerationTagsRefused, match="printed by one expression that cannot be split.*line 1") as refusal:
        add_generation_tags(LLAMA3)
    assert refusal.value.kind == generation_tags.ONE_EXPRESSION


def test_a_template_with_generation_tags_is_returned_unchanged() -> None:
    tagged = add_generation_tags(QWEN)
    assert add_generation_tags(tagged) == tagged


def test_a_name_the_turn_sets_stays_outside_the_blocks() -> None:
    # a generation block is a call block: a {% set %} inside it would not reach the {{ last }} after the turn
    source = (
        "{% for m in messages %}{% if m.role == 'assistant' %}{{ '<a>' }}{{ m.content }}{% set last = m.content %}{{ '</a>' }}"
        "{% else %}{{ '<u>' + m.content + '</u>' }}{% endif %}{{ '[' ~ last ~ ']' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<a>' }}{% endif %}"
    )
    tagged = add_generation_tags(source)
    assert "{% endgeneration %}{% set last = m.content %}{% generation %}" in tagged
    assert chatjinja.apply_chat_template(CONVERSATION, tagged) == chatjinja.apply_chat_template(CONVERSATION, source)
    # the '[...]' after the role test is printed in every iteration: marked in the assistant's only
    assert _span_texts(tagged, CONVERSATION) == ["Hello, human", "</a>", "[Hello, human]", "Goodbye", "</a>", "[Goodbye]"]


def test_a_turn_that_breaks_its_loop_is_refused() -> None:
    source = (
        "{% for m in messages %}{% if m.role == 'assistant' %}{{ '<a>' }}{{ m.content }}{% if m.content == 'x' %}{% break %}"
        "{% endif %}{{ '</a>' }}{% else %}{{ '<u>' + m.content + '</u>' }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<a>' }}{% endif %}"
    )
    with pytest.raises(GenerationTagsRefused, match=r"leaves its loop with \{% break %\}") as refusal:
        add_generation_tags(source)
    assert refusal.value.kind == generation_tags.LOOP_CONTROL


def test_a_template_without_assistant_output_is_refused() -> None:
    with pytest.raises(GenerationTagsRefused, match="renders no assistant message content") as refusal:
        add_generation_tags("{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}")
    assert refusal.value.kind == generation_tags.NOT_RENDERED


def test_a_refusal_keeps_its_kind_through_copies_and_pickles() -> None:
    # derived masks keep a refusal once per source and raise a copy of it for every conversation that needs it
    import copy
    import pickle

    with pytest.raises(GenerationTagsRefused) as refusal:
        add_generation_tags(LLAMA3)
    for again in (copy.copy(refusal.value), pickle.loads(pickle.dumps(refusal.value))):
        assert (type(again), str(again), again.kind) == (GenerationTagsRefused, str(refusal.value), generation_tags.ONE_EXPRESSION)
    budget = generation_tags.GenerationTagsBudgetExceeded("max_renders", 5, "more than 5 renders")
    again = pickle.loads(pickle.dumps(budget))
    assert (again.kind, again.budget, again.limit, str(again)) == (generation_tags.BUDGET, "max_renders", 5, str(budget))
    assert set(generation_tags.REFUSAL_KINDS) >= {refusal.value.kind, budget.kind}


def test_public_api_and_type_check() -> None:
    assert chatjinja.add_generation_tags is add_generation_tags
    with pytest.raises(TypeError, match="template source text"):
        add_generation_tags(b"{{ x }}")  # type: ignore[arg-type]


# ---- untrusted templates: budgets and bounded work ------------------------------------------


@pytest.mark.parametrize("payload", [
    "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
    "{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}",
    "{{ 'a' * 10**10 }}",
    "{% for c in ().__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}ok",
    "{% for m in messages %}{{ m.content }}{% for i in range(10**6) %}{{ i }}{% endfor %}{% endfor %}",
])
def test_attack_payloads_are_refused_within_a_bounded_number_of_renders(payload: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = observation_render.render_source
    monkeypatch.setattr(observation_render, "render_source", lambda *a, **k: calls.append(1) or real(*a, **k))
    with pytest.raises(GenerationTagsRefused):
        add_generation_tags(payload)
    assert 0 < len(calls) <= generation_tags.MAX_RENDERS


def test_source_budgets_apply() -> None:
    from chatjinja.limits import StaticLimitExceeded

    with pytest.raises(StaticLimitExceeded):
        add_generation_tags("{% if true %}" * 1000)


def test_render_count_is_bounded_for_an_accepted_template(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = observation_render.render_source
    monkeypatch.setattr(observation_render, "render_source", lambda *a, **k: calls.append(1) or real(*a, **k))
    add_generation_tags(QWEN)
    assert len(calls) <= generation_tags.MAX_RENDERS


def test_the_render_limit_is_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generation_tags, "MAX_RENDERS", 5)
    with pytest.raises(GenerationTagsRefused, match="more than 5 renders"):
        add_generation_tags(QWEN)


# ---- the command ----------------------------------------------------------------------------


def test_cli_writes_the_tagged_copy(tmp_path, capsys) -> None:
    template = tmp_path / "qwen.jinja"
    template.write_text(QWEN, encoding="utf-8")
    out = tmp_path / "qwen_training.jinja"
    assert main(["generation-tags", str(template), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == add_generation_tags(QWEN)
    assert main(["generation-tags", str(template)]) == 0
    assert capsys.readouterr().out == add_generation_tags(QWEN)


def test_cli_refusal_is_one_line_exit_1_and_no_file(tmp_path, capsys) -> None:
    template = tmp_path / "llama3.jinja"
    template.write_text(LLAMA3, encoding="utf-8")
    out = tmp_path / "out.jinja"
    assert main(["generation-tags", str(template), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "cannot be split" in err and "llama3.jinja" in err
    assert not out.exists()


@pytest.mark.parametrize("text,where,message", [
    ("{{ x", ":1:5", "unexpected end of template"),
    ("{{ 1" + " + 1" * 60_000 + " }}", ":1:", "max_source_tokens exceeded (limit 100000)"),
])
def test_cli_a_template_the_parser_refuses_is_named_by_its_file(tmp_path, capsys, text, where, message) -> None:
    """The parser's error names the template file and its line and column, not ``<string>``."""
    template = tmp_path / "bad.jinja"
    template.write_text(text, encoding="utf-8")
    assert main(["generation-tags", str(template), "-o", str(tmp_path / "out.jinja")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and f"({template}{where}" in err, err
    assert not (tmp_path / "out.jinja").exists()


@pytest.mark.parametrize("name", ["devstral-small-2-24b-instruct-2512", "mistral-v1", "mistral-v2-v3", "mistral-v3-tekken"])
def test_every_bundled_template_is_tagged(name: str) -> None:
    template = chatjinja.load_template(name)
    tagged = add_generation_tags(template.source)
    chat = [{"role": "user", "content": "Ping"}, {"role": "assistant", "content": "Pong"}, {"role": "user", "content": "Again"},
            {"role": "assistant", "content": "Pong two"}]
    kwargs = dict(template.special_tokens)
    text, spans = chatjinja.apply_chat_template(chat, tagged, return_assistant_spans=True, **kwargs)
    assert text == chatjinja.apply_chat_template(chat, template.source, **kwargs)
    assert [text[a:b].strip().startswith("Pong") for a, b in spans] == [True, True]
    assert not any("Ping" in text[a:b] or "Again" in text[a:b] for a, b in spans)


# ---- the model's text after the role header, end markers in template text, other roles' markers ----

HARMONY = (
    "{% for message in messages %}"
    "{% if message.role == 'user' %}{{ '<|start|>user<|message|>' + message.content + '<|end|>' }}"
    "{% else %}{{ '<|start|>assistant<|channel|>final<|message|>' + message.content + '<|end|>' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start|>assistant' }}{% endif %}"
)
SMOLVLM = (
    "{% for message in messages %}{% if message['role'] == 'assistant' %}Assistant:"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{ ' ' + line['text'] }}{% endif %}{% endfor %}"
    "<end_of_utterance>\n{% else %}User: {{ message['content'][0]['text'] }}<end_of_utterance>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
TURN_ENDS = (
    "{% for message in messages %}{% set role = 'model' if message.role == 'assistant' else message.role %}"
    "{{ '<|turn>' + role + '\\n' }}"
    "{% if role == 'model' %}{{ message.content }}{% else %}{{ message.content }}{% endif %}"
    "{% if true %}{{ '<turn|>\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|turn>model\\n' }}{% endif %}"
)


def test_text_the_model_writes_after_the_role_header_is_inside_the_span() -> None:
    """gpt-oss: the generation prompt writes ``<|start|>assistant``; ``<|channel|>final<|message|>`` is the model's."""
    spans = _span_texts(add_generation_tags(HARMONY), CONVERSATION)
    assert spans == ["<|channel|>final<|message|>Hello, human<|end|>", "<|channel|>final<|message|>Goodbye<|end|>"]


def test_the_end_of_turn_marker_is_in_the_span_when_the_content_prints_nothing() -> None:
    """SmolVLM: string content prints nothing; ``<end_of_utterance>`` after the content's loop is still the model's."""
    tagged = add_generation_tags(SMOLVLM)
    chunked = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in CONVERSATION]
    assert _span_texts(tagged, chunked) == [" Hello, human<end_of_utterance>\n", " Goodbye<end_of_utterance>\n"]
    assert _span_texts(tagged, CONVERSATION) == ["<end_of_utterance>\n", "<end_of_utterance>\n"]


def test_another_roles_end_marker_stays_outside_the_spans() -> None:
    """The ``<turn|>`` every role prints is the model's only after an assistant message (diffusion_gemma: the branch
    that prints the assistant's content tests ``role == 'model'``, which names no assistant role)."""
    spans = _span_texts(add_generation_tags(TURN_ENDS), CONVERSATION)
    assert [s.strip() for s in spans if s.strip()] == ["Hello, human", "<turn|>", "Goodbye", "<turn|>"]


# ---- where a turn's run starts and ends: the prompt's text in another branch, whitespace control, second loops ----

LAGUNA = (
    "{%- for m in messages -%}{%- if m.role == 'assistant' -%}{{- '<assistant>\\n' -}}"
    "{%- if m.reasoning_content -%}{{- '<think>\\n' + m.reasoning_content + '\\n</think>\\n' -}}"
    "{%- else -%}{{- '</think>\\n' -}}{%- endif -%}"
    "{{- m.content + '\\n' -}}{{- '</assistant>\\n' -}}"
    "{%- else -%}{{- '<' + m.role + '>\\n' + m.content + '\\n</' + m.role + '>\\n' -}}{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<assistant>\\n</think>' -}}{%- endif -%}"
)


def test_a_turn_starts_after_the_prompts_text_in_each_branch() -> None:
    """Laguna v2: the generation prompt writes ``<assistant>\\n</think>``; one ``{% if %}`` prints ``<think>`` and the
    reasoning (the model's) or else that ``</think>`` (the prompt's). The block starts inside the ``if``'s first branch
    and again after the ``if``, so a turn without reasoning has no ``</think>`` in its span."""
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": "ans", "reasoning_content": "hmm"}]
    tagged = add_generation_tags(LAGUNA)
    text, spans = chatjinja.apply_chat_template(chat, tagged, return_assistant_spans=True)
    assert text == chatjinja.apply_chat_template(chat, LAGUNA)
    assert [text[a:b] for a, b in spans] == ["yo\n</assistant>\n", "<think>\nhmm\n</think>\n", "ans\n</assistant>\n"]
    assert spans[1][1] == spans[2][0]  # one run of the model's text: the two blocks touch


#: transformers' check for the tag (tokenization_utils_base.py)
TRANSFORMERS_TAG_RE = re.compile(r"\{\%-?\s*generation\s*-?\%\}")
KIMI_END = (
    "{%- for m in messages -%}\n"
    "  {%- if m.role == 'assistant' -%}\n    <|a|>{{ m.content }}\n"
    "  {%- else -%}\n    <|{{ m.role }}|>{{ m.content }}\n"
    "  {%- endif {right}%}\n  <|im_end|>\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}<|a|>{%- endif -%}"
)


@pytest.mark.parametrize("right", ["-", "+"])
def test_a_block_opening_on_template_text_keeps_what_the_tag_before_did_to_it(right: str) -> None:
    """Kimi-K2: the ``<|im_end|>`` every role prints is text after ``-%}``, which strips its blanks; the opener put
    between them strips them instead (``{% generation -%}``). After ``+%}`` (or ``}}``) the text's newline stays, and a
    block tag there would lose it to trim_blocks: the opener goes after it."""
    source = KIMI_END.replace("{right}", right)
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": "ans"}]
    tagged = add_generation_tags(source)
    text, spans = chatjinja.apply_chat_template(chat, tagged, return_assistant_spans=True)
    assert text == chatjinja.apply_chat_template(chat, source)
    assert [text[a:b].strip() for a, b in spans] == ["yo", "<|im_end|>", "ans", "<|im_end|>"]
    assert TRANSFORMERS_TAG_RE.search(tagged)

SECOND_LOOP = (
    "{%- set ns = namespace(first=-1) -%}"
    "{%- for m in messages -%}{%- if m.role == 'assistant' and ns.first < 0 -%}{%- set ns.first = loop.index0 -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- for m in messages[:ns.first + 1] -%}{%- if m.role == 'assistant' -%}<|a|><think></think>{{ m.content }}<|end|>"
    "{%- else -%}<|{{ m.role }}|>{{ m.content }}<|end|>{%- endif -%}{%- endfor -%}"
    "{%- for m in messages[ns.first + 1:] -%}{%- if m.role == 'assistant' -%}<|a|><think>{{ m.reasoning_content }}</think>"
    "{{ m.content }}<|end|>{%- else -%}<|{{ m.role }}|>{{ m.content }}<|end|>{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|a|>{%- endif -%}"
)


def test_turns_a_second_loop_prints_are_tagged() -> None:
    """Kimi-K2-Thinking prints the messages up to the first answer without tool calls in one loop and the rest, with
    their reasoning, in another: the conversations that locate the turns include one with two answers."""
    assert _two_answer_spans(SECOND_LOOP) == ["yo<|end|>", "hmm</think>ans<|end|>"]


def _two_answer_spans(source: str) -> list[str]:
    """The spans of a conversation with two answers, the second with reasoning, in the tagged copy of ``source``
    (which renders the original's text)."""
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": "ans", "reasoning_content": "hmm"}]
    text, spans = chatjinja.apply_chat_template(chat, add_generation_tags(source), return_assistant_spans=True)
    assert text == chatjinja.apply_chat_template(chat, source)
    return [text[a:b] for a, b in spans]


def test_a_copy_rendering_other_text_is_refused_naming_where(monkeypatch: pytest.MonkeyPatch) -> None:
    real = generation_tags._Tagger.rewrite
    monkeypatch.setattr(generation_tags._Tagger, "rewrite", lambda self, ranges: real(self, ranges).replace("<|end|>", "<|END|>"))
    with pytest.raises(GenerationTagsRefused) as refusal:
        add_generation_tags(SECOND_LOOP)
    assert refusal.value.kind == generation_tags.VERIFICATION
    message = str(refusal.value)
    # the needle and '<|' agree; the first letter of the end marker differs
    assert "renders different text from offset 18: '<|user|>Nd1q940z<|end|>" in message, message
    assert "'<|user|>Nd1q940z<|END|>" in message, message
    assert "\n" not in message


THINK_TEXT = (
    "{%- for m in messages -%}{%- if m.role == 'assistant' -%}{{ '<|a|>' }}<think>{{ m.reasoning_content }}</think>"
    "{{ m.content }}<|end|>{%- else -%}<|{{ m.role }}|>{{ m.content }}<|end|>{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|a|>{%- endif -%}"
)


def test_template_text_after_the_role_header_starts_the_span() -> None:
    """Kimi-K2-Thinking writes ``<think>`` as template text before ``{{ rc }}``; its generation prompt writes only the
    role header, so the ``<think>`` is the model's and the block starts with it."""
    assert _two_answer_spans(THINK_TEXT) == ["<think></think>yo<|end|>", "<think>hmm</think>ans<|end|>"]


# ---- modes ----------------------------------------------------------------------------------

THINKING_MODE = (
    "{%- for m in messages -%}{%- if m.role == 'assistant' -%}<|a|>{%- if thinking -%}<think>{{ m.reasoning_content }}"
    "</think>{%- endif -%}{{ m.content }}<|end|>{%- else -%}<|{{ m.role }}|>{{ m.content }}<|end|>{%- endif -%}"
    "{%- endfor -%}{%- if add_generation_prompt -%}<|a|>{%- endif -%}"
)
REASONING_CHAT = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello", "reasoning_content": "hmm"}]


def test_reasoning_a_mode_prints_is_inside_the_span() -> None:
    """The reasoning only ``thinking=true`` prints (DeepSeek-V4's shape): located in that mode, inside the span."""
    tagged = add_generation_tags(THINKING_MODE)
    text, spans = chatjinja.apply_chat_template(REASONING_CHAT, tagged, return_assistant_spans=True, thinking=True)
    assert [text[a:b] for a, b in spans] == ["<think>hmm</think>Hello<|end|>"]
    assert _span_texts(tagged, REASONING_CHAT) == ["Hello<|end|>"]


def test_a_copy_wrong_in_a_mode_is_refused_naming_the_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turns located in the default mode only leave the thinking-mode reasoning outside: the verification, in every
    mode, refuses that copy."""
    monkeypatch.setattr(generation_tags._Tagger, "path_of", lambda self, messages, variables=None: None)
    with pytest.raises(GenerationTagsRefused, match=r"assistant reasoning_content outside every generation span .*"
                                                    r"\(mode thinking=true\)$") as refusal:
        add_generation_tags(THINKING_MODE)
    assert refusal.value.kind == generation_tags.VERIFICATION
    assert refusal.value.problem is not None and refusal.value.problem.kind == ASSISTANT_OUTSIDE
