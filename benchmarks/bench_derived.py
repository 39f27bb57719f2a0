"""``assistant_masks="derived"`` on a batch against tagging once by hand and tokenizing with the copy.

    .venv/bin/python benchmarks/bench_derived.py                   # 2,000 conversations, 3 rounds
    .venv/bin/python benchmarks/bench_derived.py --count 500 --rounds 5

Per template (Qwen3-Coder from the corpus, the bundled mistral-v3-tekken, and a template
``add_generation_tags`` refuses), side by side in this process, one worker, in process CPU time
(``time.process_time``: the machine is shared), each contender's rounds interleaved with the other's:

- ``tag once + copy``: ``add_generation_tags(source)`` once (the cache of tagged sources emptied
  first), then ``render_batch(copy, conversations, tokenize=True)`` with the copy's own tags;
- ``derived``: ``render_batch(source, conversations, tokenize=True, assistant_masks="derived")``,
  the cache of tagged sources emptied first (what a fresh run pays);
- ``tag``: ``add_generation_tags(source)`` alone, once: what every conversation paid before the
  tagging was kept per source (``x 2,000`` is that old cost, estimated).

The records of both contenders are compared before timing (the same ids and masks, or the same
refusal in every record). The conversations are SFT-like samples (``bench_tokenize.sample``) of a
conversation with two assistant turns, tokenized with tekken plus the templates' control tokens.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_render import CORPUS  # noqa: E402
from bench_tokenize import sample, tekken_folder  # noqa: E402
from timing import table  # noqa: E402

import chatjinja  # noqa: E402
import chatjinja.training.apply as apply  # noqa: E402

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And of Italy?"},
    {"role": "assistant", "content": "Rome is the capital of Italy."},
]
REFUSED = "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'user' %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"


def cases() -> dict[str, str]:
    found = {}
    qwen = CORPUS / "templates" / "llama.cpp" / "Qwen3-Coder.jinja"
    if qwen.is_file():
        found["Qwen3-Coder"] = qwen.read_text(encoding="utf-8")
    found["mistral-v3-tekken"] = (REPO / "templates" / "mistral-v3-tekken.jinja").read_text(encoding="utf-8")
    found["refused"] = REFUSED
    return found


def _fresh() -> None:
    apply._DERIVED.clear()


def _batch(source: str, conversations: list, folder: Path, **options: Any) -> list:
    return chatjinja.render_batch(source, conversations, errors="return", tokenize=True, tokenizer=folder, **options)


def _tag(source: str) -> str | None:
    try:
        return chatjinja.add_generation_tags(source)
    except chatjinja.training.generation_tags.GenerationTagsRefused:
        return None


def _plain(results: list) -> list:
    return [getattr(result, "error", result) for result in results]


def run_case(source: str, conversations: list, folder: Path, rounds: int) -> tuple[float, float, float]:
    """Median CPU seconds of (tag once + copy, derived, tag alone)."""

    def by_hand() -> list:
        _fresh()
        tagged = _tag(source)
        if tagged is None:  # refused: by hand, the copy never exists; the records are the refusal
            return [chatjinja.batch.RenderFailure(i, "refused") for i in range(len(conversations))]
        return _batch(tagged, conversations, folder)

    def derived() -> list:
        _fresh()
        return _batch(source, conversations, folder, assistant_masks="derived")

    ours, theirs = _plain(derived()), _plain(by_hand())
    if _tag(source) is not None:
        assert ours == theirs, "derived masks differ from the copy's"
    else:
        assert len(set(ours)) == 1 and ours[0].startswith("GenerationTagsRefused: "), ours[:1]
    timed: dict[str, Callable[[], object]] = {"tag once + copy": by_hand, "derived": derived, "tag": lambda: (_fresh(), _tag(source))}
    samples: dict[str, list[float]] = {name: [] for name in timed}
    order = list(timed.items())
    for index in range(rounds):
        turn = index % len(order)
        for name, fn in order[turn:] + order[:turn]:
            started = time.process_time()
            fn()
            samples[name].append(time.process_time() - started)
    medians = [statistics.median(samples[name]) for name in timed]
    return medians[0], medians[1], medians[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="conversations per batch (default 2000)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("chatjinja").setLevel(logging.ERROR)
    sources = cases()
    conversations = [sample(CONVERSATION, number) for number in range(args.count)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = tekken_folder(Path(tmp), list(sources.values()))
        for name, source in sources.items():
            by_hand, derived, tag = run_case(source, conversations, folder, args.rounds)
            relative = f"{derived / by_hand:.2f}" if name != "refused" else "- (no copy to tokenize)"
            rows.append([name, f"{by_hand:.2f}", f"{derived:.2f}", relative, f"{tag:.3f}", f"{tag * args.count:.0f}"])
    print(f"{args.count} conversations, {args.rounds} rounds, CPU seconds (medians)\n")
    print(table(["template", "tag once + copy (s)", "derived (s)", "derived / by hand", "tag (s)", f"tag x {args.count} (s, before)"], rows))


if __name__ == "__main__":
    main()
