"""Tokenized chats: chatjinja ``apply_chat_template(tokenize=True)`` vs transformers', and tokenized batch throughput.

    .venv/bin/python benchmarks/bench_tokenize.py                  # Devstral set + 20 corpus templates, batch 1 vs 2 workers
    .venv/bin/python benchmarks/bench_tokenize.py --rounds 7 --templates 5 --batch 0
    .venv/bin/python benchmarks/bench_tokenize.py --cpu            # per-call times in process CPU time
    .venv/bin/python benchmarks/bench_tokenize.py --no-calls       # only the batch rows
    .venv/bin/python benchmarks/bench_tokenize.py --case zephyr    # only the cases whose name contains 'zephyr'

Both sides tokenize with the same model folder: mistral-common's tekken vocabulary (Devstral's),
converted by transformers, with the control tokens of the timed templates it lacks
(``<|im_start|>``, ``<|eot_id|>``, ...) added as special tokens, as a model's own tokenizer has
them, and saved once into a temporary folder. The data is SFT-like: each call
gets a new sample of the case's conversation, every user, assistant and tool message ending with
`` (sample N)`` (N counts the calls, from a range of its own for each case and contender), so samples
share only the system prompt, the tools and the template's own text, as the samples of one training
set do, and no case finds another case's (or contender's) pieces in chatjinja's cache. Per case (one template, one
conversation):

- ``chatjinja``: ``chatjinja.apply_chat_template(sample, source, tokenizer=FOLDER,
  tokenize=True)`` end to end, default budgets (its cache of encoded pieces warm with the earlier
  samples, as in a training set's run);
- ``chatjinja+masks``: the same with ``return_assistant_tokens_mask=True``;
- ``chatjinja same``: the same conversation at every call (every piece found in the cache);
- ``transformers``: ``AutoTokenizer.from_pretrained(FOLDER).apply_chat_template(sample,
  chat_template=source, tokenize=True)``, end to end;
- ``encode alone``: the ``tokenizers`` library's ``encode`` of one rendered sample, which
  transformers calls (and chatjinja calls on the pieces it has not seen).

Every chatjinja result (a sample, and the same conversation) is compared with transformers'
(``input_ids``, ``attention_mask``) before timing. The batch rows run ``render_jsonl(..., tokenize=True)`` in this process on ``--batch``
conversations with 1 and 2 workers (the rate is the summary's: rendering, tokenizing and
writing), after one untimed warm-up run, three runs of each in turn (medians), next to the
machine's parallel ceiling right before each (``bench_batch.parallel_ceiling``).
``--cpu`` times the per-call table in this process's CPU time (``time.process_time``) instead of
wall time: on a machine shared with other jobs the wall clock also counts the time spent waiting
for a core.
"""

from __future__ import annotations

import argparse
import itertools
import re
import json
import logging
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_batch import parallel_ceiling  # noqa: E402
from bench_render import CORPUS_CONVERSATION, corpus_cases, devstral_cases, hf_tokenizer  # noqa: E402
from timing import interleaved, ratio, table, us  # noqa: E402


_CONTROL_RE = re.compile(r"<\|[A-Za-z0-9_.:/-]{1,40}\|>|\[/?[A-Z][A-Z_]{1,30}\]|<(?:start|end)_of_[a-z_]+>|</?s>")


def tekken_folder(where: Path, sources: list[str] = ()) -> Path:
    """tekken, with the control tokens of ``sources`` (``<|im_start|>``, ...) it lacks added as special tokens."""
    import mistral_common
    from tokenizers import AddedToken
    from transformers.integrations.mistral.tokenizer import convert_tekken_tokenizer

    vocabulary = Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
    tokenizer = convert_tekken_tokenizer(str(vocabulary), chat_template="{{ '' }}")
    control = sorted({token for source in sources for token in _CONTROL_RE.findall(source)})
    missing = [token for token in control if tokenizer.convert_tokens_to_ids(token) in (None, tokenizer.unk_token_id)]
    if missing:
        tokenizer.add_tokens([AddedToken(token, special=True, normalized=False) for token in missing], special_tokens=True)
    tokenizer.save_pretrained(str(where))
    (where / "chat_template.jinja").unlink(missing_ok=True)
    return where


def sample(conversation: list[dict[str, Any]], number: int) -> list[dict[str, Any]]:
    """A copy of ``conversation`` whose user, assistant and tool messages end with `` (sample N)``.

    A new dict per message, the other values shared (neither side changes its input): making the
    sample costs a few microseconds, where a ``deepcopy`` would add tens to both contenders' times.
    """
    suffix = f" (sample {number})"
    return [
        {**message, "content": message["content"] + suffix}
        if message.get("role") != "system" and isinstance(message.get("content"), str)
        else dict(message)
        for message in conversation
    ]


