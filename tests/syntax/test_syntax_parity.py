"""Accept/reject parity with jinja2 3.1.6 in the Hugging Face environment: corpus and known quirks."""

from __future__ import annotations

import pytest

from chatjinja.errors import TemplateSyntaxError
from chatjinja.syntax import dump, parse
from tests.syntax.support import CORPUS, SYNTAX_CASES, corpus_sources


def lark_accepts(text: str) -> tuple[bool, str]:
    try:
        parse(text)
    except TemplateSyntaxError as exc:
        return False, str(exc)
    return True, ""


_CORPUS = corpus_sources()


@pytest.mark.corpus
@pytest.mark.parametrize(
    "key,text",
    _CORPUS or [pytest.param("", "", marks=pytest.mark.skip(f"../shared/corpus not found: {CORPUS}"))],
    ids=[k for k, _ in _CORPUS] or ["absent"],
)
def test_corpus_parity(key, text, jinja2_accepts):
    expected, why = jinja2_accepts(text)
    got, mine = lark_accepts(text)
    assert got == expected, (
        f"{key}: jinja2 {'accepts' if expected else 'rejects: ' + why}, chatjinja {'accepts' if got else 'rejects: ' + mine}"
    )


@pytest.mark.corpus
def test_driver_matches_lark_loop(corpus):
    """The fast table-driven loop and Lark's own ``Lark.parse`` build identical trees."""
    for key, text in corpus[::7]:
        try:
            fast = dump(parse(text))
        except TemplateSyntaxError as exc:
            with pytest.raises(TemplateSyntaxError) as slow:
                parse(text, use_lark_loop=True)
            assert str(slow.value) == str(exc), key
            continue
        assert dump(parse(text, use_lark_loop=True)) == fast, key


def _outcome(text: str, **options) -> str:
    try:
        return dump(parse(text, **options))
    except TemplateSyntaxError as exc:
        # not the span: Lark's loop places its end-of-input token on the last token
        return f"error {exc} expected={exc.expected} open={exc.open_block}"


