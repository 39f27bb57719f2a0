"""The one guarded render of everything that renders to learn (probe, analyse --verify, generation tags,
response templates, portability, diff): a member of the conversation space rendered through the
HF-identical runtime, its failure kept as a value.

A render that raises, is stopped by a budget or produces more than :data:`OUTPUT_LIMIT` characters is
an :class:`Outcome` with an ``error`` (``"ExceptionName: message"``), never an exception. The renders run
under :data:`PROBE_BUDGETS`: the renderer's defaults with the clock as a distant backstop, so the fuel
and size budgets decide where a render stops and the answers do not depend on how loaded the machine is.
Special tokens default to :data:`SPECIAL_TOKENS` (never the template's own, so every template is
observed alike).
"""

from __future__ import annotations

import hashlib
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from ..runtime.provenance import Provenance
from ..runtime.render import render_source
from ..runtime.sandbox import mutable_containers
from .space import Member

__all__ = ["OUTPUT_LIMIT", "Outcome", "PROBE_BUDGETS", "SPECIAL_TOKENS", "error_text", "observe", "render_text"]

SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
# The renderer's default budgets with a wall-clock limit far above what any template within the
# fuel (``max_steps``) and size budgets needs: a backstop only, never what stops a render on a
# loaded machine (the compile-time check, half of it, is as far off).
PROBE_BUDGETS = {"timeout": 60.0}
OUTPUT_LIMIT = 1_000_000  # characters


@dataclass(frozen=True, slots=True)
class Outcome:
    """One render: its text (and provenance, when asked for), or the error it raised."""

    text: str | None
    error: str | None = None
    provenance: Provenance | None = None
    spans: list[tuple[int, int]] | None = None  # the ``{% generation %}`` spans, when asked for

    @property
    def ok(self) -> bool:
        return self.error is None

    def contains(self, needle: str) -> bool:
        return self.text is not None and needle in self.text


def error_text(exc: BaseException) -> str:
    """``"Type: message"``; a long message by its start, its length and a hash of the whole (equal when the messages are)."""
    text = f"{type(exc).__name__}: {str(exc).strip()}"
    if len(text) <= ERROR_CHARS:
        return text
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return f"{text[:200]}... ({len(text)} characters, blake2b {digest})"


ERROR_CHARS = 300


def render_text(source: str, messages: list, *, variables: dict[str, Any] | None = None, traced: bool = False,
                spans: bool = False, budgets: Any = PROBE_BUDGETS, reraise: tuple[type, ...] = (),
                output_limit: int | None = OUTPUT_LIMIT, mutable: bool = False, **options: Any) -> Outcome:
    """Render ``messages`` with render ``options`` (``tools=``, ``add_generation_prompt=``, ...) and
    template ``variables`` (special tokens default to :data:`SPECIAL_TOKENS`), guarded: any error is the
    outcome's (except the classes in ``reraise``, which a caller's own budget raises through). A text over
    ``output_limit`` characters is an ``OutputLimit`` outcome (``None``: only the budgets' output cap);
    ``traced=True`` adds the :class:`~chatjinja.runtime.provenance.Provenance`, ``spans=True`` the
    ``{% generation %}`` spans.

    ``mutable=True`` lets the template call a list's or dict's own mutating methods, which transformers'
    sandbox refuses (as llama.cpp's engine does): for learning what a template writes only, never for a
    prompt (the messages may be changed: pass copies)."""
    merged = {**SPECIAL_TOKENS, **(variables or {})}
    try:
        with mutable_containers() if mutable else nullcontext():
            result = render_source(messages, source, budgets=budgets, variables=merged, traced=traced,
                                   return_assistant_spans=spans, **options)
    except RecursionError:
        return Outcome(None, "RecursionError: maximum recursion depth exceeded")
    except reraise:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure is an outcome
        return Outcome(None, error_text(exc))
    provenance = result if traced else None
    found_spans = None
    if traced:
        text = result.text
    elif spans:
        text, found_spans = result
    else:
        text = result
    if not isinstance(text, str):
        return Outcome(None, f"TypeError: render returned {type(text).__name__}")
    if output_limit is not None and len(text) > output_limit:
        return Outcome(None, f"OutputLimit: {len(text)} characters")
    return Outcome(text, None, provenance, found_spans)


def observe(source: str, member: Member, *, special_tokens: dict[str, str] | None = None,
            traced: bool = False) -> Outcome:
    """Render one member of the space (its options and mode variables), guarded."""
    variables = dict(SPECIAL_TOKENS if special_tokens is None else special_tokens)
    variables.update(member.variables)
    return render_text(source, member.messages, variables=variables, traced=traced, **member.options)
