"""chatjinja's reply reader: strict reading equals transformers' parse_response, a stream equals the whole reply for any chunking, and tolerant reading keeps what it cannot read."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatjinja
from chatjinja.serving.parse import ReplyError, UnreadableReply
from chatjinja.serving.rules import _GOOD

chat_parsing = pytest.importorskip("transformers.utils.chat_parsing")
serving_utils = pytest.importorskip("transformers.cli.serving.utils")

pytestmark = pytest.mark.reference

HERMES = _GOOD
THINKING = ("{%- for m in messages %}<|{{ m['role'] }}|>{%- if m.get('reasoning_content') %}<think>{{ m['reasoning_content'] }}"
            "</think>{%- endif %}{{ m['content'] }}<|end|>{%- endfor %}{%- if add_generation_prompt %}<|assistant|>{%- endif %}")


def _fallback(model_type: str) -> dict:
    return next(v for types, v in serving_utils._RESPONSE_TEMPLATE_FALLBACKS.items() if model_type in types)


def _tool(name: str, properties: dict) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": properties}}}


TOOLS = [_tool("f", {"a": {"type": "integer"}, "b": {"type": ["integer", "string"]}, "c": {"type": "object"}})]

# Handwritten templates for what derivation does not write: call lists, ids from the content, joins, typed fields
CALL_LIST = {"start_anchor": "<|assistant|>", "fields": {
    "tool_calls": {"open": "<calls>", "close": "</calls>", "content": "python-call-list",
                   "transform": {"type": "function", "id": "{id}", "function": {"name": "{name}", "arguments": "{arguments}"}},
                   "transform_each": True},
    "content": {"close_pattern": r"\s*<\|end\|>[\s\S]*"}}}
JOINED = {"start_anchor": "<|assistant|>", "defaults": {"role": "assistant"}, "fields": {
    "reasoning_content": {"open": ["<think>", "<thought>"], "close_pattern": r"</think>|</thought>(?:\s*<answer>)?",
                          "repeats": True, "join": "\n"},
    "score": {"open": "<score>", "close": "</score>", "content": "int"},
    "notes": {"open_pattern": r"<notes(?: (?P<who>\w+))?>", "close": "</notes>", "content": "kv-lines",
              "transform": {"by": "{who}", "notes": "{content}"}},
    "content": {"close_pattern": r"\s*(?:<\|end\|>|\Z)"}}}
TAGGED = {"start_anchor": "<|assistant|>", "fields": {
    "tool_calls": {"open_pattern": r"<call name=\"(?P<name>\w+)\">", "close": "</call>", "repeats": True,
                   "content": "xml-inline", "content_args": {
                       "tag_pattern": r"<arg (?P<key>\w+)(?: as=\"(?P<kind>\w+)\")?>(?P<value>.*?)</arg>",
                       "value_parser_by": {"group": "kind", "parsers": {"json": {"name": "json"}}}},
                   "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
    "content": {}}}

_JSON = ['{"name": "f", "arguments": {"a": "1"}}', '{"name": "f", "parameters": {"a": 1}}', '{"name": "f"}', '{', '}',
         '"a"', ": ", ", ", "[", "]", '{"name": "f", "arguments": {}} tail', '{"id": "c1", "name": "g", "arguments": {"b": "2"}}']
FRAGMENTS = {
    "hermes": ["<tool_call>", "</tool_call>", "<|end|>", "Hi.", " ", "\n", "<", "|", *_JSON],
    "thinking": ["<think>", "</think>", "<|end|>", "<|assistant|>", "hmm", " ", "\n", "<", "/", "42"],
    "qwen3": ["<tool_call>", "</tool_call>", "<think>", "</think>", "<|im_end|>", "<|endoftext|>", "ok", " ", "\n", *_JSON],
    "qwen3_5": ["<tool_call>", "<function=f>", "<parameter=a>", "<parameter=b>", "</parameter>", "</function>", "</tool_call>",
                "<think>", "</think>", "<|im_end|>", "1", "x", " ", "\n", "<"],
    "gemma4": ["<|tool_call>call:f", "<tool_call|>", '<|"|>', "{", "}", "a:", ",", "1", "<|channel>thought\n", "<channel|>",
               "<turn|>", "<eos>", "hi", " "],
    "call_list": ["<calls>", "</calls>", "<|end|>", "[", "]", "f(", "g(", ")", "a=1", 'b="x"', "c={'k': [1]}", ", ", " ", "?", "ok"],
    "joined": ["<think>", "</think>", "<thought>", "</thought>", "<answer>", "<score>", "</score>", "<notes>", "<notes me>",
               "</notes>", "k: v\n", "7", "x", "<|end|>", " ", "\n"],
    "tagged": ['<call name="f">', "</call>", "<arg a>", '<arg c as="json">', "</arg>", "1", '{"k": 1}', "{", "x", " "],
}


@pytest.fixture(scope="module")
def templates() -> dict[str, dict]:
    return {
        "hermes": chatjinja.response_template(HERMES), "thinking": chatjinja.response_template(THINKING),
        "qwen3": _fallback("qwen3"), "qwen3_5": _fallback("qwen3_5"), "gemma4": _fallback("gemma4"),
        "call_list": CALL_LIST, "joined": JOINED, "tagged": TAGGED,
    }


def _outcome(read):
    try:
        return read()
    except (ValueError, KeyError) as exc:  # transformers raises KeyError for a transform placeholder with no value
        return ("error", exc.args[0] if exc.args else str(exc))


replies = st.sampled_from(sorted(FRAGMENTS)).flatmap(
    lambda name: st.tuples(st.just(name), st.lists(st.sampled_from(FRAGMENTS[name]), max_size=14).map("".join),
                           st.lists(st.sampled_from(["", *FRAGMENTS[name][:4]]), max_size=2).map("".join),
                           st.lists(st.integers(1, 9), min_size=1, max_size=30), st.booleans()))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(replies)
def test_strict_reading_is_transformers_reading(templates, case) -> None:
    """strict=True: transformers' message, or its error message (as UnreadableReply, a ValueError)."""
    name, reply, prefix, _, with_tools = case
    tools = TOOLS if with_tools else None
    theirs = _outcome(lambda: chat_parsing.parse_response(reply, templates[name], prefix=prefix, tools=tools))
    ours = _outcome(lambda: chatjinja.parse_response(reply, templates[name], prefix=prefix, tools=tools, strict=True))
    assert ours == theirs


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(replies, st.booleans())
def test_a_stream_reads_what_the_whole_reply_reads(templates, case, strict) -> None:
    """Whatever the chunks, the stream's message (or its error) is the whole reply's."""
    name, reply, prefix, sizes, with_tools = case
    tools = TOOLS if with_tools else None
    whole = _outcome(lambda: chatjinja.parse_response(reply, templates[name], prefix=prefix, tools=tools, strict=strict))

    def streamed():
        stream = chatjinja.ResponseStream(templates[name], prefix=prefix, tools=tools, strict=strict)
        at = 0
        for size in sizes * (len(reply) // max(sum(sizes), 1) + 1):
            if at >= len(reply):
                break
            stream.feed(reply[at:at + size])
            at += size
        stream.feed(reply[at:])
        return stream.finalize()[0]

    assert _outcome(streamed) == whole


@pytest.mark.parametrize(("template", "reply"), [
    # an optional close pattern: transformers' stream closes at "</thought>" before "<answer>" arrives
    ("joined", "<thought>a</thought>\n<answer>b<|end|>"),
    # \Z in a close: only the end of the reply ends it, not the end of the text so far
    ("joined", "plain text<|end|>"),
    ("hermes", 'Sure.<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call><|end|>'),
])
def test_one_character_at_a_time(templates, template, reply) -> None:
    whole = chatjinja.parse_response(reply, templates[template], prefix="")
    stream = chatjinja.ResponseStream(templates[template], prefix="")
    for char in reply:
        stream.feed(char)
    assert stream.finalize()[0] == whole


def test_transformers_stream_differs_where_ours_does_not(templates) -> None:
    """The case the stream property guards: transformers' own stream commits the shorter close."""
    reply = "<thought>a</thought>\n<answer>b"
    parser = chat_parsing.ResponseParser(templates["joined"], prefix="")
    for char in reply:
        parser.feed(char)
    theirs = parser.finalize()[0]
    whole = chat_parsing.parse_response(reply, templates["joined"], prefix="")
    assert theirs != whole  # transformers' stream and whole reply disagree
    stream = chatjinja.ResponseStream(templates["joined"], prefix="")
    for char in reply:
        stream.feed(char)
    assert stream.finalize()[0] == whole == chatjinja.parse_response(reply, templates["joined"], prefix="")


# ----------------------------------------------------------------------------------------------------
# Tolerant reading


def _call(name: str, arguments: dict, call_id: str | None = None) -> dict:
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
    return call


def test_trailing_text_after_a_call_stays_in_content(templates) -> None:
    reply = 'Let me look.<tool_call>{"name": "f", "arguments": {"a": 1}} and more</tool_call><|end|>'
    message = chatjinja.parse_response(reply, templates["hermes"], prefix="")
    assert message["tool_calls"] == [_call("f", {"a": 1})]
    assert message["content"] == "Let me look. and more"
    with pytest.raises(UnreadableReply, match="Extra data") as caught:
        chatjinja.parse_response(reply, templates["hermes"], prefix="", strict=True)
    with pytest.raises(ValueError) as theirs:
        chat_parsing.parse_response(reply, templates["hermes"], prefix="")
    assert caught.value.args[0] == theirs.value.args[0]


def test_parameters_stand_for_arguments(templates) -> None:
    reply = '<tool_call>{"name": "f", "parameters": {"a": 1}}</tool_call><|end|>'
    assert chatjinja.parse_response(reply, templates["hermes"], prefix="")["tool_calls"] == [_call("f", {"a": 1})]
    with pytest.raises(UnreadableReply, match="missing key 'arguments'"):
        chatjinja.parse_response(reply, templates["hermes"], prefix="", strict=True)


def test_ids_are_optional() -> None:
    reply = "<calls>[f(a=1), g()]</calls><|end|>"
    assert chatjinja.parse_response(reply, CALL_LIST, prefix="")["tool_calls"] == [_call("f", {"a": 1}), _call("g", {})]
    with pytest.raises(UnreadableReply, match="'{id}' is not defined"):
        chatjinja.parse_response(reply, CALL_LIST, prefix="", strict=True)


def test_an_unreadable_call_is_kept_as_written(templates) -> None:
    """Malformed JSON, too deep JSON: the call as the model wrote it, delimiters included, in its place in the content."""
    bad = '<tool_call>{"name": "f", "arguments": {"a": }</tool_call>'
    good = '<tool_call>{"name": "g", "arguments": {}}</tool_call>'
    deep = "<tool_call>" + "[" * 500 + "]" * 500 + "</tool_call>"
    reply = f"Before {bad} middle {good} {deep} after<|end|>"
    message = chatjinja.parse_response(reply, templates["hermes"], prefix="")
    assert message["tool_calls"] == [_call("g", {})]
    assert message["content"] == f"Before {bad} middle {deep} after"  # the blank before a call is its open's
    stream = chatjinja.ResponseStream(templates["hermes"], prefix="")
    events = [event for char in reply for event in stream.feed(char)]
    streamed, final = stream.finalize()
    assert streamed == message
    failed = [e for e in events + final if e["type"] == "region_close" and e["value"] is None]
    assert [e["field"] for e in failed] == ["tool_calls", "tool_calls"] and "nested more than 100" in failed[1]["error"]


def test_text_around_calls_is_kept_whole(templates) -> None:
    """transformers keeps only the text after the last call; the model wrote both."""
    reply = 'First. <tool_call>{"name": "f", "arguments": {}}</tool_call> Second.<|end|>'
    assert chatjinja.parse_response(reply, templates["hermes"], prefix="")["content"] == "First. Second."
    assert chatjinja.parse_response(reply, templates["hermes"], prefix="", strict=True)["content"] == "Second."
    assert chat_parsing.parse_response(reply, templates["hermes"], prefix="")["content"] == "Second."


def test_the_templates_own_text_before_the_reply_is_not_content() -> None:
    """Text the prefix writes and closes before the model starts is the template's: replaced, as transformers does."""
    template = {"start_anchor": "<|im_end|>", "fields": {"reasoning_content": {"open": "<think>", "close": "</think>"},
                                                           "content": {"close": "<|im_end|>"}}}
    prefix = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>"
    reply = "hmm</think>\n\nThe answer.<|im_end|>"
    message = chatjinja.parse_response(reply, template, prefix=prefix)
    assert message == chat_parsing.parse_response(reply, template, prefix=prefix) == {
        "reasoning_content": "hmm", "content": "The answer."}


def test_required_fields_and_templates_without_content() -> None:
    template = {"start_anchor": "A", "fields": {"answer": {"open": "<a>", "close": "</a>", "optional": False},
                                                  "call": {"open": "<c>", "close": "</c>", "content": "json"}}}
    assert chatjinja.parse_response("nothing", template, prefix="") == {}
    with pytest.raises(UnreadableReply, match="fields missing"):
        chatjinja.parse_response("nothing", template, prefix="", strict=True)
    # no field to keep an unreadable region's text in: tolerant reading cannot keep it, and says so
    with pytest.raises(UnreadableReply, match="could not parse region as JSON"):
        chatjinja.parse_response("<c>{</c>", template, prefix="")


def test_reply_errors_are_value_errors() -> None:
    assert issubclass(UnreadableReply, ReplyError) and issubclass(ReplyError, ValueError)
    assert issubclass(chatjinja.serving.parse.ReplyTooLarge, ReplyError)
