"""``chatjinja diff OLD NEW``: capability changes, new and fixed lint findings, and render differences between two templates."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import add_input_cap, TEMPLATE_HELP, UsageError, load_template_arg, write_atomic, write_stdout

FAIL_ON = ("lost", "changed", "render", "lint", "never")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diff",
        help="compare two versions of a template: capabilities, lint findings, renders",
        description="Compare OLD and NEW (two TEMPLATE arguments): capability changes measured by probe renders "
        "('drops parallel tool calls', 'now requires object arguments') and by the analyser ('stops marking "
        "assistant turns with {% generation %}', variables, special and control tokens, strftime_now, raised "
        "messages), special-token changes, new and fixed lint findings, and the conversations of both templates' space (every mode of either) that render "
        "differently. Exit 1 when a --fail-on condition holds (default: a capability was lost) or when a "
        "template cannot be read, else 0.",
    )
    parser.add_argument("old", metavar="OLD", help="the released template: " + TEMPLATE_HELP)
    parser.add_argument("new", metavar="NEW", help="the candidate template, of any kind OLD may be")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    parser.add_argument(
        "--fail-on",
        default="lost",
        metavar="WHAT",
        help="comma-separated: lost (a capability was lost), changed (any capability change, lost or gained too), render (any render "
        "difference), lint (new lint findings), never. Default: lost",
    )
    parser.add_argument("--name", metavar="NAME", help="named template to compare in both (e.g. tool_use)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE (whole or not at all)")
    add_input_cap(parser)
    parser.set_defaults(run=run)


def _fail_on(value: str) -> set[str]:
    chosen = {part.strip() for part in value.split(",") if part.strip()}
    unknown = chosen - set(FAIL_ON)
    if unknown or not chosen:
        raise UsageError(f"--fail-on takes a comma-separated list of {', '.join(FAIL_ON)}; got {value!r}")
    return set() if "never" in chosen else chosen


def run(args: argparse.Namespace) -> int:
    from ..loading import load_template  # lazy: the CLI imports every command to build its parser
    from ..release import diff_templates, diff_text  # lazy: the CLI imports every command to build its parser; this loads Lark, the linter and the loaders

    fail_on = _fail_on(args.fail_on)
    if args.name:
        old, new = load_template(args.old, args.name), load_template(args.new, args.name)
    else:
        old, new = load_template_arg(args.old), load_template_arg(args.new)
    diff = diff_templates(old, new)
    triggered = diff.triggered(fail_on)
    if args.format == "json":
        report = diff.to_dict()
        report["fail_on"] = sorted(fail_on)
        report["failed"] = triggered
        text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    else:
        text = diff_text(diff)
        if triggered:
            text += f"FAILED: {', '.join(triggered)} (--fail-on {args.fail_on})\n"
    if args.output:
        write_atomic(args.output, text)
    else:
        write_stdout(text)
    return 1 if triggered else 0