def test_driver_matches_lark_loop_on_goldens_and_broken_variants():
    """Same trees and the same errors (message, expected tokens, open block) from both loops, also
    for the golden cases cut short or with a token dropped in, where most error paths are taken."""
    for path in sorted(SYNTAX_CASES.glob("*.jinja")):
        text = path.read_bytes().decode("utf-8")
        variants = [text] + [text[:cut] for cut in range(1, len(text), max(1, len(text) // 12))]
        for at in (len(text) // 3, len(text) // 2):
            variants += [text[:at] + extra + text[at:] for extra in (" if", ")", ",")]
        for variant in variants:
            assert _outcome(variant) == _outcome(variant, use_lark_loop=True), (path.name, variant)


# Templates where jinja2's behaviour is surprising; each line is checked against jinja2 itself.
QUIRKS = r"""
{{ if }}
{{ and }}
{{ a and and }}
{{ a if if else else }}
{{ -not }}
{{ x is defined if y else z }}
{{ 'a' if x is defined else 'b' }}
{{ x is sameas not }}
{{ x is defined is defined }}
{{ x is divisibleby(3) is odd }}
{{ x is divisibleby -3 }}
{{ x is sameas y.z }}
{{ x is not not }}
{{ x is in }}
{{ x is not none }}
{{ x is sameas none }}
{{ f(not=1) }}
{{ f(if=1) }}
{% for in in x %}{% endfor %}
{% for x in recursive %}{% endfor %}
{% for x in a, recursive %}{% endfor %}
{% for x in in %}{% endfor %}
{% for x in y if recursive %}{% endfor %}
{% for a, in x %}{% endfor %}
{% for a, b, in x %}{% endfor %}
{% for x in a, %}{% endfor %}
{% for x in a, : %}{% endfor %}
{% for x in a: %}{% endfor %}
{% for x in y if a if b else c %}{% endfor %}
{% for x in y if c else d %}{% endfor %}
{% for (a, b) in c %}{% endfor %}
{% for x in y %}{% else: %}{% endfor %}
{% for x in y %}{% break %}{% continue %}{% endfor %}
{% from 'x' import with context %}
{% from 'x' import with %}
{% from 'a' import b as c, d, with context %}
{% from 'a' import _b %}
{% from 'a' import none %}
{% from 'a' import b as none %}
{% from 'a' import b, %}
{% import 'a' as b with context %}
{% import 'a' as none %}
{% include 'a' ignore missing with context %}
{% include 'a' ignore %}
{% include 'a' without context %}
{% extends 'a' %}
{{ x[] }}
{{ x[a,] }}
{{ x[::] }}
{{ x[a:b:c:d] }}
{{ x[:,:] }}
{% if a if b else c %}{% endif %}
{% if a, b %}{% endif %}
{% if a, %}{% endif %}
{% if a, : %}{% endif %}
{% if a: %}{% elif b: %}{% else: %}{% endif %}
{% set true = 1 %}
{% set ns.a = 1 %}
{% set x.a = 1 %}
{% set ns.a.b = 1 %}
{% set (a) = 1 %}
{% set (ns.a) = 1 %}
{% set [a] = 1 %}
{% set true.x = 1 %}
{% set ns.if = 1 %}
{% set a, b = 1, 2 %}
{% set a = 1, %}
{% set a, %}x{% endset %}
{% set a, = 1 %}
{% set x | upper %}a{% endset %}
{% set x = 1 | upper %}
{% set x: %}a{% endset %}
{% macro none() %}{% endmacro %}
{% macro f(a=1, b) %}{% endmacro %}
{% macro f(a,) %}{% endmacro %}
{% macro f(a, b=1) %}{% endmacro %}
{% macro f %}{% endmacro %}
{% call (foo)() %}{% endcall %}
{% call (foo()) %}{% endcall %}
{% call(x, y=1) foo(x) %}{% endcall %}
{% call foo() | bar %}{% endcall %}
{% call foo()() %}{% endcall %}
{% call x|f()() %}{% endcall %}
{% filter upper %}x{% endfilter %}
{% filter upper | lower(1) %}{% endfilter %}
{% filter upper() () %}{% endfilter %}
{% with %}x{% endwith %}
{% with a, b = c %}{% endwith %}
{% with a = 1, 2 %}{% endwith %}
{% with a = 1: %}{% endwith %}
{% with a = 1, b = 2 %}{% endwith %}
{% print %}
{% print a, b %}
{% print a, %}
{% block a scoped required %}{% endblock a %}
{% block a %}{% endblock b %}
{% block a required %}x{% endblock %}
{% block a required %} {# c #} {% endblock %}
{% block a-b %}{% endblock %}
{% autoescape true %}{% endautoescape %}
{% generation %}x{% endgeneration %}
{% generation: %}x{% endgeneration %}
{% do x %}
{% raw +%}x{% endraw %}
{% raw %}x{%+ endraw +%}
{%- raw -%} {{ x }} {%- endraw -%}
{% raw %}x
{#}
{# a #} #}
{#-#}
{{ {'a': 1}}}
{{ {'a': {'b': 1}}}}
{{ (1, 2)}}
{{ a -}}
{{ a +}}
{% if a +%}{% endif %}
{{ x.if }}
{{ x . y }}
{{ x.1.5 }}
{{ x.'a' }}
{{ x.0x1F }}
{{ x|upper.y }}
{{ -1|abs }}
{{ 2 ** 3 ** 2 }}
{{ a not b }}
{{ a not in b }}
{{ not a is b }}
{{ a ~ b | upper }}
{{ 'a' 'b' }}
{{ '\x' }}
{{ '\u00e9\n' }}
{{ 1_000 }}
{{ 1__0 }}
{{ 0b102 }}
{{ 0123 }}
{{ 1.e5 }}
{{ 1e5 }}
{{ x; }}
{{ x ! }}
{{ }}
{{ () }}
{{ (a, ) }}
{{ (,) }}
{{ a, }}
{{ [1, 2,] }}
{{ [,] }}
{{ {} }}
{{ {a} }}
{{ f(*a, b=1) }}
{{ f(b=1, *a) }}
{{ f(b=1, c) }}
{{ f(**a, b=1) }}
{{ f(**a, *b) }}
{{ f(a,) }}
{{ f(*a, *b) }}
{{ a if b if c else d }}
{{ a if b else c if d else e }}
{{ a.b(c)[d] }}
{{ x|f()() }}
{{ x ) }}
{{ (x ] }}
{% endif %}
{% if a %}{% endfor %}
{% if x %}{% else %}{% else %}{% endif %}
{% else %}
{% endfor: %}
{% endblock %}
{% %}
{% 'x' %}
{% if x %}
{% for x in y %}{% if x %}{% endfor %}
{{ x
{% set x = (1 %}
{{ x·y }}
{{ é }}
{% macro in() %}{% endmacro %}
{% macro if(in, not=1) %}{% endmacro %}
{% set x = 1 %}{% endset %}
{% raw %}{% raw %}{% endraw %}
{{ '{#' }}{{ '}}' }}{% set x = "%}" %}
{%endfor%}
{% for x in y%}{%endfor%}
{% if x %}{% endif x %}
{% set x %}{% endset %}
{{+ x }}
{{-1}}
{{ +x }}
{% IF x %}{% ENDIF %}
{% for x in y recursive if z %}{% endfor %}
{% for x in y if z recursive %}{% endfor %}
{% include x with context ignore missing %}
{% import x as y, z %}
{% if x %}{% elif %}{% endif %}
{% for x in y %}{% elif z %}{% endfor %}
{{ x if y else }}
{{ a | }}
{{ a is }}
{{ a . }}
{{ a[ }}
{{ f(a b) }}
{{ [a b] }}
{{ {a: b c: d} }}
{{ {a, b} }}
{{ 'a' ~ }}
{{ not }}
{{ not not a }}
{{ a is not defined and b }}
{{ a|f is b|g }}
{{ x.y.z(1)(2)[3].w }}
{{ 1 if 2 }}{{ 3 }}
{%- generation -%}{%- endgeneration -%}
{% generation %}{% generation %}{% endgeneration %}{% endgeneration %}
{% endgeneration %}
{% for m in messages %}{% generation %}{% break %}{% endgeneration %}{% endfor %}
{{ 'unterminated }}
{{ "a\"b" }}
{{ 'a\'b' }}
{{ x is divisibleby 3 }}
{{ x is divisibleby(3, 4) }}
{{ x is sameas [1] }}
{{ x is sameas {} }}
{{ x is sameas "s" }}
{{ x is sameas 1.5 }}
{{ x is a.b }}
{{ x|a.b(1) }}
{% filter a.b %}{% endfilter %}
{{ loop.cycle('a', 'b') }}
{{ a ** -b }}
{{ a * -b }}
{{ - }}
{{ a == == b }}
{{ a < b < c }}
{{ a !== b }}
{{ a <> b }}
{{ a => b }}
{{ a // b % c }}
{{ a /// b }}
{{ a *** b }}
"""


@pytest.mark.parametrize("text", [line for line in QUIRKS.strip("\n").split("\n")])
def test_jinja2_quirks(text, jinja2_accepts):
    expected, why = jinja2_accepts(text)
    got, mine = lark_accepts(text)
    assert got == expected, (
        f"jinja2 {'accepts' if expected else 'rejects: ' + why}; chatjinja {'accepts' if got else 'rejects: ' + mine}"
    )


@pytest.mark.parametrize("marker", ["", "-", "+"])
@pytest.mark.parametrize("tail", ["", "\n", "\r\n", "\r", "\n\n", " ", "x"])
def test_unclosed_comment_at_the_end(marker, tail, jinja2_accepts):
    """jinja2 drops the final newline, then stops at the end of the source before its comment rule can
    fail: ``{#`` (with a marker, before at most one newline) ending the template is accepted."""
    text = "a {#" + marker + tail
    expected, why = jinja2_accepts(text)
    got, mine = lark_accepts(text)
    assert got == expected, f"{text!r}: jinja2 {'accepts' if expected else 'rejects'}; chatjinja: {mine}"


def test_newline_styles_parse_alike():
    for text in ("{% if x %}\r\n{{ y }}\r\n{% endif %}", "{% if x %}\r{{ y }}\r{% endif %}", "{{ 'a\\\r\nb' }}"):
        parse(text)


@pytest.mark.parametrize("text", [
    "{{ " + "1" * 5000 + " }}",  # past Python's limit of decimal digits (4300 by default)
    "{{ x." + "1" * 5000 + " }}",  # an integer attribute
    "a\n{{ (" + "1" * 4301 + " }}",  # just past it, before the unclosed bracket is reached
    "{{ " + "1" * 5000 + " ) }}",
    "{{ ) " + "1" * 5000 + " }}",  # an earlier syntax error wins
    "{{ " + "1" * 4300 + " }}",  # at the limit: accepted
    "{{ " + "1_" * 3000 + "1 }}",  # 3,001 digits: underscores do not count
    "{{ 0x" + "f" * 5000 + " }}",  # hexadecimal: not limited
    "{{ 1." + "1" * 5000 + " }}",  # a float: not limited
])
def test_long_integer_literals_are_refused_where_jinja2_refuses_them(text):
    """jinja2's lexer converts an integer literal with ``int``, which raises ValueError past
    ``sys.get_int_max_str_digits()`` decimal digits; the parser refuses the same templates with that message,
    as a TemplateSyntaxError at the literal (it crashed with the ValueError itself)."""
    import jinja2

    from tests.syntax.support import hf_environment

    try:
        hf_environment().parse(text)
        expected = None
    except ValueError as exc:
        expected = str(exc)
    except jinja2.TemplateSyntaxError as exc:
        expected = exc.message
    try:
        parse(text)
        got = None
    except TemplateSyntaxError as exc:
        got = exc.message
        literal = text.index("1" * 4301) if "1" * 4301 in text else None
        if literal is not None and "digits" in got:
            assert exc.span.start == literal
    assert got == expected


def test_number_patterns_match_jinja2s_on_random_text():
    """The lexer's INT and FLOAT (written without a group repeated per digit) match exactly what jinja2's
    ``integer_re`` and ``float_re`` match, at the start of 40,000 random strings of number-like characters."""
    import random
    import re

    from jinja2 import lexer as jinja2_lexer

    from chatjinja.syntax.parser import GRAMMAR_PATH

    grammar = GRAMMAR_PATH.read_text(encoding="utf-8")
    ours = {name: re.compile(re.search(rf"^{name}: /(.*)/i$", grammar, re.M).group(1), re.I) for name in ("INT", "FLOAT")}
    theirs = {"INT": jinja2_lexer.integer_re, "FLOAT": jinja2_lexer.float_re}
    rng = random.Random(20261202)
    alphabet = "0123456789_.eE+-xXbBoOafAF 9_"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14)))
        for pos in (0, 1):
            for name in ("INT", "FLOAT"):
                mine, reference = ours[name].match(text, pos), theirs[name].match(text, pos)
                assert (mine and mine.end()) == (reference and reference.end()), (name, text, pos)


@pytest.mark.parametrize("digits", ["0x" + "f" * 1_000_000, "0b" + "1" * 1_000_000, "1." + "1" * 1_000_000,
                                    "1" * 1_000_000])
def test_a_long_number_literal_lexes_in_little_memory(digits):
    """A 1 MB number literal: jinja2's patterns (a group repeated per digit) made Python's ``re`` keep about 600
    bytes of backtracking state per digit (600 MB); the lexer's take a few MB (tracemalloc peak)."""
    import tracemalloc

    parse("{{ x }}")
    tracemalloc.start()
    try:
        parse("{{ " + digits + " }}")
    except TemplateSyntaxError:
        pass  # (the decimal one is past Python's digit limit)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024, peak
