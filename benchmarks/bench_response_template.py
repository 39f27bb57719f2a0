"""Deriving a response template per corpus template, and parsing a reply with it beside transformers' built-in fallback.

    .venv/bin/python benchmarks/bench_response_template.py            # derivation over the corpus, then parsing
    .venv/bin/python benchmarks/bench_response_template.py --rounds 9

Derivation: every corpus template whose probe says it renders tool calls or reasoning, timed from the
source text (the modes the analyser finds, the suite renders in every mode with tools given, and the
read-back check with transformers' parser; the derivation cache is bypassed; the compiled-template cache is warm, as in a server that already renders with the
template); the median, 90th percentile and slowest per template, successful and refused alike.
Parsing: the same reply (content and two calls) read with the derived template and with the fallback
transformers ships for the family (``transformers.cli.serving.utils``), both through transformers'
``parse_response``, and through ``chatjinja.parse_response`` (the size-limited wrapper), interleaved
(``timing.py``). Needs ``chatjinja[parse]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import timing

CORPUS = ROOT.parent / "shared" / "corpus" / "templates"
FAMILIES = {  # corpus template -> the model_type whose fallback reads it
    "llama.cpp/Qwen-Qwen3-0.6B.jinja": "qwen3",
    "llama.cpp/Qwen3.5-4B.jinja": "qwen3_5",
    "contrapuntal/gemma4__upstream__E2B-it.jinja": "gemma4",
}


def derivation() -> list[list[str]]:
    from chatjinja.analysis import modes_of
    from chatjinja.probing import probe
    from chatjinja.serving.derive import ResponseTemplateError, derive_source
    from chatjinja.serving.library import parser_module
    from chatjinja.serving.suite import RenderRefused, render_suite

    parser_module()
    times, refused = [], 0
    for path in sorted(CORPUS.rglob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        capabilities = probe(source)
        if not (capabilities.tool_calls or capabilities.reasoning):
            continue
        try:  # warm the compiled-template cache (and the analyser's grammar, loaded once per process)
            render_suite(source)
        except RenderRefused:
            pass
        modes_of("{{ x }}")
        started = time.perf_counter()
        try:  # the suite in every mode, the modes found by the analyser, the read-back check
            derive_source(source, strict=True)
        except ResponseTemplateError:
            refused += 1
        times.append(time.perf_counter() - started)
    times.sort()
    ms = [t * 1000 for t in times]
    return [[str(len(ms)), str(refused), f"{statistics.median(ms):.1f}", f"{ms[int(len(ms) * 0.9)]:.1f}", f"{ms[-1]:.1f}"]]


def parsing(rounds: int) -> list[list[str]]:
    import chatjinja
    from chatjinja.serving.derive import derive
    from chatjinja.serving.library import parser_module
    from chatjinja.serving.suite import render_suite

    chat_parsing = parser_module()
    from transformers.cli.serving.utils import _RESPONSE_TEMPLATE_FALLBACKS

    rows = []
    for name, model_type in FAMILIES.items():
        renders = render_suite((CORPUS / name).read_text(encoding="utf-8"))
        derived = derive(renders, strict=False)
        fallback = next(v for types, v in _RESPONSE_TEMPLATE_FALLBACKS.items() if model_type in types)
        reply = (renders.rendered().get("content_call") or renders.rendered()["parallel"]).rstrip()
        prefix = renders.prefix
        result = timing.interleaved({
            "derived": lambda r=reply, t=derived, p=prefix: chat_parsing.parse_response(r, t, prefix=p),
            "fallback": lambda r=reply, t=fallback, p=prefix: chat_parsing.parse_response(r, t, prefix=p),
            "chatjinja": lambda r=reply, t=derived, p=prefix: chatjinja.parse_response(r, t, prefix=p),
        }, rounds=rounds)
        rows.append([name, model_type, str(len(reply)), f"{result['derived'] * 1e6:.0f}", f"{result['fallback'] * 1e6:.0f}",
                     f"{result['chatjinja'] * 1e6:.0f}", f"{result['derived'] / result['fallback']:.2f}"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    print(timing.table(["templates", "refused", "median ms", "p90 ms", "slowest ms"], derivation()))
    print()
    print(timing.table(["template", "fallback", "reply chars", "derived µs", "fallback µs", "chatjinja µs", "derived/fallback"],
                       parsing(args.rounds)))


if __name__ == "__main__":
    main()
