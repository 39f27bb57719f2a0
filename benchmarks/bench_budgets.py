"""Overhead of resource budgets: the same benign renders with the default budgets on vs off.

    .venv/bin/python benchmarks/bench_budgets.py               # every corpus template, medium conversation + tools
    .venv/bin/python benchmarks/bench_budgets.py --rounds 10 --conversation long   # an even number of rounds: on and off go first equally often

For each corpus template that renders the chosen conversation (from ``inputs/conversations.json``,
with its tools), ``apply_chat_template(..., budgets=DEFAULT_BUDGETS)`` and ``budgets=None`` are
timed round-robin, in CPU time of this process (``--clock wall`` for wall time; on a shared
machine CPU time is far less noisy); both outputs must be identical. Prints the median ratio
on/off over templates (the acceptance number, target <= 1.10), its quartiles and the templates
with the largest ratios.

``--idle-hooks`` splits the overhead: the budgeted render still makes its meter, walks and collects
the input and enters the guard, but every hook in the template's code takes its budgets-off path
(the guard sets the render's meter, then the context variable the hooks read is set back to none).
The ratio is then the fixed part of the overhead; the rest of the normal ratio is the hooks' own
work, per event. The first line says which build of the hooks ran (compiled or pure Python).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from budget_cases import CONVERSATIONS, CORPUS, SPECIAL_TOKENS, conversation, corpus_templates  # noqa: E402
from timing import interleaved, table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="an even number: each contender goes first equally often")
    parser.add_argument("--target", type=float, default=0.01, help="seconds per timed batch")
    parser.add_argument("--conversation", default="medium", choices=CONVERSATIONS)
    parser.add_argument("--limit", type=int, default=0, help="only the first N templates (0: all)")
    parser.add_argument("--clock", default="cpu", choices=("cpu", "wall"))
    parser.add_argument("--show", type=int, default=5, help="how many templates with the largest ratios to list")
    parser.add_argument("--idle-hooks", action="store_true", help="hooks take their budgets-off path: the fixed part of the overhead")
    args = parser.parse_args()

    if args.idle_hooks:
        from chatjinja.runtime import budget

        enter = budget.guarded_render.__enter__

        def idle_enter(self):  # the meter is made and set, then hidden from the hooks (``__exit__`` restores)
            meter = enter(self)
            budget._meter.set(None)
            return meter

        budget.guarded_render.__enter__ = idle_enter

    from chatjinja import apply_chat_template
    from chatjinja.runtime.budget import DEFAULT_BUDGETS

    messages, tools = conversation(args.conversation)
    paths = corpus_templates()
    if args.limit:
        paths = paths[: args.limit]

    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    ratios: list[tuple[float, str, float, float]] = []
    for path in paths:
        source = path.read_text(encoding="utf-8")

        def call(budgets, source=source):
            # no copy of the conversation per call: apply_chat_template never mutates its inputs (a test
            # checks this), and a deepcopy would add the same cost to both sides and hide the overhead
            return apply_chat_template(messages, source, tools=tools, budgets=budgets, **SPECIAL_TOKENS)

        try:
            on, off = call(DEFAULT_BUDGETS), call(None)
        except Exception:  # noqa: BLE001 - templates that reject this conversation are skipped
            continue
        if on != off:
            raise SystemExit(f"{path}: output differs with budgets on")
        times = interleaved({"on": lambda: call(DEFAULT_BUDGETS), "off": lambda: call(None)}, args.rounds, args.target, clock)
        ratios.append((times["on"] / times["off"], str(path.relative_to(CORPUS / "templates")), times["on"], times["off"]))

    values = sorted(r[0] for r in ratios)
    if not values:
        raise SystemExit("no template rendered this conversation (try a larger --limit)")
    quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    from chatjinja.runtime._implementation import DESCRIPTION

    idle = ", hooks idle" if args.idle_hooks else ""
    print(f"budgets on/off over {len(ratios)} corpus templates ({args.conversation} conversation + {len(tools)} tools, {args.clock} time{idle}; render hooks {DESCRIPTION}):")
    print(f"median ratio {statistics.median(values):.3f}  (p25 {quartiles[0]:.3f}, p75 {quartiles[2]:.3f}, max {values[-1]:.3f})")
    print(f"median render {statistics.median(r[2] for r in ratios) * 1e6:.0f} us with budgets, "
          f"{statistics.median(r[3] for r in ratios) * 1e6:.0f} us without")
    worst = sorted(ratios, reverse=True)[: args.show]
    print(table(["template", "on us", "off us", "on/off"], [[name, f"{on * 1e6:.0f}", f"{off * 1e6:.0f}", f"{r:.3f}"] for r, name, on, off in worst]))


if __name__ == "__main__":
    main()
