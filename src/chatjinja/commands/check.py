"""``chatjinja check MODEL_FOLDER``: lint and probe every template a model folder (or GGUF) holds and cross-check its files."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import add_input_cap, write_atomic, write_stdout

# The same words as ``lint --fail-level``: a severity, or never (exit 0 whatever is found).
LEVELS = ("note", "warning", "error", "never")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check a model folder or GGUF before release: every template, conflicts, special tokens",
        description="Lint and probe every chat template MODEL_FOLDER holds (chat_template.jinja, "
        "additional_chat_templates/, tokenizer_config.json, chat_template.json) or a GGUF file; report which "
        "one transformers loads, templates that disagree with each other, and *_token variables the template "
        "reads but the folder does not define. Exit 1 when a finding is at or above --fail-level.",
    )
    parser.add_argument("folder", metavar="MODEL_FOLDER", help="a model folder or a GGUF file")
    parser.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text",
                        help="output format (default: text); github: workflow commands that annotate the files in GitHub Actions")
    parser.add_argument("--fail-level", choices=LEVELS, default="warning",
                        help="lowest severity that makes the exit code 1 (default: warning); never: exit 0 whatever is found")
    parser.add_argument("--rules", choices=("auto", "tokenizer", "processor"), default="auto",
                        help="which transformers loading rule decides the used template (default: auto)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE (atomically) instead of stdout")
    add_input_cap(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..release import (  # lazy: the CLI imports every command to build its parser; this loads Lark, the linter and the loaders
        SEVERITIES, check_github, check_json, check_model, check_sarif, check_text,
    )

    check = check_model(args.folder, rules=args.rules)
    formats = {"json": check_json, "sarif": check_sarif, "github": check_github, "text": check_text}
    text = formats[args.format](check)
    if args.output:
        write_atomic(args.output, text)
    else:
        write_stdout(text)
    worst = check.worst()
    if args.fail_level == "never" or worst is None:
        return 0
    return 1 if SEVERITIES.index(worst) >= SEVERITIES.index(args.fail_level) else 0
