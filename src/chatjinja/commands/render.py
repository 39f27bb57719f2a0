"""``chatjinja render TEMPLATE [--input FILE|-] [--json]``: the exact prompt text for a conversation.

``--batch IN.jsonl [-o OUT.jsonl] [--workers N]`` renders one conversation per line instead;
``--tokenize [--tokenizer PATH]`` writes token ids and assistant masks instead of text, and
``--tokenize --show-masks`` the text with token boundaries and trained tokens marked (training/show.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from typing import Any

from ._common import (
    TEMPLATE_HELP,
    InputError,
    UsageError,
    add_input_cap,
    input_cap,
    json_text,
    load_template_arg,
    read_json_input,
    write_stdout,
)
from ..training.show import show_masks, token_pieces, use_colour
from ._runtime_options import add_runtime_options, runtime_options

_SURROGATE = re.compile("[\ud800-\udfff]")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "render",
        help="render a conversation with a template, exactly as transformers does",
        description="Render a conversation (JSON: messages or a batch of them, tools, documents, "
        "add_generation_prompt, continue_final_message and any other template variables).",
    )
    parser.add_argument("template", metavar="TEMPLATE", help=TEMPLATE_HELP)
    parser.add_argument("--input", "-i", metavar="FILE", default="-", help="input JSON file, or - for stdin (default)")
    parser.add_argument("--json", action="store_true", help='write {"text": ..., "spans": [...]} instead of the bare text')
    batch = parser.add_argument_group("batch", "one conversation per JSONL line, rendered in worker processes")
    batch.add_argument("--batch", metavar="IN.jsonl", help='render every line (a JSON object like the input above) into '
                       '{"text": ...} or {"error": ..., "line": N}; exit 1 when any line failed')
    batch.add_argument("--output", "-o", metavar="OUT.jsonl", help="where --batch writes (atomically); default stdout")
    batch.add_argument("--workers", type=int, metavar="N", help="worker processes for --batch (default 1; 0: one per CPU)")
    tokens = parser.add_argument_group("tokens", "token ids and assistant masks, as apply_chat_template(tokenize=True) gives them")
    tokens.add_argument("--tokenize", action="store_true", help='write {"input_ids": [...], "assistant_masks": [...]} '
                        "(one record per line with --batch) instead of the text; needs the tokenize extra")
    tokens.add_argument("--tokenizer", metavar="PATH", help="a tokenizer.json file or a model folder (default: the "
                        "template's model folder, when it has a tokenizer.json)")
    tokens.add_argument("--sanitize-control-tokens", action="store_true",
                        help="encode control tokens found in the input as text, as transformers' sanitize_control_tokens=True")
    tokens.add_argument("--assistant-masks", choices=("template", "derived"), default="template",
                        help="masks from the template's {%% generation %%} tags (default, as transformers) or from "
                        "synthesised ones (derived)")
    tokens.add_argument("--show-masks", action="store_true",
                        help="with --tokenize: print each conversation with token boundaries (·) and trained tokens "
                        "(assistant mask 1, between « and ») instead of JSON; colours on a terminal unless NO_COLOR is set; "
                        "with --batch or a batch input each conversation is numbered")
    add_input_cap(parser)
    add_runtime_options(parser)
    parser.set_defaults(run=run)


def _tokenize_options(args: argparse.Namespace, template: Any) -> dict[str, Any]:
    """``{"tokenize": True, "tokenizer": ..., ...}`` for ``render_jsonl`` / ``apply_chat_template``, or ``{}`` without --tokenize."""
    if not args.tokenize:
        if args.tokenizer is not None or args.sanitize_control_tokens or args.assistant_masks != "template" or args.show_masks:
            raise UsageError("--tokenizer, --sanitize-control-tokens, --assistant-masks and --show-masks go with --tokenize")
        return {}
    if args.json:
        raise UsageError("--tokenize always writes JSON: drop --json")
    if args.tokenizer is None and template.tokenizer is None:
        raise UsageError("--tokenize needs --tokenizer PATH (a tokenizer.json or a model folder): the template's "
                         "source has no tokenizer.json beside it")
    from ..training.tokenizer import load_tokenizer  # lazy: the CLI imports every command to build its parser

    options: dict[str, Any] = {"tokenize": True, "tokenizer": load_tokenizer(args.tokenizer or template.tokenizer)}
    if args.sanitize_control_tokens:
        options["sanitize_control_tokens"] = True
    if args.assistant_masks != "template":
        options["assistant_masks"] = args.assistant_masks
    return options


def _split_input(data: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The input object -> (messages, render parameters, template variables), as a batch record is read."""
    from ..batch import split_record  # lazy: the CLI imports every command to build its parser; the runtime loads jinja2

    if not isinstance(data, dict):
        raise InputError(f"input must be a JSON object with 'messages', got {type(data).__name__}")
    if "messages" not in data:
        raise InputError("input has no 'messages'")
    messages = data["messages"]
    if not isinstance(messages, list):
        raise InputError(f"'messages' must be a list, got {type(messages).__name__}")
    parameters, variables = split_record(data)
    return messages, parameters, variables


