"""The hazards the type rules describe are real: each flagged template misbehaves when rendered with the data
shape the rule warns about (a Python repr in the prompt, a double-encoded JSON string, or a render error)."""

from __future__ import annotations

import pytest

from chatjinja.lint import lint
from tests.reference import our_outcome

CHUNKS = [{"type": "text", "text": "hi"}]
DICT_ARGS = {"city": "Paris"}
STRING_ARGS = '{"city": "Paris"}'
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]


def _conversation(content, arguments) -> list[dict]:
    call = {"type": "function", "function": {"name": "f", "arguments": arguments}, "arguments": arguments}
    return [{"role": "user", "content": content, "tool_calls": [call]}]


def _hazard(template: str) -> list[str]:
    """What goes wrong for list/None content, dict/string arguments and a tools list."""
    seen = []
    for content, arguments in ((CHUNKS, DICT_ARGS), (None, STRING_ARGS), (CHUNKS, STRING_ARGS)):
        outcome = our_outcome(template, _conversation(content, arguments), tools=TOOLS)
        if outcome[0] == "error":
            seen.append(f"error {outcome[1]}")
        elif "{'" in outcome[1] or "[{'" in outcome[1]:
            seen.append("python repr")
        elif '\\"city' in outcome[1]:
            seen.append("double-encoded JSON")
        elif "None" in outcome[1]:
            seen.append("None printed")
    as_dict = our_outcome(template, _conversation("hi", DICT_ARGS), tools=TOOLS)
    as_string = our_outcome(template, _conversation("hi", STRING_ARGS), tools=TOOLS)
    if as_dict[0] == as_string[0] == "text" and ("Paris" in as_dict[1]) != ("Paris" in as_string[1]):
        seen.append("arguments lost for one shape")
    return seen


CASES = [
    ("CT001", "{%- for m in messages %}{{- '[INST]' + m['content'] }}{%- endfor %}"),
    ("CT001", "{%- for m in messages %}{{- m.content|trim }}{%- endfor %}"),
    ("CT001", "{%- for m in messages %}{{- m.content.strip() }}{%- endfor %}"),
    ("CT001", "{%- set c = messages[0]['content'] %}{{- c ~ '!' }}"),
    ("CT002", "{{- tools }}"),
    ("CT002", "{%- for m in messages %}{{- m['content'] }}{%- endfor %}"),
    ("CT002", "{%- for c in messages[0].tool_calls %}{{- c.function.arguments }}{%- endfor %}"),
    ("CT002", "{{- messages[0].tool_calls|trim }}"),
    ("TC001", "{%- for c in messages[0].tool_calls %}{%- for k, v in c.function.arguments|items %}{{- k }}{%- endfor %}{%- endfor %}"),
    ("TC001", "{%- for c in messages[0].tool_calls %}{%- for k, v in c.function.arguments.items() %}{{- k }}{%- endfor %}{%- endfor %}"),
    ("TC001", "{%- for c in messages[0].tool_calls %}{{- c['function']['arguments']|tojson }}{%- endfor %}"),
    ("TC001", "{%- for c in messages[0].tool_calls %}{{- c.arguments['city'] }}{%- endfor %}"),
    ("JN001", "{{- tools[0].function.parameters.items|tojson }}"),
]


@pytest.mark.parametrize("code, template", CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CASES)])
def test_flagged_template_misbehaves(code: str, template: str) -> None:
    assert code in {d.code for d in lint(template)}
    assert _hazard(template), "no hazard observed when rendering"


@pytest.mark.parametrize(
    "template",
    [
        "{%- for m in messages %}{%- if m.content is string %}{{- m.content + '!' }}{%- endif %}{%- endfor %}",
        "{{- tools|tojson }}",
        "{%- for c in messages[0].tool_calls %}{%- if c.function.arguments is string %}{{- c.function.arguments }}"
        "{%- else %}{{- c.function.arguments|tojson }}{%- endif %}{%- endfor %}",
    ],
)
def test_guarded_template_is_clean_and_safe(template: str) -> None:
    assert [d.code for d in lint(template) if d.code in ("CT001", "CT002", "TC001")] == []
    assert _hazard(template) == []
