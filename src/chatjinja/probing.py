"""Dynamic capability probes: render fixed conversations through chatjinja's renderer and read the facts off the output.

This is the one module where both halves meet: it measures, through the HF-identical runtime,
the twelve facts the static analyser predicts (docs/CAPABILITIES.md gives each definition).
A render that raises, is stopped by a budget or produces more than the output limit counts as
"not supported" for that probe. The renders run under :data:`PROBE_BUDGETS`: the renderer's
defaults with the clock as a distant backstop, so the fuel and size budgets decide where a render
stops and the answers do not depend on how loaded the machine is.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from .analysis.facts import MEDIA_CHUNK_TYPES, Capabilities
from .loading import template_record
from .runtime.render import render_source

__all__ = ["probe", "ProbeOutcome", "ProbeRun", "run_probes", "SPECIAL_TOKENS", "PROBE_BUDGETS"]

SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
NEEDLE_CANDIDATES = ("Zq7needle", "Xk3marker", "Wv9sentinel", "Jf5probe")
# The renderer's default budgets with a wall-clock limit far above what any template within the
# fuel (``max_steps``) and size budgets needs: a backstop only, never what stops a probe render on
# a loaded machine (the compile-time check, half of it, is as far off).
PROBE_BUDGETS = {"timeout": 60.0}
# When the renders of the two simplest conversations ([user] and [user, assistant, user]) both
# exceed a budget, the other probes count as failed without rendering: a template that runs away on
# those runs away on all. The analyser uses the same rule.
_RUNAWAY = ("BudgetExceeded", "OutputLimit")
OUTPUT_LIMIT = 1_000_000  # characters

_MEDIA_CHUNKS: dict[str, dict[str, Any]] = {
    "image": {"type": "image", "url": "https://example.com/picture.png"},
    "image_url": {"type": "image_url", "image_url": {"url": "https://example.com/picture.png"}},
    "video": {"type": "video", "url": "https://example.com/clip.mp4"},
    "audio": {"type": "audio", "url": "https://example.com/sound.wav"},
    "input_audio": {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
}


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    """One probe render: its text, or the error it raised (``"ExceptionName: message"``)."""

    text: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def contains(self, needle: str) -> bool:
        return self.text is not None and needle in self.text


@dataclass(frozen=True)
class ProbeRun:
    """All probe renders of one template, by probe name, and the needle they used."""

    needle: str
    outcomes: dict[str, ProbeOutcome]


def _render(
    source: str,
    messages: list,
    special_tokens: dict[str, str],
    tools: list | None = None,
    documents: list | None = None,
    add_generation_prompt: bool = False,
    budgets: dict[str, Any] = PROBE_BUDGETS,
) -> ProbeOutcome:
    try:
        text = render_source(
            messages, source, tools, documents, add_generation_prompt, budgets=budgets, variables=special_tokens
        )
    except RecursionError:
        return ProbeOutcome(None, "RecursionError: maximum recursion depth exceeded")
    except Exception as exc:  # noqa: BLE001 - any failure means "not supported"
        return ProbeOutcome(None, f"{type(exc).__name__}: {str(exc).strip()[:300]}")
    if not isinstance(text, str):
        return ProbeOutcome(None, f"TypeError: render returned {type(text).__name__}")
    if len(text) > OUTPUT_LIMIT:
        return ProbeOutcome(None, f"OutputLimit: {len(text)} characters")
    return ProbeOutcome(text)


def _needle(source: str) -> str:
    for candidate in NEEDLE_CANDIDATES:
        if candidate not in source:
            return candidate
    return "Qq" + str(abs(hash(source)))[:8] + "needle"


def _conversations(n: str) -> dict[str, tuple[list, dict[str, Any]]]:
    """Every probe: name -> (messages, extra render arguments)."""
    u = {"role": "user", "content": "hello"}
    arguments = {"arg_" + n: "v"}

    def call(name: str, call_id: str, args: Any) -> dict[str, Any]:
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}

    def round_trip(args: Any) -> list:
        return [
            u,
            {"role": "assistant", "content": "", "tool_calls": [call("tool_" + n, "call9id9", args)]},
            {"role": "tool", "tool_call_id": "call9id9", "name": "tool_" + n, "content": n + "t"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "more"},
        ]

    def parallel(first: Any, second: Any) -> list:
        return [
            u,
            {"role": "assistant", "content": "", "tool_calls": [
                call("tool_" + n, "call9id9", first), call("second_" + n, "call8id8", second)]},
            {"role": "tool", "tool_call_id": "call9id9", "name": "tool_" + n, "content": "r1"},
            {"role": "tool", "tool_call_id": "call8id8", "name": "second_" + n, "content": "r2"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "more"},
        ]

    tools = [{"type": "function", "function": {"name": "def_" + n, "description": "d",
                                                "parameters": {"type": "object", "properties": {}}}}]
    text_chunk = {"type": "text", "text": n}
    probes: dict[str, tuple[list, dict[str, Any]]] = {
        "user": ([{"role": "user", "content": n}], {}),
        "assistant": ([u, {"role": "assistant", "content": n}, {"role": "user", "content": "next"}], {}),
        "assistant_last": ([u, {"role": "assistant", "content": n}], {}),
        "system": ([{"role": "system", "content": n}, u], {}),
        "developer": ([{"role": "developer", "content": n}, u], {}),
        "chunk_text": ([{"role": "user", "content": [text_chunk]}], {}),
        "tool_definitions": ([u], {"tools": tools}),
        "round_trip": (round_trip(arguments), {}),
        "round_trip_string": (round_trip(json.dumps(arguments)), {}),
        "parallel": (parallel(arguments, {"x": 1}), {}),
        "parallel_string": (parallel(json.dumps(arguments), json.dumps({"x": 1})), {}),
        "generation_prompt_off": ([u], {"add_generation_prompt": False}),
        "generation_prompt_on": ([u], {"add_generation_prompt": True}),
        "reasoning": ([u, {"role": "assistant", "content": "ans", "reasoning_content": n}], {}),
        "documents": ([u], {"documents": [{"title": "t", "text": n}]}),
        "alternating": ([u, {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}], {}),
        "repeated_user": ([u, {"role": "user", "content": "again"}], {}),
    }
    for kind, chunk in _MEDIA_CHUNKS.items():
        probes["chunk_" + kind] = ([{"role": "user", "content": [text_chunk, chunk]}], {})
    return probes


def run_probes(source: str, special_tokens: dict[str, str] | None = None) -> ProbeRun:
    """Render every probe conversation of docs/CAPABILITIES.md with ``source``."""
    tokens = dict(SPECIAL_TOKENS if special_tokens is None else special_tokens)
    needle = _needle(source)
    outcomes: dict[str, ProbeOutcome] = {}
    for name, (messages, kwargs) in _conversations(needle).items():
        if name not in ("user", "assistant") and all(_ran_away(outcomes[n]) for n in ("user", "assistant")):
            outcomes[name] = ProbeOutcome(None, "Skipped: the [user] and [user, assistant, user] renders ran away")
            continue
        outcomes[name] = _render(source, messages, tokens, **kwargs)
    return ProbeRun(needle, outcomes)


def _ran_away(outcome: ProbeOutcome) -> bool:
    return outcome.error is not None and outcome.error.startswith(_RUNAWAY)


def _has_chunk_dump(outcome: ProbeOutcome) -> bool:
    return outcome.text is not None and ("'type'" in outcome.text or '"type"' in outcome.text)


def capabilities_from_run(run: ProbeRun, name: str = "<string>") -> Capabilities:
    """Read the twelve facts off the probe renders (the definitions of docs/CAPABILITIES.md)."""
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
    """The twelve capability facts of a template, measured by rendering (``origin="probe"``).

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
    result = capabilities_from_run(run_probes(source, tokens), name)
    with _cache_lock:
        _cache[key] = result
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return result


def _renamed(capabilities: Capabilities, name: str) -> Capabilities:
    return replace(capabilities, source_name=name)
