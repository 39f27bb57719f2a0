"""``chatjinja analyze TEMPLATE... [--format text|json] [--verify] [-o FILE]``: what each template supports, read statically."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import add_input_cap, TEMPLATE_HELP, json_text, load_template_arg, write_atomic, write_stdout

_YES, _NO = "✓", "✗"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "analyze",
        help="report what a template supports (roles, chunk types, tools, ...) without rendering it",
        description="Statically analyse chat templates: roles, content chunk types, tool features, raise sites, "
        "variables. --verify also renders the capability probes and reports every disagreement (exit 1).",
    )
    parser.add_argument("templates", metavar="TEMPLATE", nargs="+", help=TEMPLATE_HELP)
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    parser.add_argument("--verify", action="store_true", help="also run the dynamic probes and show where they disagree")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE (whole or not at all)")
    add_input_cap(parser)
    parser.set_defaults(run=run)


def _mark(value: bool) -> str:
    return _YES if value else _NO


def _list(values: Any) -> str:
    return ", ".join(values) if values else "-"


def _mode_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else repr(value) if isinstance(value, str) else str(value)


def _text_value(value: Any) -> str:
    if isinstance(value, bool):
        return _mark(value)
    if isinstance(value, list):
        return _list(value)
    return str(value)


def _modes(c: Any, *fields: str) -> str:
    """``  (✓ when enable_thinking=true; thinking=true)``: the value of the fields in the mode variants where it differs."""
    grouped: dict[str, list[str]] = {}
    for name in fields:
        for mode, value in c.when(name):
            label = _text_value(value) if len(fields) == 1 else f"{name.replace('tool_', '').replace('_', ' ')} {_text_value(value)}"
            grouped.setdefault(label, []).append(mode)
    return "".join(f"  ({label} when {'; '.join(modes)})" for label, modes in grouped.items())


def format_text(capabilities: Any, disagreements: list | None = None) -> str:
    c = capabilities
    lines = [c.source_name]
    rows = [
        ("roles", _list(c.roles) + (f"  (also compared: {_list(c.other_roles)})" if c.other_roles else "")
         + _modes(c, "roles")),
        ("string content", _mark(c.content_string) + _modes(c, "content_string")),
        ("chunk types", _list(c.chunk_types) + _modes(c, "chunk_types")),
        ("tools", f"definitions {_mark(c.tool_definitions)}  calls {_mark(c.tool_calls)}  "
                  f"parallel {_mark(c.parallel_tool_calls)}  ids {_mark(c.tool_call_ids)}"
                  + _modes(c, "tool_definitions", "tool_calls", "parallel_tool_calls", "tool_call_ids")),
        ("call arguments", _list(c.tool_call_arguments) + _modes(c, "tool_call_arguments")),
        ("generation prompt", _mark(c.generation_prompt) + _modes(c, "generation_prompt")),
        ("reasoning", _mark(c.reasoning) + _modes(c, "reasoning")),
        ("documents", _mark(c.documents) + _modes(c, "documents")),
        ("alternation", ("required" if c.requires_alternation else "not required") + _modes(c, "requires_alternation")),
        ("modes", ", ".join(f"{m.name} ({'/'.join(_mode_value(v) for v in m.values)})" for m in c.modes) or "-"),
        ("variables", _list(c.variables)),
        ("special tokens", _list(c.special_tokens)),
        ("control tokens", _list(c.control_tokens)),
        ("generation tags", _mark(c.generation_tags)),
        ("strftime_now", _mark(c.uses_strftime_now)),
    ]
    if c.modes_cut:
        rows.append(("modes not looked at", ", ".join(c.modes_cut)))
    width = max(len(name) for name, _ in rows)
    lines += [f"  {name:<{width}}  {value}" for name, value in rows]
    if c.raises:
        lines.append(f"  raises:")
        for site in c.raises:
            message = repr(site.message) if site.message is not None else site.message_source
            guard = f"  if {site.condition}" if site.condition else ""
            lines.append(f"    {site.span.line}:{site.span.column}  {message}{guard}")
    if disagreements is not None:
        if not disagreements:
            lines.append("  verify: static analysis and probe agree on every field")
        for d in disagreements:
            lines.append(f"  DISAGREE {d.field}: static {json.dumps(d.static)} probe {json.dumps(d.probe)}")
            for evidence in d.evidence:
                lines.append(f"    {c.source_name}:{evidence.span.line}:{evidence.span.column}  {evidence.note}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from ..analysis import analyze, disagreements  # lazy: the CLI imports every command to build its parser

    reports = []
    loaded_by: list[str | None] = []
    for name in args.templates:
        template = load_template_arg(name)
        capabilities = analyze(template)
        found = None
        if args.verify:
            from ..probing import probe  # lazy: the CLI imports every command to build its parser

            found = disagreements(capabilities, probe(template))
        reports.append((capabilities, found))
        # a model folder or GGUF: say which template transformers loads and why (chatjinja.loading)
        loaded_by.append(template.origin if template.metadata.get("rule") else None)

    if args.format == "json":
        objects = []
        for capabilities, found in reports:
            report = capabilities.to_dict()
            if found is not None:
                report["verify"] = [
                    {"field": d.field, "static": d.static, "probe": d.probe, "evidence": [e.to_dict() for e in d.evidence]}
                    for d in found
                ]
            objects.append(report)
        payload = objects[0] if len(objects) == 1 else objects
        text = json_text(payload, indent=2) + "\n"
    else:
        texts = [format_text(c, found) for c, found in reports]
        texts = [t if why is None else t.replace("\n", f"\n  loaded             {why}\n", 1) for t, why in zip(texts, loaded_by)]
        text = "\n".join(texts)
    if args.output:
        write_atomic(args.output, text)
    else:
        write_stdout(text)
    return 1 if any(found for _, found in reports) else 0
