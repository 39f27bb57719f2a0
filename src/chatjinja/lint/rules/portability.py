"""What the other chat-template engines do differently from transformers' jinja2, as the PT rules need it.

The engines are the ones ``chatjinja portability`` runs (``chatjinja.portability.engines.ENGINE_NAMES``):
``minijinja`` (Rust: TGI, mistral.rs; the ``minijinja`` PyPI package with pycompat), ``hfjs``
(``@huggingface/jinja`` 0.5.11, transformers.js) and ``llamacpp`` (llama.cpp's C++ engine in
``common/jinja/``, llama-cpp-python 0.3.36). Every table entry was measured: a one-line template
through each engine against transformers 5.24.0 (``benchmarks/pt_agreement.py`` measures the rules
on the corpus). The static half keeps its own copy of the names so the linter never imports the adapters.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ...syntax import ast as A
from ..rule import Finding, Rule

__all__ = ["ENGINES", "pt_rule", "engine_list", "string_tested", "fails_without_tools"]

ENGINES = ("minijinja", "hfjs", "llamacpp")
_MINI, _HFJS, _LLAMA = ENGINES


def engine_list(engines: Iterable[str]) -> str:
    """``("minijinja", "hfjs")`` → ``"minijinja and hfjs"`` (in ``ENGINES`` order)."""
    names = [e for e in ENGINES if e in set(engines)]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def pt_rule(code: str, name: str, summary: str, doc: str, engines: tuple[str, ...], visits: tuple[type, ...] = (),
            check: Callable[[Any, Any], Iterable[Finding]] | None = None,
            finish: Callable[[Any], Iterable[Finding]] | None = None) -> Rule:
    """A portability rule: a warning that names the engines its divergence class affects."""
    assert all(e in ENGINES for e in engines), engines
    return Rule(code, name, "warning", summary, doc, visits, check, finish, engines=engines)


def string_tested(ctx: Any) -> bool:
    """Whether an enclosing ``if``/``elif`` chain tests some ``content`` with ``is string`` (``m.get('content')``,
    a variable set from it ...), which the linter's path-keyed guards do not see."""
    for statement in ctx.statements:
        if isinstance(statement, A.If):
            for test in (statement.test, *(arm.test for arm in statement.elifs)):
                text = ctx.source_text(test)
                if "string" in text and "content" in text:
                    return True
    return False


def fails_without_tools(ctx: Any) -> bool:
    """Whether the template loops over ``tools`` or ``documents`` outside any macro and any test of them: transformers
    (which passes None) then fails on every conversation without tools, so no other divergence shows in one."""
    found = ctx.scratch.get("_pt_fails_without_tools")
    if found is None:
        found = False
        for loop in ctx.nodes(A.For):
            if isinstance(loop.iter, A.Name) and loop.iter.name in ("tools", "documents") and not _tested_above(loop, ctx):
                found = True
                break
        ctx.scratch["_pt_fails_without_tools"] = found
    return found


def _tested_above(node: Any, ctx: Any) -> bool:
    stem = "tool" if node.iter.name == "tools" else "doc"
    current = ctx.parent_of(node)
    while current is not None:
        if isinstance(current, A.Macro):
            return True
        if isinstance(current, A.If) and any(
                stem in ctx.source_text(t) for t in (current.test, *(arm.test for arm in current.elifs))):
            return True
        current = ctx.parent_of(current)
    return False


# -- Python methods (PT001) -----------------------------------------------------------------------------
# The methods of str, list and dict that transformers' sandbox lets a template call, but for the
# mutating ones (PT012). An engine not listed for a method does not have it (or gives another result).
STR_METHODS = frozenset(
    "capitalize casefold center count encode endswith expandtabs find format format_map index isalnum isalpha "
    "isascii isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle isupper join ljust "
    "lower lstrip partition removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip split "
    "splitlines startswith strip swapcase title translate upper zfill".split())
LIST_METHODS = frozenset("copy count index".split())
DICT_METHODS = frozenset("copy get items keys values".split())
PYTHON_METHODS = STR_METHODS | LIST_METHODS | DICT_METHODS

_EVERYWHERE = frozenset("upper lower strip split startswith endswith replace title items keys values get".split())
# method -> the engines that implement it as Python does
METHOD_ENGINES: dict[str, frozenset[str]] = {m: frozenset(ENGINES) for m in _EVERYWHERE}
for _m in "lstrip rstrip".split():  # hfjs ignores the characters argument (PT001 flags it only with one)
    METHOD_ENGINES[_m] = frozenset(ENGINES)
for _m in ("splitlines find rfind count isdigit isalpha isspace islower isupper isalnum isnumeric join copy "
           "index").split():
    METHOD_ENGINES[_m] = frozenset({_MINI})
METHOD_ENGINES["capitalize"] = frozenset(ENGINES)  # hfjs leaves the rest as it is: the same for 'user', 'system'
METHOD_ENGINES["format"] = frozenset({_MINI, _LLAMA})
METHOD_ENGINES["rsplit"] = frozenset({_LLAMA})
# engines that differ only when the method gets an argument (llama.cpp: ``.replace(a, b, count)``); hfjs also
# ignores ``.lstrip(chars)``, which changes the text only when it starts with those characters: not flagged
METHOD_ARGUMENT_ENGINES = {"replace": frozenset({_LLAMA})}
# mutating methods: transformers refuses them (SecurityError); llama.cpp runs these four. (minijinja's own
# lists and dicts have no methods; its Python binding runs Python's on the caller's values, TGI's Rust does not.)
MUTATING_ENGINES: dict[str, frozenset[str]] = {m: frozenset({_LLAMA}) for m in "append pop reverse sort".split()}

# -- filters and tests (PT009) ----------------------------------------------------------------------------
# filter -> the engines that lack it (or whose version takes other arguments or gives another result)
FILTER_GAPS: dict[str, frozenset[str]] = {}


def _gap(names: str, *engines: str) -> None:
    for name in names.split():
        FILTER_GAPS[name] = FILTER_GAPS.get(name, frozenset()) | frozenset(engines)


_gap("wordcount center urlize forceescape xmlattr random wordwrap truncate", _MINI, _HFJS, _LLAMA)
_gap("striptags sum batch e escape reverse round groupby attr filesizeformat pprint slice urlencode", _HFJS, _LLAMA)
_gap("format count reject select min d", _HFJS)
_gap("format", _LLAMA)  # returns the format string unchanged
_gap("unique", _HFJS, _LLAMA)
_gap("attr", _MINI)
TEST_GAPS: dict[str, frozenset[str]] = {
    "callable": frozenset({_MINI}),
    "float": frozenset({_HFJS}),
    "escaped": frozenset({_HFJS, _LLAMA}),
    "filter": frozenset({_HFJS, _LLAMA}),
    "test": frozenset({_HFJS, _LLAMA}),
    "le": frozenset({_LLAMA}),
}
# tests written with an argument but no parentheses (``x is divisibleby 3``): hfjs cannot parse them
HFJS_BARE_ARGUMENT = _HFJS
