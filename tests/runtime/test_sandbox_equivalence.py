"""The fast sandbox makes jinja2's ImmutableSandboxedEnvironment decisions and renders the same bytes.

Three checks, all against jinja2 at test time:

1. every (exact type, attribute) pair touched while rendering the corpus, plus every attribute of
   those types (``dir()``), gets the decision ``ImmutableSandboxedEnvironment().is_safe_attribute``
   (with ``modifies_known_mutable``) gives, and ``getattr``/``getitem`` return the same thing;
2. every corpus template renders the same outcome (text, or error class and message) with the fast
   environment as with the same environment using jinja2's own ``getattr``/``getitem``;
3. hostile accesses (``__class__``, ``mro``, ``str.format`` escapes, mutating methods) stay blocked;
4. the plain-data fast paths of ``runtime/messages.py`` give what their general branches give
   (property tests: the same data in dict/list/str subclasses takes the general branches).
"""

from __future__ import annotations

import copy
import types
from typing import Any, Callable

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2.runtime import LoopContext, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError, is_internal_attribute, modifies_known_mutable

from chatjinja.runtime.environment import ChatTemplateEnvironment, TemplateNamespace
from chatjinja.runtime.messages import (
    alias_reasoning_fields,
    message_objects_to_dicts,
    normalize_chat_messages,
    plain_messages,
    plain_template_data,
)
from chatjinja.runtime.sandbox import FAST_TYPES, FastAttributeMixin

from ..conftest import corpus_or_skip, corpus_templates, render_cases

pytestmark = pytest.mark.corpus

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]

CONVERSATIONS: dict[str, dict[str, Any]] = {
    "basic": {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]},
    "system_prompt": {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "Weather?"},
        ],
        "add_generation_prompt": True,
    },
    "tools": {
        "messages": [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "call1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
                ],
            },
            {"role": "tool", "tool_call_id": "call1", "name": "get_weather", "content": "sunny, 21C"},
            {"role": "assistant", "content": "Sunny, 21C."},
        ],
        "tools": TOOLS,
    },
    "chunks_and_reasoning": {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Look:"}, {"type": "image"}]},
            {"role": "assistant", "content": "A cat.", "reasoning_content": "It has whiskers."},
            {"role": "user", "content": [{"type": "text", "text": "Sure?"}]},
        ],
        "add_generation_prompt": True,
    },
}
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


class ReferenceEnvironment(ChatTemplateEnvironment):
    """The chat-template environment with jinja2's own sandbox lookups (the mixin bypassed)."""

    getattr = ImmutableSandboxedEnvironment.getattr
    getitem = ImmutableSandboxedEnvironment.getitem
    is_safe_callable = ImmutableSandboxedEnvironment.is_safe_callable


class RecordingEnvironment(ChatTemplateEnvironment):
    """Records every (exact type, name) looked up as an attribute, and one instance of each type."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.touched: set[tuple[type, str]] = set()
        self.samples: dict[type, Any] = {}

    def _record(self, obj: Any, name: Any) -> None:
        if isinstance(name, str):
            self.touched.add((type(obj), name))
            self.samples.setdefault(type(obj), obj)

    def getattr(self, obj: Any, attribute: str) -> Any:
        self._record(obj, attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        # an item lookup that misses falls back to the attribute
        try:
            obj[argument]
        except Exception:  # noqa: BLE001
            self._record(obj, argument)
        return super().getitem(obj, argument)


def _variables(case: dict[str, Any]) -> dict[str, Any]:
    case = copy.deepcopy(case)
    messages = alias_reasoning_fields(plain_template_data(normalize_chat_messages(case.pop("messages"))))
    variables = {**SPECIAL_TOKENS, "tools": None, "documents": None, "add_generation_prompt": False}
    variables.update(plain_template_data(case))
    return {"messages": messages, **variables}


def _outcome(env: jinja2.Environment, source: str, variables: dict[str, Any]) -> tuple:
    try:
        template = env.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        return ("syntax-error", str(exc))
    return _render_outcome(template, variables)


def _render_outcome(template: jinja2.Template, variables: dict[str, Any]) -> tuple:
    try:
        return ("text", template.render(**copy.deepcopy(variables)))
    except Exception as exc:  # noqa: BLE001 - the class and message are what we compare
        return ("error", type(exc).__name__, str(exc))


def _corpus_sources() -> list[tuple[str, str]]:
    corpus = corpus_or_skip()
    sources = [(str(path.relative_to(corpus)), path.read_text(encoding="utf-8")) for path in corpus_templates()]
    sources += [(f"render_case:{case['key']}", case["template"]) for case in render_cases()]
    return sources


@pytest.fixture(scope="module")
def corpus_runs() -> dict[str, Any]:
    """Render the corpus once in the fast (recording) environment and once with jinja2's lookups."""
    fast, reference = RecordingEnvironment(), ReferenceEnvironment()
    differences = []
    renders = 0
    cases = list(CONVERSATIONS.values())
    case_contexts = {f"render_case:{case['key']}": case["context"] for case in render_cases()}
    for name, source in _corpus_sources():
        try:
            code = fast.compile(source)  # the same code for both: same generator and options
        except jinja2.TemplateSyntaxError:
            continue
        ours = fast.template_class.from_code(fast, code, fast.make_globals(None))
        theirs = reference.template_class.from_code(reference, code, reference.make_globals(None))
        for context in [case_contexts[name]] if name in case_contexts else cases:
            variables = _variables(context)
            renders += 1
            outcomes = (_render_outcome(ours, variables), _render_outcome(theirs, variables))
            if outcomes[0] != outcomes[1]:
                differences.append((name, *outcomes))
    return {"differences": differences, "renders": renders, "recording": fast}


