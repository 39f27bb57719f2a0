"""Issue 32, acceptance 1: llama.cpp's own test cases (real-model-style outputs on 56 templates, each with
the message a server must read back) read with the response template chatjinja derives from each template.

Each case's prompt is rendered with its messages, tools and template keyword arguments; the response
template is derived from the template alone (one template for every mode: the prompt says which mode
is on) and transformers' ``parse_response`` reads the model's output after that prompt. Content and
reasoning are compared with surrounding whitespace stripped (as llama.cpp compares them), calls by
name and arguments (their JSON values) and, where the case expects one, id. A case whose template
derives nothing counts as a failure. Every case not read back is listed in COMPATIBILITY.md
("Reading llama.cpp's cases") with its reason; the test prints the table per template.
"""

from __future__ import annotations

import collections
import re

import pytest

import chatjinja
from chatjinja.serving.derive import ResponseTemplateError
from tests.conftest import REPO
from tests.serving.peer_llamacpp import MODEL_TOKENS, Outcome, cases, prompt_of, read, source_of

pytestmark = [pytest.mark.reference]
chat_parsing = pytest.importorskip("transformers.utils.chat_parsing")

# Measured: 363 of 381 (95.3%; COMPATIBILITY.md "Reading llama.cpp's cases"). The floor is 95%.
FLOOR = 363


def _derived(source: str, tokens: tuple[str, ...] = ()) -> tuple[dict | None, str | None]:
    try:
        return chatjinja.response_template(source, tokens=tokens), None
    except ResponseTemplateError as exc:
        return None, exc.message


def outcomes() -> list[Outcome]:
    derived: dict[str, tuple[dict | None, str | None]] = {}
    out = []
    for case in cases():
        file = case["template"]["file"]
        if file not in derived:
            derived[file] = _derived(source_of(file), MODEL_TOKENS.get(file, ()))
        template, why = derived[file]
        prompt, unrendered = prompt_of(case)
        if template is None:
            out.append(Outcome(case, f"the template derives nothing: {why}", "derives nothing"))
        elif prompt is None:
            out.append(Outcome(case, unrendered, "prompt does not render"))
        else:
            out.append(read(case, template, prompt, chat_parsing.parse_response))
    return out


def table(results: list[Outcome]) -> str:
    rows: dict[str, list] = collections.defaultdict(lambda: [0, 0, collections.Counter()])
    for result in results:
        row = rows[result.template]
        row[1] += 1
        if result.problem is None:
            row[0] += 1
        else:
            row[2][result.kind] += 1
    lines = []
    for name, (read_back, total, kinds) in sorted(rows.items()):
        why = "; ".join(f"{kind}: {count}" for kind, count in kinds.most_common())
        lines.append(f"{read_back:3d}/{total:3d}  {name}" + (f"  ({why})" if why else ""))
    passing = sum(r.problem is None for r in results)
    lines.append(f"{passing}/{len(results)} read back ({100 * passing / max(1, len(results)):.1f}%)")
    return "\n".join(lines)


def _listed() -> dict[str, str]:
    text = (REPO / "COMPATIBILITY.md").read_text(encoding="utf-8")
    section = text.split("<!-- peer-llamacpp:start -->")[1].split("<!-- peer-llamacpp:end -->")[0]
    return dict(re.findall(r"^- `([^`]+)`[^:]*: (.+)$", section, re.MULTILINE))


def test_llamacpp_cases_read_back() -> None:
    if not cases():
        pytest.skip("../shared/peer/llamacpp not found beside the checkout")
    results = outcomes()
    print()
    print(table(results))
    failing = {r.case["id"]: r.problem for r in results if r.problem is not None}
    passing = len(results) - len(failing)
    assert len(results) == 381
    assert passing >= FLOOR and passing / len(results) >= 0.95, "\n".join(f"{k}: {v}" for k, v in failing.items())
    assert sorted(failing) == sorted(_listed()), "COMPATIBILITY.md lists exactly the cases not read back"
