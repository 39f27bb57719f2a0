"""The parser pauses Python's cyclic garbage collector while it runs, and leaves nothing for it to collect."""

from __future__ import annotations

import gc
import sys

import pytest

from chatjinja.errors import TemplateSyntaxError
from chatjinja.syntax import parse
from chatjinja.syntax import parser as parser_module

_PARSING = {parser_module.parse.__code__, parser_module._Driver.parse.__code__}

# about 60,000 allocations: dozens of collector passes if it were running
TEXT = "{% set x = messages[0].content %}{{ x|trim }}\n" * 2_000
BROKEN = TEXT + "{% if x %}"


@pytest.fixture
def passes():
    """The generations of the collector passes that start while a parse runs."""
    started: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase != "start":
            return
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code in _PARSING:
                started.append(info["generation"])
                return
            frame = frame.f_back

    parse("{{ x }}")  # the parser built first
    gc.collect()
    gc.callbacks.append(count)
    try:
        yield started
    finally:
        gc.callbacks.remove(count)


@pytest.mark.parametrize("text", [TEXT, BROKEN], ids=["accepted", "rejected"])
def test_no_collector_pass_during_a_parse_and_the_collector_is_on_again(passes, text):
    assert gc.isenabled()
    try:
        parse(text)
    except TemplateSyntaxError:
        assert text is BROKEN
    assert passes == []
    assert gc.isenabled()


def test_a_paused_collector_stays_paused(passes):
    gc.disable()
    try:
        parse(TEXT)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_parse_leaves_no_reference_cycles():
    """What the paused collector would have found: nothing (the tree and its tokens free by reference counting)."""
    parse("{{ x }}")
    gc.collect()
    gc.disable()  # (so that no pass between the parses and the count finds the cycles first)
    try:
        tree = parse(TEXT)
        with pytest.raises(TemplateSyntaxError):
            parse(BROKEN)
        del tree
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0
