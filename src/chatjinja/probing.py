"""Dynamic capability probes: render fixed conversations through chatjinja's renderer and read the facts off the output.

This is the one module where both halves meet: it measures, through the HF-identical runtime,
the twelve facts the static analyser predicts (docs/CAPABILITIES.md gives each definition).
A render that raises, is stopped by a budget or produces more than the output limit counts as
"not supported" for that probe. The renders run under :data:`PROBE_BUDGETS`: the renderer's
defaults with the clock as a distant backstop, so the fuel and size budgets decide where a render
stops and the answers do not depend on how loaded the machine is.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from .analysis import modes_of
from .analysis.facts import MEDIA_CHUNK_TYPES, Capabilities
from .loading import template_record
from .observation import PROBE_BUDGETS, SPECIAL_TOKENS, Outcome, build_space, render_text
from .observation.space import probe_conversations

__all__ = ["probe", "ProbeOutcome", "ProbeRun", "run_probes", "SPECIAL_TOKENS", "PROBE_BUDGETS"]

# When the renders of the two simplest conversations ([user] and [user, assistant, user]) both
# exceed a budget, the other probes count as failed without rendering: a template that runs away on
# those runs away on all. The analyser uses the same rule.
_RUNAWAY = ("BudgetExceeded", "OutputLimit")
ProbeOutcome = Outcome  # (the probe's name for an outcome of the one render helper)


@dataclass(frozen=True)
class ProbeRun:
    """All probe renders of one template, by probe name, and the needle they used; ``in_modes`` holds
    the renders of each mode variant (the mode shapes; the other probes are the default's)."""

    needle: str
    outcomes: dict[str, Outcome]
    in_modes: tuple[tuple[tuple, dict[str, Outcome]], ...] = ()
    modes: tuple = ()
    cut: tuple[str, ...] = ()


def run_probes(source: str, special_tokens: dict[str, str] | None = None, modes: tuple = ()) -> ProbeRun:
    """Render every probe shape of the conversation space with ``source``, in the default mode and in
    each variant of ``modes`` (``chatjinja.analysis.modes.Mode``)."""
    tokens = dict(SPECIAL_TOKENS if special_tokens is None else special_tokens)
    space = build_space(source, modes, shapes=probe_conversations)
    outcomes: dict[str, Outcome] = {}
    variants: dict[tuple, dict[str, Outcome]] = {}
    for member in space:
        into = variants.setdefault(member.variables, {}) if member.variables else outcomes
        if member.shape not in ("user", "assistant") and all(_ran_away(into[n]) for n in ("user", "assistant")):
            into[member.shape] = Outcome(None, "Skipped: the [user] and [user, assistant, user] renders ran away")
            continue
        if member.variables and member.shape != "user" and not into["user"].ok and outcomes["user"].ok:
            # a value the template cannot take ("Reasoning: " + true): not a mode (capabilities_from_run skips it)
            into[member.shape] = Outcome(None, "Skipped: the [user] render fails with this value")
            continue
        into[member.shape] = render_text(source, member.messages, variables={**tokens, **dict(member.variables)},
                                         **member.options)
    return ProbeRun(space.needle, outcomes, tuple(variants.items()), space.modes, space.cut)


def _ran_away(outcome: ProbeOutcome) -> bool:
    return outcome.error is not None and outcome.error.startswith(_RUNAWAY)


def _has_chunk_dump(outcome: ProbeOutcome) -> bool:
    return outcome.text is not None and ("'type'" in outcome.text or '"type"' in outcome.text)


def capabilities_from_run(run: ProbeRun, name: str = "<string>") -> Capabilities:
    """Read the twelve facts off the probe renders (the definitions of docs/CAPABILITIES.md), in the
    default mode and, where they differ, in each mode variant of the run."""
    facts = _facts(run, name)
    if not run.modes:
        return facts
    from .analysis.modes import ModeFacts  # lazy: the modes' types load the static half's tree module

    baseline = facts.probed()
    in_modes = []
    for variables, outcomes in run.in_modes:
        if not outcomes["user"].ok and run.outcomes["user"].ok:
            continue  # a value the template cannot take (as the analyser skips it)
        probed = _facts(ProbeRun(run.needle, {**run.outcomes, **outcomes}), name).probed()
        differing = {k: v for k, v in probed.items() if v != baseline[k]}
        if differing:
            in_modes.append(ModeFacts(variables, differing))
    return replace(facts, modes=run.modes, in_modes=tuple(in_modes), modes_cut=run.cut)


def _facts(run: ProbeRun, name: str) -> Capabilities:
    n, o = run.needle, run.outcomes
    roles = set()
    if o["user"].contains(n):
        roles.add("user")
    if o["assistant"].contains(n) or o["assistant_last"].contains(n):
        roles.add("assistant")
    for role in ("system", "developer"):
        if o[role].contains(n):
            roles.add(role)
    round_trips = (o["round_trip"], o["round_trip_string"])  # the arguments as a mapping, or as its JSON string
    if any(r.contains(n + "t") for r in round_trips):
        roles.add("tool")
    chunk_types = []
    text_only = o["chunk_text"]
    if text_only.contains(n) and not _has_chunk_dump(text_only):
        chunk_types.append("text")
    for kind in MEDIA_CHUNK_TYPES:
        media = o["chunk_" + kind]
        if media.ok and media.text != text_only.text and not _has_chunk_dump(media):
            chunk_types.append(kind)
    arguments = []
    if o["round_trip"].contains("arg_" + n):
        arguments.append("object")
    if o["round_trip_string"].contains("arg_" + n):
        arguments.append("string")
    on, off = o["generation_prompt_on"], o["generation_prompt_off"]
    return Capabilities(
        roles=tuple(sorted(roles)),
        content_string=o["user"].contains(n),
        chunk_types=tuple(sorted(chunk_types)),
        tool_definitions=o["tool_definitions"].contains("def_" + n),
        tool_calls=any(r.contains("tool_" + n) for r in round_trips),
        tool_call_arguments=tuple(arguments),
        parallel_tool_calls=any(o[p].contains("tool_" + n) and o[p].contains("second_" + n)
                                for p in ("parallel", "parallel_string")),
        tool_call_ids=any(r.contains("call9id9") for r in round_trips),
        generation_prompt=on.ok and on.text != off.text,
        reasoning=o["reasoning"].contains(n),
        documents=o["documents"].contains(n),
        requires_alternation=o["alternating"].ok and not o["repeated_user"].ok,
        source_name=name,
        origin="probe",
    )


_CACHE_SIZE = 1024
_cache: "OrderedDict[tuple[str, tuple], Capabilities]" = OrderedDict()
_cache_lock = threading.Lock()


def probe(template: Any, special_tokens: dict[str, str] | None = None) -> Capabilities:
    """The twelve capability facts of a template, measured by rendering (``origin="probe"``), in its
    default mode and, in ``in_modes``, where they differ in each mode variant (``modes``; see
    :func:`chatjinja.analysis.modes_of`).

    ``template`` is any template argument (a :class:`chatjinja.ChatTemplate`, a :class:`chatjinja.Source`,
    the source text, a path or a dict: see :func:`chatjinja.loading.template_record`). Special tokens default to ``<s>``, ``</s>``, ``<unk>`` (never the template's own, so
    every template is probed alike). Results are cached per source (the last 1024) for the process.
    """
    record = template_record(template)
    source, name = record.source, record.name
    tokens = dict(SPECIAL_TOKENS if special_tokens is None else special_tokens)
    key = (source, tuple(sorted(tokens.items())))
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
    if cached is not None:
        return cached if cached.source_name == name else _renamed(cached, name)
    result = capabilities_from_run(run_probes(source, tokens, modes_of(source)), name)
    with _cache_lock:
        _cache[key] = result
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return result


def _renamed(capabilities: Capabilities, name: str) -> Capabilities:
    return replace(capabilities, source_name=name)
