"""A template's modes: the variables it reads from the render context in a condition, with the values
its comparisons name.

``enable_thinking``, ``thinking``, ``reasoning_effort``, ``builtin_tools``... switch what a template
renders. A mode variable is a name the template reads from the context (not ``messages``, ``tools``,
``documents``, ``add_generation_prompt``, a special token or a global) inside an ``if``/``elif`` test or
the test of a conditional expression. Its values are the constants it is compared with
(``reasoning_effort == 'high'``, ``thinking in ['on', 'auto']``), the booleans when it is tested as one
(``enable_thinking is false``, a bare ``{% if thinking %}``), both booleans whenever one is named.
A parameter of transformers' ``apply_chat_template`` (``continue_final_message``), or a name transformers
cannot pass at all (``conversations``), is never a mode: a caller cannot pass it as a variable. The default mode is every mode variable unset, as transformers renders when the caller passes none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..parameters import TRANSFORMERS_PARAMETERS, UNPASSABLE_VARIABLES
from ..syntax import ast
from ..syntax.visitor import child_nodes
from .filters import KNOWN_GLOBALS
from .scopes import FIXED_VARIABLES

__all__ = ["MAX_MODE_VARIANTS", "MODE_SHAPES", "Mode", "ModeFacts", "find_modes", "mode_variants", "variant_name"]

# Filters whose result is tested as their subject would be (``thinking | default(false)``, ``effort | lower``)
_TRANSPARENT_FILTERS = frozenset({"default", "d", "lower", "upper", "trim", "string", "bool", "int"})
_BOOLEAN_TESTS = {"true": (True, False), "false": (True, False), "sameas": None, "none": (True, False)}
# Values of one variable beyond which the rest are left out (a long list of names is not a set of modes)
MAX_VALUES = 6
_SCALAR = (str, bool, int, float)
#: The conversation shapes rendered (and run) again in each mode variant: where reasoning, calls, the
#: generation prompt and the system prompt show. The other shapes' facts are the default mode's.
MODE_SHAPES = (
    "user", "assistant", "assistant_last", "system", "tool_definitions", "round_trip", "round_trip_string",
    "parallel", "generation_prompt_off", "generation_prompt_on", "reasoning",
    "client_calls_null_content", "client_reasoning_history", "client_reasoning_before_call",
)
#: The mode variants (one variable set to one value) a template is analysed, probed and observed in;
#: the rest are named as cut. (A template with more mode values than this is rare: 3 of the 385 corpus
#: templates.)
MAX_MODE_VARIANTS = 8


@dataclass(frozen=True, slots=True)
class Mode:
    """One mode variable and the values a render tries (in source order; the booleans last)."""

    name: str
    values: tuple[Any, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "values": list(self.values)}


def _subject(node: ast.Node, names: set[str]) -> str | None:
    while isinstance(node, ast.Filter) and node.name in _TRANSPARENT_FILTERS and node.node is not None:
        node = node.node
    if isinstance(node, ast.Name) and node.name in names:
        return node.name
    return None


def _constants(node: ast.Node) -> list[Any] | None:
    if isinstance(node, ast.Const) and isinstance(node.value, _SCALAR):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [i.value for i in node.items if isinstance(i, ast.Const) and isinstance(i.value, _SCALAR)]
        return items or None
    return None


def find_modes(tests: Iterable[ast.Expr], reads: Iterable[str], names: Iterable[ast.Name] = ()) -> tuple[Mode, ...]:
    """The modes the condition ``tests`` switch on, among the context ``reads`` (first read first).

    ``names`` (every name node of the template) tells which variables are only ever tested for truth
    (``{% if thinking %}``, ``not thinking``, ``thinking and x``): for those, false renders as unset does,
    so the variants try true alone."""
    tests = list(tests)
    candidates = [n for n in reads if n not in FIXED_VARIABLES and n not in KNOWN_GLOBALS
                  and n not in TRANSFORMERS_PARAMETERS and n not in UNPASSABLE_VARIABLES
                  and not n.endswith("_token") and n != "raise_exception"]
    candidates_set = set(candidates)
    values: dict[str, list[Any]] = {}
    truth_only: dict[str, int] = {}  # occurrences as a bare truth value (the test itself, or under not/and/or)
    for test in tests:
        stack = [test]
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.Not, ast.And, ast.Or)) or node is test:
                _count_truth(node, candidates_set, truth_only)
            stack.extend(reversed(child_nodes(node)))
            if isinstance(node, ast.Name) and node.name in candidates_set:
                values.setdefault(node.name, [])
            elif isinstance(node, ast.Compare):
                operands = [node.expr, *(op.expr for op in node.ops)]
                for (left, right), op in zip(zip(operands, operands[1:]), node.ops):
                    for subject, other in ((left, right), (right, left)):
                        name = _subject(subject, candidates_set)
                        found = _constants(other) if name is not None else None
                        if name is not None and found:
                            values.setdefault(name, []).extend(found)
            elif isinstance(node, ast.Test):
                name = _subject(node.node, candidates_set)
                if name is not None and node.name in ("true", "false", "boolean"):
                    values.setdefault(name, []).extend((True, False))
    occurrences: dict[str, int] = {}
    for node in names:
        if node.name in values:
            occurrences[node.name] = occurrences.get(node.name, 0) + 1
    modes = []
    for name in candidates:
        if name not in values:
            continue
        found = _ordered(values[name])
        if not values[name] and occurrences.get(name, 0) == truth_only.get(name, -1):
            found = (True,)  # only tested for truth: false is the default's render
        modes.append(Mode(name, found))
    return tuple(modes)


def _count_truth(node: ast.Node, candidates: set[str], counts: dict[str, int]) -> None:
    """Count the candidate names that are ``node``'s truth value directly (not under a comparison, filter or call)."""
    for child in (node.operand,) if isinstance(node, ast.Not) else (node.left, node.right) if isinstance(
            node, (ast.And, ast.Or)) else (node,):
        if isinstance(child, ast.Name) and child.name in candidates:
            counts[child.name] = counts.get(child.name, 0) + 1


def _ordered(found: list[Any]) -> tuple[Any, ...]:
    """Distinct values in order, the booleans (both of them, when one was named or none was) last."""
    seen: list[Any] = []
    booleans = not found
    for value in found:
        if isinstance(value, bool):
            booleans = True
        elif not any(type(v) is type(value) and v == value for v in seen):
            seen.append(value)
    seen = seen[:MAX_VALUES]
    return (*seen, True, False) if booleans or not seen else tuple(seen)


Variant = tuple[tuple[str, Any], ...]


def mode_variants(modes: Iterable[Mode]) -> list[Variant]:
    """One variant per mode variable and value, the others unset (variants that differ from the default in one value)."""
    return [((mode.name, value),) for mode in modes for value in mode.values]


def variant_name(variant: Variant) -> str:
    """``enable_thinking=true``: the variables as JSON values."""
    return ", ".join(f"{name}={_json_text(value)}" for name, value in variant)


def _json_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    return str(value)


@dataclass(frozen=True)
class ModeFacts:
    """The probed facts that differ from the default mode when ``variables`` are set."""

    variables: Variant
    facts: dict[str, Any]

    @property
    def name(self) -> str:
        return variant_name(self.variables)

    def to_dict(self) -> dict[str, Any]:
        return {"when": {name: value for name, value in self.variables}, "facts": dict(self.facts)}
