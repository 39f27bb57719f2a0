"""add_generation_tags over the real corpus: acceptance, identical renders, and the hand-written tags as ground truth.

The floors are measured on ``../shared/corpus`` at test time (skipped with a reason when it is absent);
the numbers are in README.md ("Training data") and the differences in COMPATIBILITY.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

import chatjinja
from chatjinja.analysis import modes_of
from chatjinja.analysis.modes import mode_variants, variant_name
from chatjinja.observation import probe_conversations
from chatjinja.probing import run_probes
from chatjinja.syntax import ast, parse, walk
from chatjinja.training.generation_tags import (
    ONE_EXPRESSION,
    GenerationTagsRefused,
    add_generation_tags,
    same_failure,
)
from tests.conftest import corpus_or_skip, corpus_templates

#: accepted / untagged templates with an assistant role, each copy verified in every mode (measured: 323 of 329,
#: 98.2%; issue 31 asks for 98%). Verified in the default mode only, 324 were accepted: CodeLlama-70b's copy held the
#: role header ("Source: assistant") in its spans, which the verification in every mode now reads and refuses
ACCEPT_FLOOR = 0.98
#: the refused ones (COMPATIBILITY.md, "Generation tags"): header and content in one expression that cannot be split
REFUSED = {"GigaChat3-10B-A1.8B.jinja", "GigaChat3.1-10B-A1.8B.jinja", "NVIDIA-Nemotron-Nano-v2.jinja", "Reka-Edge.jinja",
           "OpenChat_3.6.jinja", "codellama_CodeLlama-70b-Instruct-hf.jinja"}
#: hand-tagged assistant turns on the probe conversations, and those whose synthesised span is equal up to whitespace
#: at its ends (issue 22 asks for 95%): 216 of 264 (81.8%). Of the other 48, 47 are the role header the generation
#: prompt writes, which the hand-written tags hold and issue 22 leaves out of the span
GROUND_TRUTH_TURNS = 264
GROUND_TRUTH_EQUAL = 216
#: the same turns equal once that role header is taken off the hand-written span: all but gpt-oss's last turn with
#: an analysis message, whose second "<|start|>assistant" (before its final message) the synthesised spans leave out:
#: the same statement opens the final turns without analysis, where it is the role header (COMPATIBILITY.md)
WITHOUT_HEADER_EQUAL = 263
#: strict differences whose header is not the whole generation prompt (nor its text before a <think> it opens): the
#: template and the hand-written span's text before the synthesised one. Laguna v2's prompt writes "<assistant>\n</think>";
#: its turn with reasoning starts "<assistant>\n<think>", where "<think>" and the reasoning are the model's. gpt-oss: the
#: turn above (its synthesised spans are the analysis message and, after "<|start|>assistant", the final message)
HEADER_EXCEPTIONS = {("laguna_v2_chat_template.jinja", "<assistant>"): 1,
                     ("gptoss_training.jinja", "<|start|>assistant<|channel|>analysis<|message|>Zq7needle<|end|><|start|>assistant"): 1}
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
    kind: str | None = None


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
            found.append(_Outcome(path.name, source, True, None, str(exc), exc.kind))
    return found


def test_accepts_the_floor_of_templates_with_an_assistant_role(outcomes: list[_Outcome]) -> None:
    accepted = sum(o.copy is not None for o in outcomes)
    assert accepted / len(outcomes) >= ACCEPT_FLOOR, f"{accepted} of {len(outcomes)}"


def test_the_refusals_are_the_listed_ones(outcomes: list[_Outcome]) -> None:
    refused = {o.name: o.refusal for o in outcomes if o.refusal is not None}
    assert set(refused) == REFUSED, refused
    assert all(o.kind == ONE_EXPRESSION for o in outcomes if o.refusal is not None), refused


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
            got = tagged.outcomes[name]
            assert got.text == outcome.text and same_failure(outcome.error, got.error), (o.name, name, got.error)


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
    probes = [c for c in probe_conversations("Zq7needle").values() if any(m.get("role") == "assistant" for m in c[0])]
    return probes


@pytest.fixture(scope="module")
def ground_truth() -> dict:
    corpus_or_skip()
    return measure_ground_truth()


def _generation_prompt(source: str, **kwargs: object) -> str:
    """What ``add_generation_prompt=True`` adds after ``[user]``, stripped."""
    user = [{"role": "user", "content": "hello"}]
    off = chatjinja.apply_chat_template(user, source, **kwargs)
    on = chatjinja.apply_chat_template(user, source, add_generation_prompt=True, **kwargs)
    return on[len(off):].strip() if on.startswith(off) else ""


def _is_the_prompts_header(header: str, prompt: str) -> bool:
    """Whether ``header`` is what the generation prompt writes: all of it, or its text before a ``<think>`` it opens
    (the reasoning is the model's to write; issue 22 puts it in the span)."""
    return bool(header) and header in (prompt, prompt.split("<think>")[0].strip())


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
    hand-written span ("header"), and each other difference (template, the hand-written span's text or "refused").

    Each strict difference is also classified: "prompt_header" when the hand-written span is the text the generation
    prompt writes (rendered here, with the conversation's options) followed by a synthesised span that ends where it
    ends, else "header_exceptions" (template, the hand-written span's text before the synthesised span)."""
    tagged = [p for p in corpus_templates() if _TAG.search(p.read_text(encoding="utf-8"))]
    result = {"templates": len(tagged), "turns": 0, "equal": 0, "header": 0, "differences": [], "refused": [],
              "prompt_header": 0, "header_exceptions": []}
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
            prompt_here = _generation_prompt(original, **kwargs)
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
                    continue
                if header and _turns(text, [(span[0] + len(header), span[1])])[0] in mine:
                    result["header"] += 1
                else:
                    result["differences"].append((path.name, repr(text[span[0]:span[1]])[:80]))
                after = [a for a, b in mine if span[0] < a and b == span[1]]
                if after and _is_the_prompts_header(text[span[0]:after[0]].strip(), prompt_here):
                    result["prompt_header"] += 1
                else:
                    start = text[span[0]:after[0]].strip() if after else text[span[0]:span[1]]
                    result["header_exceptions"].append((path.name, start))
    return result


def test_ground_truth_covers_the_hand_tagged_templates(ground_truth: dict) -> None:
    assert ground_truth["templates"] >= 29


def test_synthesised_spans_match_the_hand_written_ones(ground_truth: dict) -> None:
    assert ground_truth["refused"] == []
    assert (ground_truth["equal"], ground_truth["turns"]) == (GROUND_TRUTH_EQUAL, GROUND_TRUTH_TURNS), \
        ground_truth["differences"][:20]


def test_every_other_hand_written_span_is_the_generation_prompts_header_and_the_synthesised_span(ground_truth: dict) -> None:
    """The strict measure compares with hand-written tags of which some (SmolLM3, gpt-oss and DeepSeek-V3 of TRL,
    Laguna) hold the role header ``add_generation_prompt=True`` writes: the remaining difference is that definition."""
    exceptions: dict[tuple[str, str], int] = {}
    for key in ground_truth["header_exceptions"]:
        exceptions[key] = exceptions.get(key, 0) + 1
    assert exceptions == HEADER_EXCEPTIONS
    assert ground_truth["prompt_header"] + sum(HEADER_EXCEPTIONS.values()) == ground_truth["turns"] - ground_truth["equal"]


def test_synthesised_spans_match_the_hand_written_ones_without_the_role_header(ground_truth: dict) -> None:
    """The issue leaves the role header ``add_generation_prompt=True`` writes out of the span; some hand-written tags
    hold it. Taken off, the spans agree: what the model writes after it (gpt-oss's ``<|channel|>final<|message|>``,
    `` to=functions...``) is inside the synthesised span."""
    assert ground_truth["equal"] + ground_truth["header"] == WITHOUT_HEADER_EQUAL, ground_truth["differences"][:20]




# ---- ground truth in every mode ----------------------------------------------------------------

#: hand-tagged turns rendered in the templates' mode variants (enable_thinking=true/false, ...), and those whose
#: synthesised span equals the hand-written one up to the role header the generation prompt writes in that mode (or
#: its text before a <think> it opens): 464 of 472 (98.3%)
MODE_TURNS = 472
MODE_EQUAL = 464
#: the differences, the default mode's exceptions again: Laguna v2's "<assistant>\n</think>" (a turn without reasoning
#: closes a block the prompt opens in thinking mode) and gpt-oss's second "<|start|>assistant"
MODE_EXCEPTIONS = {("laguna_v2_chat_template.jinja", "enable_thinking=true"): 7, ("gptoss_training.jinja", "builtin_tools=false"): 1}


@pytest.fixture(scope="module")
def ground_truth_in_modes() -> dict:
    corpus_or_skip()
    result: dict = {"turns": 0, "equal": 0, "differences": {}}
    for path in corpus_templates():
        original = path.read_text(encoding="utf-8")
        if not _TAG.search(original):
            continue
        variants = mode_variants(modes_of(original))
        if not variants:
            continue
        copy = add_generation_tags(_untagged(original))  # (refusals fail test_synthesised_spans_match_the_hand_written_ones)
        for variant in variants:
            variables = dict(variant)
            try:
                prompt = _generation_prompt(original, **variables)
            except Exception:  # noqa: BLE001 - a mode that needs another variable renders no prompt: no header
                prompt = ""
            for messages, kwargs in _ground_truth_conversations():
                options = {**kwargs, **variables}
                try:
                    text, theirs = chatjinja.apply_chat_template(messages, original, return_assistant_spans=True, **options)
                except Exception:  # noqa: BLE001 - a probe the template rejects in this mode has no turns to compare
                    continue
                ours_text, ours = chatjinja.apply_chat_template(messages, copy, return_assistant_spans=True, **options)
                assert ours_text == text, (path.name, variant)
                mine = set(_turns(text, ours))
                for span in _turns(text, theirs):
                    result["turns"] += 1
                    hand = text[span[0]:span[1]]
                    headers = {_role_header(hand, prompt), _role_header(hand, prompt.split("<think>")[0])}
                    if span in mine or any(h and _turns(text, [(span[0] + len(h), span[1])])[0] in mine for h in headers):
                        result["equal"] += 1
                    else:
                        key = (path.name, variant_name(variant))
                        result["differences"][key] = result["differences"].get(key, 0) + 1
    return result


def test_synthesised_spans_match_the_hand_written_ones_in_every_mode(ground_truth_in_modes: dict) -> None:
    """TRL's and the model authors' hand-written tags, rendered in each mode variant the analyser finds: the modes are
    where reasoning was left unmasked (issue 33); the synthesised spans agree there as in the default mode."""
    assert ground_truth_in_modes["differences"] == MODE_EXCEPTIONS
    assert (ground_truth_in_modes["equal"], ground_truth_in_modes["turns"]) == (MODE_EQUAL, MODE_TURNS)
