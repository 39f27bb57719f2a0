"""How the benchmarks time things: interleaved rounds in one process, medians, ratios, a Markdown table.

Contenders are timed round-robin, so a noisy neighbour on a shared machine slows all of them alike
and the ratios stay meaningful even when the absolute numbers drift. The order turns each round
(round 1: A, B, C; round 2: B, C, A; ...): the first batch after a round's ``gc.collect()`` runs
with colder caches, and a fixed order would always charge that to the same contender (about 0.04
on the budgets' on/off ratio here). Each round times a batch of calls sized to take about
``target`` seconds.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Callable


def calibrate(fn: Callable[[], object], target: float = 0.02, clock: Callable[[], float] = time.perf_counter) -> int:
    """Calls per round so that one round takes about ``target`` seconds."""
    fn()
    number = 1
    while True:
        started = clock()
        for _ in range(number):
            fn()
        elapsed = clock() - started
        if elapsed >= target / 4 or number >= 1 << 16:
            return max(1, int(number * target / max(elapsed, 1e-9)))
        number *= 4


def interleaved(
    contenders: dict[str, Callable[[], object]], rounds: int = 15, target: float = 0.02, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    """Median seconds per call of each contender (by ``clock``), measured round-robin in a turning order."""
    numbers = {name: calibrate(fn, target, clock) for name, fn in contenders.items()}
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders.items())
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for round_index in range(rounds):
            turn = round_index % len(order)
            for name, fn in order[turn:] + order[:turn]:
                number = numbers[name]
                started = clock()
                for _ in range(number):
                    fn()
                samples[name].append((clock() - started) / number)
            gc.collect()
    finally:
        if gc_was_enabled:
            gc.enable()
    return {name: statistics.median(values) for name, values in samples.items()}


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (what benchmarks/README.md holds)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = [
        "| " + " | ".join(str(cell).ljust(width) for cell, width in zip(header, widths)) + " |",
        "|" + "|".join("-" * (width + 2) for width in widths) + "|",
    ]
    lines += ["| " + " | ".join(str(cell).ljust(width) for cell, width in zip(row, widths)) + " |" for row in rows]
    return "\n".join(lines)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}"
