"""``portability`` never says ``identical`` when any member of the conversation space differs: a
difference only a client shape or a mode variant shows is found and named."""

from __future__ import annotations

import pytest

from chatjinja.portability.report import compare_engines

from .conftest import engine_or_skip

# @huggingface/jinja prints a list as JSON, transformers as Python's repr: these differ there only when
# thinking is on ...
ONLY_IN_A_MODE = "{% for m in messages %}{{ m.role }}\n{% endfor %}{% if thinking %}{{ ['a'] }}{% endif %}"
# ... and only for a system message given as text parts, as clients send it
ONLY_FOR_TEXT_PARTS = ("{% for m in messages %}{% if m.role == 'system' and m.content is not string %}"
                       "{{ m.content[0] }}{% else %}{{ m.role }}{% endif %}\n{% endfor %}")


@pytest.mark.parametrize("source, member", [
    (ONLY_IN_A_MODE, "user@thinking=true"),
    (ONLY_FOR_TEXT_PARTS, "client_text_parts"),
])
def test_a_difference_in_one_member_makes_the_verdict_differ(source, member):
    engine = engine_or_skip("hfjs")
    comparison = compare_engines(source, {"hfjs": engine})["hfjs"]
    statuses = {case.name: case.status for case in comparison.cases}
    assert statuses[member] != "identical"
    assert comparison.verdict != "identical"
    # the difference is that member's alone (the verdict would have been identical without it)
    assert {name for name, status in statuses.items() if status != "identical"} <= {
        name for name in statuses if name.endswith("@thinking=true") or name == member}
