"""The one budget of a ``chatjinja portability`` run: the time of the whole run, shared out as it goes, and the limits every engine process runs under.

A run renders each probe conversation with chatjinja, then sends those chatjinja rendered to each
engine in turn. :class:`PortabilityBudget` bounds all of it by one clock: chatjinja's renders may take
an equal share of the run's time, each engine an equal share of what is left when its turn comes
(a part that finishes early leaves its time to those after it). What a share could not reach is
*cut*: named in the report with the reason, never compared and never counted as agreeing.

Each engine render stops at the limits chatjinja applies to its own render (:class:`EngineLimits`'s
defaults): chatjinja's render timeout (:attr:`chatjinja.runtime.budget.Budgets.timeout`), the output
limit of the probe renders (:data:`chatjinja.observation.OUTPUT_LIMIT`) and the memory SECURITY.md bounds a
chatjinja render to (``ENGINE_MEMORY``, applied to the engine process as ``RLIMIT_DATA``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from .engines import DEFAULT_LIMITS, EngineLimits

__all__ = ["RUN_SECONDS", "PortabilityBudget", "RunClock"]

#: seconds of a whole run: with the interpreter's start and the report, any template finishes within 30 s
RUN_SECONDS = 20.0


@dataclass(frozen=True)
class PortabilityBudget:
    """The limits of one ``portability`` run (the engines' installs are not counted: they happen before it)."""

    #: wall-clock seconds of the whole run: chatjinja's renders and every engine's
    seconds: float = RUN_SECONDS
    #: seconds one engine render may take before its process is killed: chatjinja's own render timeout
    render_seconds: float = DEFAULT_LIMITS.case_timeout
    #: seconds an engine process may take to start and parse the template (node takes about 0.3 s)
    start_seconds: float = DEFAULT_LIMITS.start_timeout
    #: bytes of memory of each engine process (``RLIMIT_DATA``; ``RLIMIT_AS`` too, above what it reserves):
    #: :data:`~chatjinja.portability.engines.ENGINE_MEMORY`
    memory: int = DEFAULT_LIMITS.memory
    #: characters of one rendering, chatjinja's or an engine's: the probe renders' output limit
    output_chars: int = DEFAULT_LIMITS.output
    #: the clock the run's time is read from (seconds; a test gives its own)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("seconds", "render_seconds", "start_seconds", "memory", "output_chars"):
            value = getattr(self, name)
            if type(value) is bool or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise ValueError(f"portability budget {name!r} must be a finite number >= 0, got {value!r}")

    def engine_limits(self) -> EngineLimits:
        """What each engine process runs under; the run's clock decides how long the whole batch may take."""
        return EngineLimits(case_timeout=self.render_seconds, start_timeout=self.start_seconds,
                            memory=self.memory, output=self.output_chars)

    def start(self) -> "RunClock":
        """The run's clock, started now."""
        return RunClock(self, self.clock() + self.seconds)


@dataclass
class RunClock:
    """A run under way: its deadline, and the share of what is left each part may take."""

    budget: PortabilityBudget
    deadline: float

    def now(self) -> float:
        return self.budget.clock()

    def share(self, parts: int) -> float:
        """The deadline of the next of ``parts`` parts still to run: an equal share of the time left."""
        now = self.now()
        return now + max(0.0, self.deadline - now) / max(parts, 1)

    def ran_out(self, part: str, share: float) -> str:
        """Why ``part`` (chatjinja, or an engine) did not reach a case: its ``share`` of the run's time ran out."""
        return f"{part}'s share ({share:.1f} s) of the run's time budget of {self.budget.seconds:g} s ran out"
