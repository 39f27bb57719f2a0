"""Overhead of resource budgets in CPU instructions (valgrind's callgrind): deterministic, unlike time.

    .venv/bin/python benchmarks/bench_budgets_instructions.py                 # every 8th usable corpus template
    .venv/bin/python benchmarks/bench_budgets_instructions.py --every 1 --renders 5
    .venv/bin/python benchmarks/bench_budgets_instructions.py --template ../shared/corpus/templates/vllm/tool_chat_template_granite.jinja

Needs ``valgrind`` (``apt install valgrind``). Wall and CPU time on a shared machine move by 30% from
one sample to the next; an instruction count does not move at all between runs of the same code, so
this is the number to decide a change to the hooks by (``bench_budgets.py`` gives the time, the
acceptance number). Instructions are not time: the checks are many cheap Python bytecodes, and the
time ratio has stayed about 0.07 above the instruction ratio.

For each template, ``apply_chat_template`` of the medium conversation with its tools (as
``bench_budgets.py`` renders it) runs in a fresh process under callgrind ``N`` and ``3N`` times, with
the default budgets and with ``budgets=None``; the difference divided by ``2N`` is one render, free
of the start-up, the import and the first renders (which warm the interpreter's specialisation and
the sandbox's caches). Before the measured renders the heap is frozen (``gc.freeze()``), so a full
collection that happens to fall into the window cannot add millions of instructions to one side.
The template is compiled once before valgrind runs (into a private on-disk cache), and in the
measured process first without the compile deadline: under valgrind, compiling takes longer than it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from budget_cases import CORPUS, SPECIAL_TOKENS, conversation, corpus_templates  # noqa: E402


def worker(mode: str, renders: int, path: str) -> None:
    """The measured process: renders ``path`` ``renders`` times after two warm-up renders."""
    import gc

    from chatjinja import apply_chat_template
    from chatjinja.runtime.budget import DEFAULT_BUDGETS

    messages, tools = conversation("medium")
    source = Path(path).read_text(encoding="utf-8")
    budgets = DEFAULT_BUDGETS if mode == "on" else None
    # compiled (or loaded) with its nesting measured and no compile deadline (valgrind is slow)
    apply_chat_template(messages, source, tools=tools, budgets=DEFAULT_BUDGETS.replace(timeout=None), **SPECIAL_TOKENS)
    apply_chat_template(messages, source, tools=tools, budgets=budgets, **SPECIAL_TOKENS)
    gc.collect()
    gc.freeze()
    for _ in range(renders):
        apply_chat_template(messages, source, tools=tools, budgets=budgets, **SPECIAL_TOKENS)


def _instructions(mode: str, renders: int, path: str, env: dict) -> int:
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__, "--worker", mode, str(renders), path]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    found = re.search(r"refs:\s+([\d,]+)", result.stderr)
    if result.returncode != 0 or found is None:
        own = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("==")]
        raise RuntimeError(f"{path} ({mode}): " + (own or ["valgrind failed"])[-1])
    return int(found.group(1).replace(",", ""))


def per_render(mode: str, renders: int, path: str, env: dict) -> float:
    return (_instructions(mode, 3 * renders, path, env) - _instructions(mode, renders, path, env)) / (2 * renders)


def usable_templates() -> list[Path]:
    """The corpus templates that render the conversation with and without budgets, sorted."""
    from chatjinja import apply_chat_template

    messages, tools = conversation("medium")
    usable = []
    for path in corpus_templates():
        source = path.read_text(encoding="utf-8")
        try:
            apply_chat_template(messages, source, tools=tools, **SPECIAL_TOKENS)
            apply_chat_template(messages, source, tools=tools, budgets=None, **SPECIAL_TOKENS)
        except Exception:  # noqa: BLE001 - templates that reject this conversation are skipped
            continue
        usable.append(path)
    return usable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=8, help="every K-th usable corpus template (sorted by path)")
    parser.add_argument("--renders", type=int, default=10, help="N: each side is measured at N and 3N renders")
    parser.add_argument("--template", action="append", default=[], help="a template file instead of the corpus (repeatable)")
    parser.add_argument("--worker", nargs=3, metavar=("MODE", "RENDERS", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), args.worker[2])
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind not found (apt install valgrind)")
    if args.template:
        paths = [Path(name).resolve() for name in args.template]
    else:
        paths = usable_templates()[:: max(1, args.every)]
    with tempfile.TemporaryDirectory() as cache:
        # a private compile cache (filled by the compile below, outside valgrind), a fixed hash seed
        env = dict(os.environ, PYTHONHASHSEED="0", CHATJINJA_CACHE_DIR=cache)
        rows = []
        for path in paths:
            subprocess.run([sys.executable, __file__, "--worker", "on", "0", str(path)], env=env, check=True)
            on, off = per_render("on", args.renders, str(path), env), per_render("off", args.renders, str(path), env)
            rows.append((on / off, on, off, path))
            print(f"{on / off:6.3f} {on:>11,.0f} {off:>11,.0f}  {path.relative_to(CORPUS / 'templates') if CORPUS in path.parents else path}", flush=True)
    ratios = [row[0] for row in rows]
    print(f"instructions per render, budgets on/off over {len(rows)} templates: median {statistics.median(ratios):.3f}, "
          f"of the sums {sum(row[1] for row in rows) / sum(row[2] for row in rows):.3f}")


if __name__ == "__main__":
    main()