def test_corpus_renders_identically(corpus_runs: dict[str, Any]) -> None:
    assert corpus_runs["renders"] > 1000
    assert corpus_runs["differences"] == []


def _fresh_factory(tp: type, sample: Any) -> Callable[[], Any]:
    """A new equal object per lookup (so a lookup with side effects, like ``loop.last``, cannot leak)."""
    if tp is LoopContext:
        return lambda: LoopContext(iter([1, 2, 3]), Undefined, None, 0)
    if tp in (dict, list):
        return lambda: copy.deepcopy(sample)
    if issubclass(tp, jinja2.utils.Namespace):
        return lambda: tp(**copy.deepcopy(dict(sample._Namespace__attrs)))
    return lambda: sample


def _lookup(env: jinja2.Environment, lookup: str, obj: Any, name: str) -> tuple:
    try:
        return ("value", getattr(env, lookup)(obj, name))
    except Exception as exc:  # noqa: BLE001 - e.g. any lookup on an Undefined raises
        return ("raise", type(exc).__name__, str(exc))


def _same_result(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, Undefined) or isinstance(theirs, Undefined):
        return (
            type(ours) is type(theirs)
            and ours._undefined_hint == theirs._undefined_hint
            and ours._undefined_name == theirs._undefined_name
            and ours._undefined_exception is theirs._undefined_exception
            and type(ours._undefined_obj) is type(theirs._undefined_obj)
        )
    if isinstance(ours, types.FunctionType) and hasattr(ours, "__wrapped__"):  # str.format sandbox wrapper
        return (
            isinstance(theirs, types.FunctionType)
            and ours.__wrapped__.__name__ == theirs.__wrapped__.__name__
            and ours.__wrapped__.__self__ == theirs.__wrapped__.__self__
        )
    if isinstance(ours, (types.MethodType, types.BuiltinMethodType)):
        return type(ours) is type(theirs) and ours.__name__ == theirs.__name__ and type(ours.__self__) is type(theirs.__self__)
    return type(ours) is type(theirs) and (ours == theirs or (ours != ours and theirs != theirs))


