"""Render speed: chatjinja vs transformers vs bare jinja2 (sandboxed and plain) vs minijinja, side by side.

    .venv/bin/python benchmarks/bench_render.py            # Devstral set + 20 corpus templates
    .venv/bin/python benchmarks/bench_render.py --rounds 7 --templates 5

Contenders, per case (one template, one conversation):

- ``chatjinja``: ``chatjinja.apply_chat_template`` end to end (message normalisation, plain-data
  copies, the sandbox, default resource budgets);
- ``chatjinja-nobudget``: the same with ``budgets=None`` (what transformers does);
- ``transformers``: ``tokenizer.apply_chat_template(..., tokenize=False)``, end to end;
- ``chatjinja-engine``: chatjinja's compiled template (fast sandbox, budget hooks idle), only
  ``Template.render`` on data prepared beforehand: the engine without the data preparation;
- ``engine+budgets``: the same render with the default budgets metering it (what the engine does
  inside ``apply_chat_template``): the like-for-like contender for the plain jinja2 render;
- ``jinja2-sandbox``: transformers' compiled template (``ImmutableSandboxedEnvironment``), only
  ``Template.render`` on data prepared beforehand;
- ``jinja2-plain``: the same template in an unsandboxed ``jinja2.Environment``, only ``render``;
- ``minijinja``: minijinja-py (``pip install minijinja``; optional), only ``render_template``.

Every contender's output is compared with transformers' before timing; a contender that differs
is reported (``!=``) and not timed for that case. Inputs: ``inputs/conversations.json``
(``make_inputs.py``) and ``../shared/corpus`` (read at run time; skipped when absent).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPUS = REPO.parent / "shared" / "corpus"
sys.path.insert(0, str(HERE))

from timing import interleaved, ratio, table, us  # noqa: E402

SPECIAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
CORPUS_CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And of Italy?"},
]


def hf_tokenizer() -> Any:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2}, unk_token="<unk>"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL)


def plain_environment() -> Any:
    """An unsandboxed jinja2 Environment with transformers' options, filters and globals."""
    import jinja2
    import jinja2.ext

    from chatjinja.runtime.environment import AssistantTracker, TemplateNamespace, raise_exception, strftime_now, tojson

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now, namespace=TemplateNamespace)
    return env


def minijinja_environment() -> Any | None:
    try:
        import minijinja
    except ImportError:
        return None
    from chatjinja.runtime.environment import raise_exception, strftime_now, tojson

    env = minijinja.Environment(
        trim_blocks=True,
        lstrip_blocks=True,
        filters={"tojson": tojson},
        globals={"raise_exception": raise_exception, "strftime_now": strftime_now},
    )
    env.debug = False
    return env


