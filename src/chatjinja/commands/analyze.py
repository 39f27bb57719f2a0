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


def format_text(capabilities: Any, disagreements: list | None = None) -> str:
    c = capabilities
    lines = [c.source_name]
    rows = [
        ("roles", _list(c.roles) + (f"  (also compared: {_list(c.other_roles)})" if c.other_roles else "")),
        ("string content", _mark(c.content_string)),
        ("chunk types", _list(c.chunk_types)),
        ("tools", f"definitions {_mark(c.tool_definitions)}  calls {_mark(c.tool_calls)}  "
                  f"parallel {_mark(c.parallel_tool_calls)}  ids {_mark(c.tool_call_ids)}"),
        ("call arguments", _list(c.tool_call_arguments)),
        ("generation prompt", _mark(c.generation_prompt)),
        ("reasoning", _mark(c.reasoning)),
        ("documents", _mark(c.documents)),
        ("alternation", "required" if c.requires_alternation else "not required"),
        ("variables", _list(c.variables)),
        ("special tokens", _list(c.special_tokens)),
        ("control tokens", _list(c.control_tokens)),
        ("generation tags", _mark(c.generation_tags)),
        ("strftime_now", _mark(c.uses_strftime_now)),
    ]
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
