"""``chatjinja templates``: the bundled documented templates and their metadata."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import write_stdout

WHITESPACE_NOTE = (
    "Note: the three Mistral tokenizer templates are printed in their document with indentation and line\n"
    "breaks, so verbatim they render with extra newlines and spaces (V1 gives \"<s>\\n         [INST] Hello, ...\"),\n"
    "while the documented Basic String has none. transformers renders them the same way, and so does chatjinja.\n"
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("templates", help="list the bundled templates with their metadata")
    parser.add_argument("--json", action="store_true", help="print the manifest entries as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..loading import bundled_manifest  # lazy: the CLI imports every command to build its parser

    entries = bundled_manifest()["templates"]
    if args.json:
        write_stdout(json.dumps(entries, indent=2, ensure_ascii=False) + "\n")
        return 0
    lines = []
    for entry in entries:
        lines.append(entry["name"])
        lines.append(f"  title:            {entry['title']}")
        lines.append(f"  file:             {entry['file']}")
        lines.append(f"  tokenizer:        {entry['tokenizer_version'] or 'not stated'} ({entry['tokenizer_family']})")
        lines.append(f"  models:           {', '.join(entry['models'])}")
        tokens = ", ".join(f"{k}={v}" for k, v in entry["special_tokens"].items())
        lines.append(f"  special tokens:   {tokens}")
        if entry.get("basic_string") is not None:
            lines.append(f"  basic string:     {entry['basic_string']!r}")
        if entry.get("sampling_defaults"):
            defaults = ", ".join(f"{k}={v}" for k, v in entry["sampling_defaults"].items())
            lines.append(f"  sampling:         {defaults}")
        if entry.get("stop_strings") is not None:
            lines.append(f"  stop strings:     {entry['stop_strings'] or '(none listed)'}")
        lines.append("")
    write_stdout("\n".join(lines) + "\n" + WHITESPACE_NOTE)
    return 0
