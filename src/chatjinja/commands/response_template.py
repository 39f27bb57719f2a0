"""``chatjinja response-template TEMPLATE [-o FILE]``: the transformers response_template derived from a chat template, as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._common import TEMPLATE_HELP, load_template_arg, write_atomic, write_stdout


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "response-template",
        help="derive the response_template transformers' parse_response reads a model's reply with",
        description="Render the message suite through TEMPLATE, derive the response_template (transformers' "
        "format: start_anchor, reasoning and tool-call markers, argument encoding, content end) and check that "
        "transformers' parser reads every reply back; print it as JSON. Exit 1, with the message shape that fails "
        "and why, when the template writes a reply that cannot be read back. Needs chatjinja[parse].",
    )
    parser.add_argument("template", metavar="TEMPLATE", help=TEMPLATE_HELP)
    parser.add_argument("--partial", action="store_true",
                        help="when no template reads every reply back, write the one that reads the most and name "
                        "each message shape it cannot read on stderr (exit 0)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the JSON to FILE (whole or not at all)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..serving.derive import reads_back, response_template  # lazy: the CLI imports every command to build its parser
    from ..serving.suite import observe_suite  # lazy: the CLI imports every command to build its parser

    template = load_template_arg(args.template)
    derived = response_template(template, strict=not args.partial)
    if args.partial:
        for case, problem in reads_back(derived, observe_suite(template.source)).items():
            print(f"warning: the {case} reply does not read back: {problem}", file=sys.stderr)
    text = json.dumps(derived, indent=2, ensure_ascii=False) + "\n"
    if args.output:
        write_atomic(args.output, text)
    else:
        write_stdout(text)
    return 0
