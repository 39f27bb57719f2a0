"""The template variables transformers' ``apply_chat_template`` hands a template, as JSON data for the other engines.

:func:`template_context` builds them with the renderer's own steps (``plain_messages``,
``alias_reasoning_fields``, the tool schemas, ``template_variables``), so every engine receives what
the template receives in transformers: ``messages``, ``tools`` and ``documents`` (``None`` when not
given, as transformers passes them), ``add_generation_prompt`` and the keyword variables (special
tokens, ``enable_thinking``, ...). :func:`probe_cases` gives every member of the template's
conversation space (:mod:`chatjinja.observation`: the probe and client shapes, in each mode) in that
form, each with its transformers-identical rendering, made within the time a run's budget gives
chatjinja (:mod:`.budget`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..observation import PROBE_BUDGETS, SPECIAL_TOKENS, render_text, space_of
from ..runtime.messages import alias_reasoning_fields, plain_messages, plain_template_data
from ..runtime.render import _tool_schemas, template_variables

__all__ = ["PortabilityCase", "probe_cases", "template_context"]


def template_context(
    messages: list,
    tools: list[dict | Callable] | None = None,
    documents: list[dict] | None = None,
    add_generation_prompt: bool = False,
    **variables: Any,
) -> dict[str, Any]:
    """The variables one render of ``messages`` passes to the template (a single conversation, no
    ``continue_final_message``), as plain JSON data."""

    variables = template_variables(variables)
    chat = alias_reasoning_fields(plain_messages(messages))
    return {
        "messages": chat,
        "tools": plain_template_data(_tool_schemas(tools)),
        "documents": plain_template_data(documents),
        "add_generation_prompt": add_generation_prompt,
        **plain_template_data(variables),
    }


@dataclass(frozen=True)
class PortabilityCase:
    """One member of the space: its name, the engines' context and chatjinja's (transformers') rendering;
    ``cut`` says why there is none to compare with (chatjinja's render stopped at a budget, or was not made)."""

    name: str
    context: dict[str, Any]
    text: str | None
    error: str | None
    cut: str | None = None


# chatjinja's render stopped at one of its budgets or the observing renders' output limit: transformers'
# outcome is not known, so the case is compared with nothing
_STOPPED = ("BudgetExceeded", "OutputLimit")


def probe_cases(source: str, special_tokens: dict[str, str] | None = None, *, deadline: float | None = None,
                clock: Callable[[], float] | None = None, ran_out: str = "the time ran out") -> list[PortabilityCase]:
    """Every member of the template's conversation space that the other engines can be given (not
    ``continue_final_message``, which transformers applies after the render), rendered by chatjinja as
    transformers renders it; with a ``deadline`` (on ``clock``), each render's timeout is what is left of
    it, and the case it stops and those after it are cut, saying ``ran_out``."""

    tokens = dict(SPECIAL_TOKENS if special_tokens is None else special_tokens)
    cases = []
    for member in space_of(source):
        if member.options.get("continue_final_message"):
            continue
        variables = {**tokens, **dict(member.variables)}
        context = template_context(member.messages, **member.options, **variables)
        budgets = PROBE_BUDGETS
        if deadline is not None and clock is not None:
            left = deadline - clock()
            if left <= 0:
                cases.append(PortabilityCase(member.name, context, None, None, f"not run: {ran_out}"))
                continue
            budgets = {**PROBE_BUDGETS, "timeout": min(PROBE_BUDGETS["timeout"], left)}
        outcome = render_text(source, member.messages, variables=variables, budgets=budgets, **member.options)
        stopped = outcome.error if outcome.error is not None and outcome.error.startswith(_STOPPED) else None
        if stopped is None:
            cut = None
        elif budgets is not PROBE_BUDGETS and stopped.startswith("BudgetExceeded: budget timeout"):
            cut = f"not finished: {ran_out} while chatjinja rendered it"
        else:
            cut = f"chatjinja's render stopped: {stopped[:200]} (transformers' outcome unknown)"
        cases.append(PortabilityCase(member.name, context, outcome.text, outcome.error, cut))
    return cases