def test_every_touched_attribute_gets_jinja2s_decision(corpus_runs: dict[str, Any]) -> None:
    recording: RecordingEnvironment = corpus_runs["recording"]
    touched_types = {tp for tp, _ in recording.touched}
    # the renders must reach the types the fast paths are for
    assert {dict, str, LoopContext, TemplateNamespace} <= touched_types
    samples = dict(recording.samples)
    for sample in ({"a": 1}, [1], (1,), "s", 1, 1.5, True, None, TemplateNamespace(a=1)):
        samples.setdefault(type(sample), sample)
    samples.setdefault(LoopContext, None)  # made fresh per lookup
    assert set(FAST_TYPES) <= set(samples) | {jinja2.utils.Namespace}
    pairs = set(recording.touched)
    for tp, sample in samples.items():
        names = dir(sample if tp is not LoopContext else _fresh_factory(tp, None)())
        pairs |= {(tp, name) for name in names}
    fast = ChatTemplateEnvironment()
    jinja = ImmutableSandboxedEnvironment()
    checked = 0
    for tp, name in sorted(pairs, key=lambda pair: (pair[0].__name__, pair[1])):
        fresh = _fresh_factory(tp, samples[tp])
        for lookup in ("getattr", "getitem"):
            ours = _lookup(fast, lookup, fresh(), name)
            theirs = _lookup(jinja, lookup, fresh(), name)
            assert ours[0] == theirs[0], (tp, name, lookup, ours, theirs)
            if ours[0] == "raise":
                assert ours == theirs
            else:
                assert _same_result(ours[1], theirs[1]), (tp, name, lookup, ours, theirs)
        sample = fresh()
        try:
            value = getattr(sample, name)
        except Exception:  # noqa: BLE001 - no attribute (or an Undefined refusing every lookup): nothing to decide
            continue
        expected = jinja.is_safe_attribute(sample, name, value)
        assert expected == (not (name.startswith("_") or is_internal_attribute(sample, name)) and not modifies_known_mutable(sample, name))
        remembered = fast._attribute_safety.get((tp, name))
        if jinja.wrap_str_format(value) is not None:
            assert remembered is None  # str.format is always replaced by the sandboxed formatter, never decided
        elif tp in FAST_TYPES or issubclass(tp, jinja2.utils.Namespace):
            assert remembered is expected, (tp, name)
            checked += 1
    print(f"{len(pairs)} (type, name) pairs over {len(samples)} types; {checked} remembered decisions checked")
    assert checked > 450


def test_hostile_lookups_stay_blocked() -> None:
    env = ChatTemplateEnvironment()
    blocked = [
        "{{ ''.__class__.__mro__ }}",
        "{{ messages.__class__ }}",
        "{{ (messages|first).items.__self__.__class__ }}",
        "{{ namespace.__init__.__globals__ }}",
        "{% set ns = namespace() %}{{ ns.__class__ }}",
        "{% for m in messages %}{{ loop.__class__ }}{{ loop._iterator }}{% endfor %}",
        "{{ messages.append(1) }}",
        "{{ messages[0].update({'a': 1}) }}",
        "{{ messages[0].pop('role') }}",
        "{{ '{0.__class__}'.format(messages) }}",
        "{{ '{0.append}'.format(messages) }}",
        "{{ raise_exception.__globals__ }}",
        "{{ dict.__call__.__globals__ }}",
        "{{ (1).__class__.__subclasses__() }}",
    ]
    for source in blocked:
        variables = _variables(CONVERSATIONS["basic"])
        outcome = _outcome(env, source, variables)
        # an unsafe attribute is an Undefined: empty when printed, an error when used
        assert outcome in {("text", "")} or outcome[1] in {"SecurityError", "UndefinedError"}, (source, outcome)
        assert outcome == _outcome(ReferenceEnvironment(), source, variables), source
    # the messages were not mutated either
    variables = _variables(CONVERSATIONS["basic"])
    before = copy.deepcopy(variables["messages"])
    for source in blocked:
        try:
            env.from_string(source).render(**variables)
        except Exception:  # noqa: BLE001
            pass
    assert variables["messages"] == before


def test_mutation_is_refused_with_jinja2s_security_error() -> None:
    template = ChatTemplateEnvironment().from_string("{{ messages.append(1) }}")
    with pytest.raises(SecurityError, match="access to attribute 'append' of 'list' object is unsafe"):
        template.render(messages=[])


def test_overridden_policy_is_not_cached() -> None:
    class Stricter(ChatTemplateEnvironment):
        def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
            return attr != "upper" and super().is_safe_attribute(obj, attr, value)

    env = Stricter()
    assert isinstance(env, FastAttributeMixin)
    template = env.from_string("{{ 'a'.upper() }}")
    with pytest.raises(SecurityError):
        template.render()
    assert env._attribute_safety == {}
    assert env.from_string("{{ 'a'.lower() }}").render() == "a"


