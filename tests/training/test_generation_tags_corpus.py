"""add_generation_tags over the real corpus: acceptance, identical renders, and the hand-written tags as ground truth.

The floors are measured on ``../shared/corpus`` at test time (skipped with a reason when it is absent);
the numbers are in README.md ("Training data") and the differences in COMPATIBILITY.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

import chatjinja
from chatjinja.probe import _conversations, run_probes
from chatjinja.syntax import ast, parse, walk
from chatjinja.training.generation_tags import (
    GenerationTagsRefused,
    add_generation_tags,
)
from tests.conftest import corpus_or_skip, corpus_templates

#: accepted / untagged templates with an assistant role (measured: 318 of 329, 96.7%; issue 22 asks for 95%)
ACCEPT_FLOOR = 0.966
#: hand-tagged assistant turns whose synthesised span is equal up to whitespace at its ends (measured: 217 of 264,
#: 82.2%; issue 22 asks for 95%; COMPATIBILITY.md lists the differences: 40 turns whose hand-written tags hold the
#: role header the generation prompt writes, 7 of Laguna v2 whose copy holds the prompt's "</think>")
GROUND_TRUTH_FLOOR = 0.82
#: the same turns equal once that role header is taken off the hand-written span (measured: 257 of 264, 97.3%)
WITHOUT_HEADER_FLOOR = 0.97
#: transformers' check for the tag (tokenization_utils_base.py), which the renderer repeats
TRANSFORMERS_TAG = re.compile(r"\{\%-?\s*generation\s*-?\%\}")
_TAG = re.compile(r"\{%([-+]?)\s*(?:end)?generation\s*([-+]?)%\}")


@dataclass
class _Outcome:
    name: str
    source: str
    assistant: bool
    copy: str | None
    refusal: str | None


@pytest.fixture(scope="module")
def outcomes() -> list[_Outcome]:
    corpus_or_skip()
    found = []
    for path in corpus_templates():
        source = path.read_text(encoding="utf-8")
        if _TAG.search(source):
            continue  # returned unchanged: the ground-truth test strips their tags first
        assistant = "assistant" in chatjinja.probe(source).roles
        if not assistant:
            continue
        try:
            found.append(_Outcome(path.name, source, True, add_generation_tags(source), None))
        except GenerationTagsRefused as exc:
            found.append(_Outcome(path.name, source, True, None, str(exc)))
    return found


def test_accepts_the_floor_of_templates_with_an_assistant_role(outcomes: list[_Outcome]) -> None:
    accepted = sum(o.copy is not None for o in outcomes)
    assert accepted / len(outcomes) >= ACCEPT_FLOOR, f"{accepted} of {len(outcomes)}"


def test_every_refusal_names_its_reason(outcomes: list[_Outcome]) -> None:
    for o in outcomes:
        if o.refusal is not None:
            assert len(o.refusal) > 20 and "\n" not in o.refusal, (o.name, o.refusal)


def test_every_accepted_copy_renders_the_probe_suite_identically(outcomes: list[_Outcome]) -> None:
    for o in outcomes:
        if o.copy is None:
            continue
        assert TRANSFORMERS_TAG.search(o.copy), o.name  # transformers warns about a template its regex misses
        original, tagged = run_probes(o.source), run_probes(o.copy)
        for name, outcome in original.outcomes.items():
            assert (tagged.outcomes[name].text, tagged.outcomes[name].error) == (outcome.text, outcome.error), (o.name, name)


# ---- ground truth: the hand-written tags ------------------------------------------------------


def _untagged(source: str) -> str:
    """The template without its generation tags, rendering the same text: each tag becomes a comment with its markers."""
    tags = [t for n in walk(parse(source)) if isinstance(n, ast.Generation) for t in (n.open_tag, n.end_tag)]
    out, at = [], 0
    for tag in sorted(tags, key=lambda t: t.span.start):
        left = "-" if tag.strip_left else "+" if tag.keep_left else ""
        right = "-" if tag.strip_right else "+" if tag.keep_right else ""
        out += [source[at:tag.span.start], "{#" + left + " " + right + "#}"]
        at = tag.span.end
    return "".join(out) + source[at:]


def _turns(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans trimmed of whitespace at both ends, and joined where only whitespace separates them."""
    trimmed = []
    for a, b in sorted(spans):
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a == b:
            continue
        if trimmed and not text[trimmed[-1][1]:a].strip():
            trimmed[-1] = (trimmed[-1][0], max(b, trimmed[-1][1]))
        else:
            trimmed.append((a, b))
    return trimmed


