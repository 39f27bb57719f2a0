"""serving/content.py against transformers' content parsers at test time: the same value or the same error message, on text built to hit their edges."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from chatjinja.serving import content

content_parsers = pytest.importorskip("transformers.utils.chat_parsing.content_parsers")

pytestmark = pytest.mark.reference


def _outcome(parse):
    try:
        return ("value", parse())
    except ValueError as exc:
        return ("error", str(exc))


def _same(text: str, name: str, args: dict) -> None:
    theirs = _outcome(lambda: content_parsers.parse_content(text, name, args))
    ours = _outcome(lambda: content.parse_content(text, name, args)[0])
    assert ours == theirs


DIALECT = ['{', '}', '[', ']', ':', ',', ' ', '\n', '"', '\\', '\\"', 'a', 'key', '1', '<|"|>', '<s>', '</s>', 'x y', '\\n']


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(DIALECT), max_size=30).map("".join),
       st.sampled_from([{}, {"unquoted_keys": True}, {"string_delims": [['<|"|>', '<|"|>']]},
                        {"unquoted_keys": True, "string_delims": [['<|"|>', '<|"|>'], ["<s>", "</s>"]]},
                        {"allow_non_json": True}]))
@example('{a: "x\\\ny", b: "1", c: 2}', {"unquoted_keys": True})  # a backslash before a newline ends a string's reading
@example('{a: "\\"\\"', {"unquoted_keys": True})
@example('{a: <|"|>x<|"|>, b: <|"|>', {"unquoted_keys": True, "string_delims": [['<|"|>', '<|"|>']]})
def test_json_and_its_dialects(text: str, args: dict) -> None:
    _same(text, "json", args)


CALLS = ["[", "]", "(", ")", "f", "g.h", "a", "=", ",", " ", "1", "-2.5e3", "'x'", '"y"', "'\\u00e9'", "{", "}", ":",
         "True", "None", "null", "'k'", "99999999999999999", "'\\q'", "\n"]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(CALLS), max_size=30).map("".join))
@example("[f(a=1, a=2)]")
@example("[f(a={'k': 1, 'k': 2})]")
@example("[f(a=[[[1]]], b={'x': [None, True]})]")
@example("[f(a=" + "[" * 100 + "]" * 100 + ")]")
@example("[f(a=" + "[" * 99 + "]" * 99 + ")]")
def test_python_call_lists(text: str) -> None:
    _same(text, "python-call-list", {})


TAGS = ["<p=", "a", "b", ">", "</p>", "<v as=json>", "<v>", "</v>", " ", "1", '{"k": 2}', "\n", "x"]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(TAGS), max_size=20).map("".join), st.booleans())
def test_tagged_values(text: str, merge: bool) -> None:
    _same(text, "xml-inline", {"tag_pattern": r"<p=(?P<key>\w+)>\s*(?P<value>.*?)\s*</p>", "merge_duplicates": merge})
    _same(text, "xml-inline", {"tag_pattern": r"<v(?: as=(?P<kind>\w+))?>(?P<value>.*?)</v>(?P<key>)",
                               "value_parser_by": {"group": "kind", "parsers": {"json": {"name": "json"}}}})
    _same(text.replace("</p>", "\n"), "kv-lines", {"kv_sep": ">"})


def test_nesting_is_bounded_before_json_loads() -> None:
    assert content.nesting(json.dumps([[[]]] * 10)) == 0  # no more brackets than the bound: not scanned
    assert content.nesting(json.dumps([[[[]]]] * 50)) == 4
    assert content.nesting("[" * 101 + '"[[["' + "]" * 101) == 101
    with pytest.raises(ValueError, match="nested more than 100"):
        content.parse_content("[" * 101 + "]" * 101, "json", {})
    assert content.parse_content("[" * 100 + "]" * 100, "json", {})[0] == json.loads("[" * 100 + "]" * 100)


def test_tolerant_reading_leaves_what_follows() -> None:
    assert content.parse_content(' {"a": 1} and more', "json", {}, tolerant=True) == ({"a": 1}, " and more")
    assert content.parse_content("[f(a=1)] text", "python-call-list", {}, tolerant=True) == (
        [{"name": "f", "arguments": {"a": 1}}], "text")
