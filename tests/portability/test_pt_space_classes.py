"""The difference classes the conversation space's client shapes and modes show, one small template each: the PT
finding names exactly the engines of its class, and each of those engines renders the space differently from
transformers (``chatjinja portability``'s comparison), so the rules' tables are checked against the engines."""

from __future__ import annotations

import pytest

from chatjinja.lint import lint
from chatjinja.portability.report import compare_engines

from .conftest import engine_or_skip

_CALLS = ("{%- for m in messages %}{%- if m['tool_calls'] is defined %}{%- for c in m['tool_calls'] %}"
          "{%- if c['function']['arguments'] is mapping %}{%- for k, v in c['function']['arguments']|items %}")
_CALLS_END = "{%- endfor %}{%- endif %}{%- endfor %}{%- endif %}{%- endfor %}"
_TOOLS = "{%- if tools %}{%- for t in tools %}"
_TOOLS_END = "{%- endfor %}{%- endif %}"

# (code, what the row shows, template, the engines the finding names)
CLASSES = [
    ("PT001", "hfjs ignores .lstrip(chars)",
     "{%- for m in messages %}{%- if m['content'] is string and '</think>' in m['content'] %}"
     "{{- m['content'].split('</think>')[-1].lstrip('\\n') }}{%- endif %}{%- endfor %}", {"hfjs"}),
    ("PT006", "arguments sent as a JSON string, looped over with loop.last",
     "{%- for m in messages %}{%- if m['tool_calls'] is defined %}{%- for c in m['tool_calls'] %}"
     "{%- for k in c['function']['arguments'] %}{{- k }}{%- if not loop.last %},{%- endif %}{%- endfor %}"
     "{%- endfor %}{%- endif %}{%- endfor %}", {"minijinja", "hfjs", "llamacpp"}),
    ("PT009", "|tojson of a |map generator", "{%- if tools %}{{- tools|map(attribute='function')|tojson }}{%- endif %}",
     {"minijinja", "hfjs", "llamacpp"}),
    ("PT009", "|int of a tool result that is not a number",
     "{%- for m in messages %}{%- if m['role'] == 'tool' %}{{- m['content']|int }}{%- endif %}{%- endfor %}", {"minijinja"}),
    ("PT013", "minijinja drops the line break after {% raw %}", "{%- raw %}\nx{% endraw %}",
     {"minijinja", "hfjs", "llamacpp"}),
    ("PT015", "a test that lets None tools through",
     "{%- if tools or documents %}{%- for t in tools %}{{- t['function']['name'] }}{%- endfor %}{%- endif %}",
     {"minijinja"}),
    ("PT011", "text parts in an assistant turn concatenated with +",
     "{%- for m in messages %}{%- if m['role'] == 'assistant' and m['content'] is defined %}{{- '<a>' + m['content'] }}"
     "{%- endif %}{%- endfor %}", {"hfjs", "llamacpp"}),
    ("PT016", "|trim of content left out", "{%- for m in messages %}{{- m['content']|trim }}{%- endfor %}", {"hfjs"}),
    ("PT016", "+ with content left out", "{%- for m in messages %}{{- '<' + m['content'] + '>' }}{%- endfor %}",
     {"llamacpp"}),
    ("PT016", "|tojson of content left out", "{%- for m in messages %}{{- m['content']|tojson }}{%- endfor %}",
     {"minijinja", "hfjs"}),
    ("PT016", "an item of content left out, behind 'is iterable'",
     "{%- for m in messages %}{%- if m['content'] is iterable and m['content'] is not string %}"
     "{{- m['content'][0]['text'] }}{%- endif %}{%- endfor %}", {"hfjs", "llamacpp"}),
    ("PT017", "a flag printed", "{%- if model_identity %}{{- model_identity }}{%- endif %}", {"hfjs"}),
    ("PT017", "a flag joined with +",
     "{%- if date_string is not defined %}{%- set date_string = '26 Jul 2024' %}{%- endif %}{{- 'Today: ' + date_string }}",
     {"hfjs", "llamacpp"}),
    ("PT017", "|reject of a flag",
     "{%- if builtin_tools is defined %}{{- builtin_tools|reject('equalto', 'x')|join(', ') }}{%- endif %}",
     {"minijinja", "hfjs", "llamacpp"}),
    ("PT018", "|upper of a schema type that is a list",
     _TOOLS + "{%- for k, p in t['function']['parameters']['properties']|items %}{{- k ~ ':' ~ p['type']|upper ~ ';' }}"
     "{%- endfor %}" + _TOOLS_END, {"hfjs"}),
    ("PT018", "an argument value printed", _CALLS + "{{- k ~ '=' ~ v ~ ';' }}" + _CALLS_END, {"hfjs", "llamacpp"}),
    ("PT018", "|string of an argument value", _CALLS + "{{- k ~ '=' ~ v|string ~ ';' }}" + _CALLS_END, {"hfjs"}),
    ("PT018", ".items() of a schema with an 'items' key",
     "{%- macro walk(s) %}{%- for k, v in s.items() %}{{- k ~ ';' }}{%- if v is mapping %}{{- walk(v) }}{%- endif %}"
     "{%- endfor %}{%- endmacro %}" + _TOOLS + "{{- walk(t['function']['parameters']) }}" + _TOOLS_END, {"hfjs"}),
    ("PT018", "a schema type that is a list looked up in a list",
     "{%- macro ty(s) %}{%- if s['type'] in ['integer', 'number'] %}{{- 'number' }}{%- else %}{{- 'other' }}{%- endif %}"
     "{%- endmacro %}" + _TOOLS + "{%- for k, p in t['function']['parameters']['properties']|items %}"
     "{{- k ~ ':' ~ ty(p) ~ ';' }}{%- endfor %}" + _TOOLS_END, {"llamacpp"}),
    ("PT019", "a set in a loop read before it",
     "{%- set last = '' %}{%- for m in messages %}{%- if last %}{{- '(after ' ~ last ~ ') ' }}{%- endif %}"
     "{{- m['role'] ~ '\\n' }}{%- set last = m['role'] %}{%- endfor %}", {"hfjs", "llamacpp"}),
]


def _params():
    return [pytest.param(code, source, engines, id=f"{code}-{what}") for code, what, source, engines in CLASSES]


@pytest.mark.parametrize("code, source, engines", _params())
def test_the_finding_names_the_class_engines(code, source, engines) -> None:
    found = [d for d in lint(source, select=["PT"]) if d.code == code]
    assert found and {e for d in found for e in d.engines} == engines


@pytest.mark.parametrize("code, source, engines", _params())
def test_each_named_engine_renders_the_space_differently(code, source, engines) -> None:
    adapters = {name: engine_or_skip(name) for name in sorted(engines)}
    assert {name: found.verdict for name, found in compare_engines(source, adapters).items()} == \
        {name: "differs" for name in adapters}
