"""The analyser on small templates that use the data-flow patterns real chat templates use.

Every probed fact is compared with the probe at test time (the renderer is the reference); the
static-only facts (raise sites, role tests, variables, tokens) are checked against the source.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from chatjinja import analyze, probe
from chatjinja.analysis import PROBED_FIELDS, Capabilities, disagreements
from chatjinja.errors import ChatJinjaError, TemplateSyntaxError
from chatjinja.analysis.collect import NEEDLE, collect, run_scenarios
from chatjinja.analysis.execute import STEP_LIMIT_MESSAGE
from chatjinja.limits import StaticLimitExceeded
from chatjinja.source import Source
from chatjinja.syntax import parse

CHATML_LOOP = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"

PATTERNS = {
    "generic-loop": CHATML_LOOP + "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    "system-alias-slice": (
        "{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}{% set loop_messages = messages[1:] %}"
        "{% else %}{% set sys = '' %}{% set loop_messages = messages %}{% endif %}{{ sys }}"
        "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% set content = message['content'] %}{% if message.role == 'user' %}[INST]{{ content }}[/INST]"
        "{% elif message.role == 'assistant' %}{{ content }}</s>{% else %}{{ raise_exception('bad role') }}{% endif %}{% endfor %}"
    ),
    "macro-parameters": (
        "{% macro render(msg, prefix='') %}{{ prefix }}{{ msg.content }}{% endmacro %}"
        "{% for m in messages %}{% if m.role in ['user', 'system'] %}{{ render(m, 'U:') }}"
        "{% elif m.role == 'assistant' %}{{ render(m) }}{% endif %}{% endfor %}"
    ),
    "namespace-counter-alternation": (
        "{% set ns = namespace(index=0, system='') %}{% for m in messages %}"
        "{% if m.role == 'system' %}{% set ns.system = m.content %}{% else %}"
        "{% if (m.role == 'user') != (ns.index % 2 == 0) %}{{ raise_exception('alternate!') }}{% endif %}"
        "{% set ns.index = ns.index + 1 %}{{ m.content }}{% endif %}{% endfor %}{{ ns.system }}"
    ),
    "set-in-loop-does-not-leak": (
        "{% set found = false %}{% for m in messages %}{% if m.role == 'system' %}{% set found = true %}{% endif %}{% endfor %}"
        "{% if found %}{{ messages[0].content }}{% endif %}{% for m in messages if m.role != 'system' %}{{ m.content }}{% endfor %}"
    ),
    "selectattr-and-generator-truth": (
        "{% set systems = messages | selectattr('role', 'equalto', 'system') | list %}"
        "{% if systems %}{{ systems[0].content }}{% endif %}"
        "{% if messages | selectattr('role', 'equalto', 'developer') %}always{% endif %}"
        "{% for m in messages | rejectattr('role', 'equalto', 'system') %}{{ m['content'] }}{% endfor %}"
    ),
    "chunks-with-type-guards": (
        "{% for m in messages %}{% if m.content is string %}{{ m.content }}"
        "{% elif m.content is iterable and m.content is not mapping %}"
        "{% for c in m.content | sort(attribute='type') %}{% if c.type == 'text' %}{{ c.text }}"
        "{% elif c.type in ['image', 'image_url'] %}<image>{% elif c['type'] == 'input_audio' %}<audio>"
        "{% else %}{{ raise_exception('unsupported chunk ' + c.type) }}{% endif %}{% endfor %}{% endif %}{% endfor %}"
    ),
    "content-dumped-as-python": "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
    "tools-and-calls": (
        "{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}{% for m in messages %}"
        "{% if m.role == 'assistant' and m.tool_calls %}{% for call in m.tool_calls %}"
        "<call id={{ call.id }}>{{ call.function.name }} {% if call.function.arguments is string %}"
        "{{ call.function.arguments }}{% else %}{{ call.function.arguments | tojson }}{% endif %}</call>{% endfor %}"
        "{% elif m.role == 'tool' %}<result>{{ m.content }}</result>{% else %}{{ m.content }}{% endif %}{% endfor %}"
    ),
    "only-first-call-and-no-ids": (
        "{% for m in messages %}{% if m.tool_calls is defined %}{% set call = m.tool_calls[0].function %}"
        "{{ call.name }}({% for k, v in call.arguments.items() %}{{ k }}={{ v }}{% endfor %})"
        "{% else %}{{ m.content }}{% endif %}{% endfor %}"
    ),
    "tools-length-without-guard-fails": "{{ tools | length }}{% for m in messages %}{{ m.content }}{% endfor %}",
    "reasoning-and-documents": (
        "{% if documents %}{% for d in documents %}<doc>{{ d.text }}</doc>{% endfor %}{% endif %}"
        "{% for m in messages %}{% if m.reasoning_content is defined %}<think>{{ m.reasoning_content }}</think>{% endif %}"
        "{{ m.content }}{% endfor %}"
    ),
    "strip-reasoning-by-split": (
        "{% for m in messages %}{% set content = m.content %}{% if '</think>' in content %}"
        "{% set content = content.split('</think>')[-1].lstrip('\\n') %}{% endif %}{{ content | trim }}{% endfor %}"
    ),
    "string-methods-and-filters": (
        "{% for m in messages %}{{ m.content.strip() | replace('x', 'y') }}{{ m.role | upper }}"
        "{% if m.content.startswith('/') %}cmd{% endif %}{% endfor %}"
    ),
    "upper-hides-the-text": "{% for m in messages %}{{ m.content | upper }}{% endfor %}",
    "raise-when-not-user-first": (
        "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be the user') }}{% endif %}"
        "{% for m in messages %}{{ m.content }}{% endfor %}"
    ),
    "recursive-macro": (
        "{% macro show(v, d) %}{% if v is mapping %}{% for k in v %}{{ k }}:{{ show(v[k], d + 1) }}{% endfor %}"
        "{% else %}{{ v }}{% endif %}{% endmacro %}{% for m in messages %}{{ show(m, 0) }}{% endfor %}"
    ),
    "call-block-and-generation": (
        "{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% for m in messages %}"
        "{% call wrap() %}{% generation %}{{ m.content }}{% endgeneration %}{% endcall %}{% endfor %}"
        "{{ strftime_now('%Y') if add_generation_prompt }}"
    ),
    "whitespace-only-generation-prompt": (
        "{% for m in messages %}{{ m.content }}{% endfor %}\n{% if add_generation_prompt %}\n{% endif %}"
    ),
    "dict-and-loop-helpers": (
        "{% set names = dict(user='U', assistant='A') %}{% for m in messages %}"
        "{{ names.get(m.role, '?') }}{% if not loop.last %}{{ m.content }}{% else %}{{ m.content | trim }}{% endif %}{% endfor %}"
    ),
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_static_matches_probe(name):
    source = PATTERNS[name]
    static, measured = analyze(source), probe(source)
    assert disagreements(static, measured) == [], static.probed()


def test_patterns_cover_both_answers_of_every_field():
    """The pattern set is only a test if each probed field is true for some pattern and false for another."""
    seen: dict[str, set] = {name: set() for name in PROBED_FIELDS}
    for source in PATTERNS.values():
        for name, value in probe(source).probed().items():
            seen[name].add(bool(value))
    assert all(values == {True, False} for values in seen.values()), seen


def test_raise_sites_carry_message_position_and_guard():
    c = analyze(PATTERNS["system-alias-slice"])
    alternation, bad_role = c.raises
    assert alternation.message.startswith("Conversation roles must alternate")
    assert alternation.kind == "alternation"
    assert alternation.condition == "(message['role'] == 'user') != (loop.index0 % 2 == 0)"
    assert (alternation.span.line, alternation.span.column) == (1, PATTERNS["system-alias-slice"].index("raise_exception") + 1)
    assert bad_role.message == "bad role" and bad_role.kind == "role"
    assert bad_role.condition == "not (message.role == 'user') and not (message.role == 'assistant')"
    assert bad_role.roles == ("developer", "system", "tool")
    dynamic = analyze("{{ raise_exception('got ' + messages[0].role) }}").raises[0]
    assert dynamic.message is None and dynamic.message_source == "'got ' + messages[0].role" and dynamic.condition is None


def test_role_tests_are_spanned_and_normalised():
    source = PATTERNS["macro-parameters"] + "{{ messages | selectattr('role', 'equalto', 'tool') | list | length }}"
    tests = analyze(source).role_tests
    shapes = [(t.roles, t.operator, t.subject) for t in tests]
    assert (("user", "system"), "in", "m.role") in shapes
    assert (("assistant",), "==", "m.role") in shapes
    assert (("tool",), "selectattr", "messages") in shapes
    for test in tests:
        assert source[test.span.start : test.span.end].startswith(("m.role", "messages |", "messages|"))


def test_variables_special_tokens_and_other_facts():
    source = (
        "{{ bos_token }}{% if enable_thinking is defined and enable_thinking %}<think>{% endif %}"
        "{% set custom = custom_prompt | default('x') %}{% for m in messages %}{% set local = m.content %}{{ local }}"
        "{% if m.role == 'ipython' %}<|python_tag|>{% endif %}{% endfor %}{{ eos_token }}{{ strftime_now('%d') }}"
        "{% generation %}{% endgeneration %}<start_of_turn>[TOOL_CALLS]"
    )
    c = analyze(source)
    assert c.variables == ("bos_token", "custom_prompt", "enable_thinking", "eos_token")
    assert c.special_tokens == ("bos_token", "eos_token")
    uses = {u.name: u for u in c.variable_uses}
    assert uses["enable_thinking"].guarded and uses["custom_prompt"].guarded and not uses["bos_token"].guarded
    assert c.uses_strftime_now and c.generation_tags
    assert c.other_roles == ("ipython",)
    assert set(c.control_tokens) == {"<think>", "<|python_tag|>", "<start_of_turn>", "[TOOL_CALLS]"}


def test_content_uses_say_how_and_for_which_roles():
    uses = analyze(PATTERNS["chunks-with-type-guards"]).content_uses
    hows = {u.how for u in uses}
    assert {"type-test", "output"} <= hows
    rendered = analyze(PATTERNS["system-alias-slice"]).content_uses
    assert any(u.how == "output" for u in rendered)


def test_evidence_points_at_the_deciding_constructs():
    source = PATTERNS["tools-and-calls"]
    c = analyze(source)
    (definition,) = c.evidence["tool_definitions"]
    assert source[definition.span.start : definition.span.end] == "{{ tools | tojson }}"
    ids = c.evidence["tool_call_ids"][0]
    assert source[ids.span.start : ids.span.end] == "{{ call.id }}"
    failing = analyze(PATTERNS["tools-length-without-guard-fails"])
    assert failing.roles == () and "type" in failing.evidence["roles"][0].note


def test_syntax_error_is_raised_with_a_span():
    with pytest.raises(TemplateSyntaxError) as info:
        analyze("{% if messages %}unclosed")
    assert info.value.span is not None


def test_analyze_accepts_text_source_and_chat_template():
    from chatjinja import ChatTemplate, Source

    text = PATTERNS["generic-loop"]
    a, b, c = analyze(text), analyze(Source(text, "x.jinja")), analyze(ChatTemplate(text, name="named"))
    assert a.probed() == b.probed() == c.probed()
    assert (b.source_name, c.source_name) == ("x.jinja", "named")


@pytest.mark.parametrize(
    "source",
    [
        "{% for a in range(99999) %}{% for b in range(99999) %}{{ a }}{% endfor %}{% endfor %}{{ messages[0].content }}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "{% set s = 'ab' * 99999999 %}{{ s }}",
        "{{ 9 ** 9 ** 9 }}",
        "{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}",
        "{{- '%999999999s'|format('x') }}{{ messages[0].content }}",
        "{{ '%999999999s' % 'x' }}{{ messages[0].content }}",
        "{{ '{:>999999999}'.format('x') }}{{ messages[0].content }}",
        "{{ 'x'.center(999999999) }}{{ messages[0].content }}",
        "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ messages[0].content }}",
    ],
)
def test_hostile_templates_end_and_agree(source):
    """Templates that would run away: both the analyser (step limits, or its fuel) and the probe (budgets) stop."""
    measured = probe(source)
    assert measured.roles == ()
    try:
        static = analyze(source)
    except StaticLimitExceeded as exc:  # more work than an analysis may do: a clean stop, naming the limit
        assert exc.limit == "analysis_fuel"
        return
    assert disagreements(static, measured) == []
    assert static.roles == () and isinstance(static, Capabilities)


def test_static_half_never_imports_jinja2_or_the_runtime():
    code = (
        "import sys, chatjinja\n"
        "c = chatjinja.analyze(open('templates/devstral-small-2-24b-instruct-2512.jinja').read())\n"
        "assert c.tool_calls\n"
        "bad = sorted(m for m in sys.modules if m == 'jinja2' or m.startswith(('jinja2.', 'chatjinja.runtime')))\n"
        "assert not bad, bad\n"
    )
    from ..conftest import REPO

    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_format_strings_never_reach_python_attribute_lookup():
    """The analyser runs outside the sandbox: ``str.format`` field names must not walk Python objects."""
    for source in (
        "{{ '{0.__class__.__init__.__globals__}'.format(messages) }}{{ messages[0].content }}",
        "{{ raise_exception('{0.__init__.__globals__}'.format(raise_exception)) }}",
        "{% set f = '{0.__class__.__mro__}'.format %}{{ f('') }}",
    ):
        c = analyze(source)
        notes = " ".join(e.note for items in c.evidence.values() for e in items)
        assert "globals" not in notes.replace("__globals__", "") and "<function" not in notes and "mro" not in notes.replace("__mro__", "")
        assert c.roles == ()
    assert analyze("{{ '{}-{:>3}'.format('a', 7) }}{{ messages[0].content }}").content_string


def test_security_payloads_never_crash_the_analyser():
    from ..conftest import REPO

    payloads = sorted((REPO / "tests" / "security" / "payloads").glob("*.jinja"))
    if not payloads:
        pytest.skip("no security payloads in this checkout")
    too_deep = []
    for path in payloads:
        try:
            analyze(path.read_text(encoding="utf-8"))
        except TemplateSyntaxError:
            pass
        except StaticLimitExceeded:  # a clean error naming the static half's limit
            pass
        except ChatJinjaError as exc:  # a clean error, never a RecursionError
            assert "nested too deeply" in str(exc)
            too_deep.append(path.name)
    assert len(too_deep) <= 3, too_deep


def test_control_tokens_searched_in_one_joined_text_match_a_search_per_text():
    """collect searches all literals joined by "<>": no token can straddle the joint."""
    from chatjinja.analysis.collect import _CONTROL_TOKEN

    texts = ["<|im_start", "|>", "<", "|eot_id|>", "<start_of", "_turn>", "[INST", "]", "</", "s>", "<｜User",
             "｜>", "a<|x|>b", "<think>", "[/INST]</s>", "<tool_call>", "|>", "<|a|", ">", "<", ">", ""]
    separate = {token for text in texts for token in _CONTROL_TOKEN.findall(text)}
    assert set(_CONTROL_TOKEN.findall("<>".join(texts))) == separate
    source = "".join("{{ '" + t.replace("'", "") + "' }}" for t in texts)
    assert set(analyze(source).control_tokens) == separate


def test_step_limit_fails_at_the_same_place_with_text_between_statements():
    """Statements that print nothing only add steps: the run ends at the same step, in the same construct.

    The expectations are what the statement-by-statement interpreter reported (a step per
    statement, comments included), around the 200,000-step limit.
    """
    cases = [
        ("{% for i in range(99999) %}\n{% for j in range(3) %}\n{% endfor %}\n{% endfor %}{{ messages[0].content }}", (2, 1)),
        ("{% for i in range(99999) %}{# c #}{# d #}{% set x = 1 %}{# e #}{% endfor %}{{ messages[0].content }}", (1, 1)),
        ("{% for i in range(49999) %}{# a #}{# b #}{# c #}{% endfor %}{{ messages[0].content }}", None),
        ("{% for i in range(50000) %}{# a #}{# b #}{# c #}{% endfor %}{{ messages[0].content }}", (1, 1)),
        ("{% for i in range(66665) %}{# a #}{# b #}{% endfor %}{{ messages[0].content }}{# x #}", None),
        ("{% for i in range(66666) %}{# a #}{# b #}{% endfor %}{{ messages[0].content }}", "no place"),
        ("{% for i in range(66667) %}{# a #}{# b #}{% endfor %}{{ messages[0].content }}", (1, 1)),
        ("{% for i in range(66665) %}{# a #}{% if true %}{# b #}{% endif %}{% endfor %}{# y #}{{ messages[0].content }}", (1, 1)),
    ]
    for source, failure in cases:
        # the [user N] run alone: every shape running to the step limit is more work than one analysis's fuel
        trace = run_scenarios(parse(source), source)["user"]
        if failure is None:
            assert trace.contains(NEEDLE), source
        elif failure == "no place":  # the limit is reached between top-level statements
            assert trace.failure is not None and trace.failure.span is None, source
        else:
            assert trace.failure is not None and trace.failure.message == STEP_LIMIT_MESSAGE, source
            assert (trace.failure.span.line, trace.failure.span.column) == failure, source
        try:  # the whole analysis agrees, or stops on its fuel
            assert analyze(source).content_string == trace.contains(NEEDLE), source
        except StaticLimitExceeded as exc:
            assert exc.limit == "analysis_fuel", source


def _unbounded(source: str) -> Capabilities:
    """The analysis of a template parsed without the source budgets (which ``analyze`` applies)."""
    return collect(parse(source, max_source_nesting=None), Source(source))


def test_deeply_nested_branches_compile_inside_the_run():
    """The executor compiles a branch when it first runs: nesting too deep to compile fails runs, not the analysis."""
    source = "{% if messages %}" * 300 + "{{ messages[0].content }}" + "{% endif %}" * 300
    c = _unbounded(source)
    assert isinstance(c, Capabilities)
    with pytest.raises(StaticLimitExceeded, match="max_source_nesting"):
        analyze(source)


def test_moderately_deep_nesting_is_analysed_not_cut_short():
    """A nesting level costs the executor no more Python frames than the tree-walking interpreter did.

    (Past the renderer's source nesting budget, which ``analyze`` applies: the executor itself is tested.)
    """
    depth = 150
    for source in (
        "{% with a = 1 %}" * depth + "{{ messages[0].content }}" + "{% endwith %}" * depth,
        "{% if messages %}" * depth + "{{ messages[0].content }}" + "{% endif %}" * depth,
        "{{ " + "{'a':" * depth + "1" + "}" * depth + " }}{{ messages[0].content }}",
        "{{ " + "[" * depth + "]" * depth + " }}{{ messages[0].content }}",
        "{% set x = " + "(" * depth + "1" + ")" * depth + " %}{{ messages[0].content }}",
    ):
        assert _unbounded(source).content_string, source[:40]


STAND_IN_TEMPLATES = {
    "text-chunks-only": (
        "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for c in m.content %}"
        "{% if c.type == 'text' %}{{ c.text }}{% endif %}{% endfor %}{% endif %}{% endfor %}"
    ),
    "media-placeholders": (
        "{% for m in messages %}{% for c in m.content %}{% if c['type'] == 'image' %}<image>{% elif c.type == 'text' %}"
        "{{ c.text }}{% elif 'audio' in c %}<audio>{% else %}{{ c }}{% endif %}{% endfor %}{% endfor %}"
    ),
    "content-dumped": "{% for m in messages %}{{ m.content }}{{ m | tojson }}{% endfor %}",
    "content-concatenated": "{% for m in messages %}{{ 'U: ' + m.content }}{% endfor %}",
    "chunk-length-and-keys": (
        "{% for m in messages %}{% for c in m.content %}{{ c | length }}{% if c %}x{% endif %}"
        "{% for k in c %}{{ k }}{% endfor %}{% endfor %}{% endfor %}"
    ),
    "content-type-tested": (
        "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% elif m.content is defined %}"
        "{{ raise_exception('only text') }}{% endif %}{% endfor %}"
    ),
    **{f"content-list-{index}": "{% for m in messages %}{% if m.content is not string %}" + operation + "{% endif %}{% endfor %}"
       for index, operation in enumerate((
           "{{ m.content | length }}", "{{ ([1] + m.content) | length }}", "{{ (m.content + [1]) | length }}",
           "{% if m.content %}x{% endif %}", "{{ m.content[-1].type }}", "{{ m.content | last }}",
           "{{ m.content | map(attribute='type') | join(',') }}", "{{ m.content | tojson }}", "{{ m.content ~ '' }}",
           "{% for a, b in [m.content] %}{{ b }}{% endfor %}", "{{ m.content == [] }}", "{{ m.content | reverse | first }}",
           "{{ (m.content * 2) | length }}", "{{ m.content.count(1) }}", "{% if m.content | selectattr('type', 'ne', 'text') | list %}x{% endif %}",
       ))},
    **{f"reasoning-{index}": "{% for m in messages %}{{ m.content }}" + operation + "{% endfor %}"
       for index, operation in enumerate((
           "{{ m.reasoning_content }}", "{% if m.thinking is defined %}t{% endif %}", "{% if 'reasoning_content' in m %}r{% endif %}",
           "{{ m | length }}", "{{ m.get('thinking', '') }}", "{% for k in m %}{{ k }}{% endfor %}", "{{ m | dictsort | length }}",
           "{% if 'tool_calls' in m %}t{% endif %}{{ m.get('role') }}{{ m['content'] }}",
       ))},
    "call-names-only": (
        "{% for m in messages %}{% for t in m.tool_calls or [] %}{{ t.function.name }}{{ t.id }}{% endfor %}"
        "{{ m.content }}{% endfor %}"
    ),
    "call-arguments": (
        "{% for m in messages %}{% for t in m.tool_calls or [] %}{{ t.function.name }}"
        "{% if t.function.arguments is string %}{{ t.function.arguments }}{% else %}{{ t.function.arguments | tojson }}{% endif %}"
        "{% endfor %}{% endfor %}"
    ),
    "call-function-dumped": (
        "{% for m in messages %}{% for t in m.tool_calls or [] %}{{ t.function | tojson }}{{ t.function.items() | list }}"
        "{% endfor %}{% endfor %}"
    ),
    "call-function-keys": (
        "{% for m in messages %}{% for t in m.tool_calls or [] %}{% for k in t.function %}{{ k }}{% endfor %}"
        "{{ t.function | length }}{% if 'arguments' in t.function %}a{% endif %}{% endfor %}{% endfor %}"
    ),
}


# The watched runs that never look inside their watched dict or list, so stand in for the others
# (besides the reasoning run, which stands for [U, assistant N] in all but "content-dumped" and the
# templates that read the reasoning).
STANDS_IN = {
    "text-chunks-only": {"round_trip"}, "media-placeholders": {"round_trip"}, "content-dumped": set(),
    "content-concatenated": {"chunk_text", "round_trip"}, "chunk-length-and-keys": {"round_trip"},
    "content-type-tested": {"chunk_text", "round_trip"}, **{f"content-list-{index}": {"round_trip"} | ({"chunk_image"} if index in (0, 1, 2, 3, 12) else set())
       for index in range(15)},  # (the length of the list is not a look inside its chunks)
    **{f"reasoning-{index}": {"round_trip"} | ({"reasoning"} if index == 7 else set()) for index in range(8)},
    "call-names-only": {"round_trip"}, "call-arguments": {"chunk_text"}, "call-function-dumped": {"chunk_text"},
    "call-function-keys": {"chunk_text", "round_trip"},
}


@pytest.mark.parametrize("name", sorted(STAND_IN_TEMPLATES))
def test_a_watched_run_stands_in_only_for_runs_it_equals(name):
    """Where one run stands for others (text and media chunks, the two forms of call arguments), each
    of them made on its own, with plain dicts and lists, gives the same trace."""
    from chatjinja.analysis.collect import _SHAPES, _STANDS_FOR, SPECIAL_TOKEN_VALUES, run_scenarios
    from chatjinja.analysis.execute import Program
    from chatjinja.syntax.whitespace import effective_texts
    from chatjinja.syntax import parse

    source = STAND_IN_TEMPLATES[name]
    tree = parse(source)
    runs = run_scenarios(tree, source)
    program = Program(tree, effective_texts(tree, source))

    def summary(trace):
        failure = trace.failure and (trace.failure.kind, trace.failure.message, trace.failure.span)
        return (repr(trace.pieces), sorted(trace.printed.items()), failure,
                [(f.kind, f.message, f.span) for f in trace.may_fail], trace.steps)

    for scenario in sorted(set(_STANDS_FOR).union(*_STANDS_FOR.values())):
        messages, extra = _SHAPES[scenario]()
        alone = program.run({"messages": messages, "tools": None, "documents": None, "add_generation_prompt": False,
                             **SPECIAL_TOKEN_VALUES, **extra})
        assert summary(runs[scenario]) == summary(alone), scenario
    reasoning = set() if name == "content-dumped" or name.startswith("reasoning-") else {"reasoning"}
    # (the parallel shape's two calls are looked inside where the round trip's one call is)
    parallel = {"parallel"} if "round_trip" in STANDS_IN[name] else set()
    assert runs.unlooked == STANDS_IN[name] | reasoning | parallel


WATCHED_DICT_LOOKS = {
    "item": lambda d: d["url"], "get": lambda d: d.get("url"), "in": lambda d: "url" in d, "iter": lambda d: list(d),
    "keys": lambda d: d.keys(), "values": lambda d: d.values(), "items": lambda d: d.items(), "copy": lambda d: d.copy(),
    "dict": lambda d: dict(d), "update": lambda d: {}.update(d), "unpack": lambda d: {**d}, "eq": lambda d: {} == d,
    "repr": lambda d: repr(d), "format": lambda d: "{}".format(d), "reversed": lambda d: reversed(d), "or": lambda d: {} | d,
}
WATCHED_LIST_LOOKS = {
    "item": lambda x: x[0], "iter": lambda x: list(x), "len": lambda x: len(x), "truth": lambda x: bool(x),
    "in": lambda x: 1 in x, "eq": lambda x: [] == x, "repr": lambda x: repr(x), "add": lambda x: x + [], "radd": lambda x: [] + x,
    "mul": lambda x: 2 * x, "extend": lambda x: [].extend(x), "join": lambda x: ",".join(x), "tuple": lambda x: tuple(x),
    "sorted": lambda x: sorted(x), "count": lambda x: x.count(1), "reversed": lambda x: reversed(x),
}


@pytest.mark.parametrize("look", sorted(WATCHED_DICT_LOOKS))
def test_a_watched_dict_notes_every_look_inside(look):
    from chatjinja.analysis.values import Watched

    watched = Watched({"type": "image", "url": "u"})
    WATCHED_DICT_LOOKS[look](watched)
    assert watched.read and type(watched).__name__ == "dict"
    keyed = Watched({"name": "n", "arguments": "a"}, frozenset({"arguments"}))
    len(keyed), list(keyed), "name" in keyed, keyed["name"], keyed.get("name")  # the same in every shape it stands for
    assert not keyed.read
    keyed.get("arguments")
    assert keyed.read


@pytest.mark.parametrize("look", sorted(WATCHED_LIST_LOOKS))
def test_a_watched_list_notes_every_look_inside(look):
    from chatjinja.analysis.values import WatchedList

    watched = WatchedList(["a"])
    try:
        WATCHED_LIST_LOOKS[look](watched)
    except TypeError:
        pass
    assert watched.read and type(watched).__name__ == "list"


def test_a_probe_render_stopped_by_a_budget_is_not_supported_and_not_retried(monkeypatch):
    # Every probe render runs once, under PROBE_BUDGETS (the clock only a distant backstop); a render any
    # budget stops, the timeout included, is "not supported" as recorded.
    from chatjinja.observation import render as probe_module
    from chatjinja.runtime.budget import BudgetExceeded

    calls: list[dict] = []
    for budget in ("timeout", "max_steps"):

        def stopped(messages, source, *parameters, budget=budget, **kwargs):
            calls.append(kwargs)
            raise BudgetExceeded(budget, 5, "over")

        calls.clear()
        monkeypatch.setattr(probe_module, "render_source", stopped)
        outcome = probe_module.render_text("x", [])
        assert outcome.text is None and outcome.error.startswith("BudgetExceeded") and len(calls) == 1
        assert calls[0]["budgets"] is probe_module.PROBE_BUDGETS
    assert probe_module.PROBE_BUDGETS == {"timeout": probe_module.PROBE_BUDGETS["timeout"]}  # fuel and sizes: the defaults
    assert probe_module.PROBE_BUDGETS["timeout"] >= 30


def test_no_signal_handling_in_the_library():
    """The library never installs signal handlers or timers (a probe's answer must not depend on a timer or the
    machine's load). Killing a child process it started (the portability engines) is not handling a signal."""
    import re

    from ..conftest import REPO

    handler = re.compile(r"signal\.(signal|alarm|setitimer|set_wakeup_fd|sigwait|pthread_sigmask)\b|SIGALRM|ITIMER_")
    found = [f"{path.relative_to(REPO)}:{number}" for path in sorted((REPO / "src").rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if handler.search(line)]
    assert found == []


def test_one_analysis_runs_with_the_cyclic_collector_paused_and_leaves_it_as_it_was(monkeypatch):
    """The parse and the analysis allocate the tree and the compiled runs in one go: the collector is off
    while they run (its passes would rescan them all), and its state is restored after, errors included."""
    import gc

    from chatjinja.analysis import collect as collect_module

    seen: list[tuple[str, bool]] = []

    def watched(name: str, function):
        def call(*args, **kwargs):
            seen.append((name, gc.isenabled()))
            try:
                return function(*args, **kwargs)
            finally:
                seen.append((name, gc.isenabled()))
        return call

    monkeypatch.setattr(collect_module, "parse", watched("parse", collect_module.parse))
    monkeypatch.setattr(collect_module, "_collect", watched("collect", collect_module._collect))
    source = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        assert analyze(source).content_string
        assert seen == [("parse", False), ("parse", False), ("collect", False), ("collect", False)]
        assert gc.isenabled()
        seen.clear()
        with pytest.raises(TemplateSyntaxError):
            analyze(source + "{% if %}")
        assert seen == [("parse", False), ("parse", False)] and gc.isenabled()  # (restored after an error too)
        seen.clear()
        assert collect(collect_module.parse(source), Source(source)).content_string  # the analysis of a tree parsed before
        assert seen == [("parse", True), ("parse", True), ("collect", False), ("collect", False)] and gc.isenabled()
        gc.disable()
        analyze(source)
        assert not gc.isenabled()  # a caller's paused collector stays paused
    finally:
        if was_enabled:
            gc.enable()
        else:
            gc.disable()


def test_an_analysis_leaves_no_reference_cycles_through_its_compiled_program():
    """The compiled closures refer to their program: ``Program.close`` at the end of ``collect`` lets them
    go at once, instead of leaving them all (tens of thousands for a large template) to the cyclic collector."""
    import gc

    source = "{% for m in messages %}{{ m['content'] }}{% endfor %}" * 200  # (500 are past the analysis fuel)
    analyze(source)  # (anything made once, such as the grammar, made before counting)
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()  # (so that no automatic pass collects what the analysis left before it is counted)
    try:
        assert analyze(source).content_string
        left = gc.collect()
    finally:
        if was_enabled:
            gc.enable()
    assert left < 100  # (31,511 objects for 500 loops before the programs were closed)