def _run_batch(args: argparse.Namespace, template: Any, tokenizing: dict[str, Any]) -> int:
    from ..batch import render_jsonl  # lazy: the CLI imports every command to build its parser; the runtime loads jinja2

    if args.input != "-":
        raise UsageError("--batch reads its own input file: drop --input")
    if args.json:
        raise UsageError("--batch always writes JSON lines: drop --json")
    if args.workers is not None and args.workers < 0:
        raise UsageError(f"--workers must be 0 (one per CPU) or more, got {args.workers}")
    if not os.path.exists(args.batch):
        raise InputError(f"input file not found: {args.batch}")
    if args.show_masks:
        if args.output is not None or args.workers is not None:
            raise UsageError("--show-masks prints to stdout in one process: drop --output and --workers")
        return _show_batch(args, template, tokenizing)
    workers = 1 if args.workers is None else (args.workers or None)
    template.compile()  # a template that does not compile is one error, not one per line
    to_stdout = args.output in (None, "-")
    progress = _progress_bar if sys.stderr.isatty() else None
    options = {**runtime_options(args), "max_line_bytes": input_cap(args), **tokenizing}
    try:
        if to_stdout:
            summary = _batch_to_stdout(template, args.batch, workers, progress, options)
        else:
            summary = render_jsonl(template, args.batch, args.output, workers=workers, progress=progress, **options)
    finally:
        if progress is not None:
            sys.stderr.write("\n")
    print(summary.line(), file=sys.stderr)
    return 1 if summary.errors else 0


def _batch_to_stdout(template: Any, path: str, workers: int | None, progress: Any, options: dict[str, Any]) -> Any:
    from ..batch import render_jsonl  # lazy: the CLI imports every command to build its parser; the runtime loads jinja2

    # rendered into a private temporary file first, so stdout gets all of it or nothing
    with tempfile.TemporaryDirectory(prefix="chatjinja-batch-") as tmp:
        out = os.path.join(tmp, "out.jsonl")
        summary = render_jsonl(template, path, out, workers=workers, progress=progress, **options)
        with open(out, encoding="utf-8") as f:
            while block := f.read(1 << 20):
                write_stdout(block)
    return summary


def _progress_bar(done: int, total: int) -> None:
    width = 30
    filled = width * done // total if total else width
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    render_options = runtime_options(args)  # a bad budget flag is a usage error before any work
    if args.batch is None and (args.output is not None or args.workers is not None):
        raise UsageError("--output and --workers go with --batch")
    from ..template import chat_template_argument  # lazy: the CLI imports every command to build its parser; the front door loads jinja2

    template = chat_template_argument(load_template_arg(args.template))
    tokenizing = _tokenize_options(args, template)  # a usage error before any input is read
    if args.batch is not None:
        return _run_batch(args, template, tokenizing)
    messages, parameters, variables = _split_input(read_json_input(args.input, input_cap(args)))
    is_batch = bool(messages) and isinstance(messages[0], list)
    if tokenizing and args.show_masks:
        conversations = messages if is_batch else [messages]
        shown = [_shown(template, chat, parameters, variables, render_options, tokenizing) for chat in conversations]
        write_stdout("".join(f"#{n}\n{text}\n\n" for n, (text, _) in enumerate(shown, 1)) if is_batch else shown[0][0] + "\n")
        for n, (_, trained) in enumerate(shown, 1):
            if not trained:  # never silently empty: an all-zero mask is said, whatever the template's tags
                print(f"note: {f'conversation #{n} has' if is_batch else 'the conversation has'} no assistant token "
                      "(its assistant mask is all zero)", file=sys.stderr)
        return 0
    if tokenizing:
        return _run_tokenize(template, messages, parameters, variables, render_options, tokenizing)
    if is_batch and not args.json:
        raise UsageError("the input holds a batch of conversations: use --json to get one record per conversation")
    try:
        result = template.render(messages, return_assistant_spans=args.json, **render_options, **parameters, variables=variables)
    except Exception as exc:
        exc.chatjinja_template = template.name  # type: ignore[attr-defined]
        raise
    if not args.json:
        surrogate = _SURROGATE.search(result)
        if surrogate is not None:  # (from a "\udcff" escape in the input JSON)
            raise InputError(f"the rendered text holds a lone surrogate (U+{ord(surrogate.group()):04X}), which UTF-8 "
                             "cannot encode: use --json, which writes it as an escape")
        write_stdout(result)
        return 0
    texts, spans = result
    if is_batch:
        records = [{"text": t, "spans": [list(s) for s in sp]} for t, sp in zip(texts, spans)]
        write_stdout(json_text(records) + "\n")
    else:
        write_stdout(json_text({"text": texts, "spans": [list(s) for s in spans]}) + "\n")
    return 0


