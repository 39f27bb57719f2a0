"""``chatjinja portability TEMPLATE``: the probe conversations in minijinja, @huggingface/jinja and llama.cpp, beside transformers."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from ..version import __version__
from ._common import TEMPLATE_HELP, UsageError, load_template_arg, write_atomic, write_stdout

ENGINES_HELP = "comma-separated engines: minijinja, hfjs, llamacpp (default: all three)"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "portability",
        help="render the probe conversations in the other engines that serve templates and compare with transformers",
        description="Render the template's conversation space (the probe conversations of docs/CAPABILITIES.md, client shapes, every mode) with transformers-identical chatjinja and "
        "with each engine, configured as its servers configure it: minijinja (TGI, mistral.rs), hfjs "
        "(@huggingface/jinja: transformers.js) and llamacpp (llama.cpp's own C++ engine: llama-server). Per engine: "
        "identical, differs (each case that does not render as in transformers: differs, fails, renders, with the "
        "first differing characters and the cause), incomplete (nothing differs, but some cases were cut: not "
        "compared, each named with why) or unavailable (with what is missing). The whole run has one time budget "
        "(--time-budget); each engine render stops at chatjinja's own render limits (1 s, 512 MiB, the probes' "
        "output limit). The hfjs package and the llama.cpp engine are installed into the cache folder on first use "
        "(npm, pip and g++; --no-install forbids it; not counted in the budget). Exit 0 when every engine that ran "
        "renders every case as transformers does, 1 when one differs, a case was cut or none could run.",
    )
    parser.add_argument("template", metavar="TEMPLATE", help=TEMPLATE_HELP)
    parser.add_argument("--engines", default=None, metavar="NAMES", help=ENGINES_HELP)
    parser.add_argument("--format", choices=("text", "json", "sarif"), default="text", help="output format (default: text)")
    parser.add_argument("--no-install", action="store_true",
                        help="use only engines already installed; never run npm, pip or the compiler")
    parser.add_argument("--time-budget", type=_seconds, default=None, metavar="S",
                        help="seconds for the whole run: chatjinja's renders and every engine's; what it does not reach "
                        "is reported cut (default: 20)")
    parser.add_argument("--verbose", "-v", action="store_true", help="text format: print both renderings of every differing case")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE (whole or not at all)")
    parser.set_defaults(run=run)


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"takes a number of seconds > 0, got {value!r}")
    return seconds


def _engine_names(value: str | None, known: tuple[str, ...]) -> tuple[str, ...]:
    if value is None:
        return known
    names = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise UsageError(f"--engines takes {', '.join(known)}, got {value!r}")
    return names


def run(args: argparse.Namespace) -> int:
    from ..portability import ENGINE_NAMES, PortabilityBudget, check_portability, format_json, format_sarif, format_text  # lazy: the CLI imports every command to build its parser; this loads the runtime and jinja2

    names = _engine_names(args.engines, ENGINE_NAMES)
    template = load_template_arg(args.template)
    # an install or build says so on stderr while it runs (it takes up to minutes, once)
    logger = logging.getLogger("chatjinja.portability")  # portability.engines logs there
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("chatjinja: %(message)s"))
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.INFO
    try:
        budget = PortabilityBudget() if args.time_budget is None else PortabilityBudget(seconds=args.time_budget)
        report = check_portability(template, names, install=not args.no_install, budget=budget)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    if args.format == "json":
        text = format_json(report)
    elif args.format == "sarif":
        text = format_sarif(report, __version__)
    else:
        text = format_text(report, verbose=args.verbose)
    if args.output:
        write_atomic(args.output, text)
    else:
        write_stdout(text)
    return 0 if report.ok else 1
