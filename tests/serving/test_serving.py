"""response_template, parse_response and ResponseStream on small templates: what is derived, what is refused and why, hostile input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chatjinja
from chatjinja.cli import main
from chatjinja.serving import library
from chatjinja.serving import parse as parse_module
from chatjinja.serving import suite
from chatjinja.serving.derive import ResponseTemplateError
from chatjinja.serving.rules import _BAD, _GOOD

chat_parsing = pytest.importorskip("transformers.utils.chat_parsing")

HERMES = _GOOD
THINKING = ("{%- for m in messages %}<|{{ m['role'] }}|>{%- if m.get('reasoning_content') %}<think>{{ m['reasoning_content'] }}"
            "</think>{%- endif %}{{ m['content'] }}<|end|>{%- endfor %}{%- if add_generation_prompt %}<|assistant|>{%- endif %}")
GLUED = THINKING.replace("</think>", "")  # reasoning runs straight into the content


def _prompt(template: str) -> str:
    return chatjinja.apply_chat_template([{"role": "user", "content": "hi"}], template, add_generation_prompt=True)


def test_derives_a_template_that_reads_calls_and_content() -> None:
    derived = chatjinja.response_template(HERMES)
    assert set(derived["fields"]) == {"tool_calls", "content"} and derived["start_anchor"].endswith("<|assistant|>")
    reply = 'Sure.<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call><|end|>'
    message = chatjinja.parse_response(reply, HERMES, prefix=_prompt(HERMES))
    assert message == {"role": "assistant", "content": "Sure.", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]}
    assert message == chat_parsing.parse_response(reply, derived, prefix=_prompt(HERMES))


def test_reasoning_markers() -> None:
    derived = chatjinja.response_template(THINKING)
    assert derived["fields"]["reasoning_content"]["open"] == "<think>"
    message = chatjinja.parse_response("<think>hmm</think>42<|end|>", derived, prefix=_prompt(THINKING))
    assert (message["reasoning_content"], message["content"]) == ("hmm", "42")


@pytest.mark.parametrize(("template", "reason"), [
    (_BAD, "Python dict repr"),
    (GLUED, "not separated"),
    ("{{ messages[0]['content'] }}", "no suite message renders"),
])
def test_refuses_with_the_reason(template: str, reason: str) -> None:
    with pytest.raises(ResponseTemplateError, match=reason) as caught:
        chatjinja.response_template(template)
    assert caught.value.reasons or "no suite message" in reason


def test_streaming_equals_one_shot() -> None:
    derived = chatjinja.response_template(HERMES)
    reply = 'Ok.<tool_call>{"name": "f", "arguments": {"x": [1, {"y": "é"}]}}</tool_call><|end|>'
    stream = chatjinja.ResponseStream(derived, prefix=_prompt(HERMES))
    events = list(stream.initial_events)
    for char in reply:
        events += stream.feed(char)
    message, final = stream.finalize()
    assert message == chatjinja.parse_response(reply, derived, prefix=_prompt(HERMES))
    assert {e["type"] for e in events + final} == {"region_open", "region_chunk", "region_close"}


def test_cli_prints_the_template_or_one_line(tmp_path, capsys) -> None:
    good, bad = tmp_path / "good.jinja", tmp_path / "bad.jinja"
    good.write_text(HERMES, encoding="utf-8")
    bad.write_text(_BAD, encoding="utf-8")
    out = tmp_path / "rt.json"
    assert main(["response-template", str(good), "-o", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == chatjinja.response_template(HERMES)
    capsys.readouterr()
    target = tmp_path / "never.json"
    assert main(["response-template", str(bad), "-o", str(target)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: tool calls: the arguments are written as a Python dict repr") and err.count("\n") == 1
    assert not target.exists()


def test_hostile_templates_are_bounded(monkeypatch) -> None:
    """A runaway template is stopped by the render budgets; derivation renders a fixed number of times."""
    calls = []
    real = suite.render_text  # every render of the suite (the prompt, and each case traced) goes through it
    monkeypatch.setattr(suite, "render_text", lambda *a, **k: calls.append(1) or real(*a, **k))
    loop = "{%- for i in range(99999) %}{%- for j in range(99999) %}{%- for k in range(99999) %}{%- endfor %}{%- endfor %}{%- endfor %}"
    with pytest.raises(ResponseTemplateError, match="the generation prompt does not render: BudgetExceeded"):
        chatjinja.response_template(loop)
    assert len(calls) == 1  # the prompt's render ran out of fuel: nothing else is rendered
    calls.clear()
    huge = "{%- for m in messages %}<|{{ m['role'] }}|>{{ 'y' * 100000 }}{{ m['content'] }}{%- endfor %}<|assistant|>"
    with pytest.raises(ResponseTemplateError, match="longer than 64000 characters"):
        chatjinja.response_template(huge)
    assert len(calls) == 1 + len(suite.CASES) + 1  # the prompt, each case, the empty reply


def test_reply_size_limit(monkeypatch) -> None:
    monkeypatch.setattr(parse_module, "MAX_REPLY_CHARS", 100)
    derived = chatjinja.response_template(HERMES)
    with pytest.raises(parse_module.ReplyTooLarge):
        chatjinja.parse_response("x" * 101, derived, prefix="")
    stream = chatjinja.ResponseStream(derived, prefix="")
    stream.feed("x" * 60)
    with pytest.raises(parse_module.ReplyTooLarge):
        stream.feed("x" * 60)


_DERIVED = None


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('<>/{}[]":,tool_call|end think abc\n')), max_size=120))
def test_untrusted_replies_read_as_transformers_reads_them(text: str) -> None:
    global _DERIVED
    _DERIVED = _DERIVED or chatjinja.response_template(HERMES)

    def outcome(parse):
        try:
            return parse(text, _DERIVED, prefix="")
        except ValueError as exc:  # malformed call JSON: transformers' error, passed through
            return ("ValueError", str(exc))

    assert outcome(chatjinja.parse_response) == outcome(chat_parsing.parse_response)


def _tool(name: str, properties: dict) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": properties}}}


# Schemas allowing `string` beside another type, and not: transformers 5.25 stopped casting the first kind
# for the `json` and `python-call-list` content parsers
CAST_TOOLS = [_tool("f", {
    "either": {"type": ["integer", "string"]}, "maybe": {"type": "string", "nullable": True},
    "whole": {"type": "integer"}, "text": {"type": "string"},
    "any": {"anyOf": [{"type": "number"}, {"type": "string"}]}, "flag": {"type": "boolean"},
})]


@pytest.mark.reference
@pytest.mark.parametrize("arguments", [
    {"either": "5", "maybe": "None", "whole": "7", "text": "8", "any": "1.5", "flag": "true"},
    {"either": 5, "maybe": None, "whole": 7, "text": "x", "any": 1.5, "flag": True},
    {"either": ["5"], "whole": ["7", "8"]},
])
def test_tool_arguments_cast_as_transformers_casts_them(arguments: dict) -> None:
    """``tools=`` casts (or leaves) a JSON call's arguments as the installed transformers' parser does."""
    derived = chatjinja.response_template(HERMES)
    reply = f'<tool_call>{{"name": "f", "arguments": {json.dumps(arguments)}}}</tool_call><|end|>'
    ours = chatjinja.parse_response(reply, HERMES, prefix=_prompt(HERMES), tools=CAST_TOOLS)
    assert ours == chat_parsing.parse_response(reply, derived, prefix=_prompt(HERMES), tools=CAST_TOOLS)
    stream = chatjinja.ResponseStream(derived, prefix=_prompt(HERMES), tools=CAST_TOOLS)
    for char in reply:
        stream.feed(char)
    assert stream.finalize()[0] == ours


def test_a_reply_of_blank_lines_reads_in_one_pass(monkeypatch) -> None:
    """transformers' partial matching (``feed``) is quadratic in a run of whitespace in the ``regex`` module
    (80,000 spaces: about 1 s); ``parse_response`` reads the whole reply at the end of the stream, where
    nothing is partial: a reply of a million blank characters reads as transformers reads a short one."""
    derived = chatjinja.response_template(HERMES)
    short = chat_parsing.parse_response("hello" + " \n" + "world", derived, prefix="")

    def partial(*args, **kwargs):
        raise AssertionError("parse_response ran transformers' partial matching")

    monkeypatch.setattr(chat_parsing.ResponseParser, "feed", partial)
    gap = " " * 500_000 + "\n" * 500_000
    message = chatjinja.parse_response("hello" + gap + "world", derived, prefix="")
    assert message["content"].replace(gap, " \n") == short["content"]


def test_without_the_parse_extra(monkeypatch, tmp_path) -> None:
    """No transformers: a response template still reads replies (chatjinja's reader needs only ``regex``);
    deriving one says which extra to install; check notes that RP did not run."""
    from chatjinja.release import check_model

    def missing():
        raise parse_module.ParseExtraMissing("deriving a response template needs transformers' parser: pip install 'chatjinja[parse]'")

    monkeypatch.setattr(library, "parser_module", missing)  # the one place derivation imports the parser from
    assert chatjinja.parse_response("x", {"start_anchor": "a", "fields": {"content": {}}}, prefix="") == {"content": "x"}
    with pytest.raises(parse_module.ParseExtraMissing, match=r"chatjinja\[parse\]"):
        chatjinja.response_template(HERMES.replace("<|end|>", "<|end_of_this_test|>"))  # not derived (cached) before
    (tmp_path / "chat_template.jinja").write_text(_BAD, encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text('{"eos_token": "</s>"}', encoding="utf-8")
    check = check_model(tmp_path)
    assert not [f for f in check.findings if f.code.startswith("RP")]
    assert any("replies were not checked (RP)" in note for note in check.notes)


_FRAGMENTS = [
    "{{ m['content'] }}", "<|{{ m['role'] }}|>", "<think>", "</think>", "[TOOL_CALLS]", "<tool_call>", "</tool_call>",
    "{{ m.get('reasoning_content', '') }}", "{{ eos_token }}", "\n", "{{ c['function'] | tojson }}",
    "{{ c['function']['name'] }}", "{{ c['function']['arguments'] }}", "{{ c['id'] }}", "{", "}", "<|end|>",
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=8), st.lists(st.sampled_from(_FRAGMENTS), max_size=4))
def test_untrusted_templates_derive_or_say_why(turn: list[str], call: list[str]) -> None:
    """Whatever a template writes, derivation returns a template or raises ResponseTemplateError, nothing else."""
    calls = "{%- for c in m.get('tool_calls', []) %}" + "".join(call) + "{%- endfor %}" if call else ""
    source = ("{%- for m in messages %}<|{{ m['role'] }}|>" + "".join(turn).replace("{{ c[", "{{ m[") + calls + "{%- endfor %}"
              "{%- if add_generation_prompt %}<|assistant|>{%- endif %}")
    try:
        derived = chatjinja.response_template(source)
    except ResponseTemplateError as exc:
        assert exc.message.strip()
    else:
        assert derived["fields"] and "start_anchor" in derived
