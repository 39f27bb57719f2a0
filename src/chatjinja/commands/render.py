"""``chatjinja render TEMPLATE [--input FILE|-] [--json]``: the exact prompt text for a conversation."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import InputError, UsageError, load_template_arg, read_json_input, write_stdout
from ._runtime_options import add_runtime_options, runtime_options

_FIXED_KEYS = ("messages", "tools", "documents", "add_generation_prompt", "continue_final_message")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "render",
        help="render a conversation with a template, exactly as transformers does",
        description="Render a conversation (JSON: messages or a batch of them, tools, documents, "
        "add_generation_prompt, continue_final_message and any other template variables).",
    )
    parser.add_argument("template", metavar="TEMPLATE", help="bundled template name, model name, or .jinja file")
    parser.add_argument("--input", "-i", metavar="FILE", default="-", help="input JSON file, or - for stdin (default)")
    parser.add_argument("--json", action="store_true", help='write {"text": ..., "spans": [...]} instead of the bare text')
    add_runtime_options(parser)
    parser.set_defaults(run=run)


def _split_input(data: Any) -> tuple[Any, dict[str, Any]]:
    if not isinstance(data, dict):
        raise InputError(f"input must be a JSON object with 'messages', got {type(data).__name__}")
    if "messages" not in data:
        raise InputError("input has no 'messages'")
    messages = data["messages"]
    if not isinstance(messages, list):
        raise InputError(f"'messages' must be a list, got {type(messages).__name__}")
    options = {key: value for key, value in data.items() if key != "messages"}
    return messages, options


def run(args: argparse.Namespace) -> int:
    template = load_template_arg(args.template)
    messages, options = _split_input(read_json_input(args.input))
    is_batch = bool(messages) and isinstance(messages[0], list)
    if is_batch and not args.json:
        raise UsageError("the input holds a batch of conversations: use --json to get one record per conversation")
    try:
        result = template.render(messages, return_assistant_spans=args.json, **runtime_options(args), **options)
    except Exception as exc:
        exc.chatjinja_template = template.name  # type: ignore[attr-defined]
        raise
    if not args.json:
        write_stdout(result)
        return 0
    texts, spans = result
    if is_batch:
        records = [{"text": t, "spans": [list(s) for s in sp]} for t, sp in zip(texts, spans)]
        write_stdout(json.dumps(records, ensure_ascii=False) + "\n")
    else:
        write_stdout(json.dumps({"text": texts, "spans": [list(s) for s in spans]}, ensure_ascii=False) + "\n")
    return 0