def _ground_truth_conversations() -> list[tuple[list, dict]]:
    probes = [c for c in _conversations("Zq7needle").values() if any(m.get("role") == "assistant" for m in c[0])]
    return probes


@pytest.fixture(scope="module")
def ground_truth() -> dict:
    corpus_or_skip()
    return measure_ground_truth()


def _generation_prompt(source: str) -> str:
    """What ``add_generation_prompt=True`` adds after ``[user]``, stripped."""
    user = [{"role": "user", "content": "hello"}]
    off = chatjinja.apply_chat_template(user, source)
    on = chatjinja.apply_chat_template(user, source, add_generation_prompt=True)
    return on[len(off):].strip() if on.startswith(off) else ""


def _role_header(span: str, prompt: str) -> str:
    """The start of a hand-written span that the generation prompt writes too, cut at a whole control token."""
    at = 0
    while at < min(len(span), len(prompt)) and span[at] == prompt[at]:
        at += 1
    header = span[:at]
    if at < len(prompt) and "<" in header and ">" not in header[header.rfind("<"):]:
        header = header[:header.rfind("<")]
    return header


def measure_ground_truth() -> dict:
    """Turns compared, turns equal, turns equal once the role header the generation prompt writes is taken off the
    hand-written span ("header"), and each other difference (template, the hand-written span's text or "refused")."""
    tagged = [p for p in corpus_templates() if _TAG.search(p.read_text(encoding="utf-8"))]
    result = {"templates": len(tagged), "turns": 0, "equal": 0, "header": 0, "differences": [], "refused": []}
    for path in tagged:
        original = path.read_text(encoding="utf-8")
        untagged = _untagged(original)
        try:
            copy = add_generation_tags(untagged)
        except GenerationTagsRefused as exc:
            result["refused"].append((path.name, str(exc)))
            copy = None
        prompt = _generation_prompt(original)
        for messages, kwargs in _ground_truth_conversations():
            try:
                text, theirs = chatjinja.apply_chat_template(messages, original, return_assistant_spans=True, **kwargs)
            except Exception:  # noqa: BLE001 - a probe the template rejects has no turns to compare
                continue
            truth = _turns(text, theirs)
            result["turns"] += len(truth)
            if copy is None:
                result["differences"].append((path.name, "refused"))
                continue
            ours_text, ours = chatjinja.apply_chat_template(messages, copy, return_assistant_spans=True, **kwargs)
            assert ours_text == text, path.name
            mine = set(_turns(text, ours))
            for span in truth:
                header = _role_header(text[span[0]:span[1]], prompt)
                if span in mine:
                    result["equal"] += 1
                elif header and _turns(text, [(span[0] + len(header), span[1])])[0] in mine:
                    result["header"] += 1
                else:
                    result["differences"].append((path.name, repr(text[span[0]:span[1]])[:80]))
    return result


def test_ground_truth_covers_the_hand_tagged_templates(ground_truth: dict) -> None:
    assert ground_truth["templates"] >= 29


def test_synthesised_spans_match_the_hand_written_ones(ground_truth: dict) -> None:
    share = ground_truth["equal"] / ground_truth["turns"]
    assert share >= GROUND_TRUTH_FLOOR, (ground_truth["equal"], ground_truth["turns"], ground_truth["differences"][:20])


def test_synthesised_spans_match_the_hand_written_ones_without_the_role_header(ground_truth: dict) -> None:
    """The issue leaves the role header ``add_generation_prompt=True`` writes out of the span; some hand-written tags
    hold it. Taken off, the spans agree: what the model writes after it (gpt-oss's ``<|channel|>final<|message|>``,
    `` to=functions...``) is inside the synthesised span."""
    share = (ground_truth["equal"] + ground_truth["header"]) / ground_truth["turns"]
    assert share >= WITHOUT_HEADER_FLOOR, (ground_truth["header"], ground_truth["differences"][:20])


