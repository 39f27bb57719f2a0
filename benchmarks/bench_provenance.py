"""What the provenance render costs: off (every render chatjinja makes by default) against the render
path before provenance existed, and on, side by side in one process.

    .venv/bin/python benchmarks/bench_provenance.py [--before 4ad412d] [--templates 20] [--rounds 15]

``--before REV`` loads ``src/chatjinja/runtime/render.py`` as it was at REV (git show) beside the
current one, as a module of the same package (the environment, hooks and messages it imports are the
ones in the tree), so ``before`` and ``off`` differ exactly by what the provenance render added to the
render path. Timed interleaved (``timing.interleaved``), CPU time of this process.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPUS = REPO.parent / "shared" / "corpus" / "templates"
sys.path.insert(0, str(HERE))

from bench_render import CORPUS_CONVERSATION as CONVERSATION  # noqa: E402
from timing import interleaved, table  # noqa: E402

TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def render_before(rev: str):
    """``render_source`` of ``runtime/render.py`` at ``rev``, as a module of the current package."""
    text = subprocess.run(["git", "show", f"{rev}:src/chatjinja/runtime/render.py"], cwd=REPO, check=True,
                          capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("chatjinja.runtime._render_before", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "chatjinja.runtime"
    exec(compile(text, f"render.py@{rev}", "exec"), module.__dict__)  # noqa: S102 - the project's own file at REV
    return module.render_source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="4ad412d")
    parser.add_argument("--templates", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    from chatjinja.runtime.render import render_source

    before = render_before(args.before)
    paths = sorted(glob.glob(str(CORPUS / "**" / "*.jinja"), recursive=True))
    step = max(1, len(paths) // max(1, args.templates))
    rows, off_ratios, on_ratios = [], [], []
    for path in paths[::step][: args.templates]:
        source = Path(path).read_text(encoding="utf-8")
        try:
            expected = render_source(CONVERSATION, source, variables=TOKENS, add_generation_prompt=True)
        except Exception:  # noqa: BLE001 - a template that refuses the conversation is not timed
            continue
        contenders = {
            "before": lambda: before(CONVERSATION, source, variables=TOKENS, add_generation_prompt=True),
            "off": lambda: render_source(CONVERSATION, source, variables=TOKENS, add_generation_prompt=True),
            "on": lambda: render_source(CONVERSATION, source, variables=TOKENS, add_generation_prompt=True, traced=True),
        }
        assert contenders["before"]() == expected and contenders["on"]().text == expected
        times = interleaved(contenders, rounds=args.rounds, clock=time.process_time)
        off_ratios.append(times["off"] / times["before"])
        on_ratios.append(times["on"] / times["before"])
        rows.append([str(Path(path).relative_to(CORPUS)), f"{times['before'] * 1e6:.0f}", f"{times['off'] * 1e6:.0f}",
                     f"{times['on'] * 1e6:.0f}", f"{off_ratios[-1]:.3f}", f"{on_ratios[-1]:.2f}"])
    print(table(["template", "before µs", "off µs", "on µs", "off / before", "on / before"], rows))
    print(f"\nmedian off / before {statistics.median(off_ratios):.3f} "
          f"(min {min(off_ratios):.3f}, max {max(off_ratios):.3f}); median on / before {statistics.median(on_ratios):.2f}"
          f" over {len(rows)} templates")


if __name__ == "__main__":
    main()
