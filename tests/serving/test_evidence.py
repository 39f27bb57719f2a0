"""Derivation from all the evidence on small templates: every mode, markers only the source or a model's tokens name, renders transformers' sandbox refuses only for ``list.append``, and a continued message returned whole."""

from __future__ import annotations

import pytest

import chatjinja
from chatjinja.observation import render_text
from chatjinja.serving.continued import continued_message
from chatjinja.serving.evidence import call_pair, marker_pairs, prefilled, reasoning_pairs

chat_parsing = pytest.importorskip("transformers.utils.chat_parsing")

USER = [{"role": "user", "content": "hi"}]

# Gemma 4's shape: with thinking off the prompt prefills an empty thought channel the history never writes
CHANNEL = (
    "{%- for m in messages %}<|turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{%- if m.get('reasoning_content') %}<|channel>thought\n{{ m['reasoning_content'] }}<channel|>{%- endif %}"
    "{{ m['content'] }}<turn|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|turn>model\n{%- if not enable_thinking %}<|channel>thought\n<channel|>{%- endif %}{%- endif %}"
)
# DeepSeek R1's shape: the prompt opens <think>, the history drops the reasoning (split on </think>)
STRIPPED = (
    "{%- for m in messages %}<|{{ m['role'] }}|>{{ m['content'].split('</think>')[-1] }}<|end|>{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|><think>\n{%- endif %}"
)
# LFM2's shape: calls are never rendered
NO_CALLS = "{%- for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{%- endfor %}" \
           "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
# Kimi K2's shape: call ids appended to a namespace list while the calls render
APPENDS = (
    "{%- set q = namespace(ids=[]) %}{%- for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}"
    "{%- for c in m.get('tool_calls', []) %}{%- set _ = q.ids.append(c['id']) %}"
    "<call>{{ {'name': c['function']['name'], 'arguments': c['function']['arguments']} | tojson }}</call>{%- endfor %}"
    "<|end|>{%- endfor %}{%- if add_generation_prompt %}<|assistant|>{%- endif %}"
)


def _prompt(template: str, **variables) -> str:
    outcome = render_text(template, USER, add_generation_prompt=True, variables=variables)
    assert outcome.ok, outcome.error
    return outcome.text


# reasoning rendered (and prefilled) only in thinking mode, between markers no name says are for thinking
SCRATCH = (
    "{%- for m in messages %}<|{{ m['role'] }}|>"
    "{%- if enable_thinking and m.get('reasoning_content') %}<|scratch_begin|>{{ m['reasoning_content'] }}<|scratch_end|>"
    "{%- endif %}{{ m['content'] }}<|end|>{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{%- if enable_thinking %}<|scratch_begin|>{%- endif %}{%- endif %}"
)


def test_reasoning_only_a_mode_renders_is_read() -> None:
    derived = chatjinja.response_template(SCRATCH)
    on = chat_parsing.parse_response("hmm<|scratch_end|>42<|end|>", derived, prefix=_prompt(SCRATCH, enable_thinking=True))
    off = chat_parsing.parse_response("42<|end|>", derived, prefix=_prompt(SCRATCH))
    assert (on.get("reasoning_content"), on.get("content")) == ("hmm", "42")
    assert (off.get("reasoning_content"), off.get("content")) == (None, "42")


def test_one_template_reads_every_mode() -> None:
    derived = chatjinja.response_template(CHANNEL)
    on = chat_parsing.parse_response("<|channel>thought\nhmm<channel|>42<turn|>", derived,
                                     prefix=_prompt(CHANNEL, enable_thinking=True))
    off = chat_parsing.parse_response("42<turn|>", derived, prefix=_prompt(CHANNEL))
    assert (on.get("reasoning_content"), on.get("content")) == ("hmm", "42")
    assert (off.get("reasoning_content"), off.get("content")) == (None, "42")


def test_markers_the_source_strips_are_the_reasoning() -> None:
    derived = chatjinja.response_template(STRIPPED)
    assert "reasoning_content" in derived["fields"]
    message = chat_parsing.parse_response("let me see</think>42<|end|>", derived, prefix=_prompt(STRIPPED))
    assert (message["reasoning_content"], message["content"]) == ("let me see", "42")


