"""Reading hostile replies: chatjinja's reader against transformers' ``parse_response`` on the same replies.

    .venv/bin/python benchmarks/bench_hostile_replies.py                      # the table in benchmarks/README.md
    .venv/bin/python benchmarks/bench_hostile_replies.py --sizes 10000 100000 --reference-cap 20

The replies are the shapes of ``tests/serving/test_hostile_replies.py`` (well-formed calls repeated, the end marker
inside calls, opens that never close, runs of blanks, ...) at each size, read whole with the response templates
written out there (``hermes`` is the one chatjinja derives for a Hermes-style template). Each cell is the median CPU
seconds (``time.process_time``) of ``--rounds`` reads, chatjinja's and transformers' interleaved in this process.

transformers' reader is polynomial on some shapes (100,000 characters of Hermes calls: 85 s): its reads run in a
forked copy of this process, stopped after ``--reference-cap`` seconds (default 30; ``> 30`` in the table), and
the larger replies of a shape it was stopped on are not read. Both readers are given the same reply and prefix;
a row says whether the two messages are equal (``same``) or differ (``differs``: chatjinja reads tolerantly where
transformers raises or reads otherwise; the strict reading equal to transformers' is tested, not timed here).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from timing import table  # noqa: E402

import chatjinja  # noqa: E402
from chatjinja.serving.library import parser_module  # noqa: E402
from chatjinja.serving.rules import _GOOD  # noqa: E402
from tests.serving.test_hostile_replies import LLAMA, MISTRAL, SHAPES, TAGGED  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000, 3_900_000)


def _timed(read: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    samples, result = [], None
    for _ in range(rounds):
        started = time.process_time()
        try:
            result = read()
        except Exception as exc:  # noqa: BLE001 - a reader that raises is timed to its raise
            result = repr(exc)
        samples.append(time.process_time() - started)
    return statistics.median(samples), result


def _capped(read: Callable[[], Any], rounds: int, cap: float) -> tuple[float | None, Any]:
    """``_timed`` in a forked copy of this process, stopped after ``cap`` seconds: (None, None) when stopped."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child() -> None:
        send.send(_timed(read, rounds))

    process = context.Process(target=child)
    process.start()
    ready = receive.poll(cap * rounds)
    result = receive.recv() if ready else (None, None)
    process.kill()
    process.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reference-cap", type=float, default=30.0,
                        help="seconds after which a transformers read is stopped (and its larger replies of the shape not read)")
    args = parser.parse_args()
    logging.getLogger("chatjinja").setLevel(logging.ERROR)
    reference = parser_module().parse_response
    templates = {"hermes": chatjinja.response_template(_GOOD), "mistral": MISTRAL, "llama": LLAMA, "tagged": TAGGED}
    rows = []
    for shape in sorted(SHAPES):
        name, unit = SHAPES[shape]
        template = templates[name]
        stopped = False
        for size in sorted(args.sizes):
            reply = unit * max(1, size // len(unit))
            ours, message = _timed(lambda: chatjinja.parse_response(reply, template, prefix=""), args.rounds)
            if stopped:  # (a larger reply of a shape whose smaller one was stopped)
                rows.append([shape, f"{len(reply):,}", f"{ours:.3f}", f"> {args.reference_cap:g}", "-", "not read"])
                continue
            theirs, their_message = _capped(lambda: reference(reply, template, prefix=""), 1 if size > 100_000 else args.rounds,
                                            args.reference_cap)
            if theirs is None:
                stopped = True
                rows.append([shape, f"{len(reply):,}", f"{ours:.3f}", f"> {args.reference_cap:g}", "-", "stopped"])
            else:
                verdict = "same" if their_message == message else "differs"
                ratio = f"{ours / theirs:.2f}" if theirs > 0.0005 else "-"
                rows.append([shape, f"{len(reply):,}", f"{ours:.3f}", f"{theirs:.3f}", ratio, verdict])
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(f"median CPU seconds of {args.rounds} whole reads (transformers: one read above 100,000 characters, in a "
          f"forked process stopped after {args.reference_cap:g} s, and not run on the larger replies of that shape)\n")
    print(table(["shape", "characters", "chatjinja (s)", "transformers (s)", "chatjinja / transformers", "messages"], rows))


if __name__ == "__main__":
    main()
