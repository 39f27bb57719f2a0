"""Hostile replies up to the length limit: work linear in their length, counted (regex calls, and the characters they pass over or copy), whole or one character at a time; a message or a ReplyError, never RecursionError."""

from __future__ import annotations

import pytest

import chatjinja
from chatjinja.serving import content, patterns
from chatjinja.serving.parse import MAX_REPLY_CHARS, ReplyError, ResponseStream
from chatjinja.serving.reader import Reader
from chatjinja.serving.rules import _GOOD
from chatjinja.serving.spec import load

pytest.importorskip("transformers.utils.chat_parsing")  # derivation checks with transformers' parser

# What derivation writes for three corpus families (tests/serving/test_dialects.py derives them from the
# corpus; here they are written out so that these tests need no corpus): a close that ends the turn and
# takes the rest, one that stops before the next call or at the end, tagged parameters
MISTRAL = {"defaults": {"role": "assistant"}, "start_anchor": "[/INST]", "fields": {
    "tool_calls": {"open_pattern": r"(?:\G|(?<!\s))\s*\[TOOL_CALLS\](?P<name>[\w.\-]+)\s*\[ARGS\]\s*",
                   "close_pattern": r"(?:\G|(?<!\s))(?=\s*\[TOOL_CALLS\])|\s*(?:</s>)[\s\S]*|\s*\Z",
                   "repeats": True, "content": "json",
                   "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
    "content": {"close_pattern": r"(?:\G|(?<!\s))\s*(?:</s>)[\s\S]*", "content": "text"}}}
LLAMA = {"defaults": {"role": "assistant"}, "start_anchor": "<|start_header_id|>assistant<|end_header_id|>", "fields": {
    "tool_calls": {"open_pattern": r"(?:\G|(?<!\s))\s*(?=\{\s*\"name)",
                   "close_pattern": r"(?<=\})(?=\s*\{\s*\"name)|\s*(?:<\|eot_id\|>)[\s\S]*|\s*\Z",
                   "repeats": True, "content": "json",
                   "transform": {"type": "function", "function": {"name": "{content.name}", "arguments": "{content.parameters}"}}},
    "content": {"close_pattern": r"(?:\G|(?<!\s))\s*(?:<\|eot_id\|>)[\s\S]*", "content": "text"}}}
TAGGED = {"defaults": {"role": "assistant"}, "start_anchor": "<|im_start|>assistant\n", "fields": {
    "reasoning_content": {"open": "<think>", "close": "</think>", "content": "text"},
    "tool_calls": {"open_pattern": r"(?:\G|(?<!\s))\s*<tool_call>\s*<function=(?P<name>[\w.\-]+)>",
                   "close_pattern": r"</function>\s*</tool_call>", "repeats": True, "content": "xml-inline",
                   "content_args": {"tag_pattern": r"<parameter=\s*(?P<key>[^<>\n\"=]+?)\s*>\s*(?P<value>.*?)\s*</parameter>"},
                   "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
    "content": {"close_pattern": r"(?:\G|(?<!\s))\s*(?:<\|im_end\|>)[\s\S]*", "content": "text"}}}

# (template, a unit repeated to the reply's length): well-formed calls, the end marker inside calls, opens
# that never close, blank runs, blanks between calls, an unclosed reasoning
SHAPES = {
    "hermes-calls": ("hermes", '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'),
    "hermes-end-in-calls": ("hermes", '<tool_call>{"name": "f", "arguments": {"q": "<|end|>"}}</tool_call>'),
    "hermes-unclosed": ("hermes", "<tool_call>{"),
    "hermes-blanks": ("hermes", " \n"),
    "mistral-calls": ("mistral", '[TOOL_CALLS]f[ARGS]{"a": 1}  \n'),
    "mistral-opens": ("mistral", "[TOOL_CALLS]"),
    "mistral-blanks": ("mistral", "  \n "),
    "llama-calls": ("llama", '{"name": "f", "parameters": {"a": 1}}  '),
    "llama-braces": ("llama", '} {"name"'),
    "tagged-calls": ("tagged", "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>\n"),
    "tagged-open-parameters": ("tagged", "<tool_call><function=f><parameter=a>"),
    "tagged-think": ("tagged", "<think> "),
}


@pytest.fixture(scope="module")
def templates() -> dict:
    return {"hermes": chatjinja.response_template(_GOOD), "mistral": MISTRAL, "llama": LLAMA, "tagged": TAGGED}


def _whole(template: dict, reply: str) -> tuple[int, int]:
    reader = Reader(load(template))
    reader.start("", read=False)
    reader.append(reply)
    message, _ = reader.finish()
    assert isinstance(message, dict)
    return reader.work.calls, reader.work.chars


def _streamed(template: dict, reply: str) -> tuple[int, int]:
    stream = ResponseStream(template, prefix="")
    for char in reply:
        stream.feed(char)
    assert isinstance(stream.finalize()[0], dict)
    return stream.work.calls, stream.work.chars


def _assert_linear(small: tuple[int, int], large: tuple[int, int], ratio: float, length: int, per_char: int) -> None:
    for few, many in zip(small, large):
        assert many <= 1.1 * ratio * few + 1000, (small, large)
    assert large[1] <= per_char * length, large


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_whole_replies_cost_linear_work(templates, shape) -> None:
    name, unit = SHAPES[shape]
    small, large = (unit * (n // len(unit)) for n in (100_000, 400_000))
    _assert_linear(_whole(templates[name], small), _whole(templates[name], large), len(large) / len(small), len(large), 6)


@pytest.mark.parametrize("shape", ["hermes-calls", "hermes-blanks", "mistral-opens", "mistral-blanks", "llama-braces",
                                   "tagged-open-parameters", "tagged-think"])
def test_one_character_at_a_time_costs_linear_work(templates, shape) -> None:
    name, unit = SHAPES[shape]
    small, large = (unit * (n // len(unit)) for n in (10_000, 40_000))
    _assert_linear(_streamed(templates[name], small), _streamed(templates[name], large), len(large) / len(small),
                   len(large), 40)


def test_calls_up_to_the_length_limit(templates) -> None:
    """The issue's case: 3.9 MB of calls (46-50 s with transformers' parser)."""
    unit = SHAPES["hermes-calls"][1]
    reply = unit * ((MAX_REPLY_CHARS - 100_000) // len(unit))
    calls, chars = _whole(templates["hermes"], reply)
    assert chars <= 4 * len(reply) and calls <= len(reply) // 10
    message = chatjinja.parse_response(reply, templates["hermes"], prefix="")
    assert len(message["tool_calls"]) == len(reply) // len(unit)


@pytest.mark.parametrize("strict", [False, True])
def test_deep_nesting_is_a_reply_error_never_recursion(templates, strict) -> None:
    reply = '<tool_call>{"name": "f", "arguments": ' + "[" * 100_000 + "]" * 100_000 + "}}</tool_call><|end|>"
    for read in (lambda: chatjinja.parse_response(reply, templates["hermes"], prefix="", strict=strict), lambda: _fed(reply, templates["hermes"], strict)):
        try:
            message = read()
        except ReplyError as exc:
            assert strict and "nested more than 100" in str(exc)
        else:
            assert not strict and message["content"] == reply[:-len("<|end|>")]


def _fed(reply: str, template: dict, strict: bool) -> dict:
    stream = ResponseStream(template, prefix="", strict=strict)
    for at in range(0, len(reply), 7):
        stream.feed(reply[at:at + 7])
    return stream.finalize()[0]


def test_call_lists_nest_without_recursion() -> None:
    template = {"start_anchor": "A", "fields": {"calls": {"open": "<c>", "close": "</c>", "content": "python-call-list"},
                                                 "content": {}}}
    deep = "<c>[f(a=" + "[" * 100 + "1" + "]" * 100 + ")]</c>"
    assert chatjinja.parse_response(deep, template, prefix="", strict=True)["calls"][0]["name"] == "f"
    deeper = "<c>[f(a=" + "[" * 100_000 + "]" * 100_000 + ")]</c>"
    with pytest.raises(ReplyError, match="nested more than 100 levels"):
        chatjinja.parse_response(deeper, template, prefix="", strict=True)
    assert chatjinja.parse_response(deeper, template, prefix="")["content"] == deeper


def test_unterminated_strings_in_bare_key_json_are_read_once(monkeypatch) -> None:
    """Gemma 4's dialect: transformers' substitution tries a whole string at every quote after an unterminated
    one (each to the end of the text); the string alternative only ever sees the text before it."""
    seen = []
    real = content._KEY_OR_STRING

    class Recording:
        def sub(self, repl, text):
            seen.append(len(text))
            return real.sub(repl, text)

    monkeypatch.setattr(content, "_KEY_OR_STRING", Recording())
    text = '{a: 1, b: "ok", c: "' + '\\"' * 50_000 + "}"
    with pytest.raises(ValueError):
        content.parse_content(text, "json", {"unquoted_keys": True})
    assert sum(seen) <= len('{a: 1, b: "ok", c: ') + 1


def test_unclosed_tags_are_searched_only_up_to_the_last_close(monkeypatch) -> None:
    """xml-inline: an opening tag with no close is searched for one to the end of the text; with many, quadratic."""
    searched = []
    real = content._tag_pattern

    def recording(source):
        pattern = real(source)

        class Recording:
            def finditer(self, text):
                searched.append(len(text))
                return pattern.finditer(text)

        return Recording()

    monkeypatch.setattr(content, "_tag_pattern", recording)
    args = TAGGED["fields"]["tool_calls"]["content_args"]
    body = "<parameter=a>1</parameter>" + "<parameter=b>" * 20_000
    assert content.parse_content(body, "xml-inline", args) == ({"a": "1"}, "")
    assert searched == [len("<parameter=a>1</parameter>")]


def test_the_rewritten_patterns_are_guarded() -> None:
    """Every top-level alternative that starts with blanks is guarded; a tail that takes the rest is a marker."""
    delimiter = patterns.prepare(MISTRAL["fields"]["tool_calls"]["close_pattern"])
    # derivation guarded the first alternative only; \G holds only at the search start (tried alone)
    assert delimiter.search.pattern == (r"(?:(?!)|(?<!\s))(?=\s*\[TOOL_CALLS\])|(?<!\s)\s*(?:</s>)(?P<_cjtail>)"
                                        r"|(?<!\s)\s*(?![\s\S])")
    assert delimiter.anchored.pattern == r"(?:\G|(?<!\s))(?=\s*\[TOOL_CALLS\])|\s*(?:</s>)(?P<_cjtail>)|\s*(?![\s\S])"
    assert delimiter.lookback == 2
    assert patterns.prepare(r"(?<=\}\s*),").lookback is None
    assert patterns.prepare(r"(?<=ab{2,3})x").lookback == 5