def contenders_for(name: str, source: str, conversation: list, kwargs: dict[str, Any], engines: dict[str, Any]) -> tuple[dict, dict]:
    """The callables to time for one case, and the outputs that were not byte-identical to transformers'."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    import chatjinja
    from chatjinja.runtime.messages import alias_reasoning_fields, normalize_chat_messages, plain_template_data

    tok = engines["tokenizer"]
    expected = tok.apply_chat_template(copy.deepcopy(conversation), chat_template=source, tokenize=False, **kwargs)
    prepared = {
        **SPECIAL,
        "messages": alias_reasoning_fields(plain_template_data(normalize_chat_messages(conversation))),
        "tools": plain_template_data(kwargs.get("tools")),
        "documents": None,
        "add_generation_prompt": kwargs.get("add_generation_prompt", False),
    }
    sandboxed = _compile_jinja_template(source)
    from chatjinja.runtime.environment import compile_template

    ours = compile_template(source)
    from chatjinja.runtime.budget import DEFAULT_BUDGETS, guarded_render, is_plain_checked

    inputs: list = []  # the containers apply_chat_template collects while preparing the data
    for value in prepared.values():
        is_plain_checked(value, DEFAULT_BUDGETS.max_input_depth, seen=inputs)

    def engine_with_budgets() -> str:
        with guarded_render(DEFAULT_BUDGETS, False, inputs):
            return ours.render(**prepared)

    plain = engines["plain"].from_string(source)
    candidates: dict[str, Callable[[], str]] = {
        "chatjinja": lambda: chatjinja.apply_chat_template(conversation, source, **SPECIAL, **kwargs),
        "chatjinja-nobudget": lambda: chatjinja.apply_chat_template(conversation, source, budgets=None, **SPECIAL, **kwargs),
        "transformers": lambda: tok.apply_chat_template(conversation, chat_template=source, tokenize=False, **kwargs),
        "chatjinja-engine": lambda: ours.render(**prepared),
        "engine+budgets": engine_with_budgets,
        "jinja2-sandbox": lambda: sandboxed.render(**prepared),
        "jinja2-plain": lambda: plain.render(**prepared),
    }
    mini = engines.get("minijinja")
    if mini is not None:
        try:
            mini.add_template(name, source)
        except Exception:  # noqa: BLE001 - e.g. {% generation %}, which minijinja does not know
            pass
        else:
            candidates["minijinja"] = lambda: mini.render_template(name, **prepared)
    contenders, different = {}, {}
    for label, fn in candidates.items():
        try:
            output = fn()
        except Exception as exc:  # noqa: BLE001 - reported, not timed
            different[label] = f"{type(exc).__name__}"
            continue
        if output != expected:
            different[label] = "!="
        else:
            contenders[label] = fn
    return contenders, different


def devstral_cases() -> list[tuple[str, str, list, dict]]:
    source = (REPO / "templates" / "devstral-small-2-24b-instruct-2512.jinja").read_text(encoding="utf-8")
    data = json.loads((HERE / "inputs" / "conversations.json").read_text(encoding="utf-8"))
    cases = []
    for size, conversation in data["conversations"].items():
        cases.append((f"devstral/{size} ({len(conversation)} msgs)", source, conversation, {"tools": data["tools"]}))
    return cases


def corpus_cases(count: int, tokenizer: Any) -> list[tuple[str, str, list, dict]]:
    """``count`` corpus templates, evenly spread over the sorted list of those transformers renders."""
    if not (CORPUS / "templates").is_dir():
        print(f"(corpus not found at {CORPUS}: corpus cases skipped)", file=sys.stderr)
        return []
    kwargs = {"add_generation_prompt": True}
    usable = []
    for path in sorted((CORPUS / "templates").rglob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        try:
            tokenizer.apply_chat_template(copy.deepcopy(CORPUS_CONVERSATION), chat_template=source, tokenize=False, **kwargs)
        except Exception:  # noqa: BLE001 - only templates that render this conversation
            continue
        usable.append((str(path.relative_to(CORPUS / "templates")), source))
    step = max(1, len(usable) // count)
    return [(name, source, CORPUS_CONVERSATION, kwargs) for name, source in usable[::step][:count]]


COLUMNS = ["chatjinja", "chatjinja-nobudget", "transformers", "chatjinja-engine", "engine+budgets", "jinja2-sandbox", "jinja2-plain", "minijinja"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--templates", type=int, default=20, help="corpus templates (0 for none)")
    args = parser.parse_args()

    engines = {"tokenizer": hf_tokenizer(), "plain": plain_environment(), "minijinja": minijinja_environment()}
    groups = {"devstral": devstral_cases(), "corpus": corpus_cases(args.templates, engines["tokenizer"]) if args.templates else []}
    ratios: dict[str, dict[str, list[float]]] = {}
    rows = []
    for group, cases in groups.items():
        for name, source, conversation, kwargs in cases:
            contenders, different = contenders_for(name, source, conversation, kwargs, engines)
            times = interleaved(contenders, rounds=args.rounds)
            row = [name] + [us(times[c]) if c in times else different.get(c, "n/a") for c in COLUMNS]
            ours = times.get("chatjinja")
            for other in ("transformers", "jinja2-plain", "minijinja"):
                if ours is not None and other in times:
                    ratios.setdefault(group, {}).setdefault(other, []).append(ours / times[other])
            engine = times.get("chatjinja-engine")
            for other in ("jinja2-sandbox", "jinja2-plain"):
                if engine is not None and other in times:
                    ratios.setdefault(group, {}).setdefault(f"engine/{other}", []).append(engine / times[other])
            metered = times.get("engine+budgets")
            for other in ("jinja2-sandbox", "jinja2-plain", "minijinja"):
                if metered is not None and other in times:
                    ratios.setdefault(group, {}).setdefault(f"metered/{other}", []).append(metered / times[other])
            ours_nb = times.get("chatjinja-nobudget")
            for other in ("transformers", "jinja2-plain", "minijinja"):
                if ours_nb is not None and other in times:
                    ratios.setdefault(group, {}).setdefault(f"nobudget/{other}", []).append(ours_nb / times[other])
            row += [ratio(ours, times["transformers"]) if ours and "transformers" in times else "-"]
            row += [ratio(ours, times["jinja2-plain"]) if ours and "jinja2-plain" in times else "-"]
            rows.append(row)
            print(" | ".join(row), file=sys.stderr, flush=True)
    print("\nMedian time per render in µs (!= : output differs from transformers; n/a : not available)\n")
    print(table(["case"] + COLUMNS + ["cj/hf", "cj/plain"], rows))
    print("\nMedian ratios (chatjinja with default budgets; in brackets: budgets=None)\n")
    summary = []
    for group, by_other in ratios.items():
        cells = [group, str(len(by_other.get("transformers", [])))]
        for other in ("transformers", "jinja2-plain", "minijinja"):
            values, values_nb = by_other.get(other), by_other.get(f"nobudget/{other}")
            cells.append(
                f"{statistics.median(values):.2f} ({statistics.median(values_nb):.2f})" if values and values_nb else "-"
            )
        summary.append(cells)
    print(table(["set", "cases", "chatjinja / transformers", "chatjinja / jinja2-plain", "chatjinja / minijinja"], summary))
    print("\nEngine only (compiled template, prepared data): chatjinja's sandbox vs jinja2's\n")
    engine_rows = []
    for group, by_other in ratios.items():
        cells = [group]
        for other in ("jinja2-sandbox", "jinja2-plain"):
            values = by_other.get(f"engine/{other}")
            cells.append(f"{statistics.median(values):.2f}" if values else "-")
        engine_rows.append(cells)
    print(table(["set", "chatjinja-engine / jinja2-sandbox", "chatjinja-engine / jinja2-plain"], engine_rows))
    print("\nEngine with the default budgets metering it (engine+budgets) vs the bare jinja2 renders and minijinja\n")
    metered_rows = []
    for group, by_other in ratios.items():
        cells = [group]
        for other in ("jinja2-sandbox", "jinja2-plain", "minijinja"):
            values = by_other.get(f"metered/{other}")
            cells.append(f"{statistics.median(values):.2f}" if values else "-")
        metered_rows.append(cells)
    print(table(["set", "engine+budgets / jinja2-sandbox", "engine+budgets / jinja2-plain", "engine+budgets / minijinja"], metered_rows))


if __name__ == "__main__":
    main()