def test_a_model_folders_tokens_mark_calls_no_render_writes() -> None:
    assert "tool_calls" not in chatjinja.response_template(NO_CALLS)["fields"]
    tokens = ["<|im_start|>", "<|im_end|>", "<|tool_call_start|>", "<|tool_call_end|>"]
    derived = chatjinja.response_template(NO_CALLS, tokens=tokens)
    message = chat_parsing.parse_response('Sure.<|tool_call_start|>[get_time(city="Paris")]<|tool_call_end|><|im_end|>',
                                          derived, prefix=_prompt(NO_CALLS))
    assert message["content"] == "Sure."
    assert message["tool_calls"] == [{"type": "function", "function": {"name": "get_time", "arguments": {"city": "Paris"}}}]


def test_a_call_render_refused_for_append_only_is_observed() -> None:
    assert not render_text(APPENDS, [*USER, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": {}}}]}]).ok  # transformers refuses it
    derived = chatjinja.response_template(APPENDS)
    message = chat_parsing.parse_response('<call>{"name": "f", "arguments": {"x": 1}}</call><|end|>', derived,
                                          prefix=_prompt(APPENDS))
    assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": {"x": 1}}


def test_mutable_observation_never_reaches_the_runtime() -> None:
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type": "function",
                                                                 "function": {"name": "f", "arguments": {}}}]}
    assert render_text(APPENDS, [*USER, call], mutable=True).ok
    with pytest.raises(Exception, match="unsafe"):
        chatjinja.apply_chat_template([*USER, call], APPENDS)


def test_an_unclosed_reasoning_ends_at_a_call_and_a_closed_one_keeps_it() -> None:
    template = ("{%- for m in messages %}<|{{ m['role'] }}|>{%- if m.get('reasoning_content') %}<think>"
                "{{ m['reasoning_content'] }}</think>{%- endif %}{{ m['content'] }}"
                "{%- for c in m.get('tool_calls', []) %}<tool_call>{{ {'name': c['function']['name'], "
                "'arguments': c['function']['arguments']} | tojson }}</tool_call>{%- endfor %}<|end|>{%- endfor %}"
                "{%- if add_generation_prompt %}<|assistant|>{%- endif %}")
    derived = chatjinja.response_template(template)
    call = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    unclosed = chat_parsing.parse_response("<think>I'll call it" + call, derived, prefix=_prompt(template))
    closed = chat_parsing.parse_response("<think>maybe " + call + " no</think>ok", derived, prefix=_prompt(template))
    assert unclosed["reasoning_content"] == "I'll call it" and len(unclosed["tool_calls"]) == 1
    assert closed["reasoning_content"] == "maybe " + call + " no" and closed["content"] == "ok"


def test_a_continued_message_comes_back_whole() -> None:
    with_reasoning = {"fields": {"reasoning_content": {}, "content": {}}}
    without = {"fields": {"content": {}}}
    prefilled_message = {"role": "assistant", "content": "Hello, ", "reasoning_content": "I'm thinking"}
    parsed = {"role": "assistant", "content": "Hello, world"}
    assert continued_message(parsed, prefilled_message, with_reasoning)["reasoning_content"] == "I'm thinking"
    assert "reasoning_content" not in continued_message(parsed, prefilled_message, without)
    assert continued_message({"role": "assistant", "reasoning_content": "new"}, prefilled_message,
                             with_reasoning)["reasoning_content"] == "new"


def test_marker_pairs_and_prefills() -> None:
    pairs = marker_pairs(["<think>", "</think>", "[THINK]", "[/THINK]", "<|tool_call_start|>", "<|tool_call_end|>",
                          "<|channel>", "<channel|>", "<|tool_list_start|>", "<|tool_list_end|>"])
    assert [(p.open, p.close) for p in reasoning_pairs([x for p in pairs for x in (p.open, p.close)])] == [
        ("<think>", "</think>"), ("[THINK]", "[/THINK]")]
    assert call_pair(["<|tool_list_start|>", "<|tool_list_end|>", "<|tool_call_start|>", "<|tool_call_end|>"]).open \
        == "<|tool_call_start|>"
    assert prefilled("<think>\n") == ("<think>", None)
    assert prefilled("<|channel>thought\n<channel|>") == ("<|channel>thought", "<channel|>")
    assert prefilled("</think>") == (None, "</think>")
    assert prefilled("<|start_of_turn|><|assistant|>") == (None, None)  # two markers not named alike
