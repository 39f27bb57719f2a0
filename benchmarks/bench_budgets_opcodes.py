"""Overhead of resource budgets in Python bytecodes executed, with the functions that add them.

    .venv/bin/python benchmarks/bench_budgets_opcodes.py                      # every usable corpus template
    .venv/bin/python benchmarks/bench_budgets_opcodes.py --conversation long --show 40
    .venv/bin/python benchmarks/bench_budgets_opcodes.py --lines budget_iter,call   # per source line

Counts every bytecode one render executes (``sys.settrace`` with opcode events), with the default
budgets and with ``budgets=None``, for each corpus template that renders the conversation (as
``bench_budgets.py`` renders it). Deterministic and about 10 s for the 189 templates, so it is the
quick number to decide a change to the hooks by, and the only one that says *where* the overhead
is: the difference per function (or per line), summed over the templates. Bytecodes are not time:
C calls (``len``, the clock, ``set(map(id, ...))``) count as one, and the time ratio runs a few
hundredths above this one. ``bench_budgets.py`` gives the time (the acceptance number),
``bench_budgets_instructions.py`` the CPU instructions.

Compiled hooks (the default build, ``_hooks_native``) execute no bytecodes: this counts what is left in
Python (the input walk, the guard). Run it with ``CHATJINJA_PURE_PYTHON=1`` to see the hooks themselves,
as the pure-Python build runs them (their source is the same).
"""

from __future__ import annotations

import argparse
import collections
import linecache
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from budget_cases import CONVERSATIONS, SPECIAL_TOKENS, conversation, corpus_templates  # noqa: E402


def count_opcodes(render, lines_of: set[str] | None = None) -> collections.Counter:
    """Bytecodes ``render()`` executes, by (file, first line, function), or by (file, line) in the
    functions named in ``lines_of``."""
    counts: collections.Counter = collections.Counter()

    def on_call(frame, event, arg):
        code = frame.f_code
        if lines_of is not None and code.co_name not in lines_of:
            return None
        frame.f_trace_opcodes = True
        key = (code.co_filename, code.co_firstlineno, code.co_name)

        def on_opcode(frame, event, arg):
            if event == "opcode":
                counts[(code.co_filename, frame.f_lineno) if lines_of is not None else key] += 1
            return on_opcode

        return on_opcode

    sys.settrace(on_call)
    try:
        render()
    finally:
        sys.settrace(None)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversation", default="medium", choices=CONVERSATIONS)
    parser.add_argument("--show", type=int, default=20, help="how many functions (or lines) to list")
    parser.add_argument("--lines", default="", help="comma-separated function names: count their lines instead")
    args = parser.parse_args()

    from chatjinja import apply_chat_template
    from chatjinja.runtime.budget import DEFAULT_BUDGETS

    messages, tools = conversation(args.conversation)
    paths = corpus_templates()
    lines_of = set(args.lines.split(",")) if args.lines else None

    ratios: list[float] = []
    added: collections.Counter = collections.Counter()
    for path in paths:
        source = path.read_text(encoding="utf-8")

        def render(budgets, source=source):
            return apply_chat_template(messages, source, tools=tools, budgets=budgets, **SPECIAL_TOKENS)

        try:  # (also the warm-up: compiled, caches filled)
            if render(DEFAULT_BUDGETS) != render(None):
                raise SystemExit(f"{path}: output differs with budgets on")
        except Exception:  # noqa: BLE001 - templates that reject this conversation are skipped
            continue
        on, off = count_opcodes(lambda: render(DEFAULT_BUDGETS)), count_opcodes(lambda: render(None))
        ratios.append(sum(on.values()) / sum(off.values()))
        if lines_of is not None:
            on, off = count_opcodes(lambda: render(DEFAULT_BUDGETS), lines_of), count_opcodes(lambda: render(None), lines_of)
        for key in on.keys() | off.keys():
            added[key] += on[key] - off[key]

    if not ratios:
        raise SystemExit("no template rendered this conversation")
    quartiles = statistics.quantiles(ratios, n=4)
    print(f"bytecodes per render, budgets on/off over {len(ratios)} corpus templates ({args.conversation} conversation + {len(tools)} tools):")
    print(f"median ratio {statistics.median(ratios):.3f}  (p25 {quartiles[0]:.3f}, p75 {quartiles[2]:.3f}, max {max(ratios):.3f})")
    total = sum(added.values())
    print(f"added by the budgets: {total / len(ratios):.0f} bytecodes per render; where:")
    for key, value in sorted(added.items(), key=lambda item: -abs(item[1]))[: args.show]:
        if lines_of is not None:
            where = f"{Path(key[0]).name}:{key[1]}: {linecache.getline(key[0], key[1] or 0).strip()[:90]}"
        else:
            where = f"{Path(key[0]).name}:{key[1]} {key[2]}"
        print(f"{value / len(ratios):8.1f} per render  {100 * value / total:5.1f}%  {where}")


if __name__ == "__main__":
    main()
