"""``chatjinja response-template TEMPLATE [--target T] [-o FILE] [--write-into MODEL_FOLDER]``: the response_template derived from a chat template, as JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..files import FileError
from ._common import TEMPLATE_HELP, load_template_arg, write_atomic, write_stdout


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "response-template",
        help="derive the response_template transformers' parse_response or vLLM reads a model's reply with",
        description="Render the message suite through TEMPLATE, derive the response_template (start_anchor, "
        "reasoning and tool-call markers, argument encoding, content end) and check that transformers' parser "
        "reads every reply back; print it as JSON in the target's format, or write it into a model folder. Exit 1, with the message shape that fails "
        "and why, when the template writes a reply that cannot be read back. Needs chatjinja[parse].",
    )
    parser.add_argument("template", metavar="TEMPLATE", help=TEMPLATE_HELP)
    parser.add_argument("--partial", action="store_true",
                        help="when no template reads every reply back, write the one that reads the most and name "
                        "each message shape it cannot read on stderr (exit 0)")
    parser.add_argument("--target", choices=("transformers", "vllm"), default="transformers",
                        help="the parser that reads it: transformers' parse_response (reasoning in reasoning_content; "
                        "the default) or vLLM 0.34's --reasoning-parser hf / --tool-call-parser hf (reasoning in "
                        "thinking); exit 1 when the target cannot express the reply format")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the JSON to FILE (whole or not at all)")
    parser.add_argument("--write-into", metavar="MODEL_FOLDER",
                        help="set response_template in MODEL_FOLDER/tokenizer_config.json, where transformers and vLLM "
                        "read it (atomically; the rest of the file is kept byte for byte) instead of printing it")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..serving.derive import reads_back, response_template  # lazy: the CLI imports every command to build its parser
    from ..serving.checkpoint import write_response_template  # lazy: the CLI imports every command to build its parser
    from ..serving.suite import observe_suite  # lazy: the CLI imports every command to build its parser

    if args.write_into and not os.path.isfile(os.path.join(args.write_into, "tokenizer_config.json")):
        raise FileError(f"{args.write_into} has no tokenizer_config.json: transformers and vLLM read a model's "
                        "response template from there")  # said before the derivation, which takes seconds
    template = load_template_arg(args.template)
    derived = response_template(template, strict=not args.partial, target=args.target)
    if args.partial:
        read = derived if args.target == "transformers" else response_template(template, strict=False)  # cached
        for case, problem in reads_back(read, observe_suite(template.source)).items():
            print(f"warning: the {case} reply does not read back: {problem}", file=sys.stderr)
    text = json.dumps(derived, indent=2, ensure_ascii=False) + "\n"
    if args.write_into:
        write_response_template(args.write_into, derived)
    if args.output:
        write_atomic(args.output, text)
    elif not args.write_into:
        write_stdout(text)
    return 0
