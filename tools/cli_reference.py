"""Write docs/reference/cli.md from chatjinja's argument parser (``python tools/cli_reference.py``).

``tests/test_cli_reference.py`` checks that the page is what this prints, so the reference cannot
drift from the parser.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md"

HEADER = """# Command-line reference

Generated from the argument parser by `python tools/cli_reference.py` (a test checks that this page is
what it prints). Every command takes `--help`. Exit codes: see [the README](../../README.md#exit-codes).
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    names = ", ".join(f"`{name}`" for name in action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar or action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    return f"{names} `{metavar}`"


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.option_strings == []:
        return ""
    return f"`{action.default}`"


def _choices(action: argparse.Action) -> str:
    if not action.choices:
        return ""
    return ", ".join(f"`{choice}`" for choice in action.choices)


def command_section(name: str, parser: argparse.ArgumentParser) -> str:
    lines = [f"## `chatjinja {name}`", ""]
    if parser.description:
        lines += [_cell(parser.description), ""]
    usage = " ".join(parser.format_usage().split())
    usage = usage.removeprefix("usage: ")
    lines += ["```text", usage, "```", ""]
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    if actions:
        lines += ["| argument | values | default | meaning |", "|---|---|---|---|"]
        for action in actions:
            lines.append(f"| {_flags(action)} | {_choices(action)} | {_default(action)} | {_cell(action.help or '')} |")
        lines.append("")
    return "\n".join(lines)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def render() -> str:
    from chatjinja.cli import build_parser

    parser = build_parser()
    parts = [HEADER]
    for name, sub in subcommands(parser).items():
        parts.append(command_section(name, sub))
    return "\n".join(parts).rstrip("\n") + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        sys.exit(0 if PAGE.read_text(encoding="utf-8") == render() else 1)
    PAGE.write_text(render(), encoding="utf-8")