def _run_tokenize(template: Any, messages: Any, parameters: dict[str, Any], variables: dict[str, Any],
                  render_options: dict[str, Any], tokenizing: dict[str, Any]) -> int:
    """One input (a conversation or a batch of them) -> its token ids and assistant masks, as JSON."""
    from ..template import apply_chat_template  # lazy: the CLI imports every command to build its parser; the runtime loads jinja2

    try:
        out = apply_chat_template(messages, template, **parameters, **render_options, **tokenizing,
                                  return_assistant_tokens_mask=True, variables=variables)
    except Exception as exc:
        exc.chatjinja_template = template.name  # type: ignore[attr-defined]
        raise
    if isinstance(out["input_ids"], list) and out["input_ids"] and isinstance(out["input_ids"][0], list):
        records = [{"input_ids": ids, "assistant_masks": mask} for ids, mask in zip(out["input_ids"], out["assistant_masks"])]
        write_stdout(json_text(records) + "\n")
    else:
        write_stdout(json_text({"input_ids": out["input_ids"], "assistant_masks": out["assistant_masks"]}) + "\n")
    return 0


def _shown(template: Any, messages: list, parameters: dict[str, Any], variables: dict[str, Any],
           render_options: dict[str, Any], tokenizing: dict[str, Any]) -> tuple[str, bool]:
    """One conversation's text with its token boundaries and trained tokens marked (training/show.py), and whether
    any token is trained."""
    from ..template import apply_chat_template  # lazy: the CLI imports every command to build its parser; the runtime loads jinja2

    try:
        out = apply_chat_template(messages, template, **parameters, **render_options, **tokenizing,
                                  return_assistant_tokens_mask=True, variables=variables)
        text = template.render(messages, **render_options, **parameters, variables=variables)
    except Exception as exc:
        exc.chatjinja_template = template.name  # type: ignore[attr-defined]
        raise
    pieces = token_pieces(tokenizing["tokenizer"].backend, text, out["input_ids"])
    return show_masks(pieces, out["assistant_masks"], colour=use_colour(sys.stdout)), 1 in out["assistant_masks"]


def _show_batch(args: argparse.Namespace, template: Any, tokenizing: dict[str, Any]) -> int:
    """``--batch IN.jsonl --show-masks``: each line's conversation, numbered by its line; a failed line says why."""
    from ..runtime.batch import BatchSummary, read_lines  # lazy: the CLI imports every command to build its parser; the runtime loads jinja2

    render_options = runtime_options(args)
    failed, ok, unmasked, first_error = 0, 0, 0, None
    started = time.perf_counter()
    # lines over --max-input-bytes are never read into memory whole, as in a JSONL batch
    for number, line in enumerate(read_lines(args.batch, input_cap(args)), 1):
        if isinstance(line, bytes) and not line.strip():
            continue
        try:
            if not isinstance(line, bytes):
                raise InputError(json.loads(line.record())["error"])
            messages, parameters, variables = _split_input(json.loads(line))
            text, trained = _shown(template, messages, parameters, variables, render_options, tokenizing)
        except Exception as exc:  # noqa: BLE001 - one bad line is reported, the others shown
            failed += 1
            first_error = first_error or number
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            write_stdout(f"#{number} error: {type(exc).__name__}: {first}\n\n")
            continue
        ok += 1
        unmasked += not trained
        write_stdout(f"#{number}\n{text}\n\n")
    # the summary of a JSONL batch (the count of conversations with no assistant token too)
    summary = BatchSummary(ok, failed, time.perf_counter() - started, 1, first_error, tokenized=ok, unmasked=unmasked)
    print(summary.line(), file=sys.stderr)
    return 1 if failed else 0