def test_decision_table_is_bounded() -> None:
    # attribute names can come from data; the table stops growing at its bound
    env = ChatTemplateEnvironment()
    names = {f"x{i}": i for i in range(6000)}
    text = env.from_string("{% for i in range(6000) %}{{ ns['x' ~ i] }},{% endfor %}").render(ns=TemplateNamespace(**names))
    assert text == "".join(f"{i}," for i in range(6000))
    assert len(env._attribute_safety) <= 4096


# -- the plain-data fast paths (runtime/messages.py) ----------------------------------------------


class _Dict(dict):
    pass


class _List(list):
    pass


class _Str(str):
    pass


def _disguised(value: Any) -> Any:
    """The same data in subclasses of dict/list/str, which the fast paths leave to the general branches."""
    if type(value) is dict:
        return _Dict({_disguised(k): _disguised(v) for k, v in value.items()})
    if type(value) is list:
        return _List(_disguised(v) for v in value)
    if type(value) is str:
        return _Str(value)
    return value


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)
_messages = st.lists(
    st.dictionaries(st.sampled_from(["role", "content", "reasoning", "thinking", "tool_calls", "x"]), _json, max_size=5),
    max_size=4,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, with exactly the same (plain) types all the way down."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@settings(max_examples=150, deadline=None)
@given(_json)
def test_plain_data_fast_path_equals_general_path(value: Any) -> None:
    assert _same(plain_template_data(value), plain_template_data(_disguised(value)))
    converted = message_objects_to_dicts(value)
    assert converted == value and (type(value) not in (dict, list) or converted is not value)


@settings(max_examples=150, deadline=None)
@given(_messages)
def test_message_fast_paths_equal_general_paths(messages: list) -> None:
    fast = normalize_chat_messages(messages)
    general = normalize_chat_messages(_List(_Dict(m) for m in messages))
    assert _same(fast, [dict(m) for m in general])
    assert all(m is not n for m, n in zip(fast, messages))
    aliased = alias_reasoning_fields(plain_template_data(fast))
    assert _same(aliased, [dict(m) for m in alias_reasoning_fields([_Dict(m) for m in plain_template_data(fast)])])


@settings(max_examples=150, deadline=None)
@given(_messages)
def test_plain_messages_is_normalise_then_plain(messages: list) -> None:
    expected = plain_template_data(normalize_chat_messages(messages))
    assert _same(plain_messages(messages), expected)
    assert _same(plain_messages(_List(_Dict(m) for m in messages)), expected)  # the general path
    assert _same(plain_messages([_Dict({_Str(k): _disguised(v) for k, v in m.items()}) for m in messages]), expected)
    # the fast path (plain message dicts) with subclassed keys and values inside
    assert _same(plain_messages([{_Str(k): _disguised(v) for k, v in m.items()} for m in messages]), expected)
    # with the input depth budget: the same result, and every container the template gets is among
    # the caller's containers collected on the way (their text is not sized again)
    seen: list = []
    result = plain_messages(messages, 128, seen)
    assert _same(result, expected)
    collected = set(map(id, seen))
    stack = [result]
    while stack:
        item = stack.pop()
        if type(item) in (dict, list):
            assert id(item) in collected
            stack.extend(item.values() if type(item) is dict else item)


def test_namespace_lookups_match_jinja2() -> None:
    """The inline Namespace lookup: hits, misses, private names, its own two names, a format method."""
    fast, jinja = ChatTemplateEnvironment(), ImmutableSandboxedEnvironment()
    namespaces = [
        lambda: TemplateNamespace(a=1, items=[1], fmt="x{}".format),
        lambda: jinja2.utils.Namespace(a=1, _private=2, __dunder=3, fmt="{0.__class__}".format),
    ]
    names = ["a", "items", "fmt", "missing", "_private", "__dunder", "__class__", "_Namespace__attrs", "__init__", "mro"]
    for make in namespaces:
        for name in names:
            for _ in range(2):  # the second time answers from the remembered decision
                for lookup in ("getattr", "getitem"):
                    ours, theirs = _lookup(fast, lookup, make(), name), _lookup(jinja, lookup, make(), name)
                    assert ours[0] == theirs[0], (name, lookup, ours, theirs)
                    assert ours == theirs if ours[0] == "raise" else _same_result(ours[1], theirs[1]), (name, lookup)
    assert TemplateNamespace in fast._namespace_types
