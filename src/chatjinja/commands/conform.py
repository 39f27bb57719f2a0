"""``chatjinja conform TEMPLATE --against mistral-common:VERSION``: compare a template with mistral-common's output."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import TEMPLATE_HELP, UsageError, add_input_cap, input_cap, read_json_input, write_atomic, write_stdout

# Each bundled template and the mistral-common version it is documented for (Devstral: the v13 generated template).
BUNDLED_AGAINST = (
    ("mistral-v1", "v1"),
    ("mistral-v2-v3", "v3"),
    ("mistral-v3-tekken", "v3-tekken"),
    ("devstral-small-2-24b-instruct-2512", "v13"),
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "conform",
        help="compare a template's renderings with mistral-common (the ground truth for Mistral models)",
        description="Render a conversation suite with TEMPLATE and with mistral-common for a tokenizer version "
        "(the bundled tokenizer for v1, v2, v3, v3-tekken, v7; the generated reference template for v11, v13, "
        "v15) and report per case: match, mismatch (first difference, whitespace visible), template raised, "
        "reference rejected. Exit 0 when every case agrees, 1 otherwise. Needs the [mistral] extra.",
    )
    parser.add_argument("template", metavar="TEMPLATE", nargs="?", help=TEMPLATE_HELP)
    parser.add_argument("--against", metavar="mistral-common:VERSION",
                        help="reference tokenizer version: v1, v2, v3, v3-tekken, v7, v11, v13, v15")
    parser.add_argument("--conversations", metavar="FILE",
                        help="JSON file of conversations ([{name, messages, tools}] or message lists); default: the built-in suite")
    parser.add_argument("--form", choices=("auto", "tokenizer", "template"), default="auto",
                        help="reference form: bundled tokenizer or generated template (default: tokenizer where bundled)")
    parser.add_argument("--format", choices=("text", "json", "markdown"), default="text", help="output format")
    parser.add_argument("--bundled", action="store_true",
                        help="compare every bundled template with its documented version (" +
                        ", ".join(f"{t}: {v}" for t, v in BUNDLED_AGAINST) + ")")
    parser.add_argument("--verbose", "-v", action="store_true", help="text format: print both renderings of every disagreeing case")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE (whole or not at all)")
    add_input_cap(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..conform import (  # lazy: the CLI imports every command to build its parser
        ReferenceUnavailable, UnknownReference, conform, format_json, format_markdown_table, format_text, parse_against,
    )

    if args.bundled and (args.template or args.against):
        raise UsageError("--bundled compares the bundled templates with their own versions: give no TEMPLATE or --against")
    if not args.bundled and (not args.template or not args.against):
        raise UsageError("give TEMPLATE and --against mistral-common:VERSION (or --bundled)")
    if args.against:
        try:
            parse_against(args.against)  # a bad version is a usage error before any work
        except UnknownReference as exc:
            raise UsageError(str(exc)) from None
    conversations = read_json_input(args.conversations, input_cap(args)) if args.conversations else None
    pairs = BUNDLED_AGAINST if args.bundled else ((args.template, args.against),)
    try:
        reports = [conform(template, against, conversations, form=args.form) for template, against in pairs]
    except (ReferenceUnavailable, UnknownReference) as exc:  # what to install / what exists: usage errors
        raise UsageError(str(exc)) from None
    if args.format == "json":  # one report object; with --bundled a list of them
        text = format_json(reports if args.bundled else reports[0])
    elif args.format == "markdown":
        text = format_markdown_table(reports)
    else:
        text = "\n".join(format_text(r, verbose=args.verbose) for r in reports)
    if args.output:
        write_atomic(args.output, text)
    else:
        write_stdout(text)
    return 0 if all(r.ok for r in reports) else 1
