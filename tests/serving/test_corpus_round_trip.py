"""Every corpus template that renders tool calls or reasoning reads its own replies back, in every mode it has, with transformers' parser, or is listed in COMPATIBILITY.md with why (issue 32, acceptance 2)."""

from __future__ import annotations

import re

import pytest

import chatjinja

from chatjinja.serving.emit import Unexpressible, to_vllm
from chatjinja.serving.suite import LEAD, TOOLS, expected_problem
from tests.conftest import REPO, corpus_or_skip
from tests.serving.corpus_round_trip import derived, name_of, reply_formats, selected

pytestmark = [pytest.mark.corpus, pytest.mark.reference]
chat_parsing = pytest.importorskip("transformers.utils.chat_parsing")

# Measured: 159 of the 163 templates (97.5%) derive and read back every case they render in every mode;
# the floor is 97%. A template none of whose cases renders as a reply to its own prompt counts
# as failing (COMPATIBILITY.md "Parsing replies" lists the rest with the reason).
FLOOR = 159


def _listed() -> dict[str, str]:
    text = (REPO / "COMPATIBILITY.md").read_text(encoding="utf-8")
    section = text.split("<!-- unreadable-replies:start -->")[1].split("<!-- unreadable-replies:end -->")[0]
    return dict(re.findall(r"^- `([^`]+)`: (.+)$", section, re.MULTILINE))


def _outcome(path) -> str | None:
    """None when the derived template reads back every case rendered in every mode of the template (the
    suite after each mode's own prompt) with transformers' own parse_response."""
    observed, template, reason = derived(path)
    if template is None:
        return reason
    for renders in observed.modes:
        for case, response in renders.rendered().items():
            try:
                parsed = chat_parsing.parse_response(response, template, prefix=renders.prefix, tools=TOOLS)
            except ValueError as exc:
                return f"{case}@{renders.mode}: the parser raises {exc}"
            # chatjinja's one-shot reading (the whole reply at the end of the stream) gives transformers' message
            assert chatjinja.parse_response(response, template, prefix=renders.prefix, tools=TOOLS) == parsed
            problem = expected_problem(case, parsed, response)
            if problem is not None and not (case == "content_call" and parsed.get("reasoning_content", "").strip() == LEAD):
                return f"{case}@{renders.mode}: {problem}"
    return None


def test_round_trip_floor_and_the_listed_failures() -> None:
    corpus_or_skip()
    templates = selected()
    assert len(templates) >= 150, len(templates)
    outcomes = {name_of(p): _outcome(p) for p in templates}
    failing = {name for name, why in outcomes.items() if why is not None}
    passing = len(templates) - len(failing)
    assert passing >= FLOOR and passing / len(templates) >= 0.97, sorted(failing)
    assert sorted(failing) == sorted(_listed()), "COMPATIBILITY.md lists exactly the failing templates"
    # every template that derives has at least one case to read back
    assert all(any(m.rendered() for m in derived(p)[0].modes) for p in templates if outcomes[name_of(p)] is None)
    # the modes are observed: templates read back in more than their default mode
    assert sum(len(derived(p)[0].modes) > 1 for p in templates if outcomes[name_of(p)] is None) >= 40


# Measured: vLLM's generic parser can express every derived format, 159 of 159 (the reasoning and content
# fields are plain text; only the calls carry a content parser and a transform, which vLLM takes).
VLLM_FLOOR = 159


def test_the_vllm_target_expresses_every_derived_format() -> None:
    from tests.serving.test_targets import vllm_validate
    corpus_or_skip()
    formats = [(name_of(p), reply_formats.get(p)) for p in selected() if derived(p)[1] is not None]
    unexpressible = {}
    for name, reply in formats:
        try:
            vllm_validate(to_vllm(reply))
        except (Unexpressible, ValueError) as exc:
            unexpressible[name] = str(exc)
    assert not unexpressible and len(formats) >= VLLM_FLOOR, unexpressible