def _plain(out: Any) -> dict[str, Any]:
    return {key: out[key] for key in ("input_ids", "attention_mask")}


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the worker processes, once shut down)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def batch_rows(folder: Path, count: int, rounds: int = 3) -> list[list[str]]:
    """Tokenized batch throughput, 1 and 2 workers, in the steady state: after one untimed warm-up run (the
    template compiled, the tokenizer loaded, the pieces cached, all of which the forked workers inherit),
    ``rounds`` runs of each in turn; the medians of their rates, CPU seconds and parallel ceilings."""
    from chatjinja import load_template
    from chatjinja.batch import render_jsonl

    data = json.loads((HERE / "inputs" / "conversations.json").read_text(encoding="utf-8"))
    conversations = [data["conversations"][name] for name in ("short", "medium", "long")]
    template = load_template("devstral-small-2-24b-instruct-2512")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-tokenize-") as tmp:
        source = Path(tmp) / "in.jsonl"
        with open(source, "w", encoding="utf-8") as f:
            for i in range(count):
                record = {"messages": conversations[i % 3], **({"tools": data["tools"]} if i % 2 else {})}
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        render_jsonl(template, source, Path(tmp) / "warm.jsonl", workers=1, tokenize=True, tokenizer=str(folder))
        outputs: dict[int, bytes] = {}
        measured: dict[int, list[tuple[float, float, float, float]]] = {1: [], 2: []}
        for _ in range(rounds):
            for workers in (1, 2):
                ceiling = parallel_ceiling(workers) if workers > 1 else 1.0
                out = Path(tmp) / f"out{workers}.jsonl"
                before = _cpu()
                summary = render_jsonl(template, source, out, workers=workers, tokenize=True, tokenizer=str(folder))
                cpu = _cpu() - before
                if summary.errors:
                    raise SystemExit(f"tokenized batch had {summary.errors} errors")
                outputs[workers] = out.read_bytes()
                measured[workers].append((summary.rate, summary.seconds, cpu, ceiling))
        if outputs[1] != outputs[2]:
            raise SystemExit("the 2-worker output differs from the 1-worker output")
    baseline = statistics.median(rate for rate, *_ in measured[1])
    for workers in (1, 2):
        rate, seconds, cpu, ceiling = (statistics.median(values) for values in zip(*measured[workers]))
        rows.append([f"render_jsonl(tokenize=True), workers={workers}", f"{rate:.0f}", f"{seconds:.2f}",
                     f"{cpu:.2f}", f"{rate / baseline:.2f}", f"{ceiling:.2f}"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--templates", type=int, default=20, help="corpus templates (0 for none)")
    parser.add_argument("--batch", type=int, default=16000, help="conversations in the batch rows (0 for none)")
    parser.add_argument("--cpu", action="store_true", help="per-call times in process CPU time instead of wall time")
    parser.add_argument("--no-calls", action="store_true", help="only the batch rows")
    parser.add_argument("--case", default="", help="only the cases whose name contains this")
    args = parser.parse_args()
    import time

    clock = time.process_time if args.cpu else time.perf_counter
    logging.disable(logging.WARNING)  # the no-generation-tag warnings of the masks contender

    import chatjinja
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="bench-tekken-") as tmp:
        groups = {} if args.no_calls else {
            "devstral": devstral_cases(),
            "corpus": corpus_cases(args.templates, hf_tokenizer()) if args.templates else [],
        }
        folder = tekken_folder(Path(tmp), [source for cases in groups.values() for _, source, _, _ in cases])
        reference = AutoTokenizer.from_pretrained(str(folder))
        rows, ratios = [], {"devstral": [], "corpus": []}
        numbers = itertools.count(1)
        for group, cases in groups.items():
            for name, source, conversation, kwargs in cases:
                if args.case not in name:
                    continue
                # sample numbers of this case and contender only: no piece a case or contender encoded is
                # another's cache hit (chatml-like templates would share ``user\nWhat is ... (sample 3)``)
                base = next(numbers) * 1_000_000
                ours_count, masks_count, theirs_count = itertools.count(base), itertools.count(base + 500_000), itertools.count(base)

                def ours(masks: bool = False, chat: Any = None) -> Any:
                    chat = chat if chat is not None else sample(conversation, next(masks_count if masks else ours_count))
                    return chatjinja.apply_chat_template(chat, source, tokenizer=folder, tokenize=True,
                                                         return_assistant_tokens_mask=masks, **kwargs)

                def same() -> Any:
                    return ours(chat=[dict(message) for message in conversation])

                def theirs(chat: Any = None) -> Any:
                    chat = chat if chat is not None else sample(conversation, next(theirs_count))
                    return reference.apply_chat_template(chat, chat_template=source, tokenize=True, **kwargs)

                first, again = sample(conversation, base - 1), [dict(message) for message in conversation]
                if (_plain(ours(chat=first)) != _plain(theirs(first)) or _plain(ours(True, first)) != _plain(theirs(first))
                        or _plain(same()) != _plain(theirs(again))):
                    rows.append([name, "!=", "!=", "!=", "-", "-", "-", "-", "-", "-"])
                    continue
                text = chatjinja.apply_chat_template(sample(conversation, base - 2), source, **reference.special_tokens_map, **kwargs)
                backend = reference.backend_tokenizer

                def encode_alone() -> Any:
                    return backend.encode(text, add_special_tokens=False)

                times = interleaved(
                    {"chatjinja": ours, "chatjinja+masks": lambda: ours(True), "same": same, "transformers": theirs,
                     "encode": encode_alone},
                    rounds=args.rounds,
                    clock=clock,
                )
                ratios[group].append(times["chatjinja"] / times["transformers"])
                hf = times["transformers"]
                rows.append([name, us(times["chatjinja"]), us(times["chatjinja+masks"]), us(times["same"]), us(hf), us(times["encode"]),
                             ratio(times["chatjinja"], hf), ratio(times["chatjinja+masks"], hf), ratio(times["same"], hf),
                             ratio(times["encode"], hf)])
        if rows:
            print(table(["case", "chatjinja µs", "chatjinja+masks µs", "chatjinja same µs", "transformers µs", "encode alone µs",
                         "cj/hf", "cj+masks/hf", "same/hf", "encode/hf"], rows))
        for group, values in ratios.items():
            if values:
                print(f"median cj/hf, {group}: {statistics.median(values):.2f} over {len(values)} cases")
        if args.batch:
            print()
            print(table(["run", "conversations/s", "seconds", "CPU s (all processes)", "speed-up", "machine ceiling"],
                        batch_rows(folder, args.batch)))


if __name__ == "__main__":
    main()
