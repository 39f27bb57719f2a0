"""``chatjinja rules [CODE]``: list every code chatjinja reports (lint rules, check's MF, RP and TR codes), or print one's documentation."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import UsageError, write_stdout


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("rules", help="list the lint rules and check's folder codes, or show one's documentation",
                                   description="List every code chatjinja reports (code, name, severity, summary): the "
                                   "lint rules, then the MF codes of 'chatjinja check'; or print the documentation of one "
                                   "given by code or name.")
    parser.add_argument("rule", metavar="CODE", nargs="?", help="a rule code (WS001, MF001) or name (leaked-whitespace)")
    parser.add_argument("--json", action="store_true", help="print the rules as JSON")
    parser.set_defaults(run=run)


def _registry() -> Any:
    """``chatjinja.lint.registry``, imported on first use."""
    from ..lint import registry  # lazy: the CLI imports every command to build its parser; the registry loads Lark and the linter

    return registry


def _reported_by(rule) -> str:
    return "lint" if rule in _registry().all_rules() else "check"


def rule_page(rule) -> str:
    """One rule's documentation as Markdown (also what docs/rules/<CODE>.md holds)."""
    fix = "yes" if rule.fixable else "no"
    if _reported_by(rule) == "lint":
        by = ""
    elif rule.code.startswith("RP"):  # a round trip through renders and transformers' parser, not static
        by = (" Reported by `chatjinja check` on each template it loads (it renders the template; needs"
              " `chatjinja[parse]`), never by `chatjinja lint`.")
    elif rule.code.startswith("TR"):  # measured by rendering conversations, not static
        by = (" Reported by `chatjinja check` on each template it loads (it renders the template), never by"
              " `chatjinja lint`.")
    else:
        by = " Reported by `chatjinja check` (a model folder's own finding)."
    return (f"# {rule.code} {rule.name}\n\n{rule.summary}.\n\nSeverity: {rule.severity}. Fix available: {fix}."
            f"{' Security rule (selected by --select SC).' if rule.security else ''}{by}{_engines(rule)}"
            f"\n\n{rule.doc.rstrip()}\n")


def _engines(rule) -> str:
    if not rule.engines:
        return ""
    return (f" Portability rule, off by default (selected by --select PT); engines it affects: "
            f"{', '.join(rule.engines)}.")


def run(args: argparse.Namespace) -> int:
    if args.rule:
        rule = _registry().get_rule(args.rule, listed=True)
        if rule is None:
            raise UsageError(f"no rule {args.rule!r} (see 'chatjinja rules')")
        if args.json:
            write_stdout(json.dumps(_as_dict(rule), indent=2, ensure_ascii=False) + "\n")
        else:
            write_stdout(rule_page(rule))
        return 0
    rules = _registry().listed_rules()
    if args.json:
        write_stdout(json.dumps([_as_dict(r) for r in rules], indent=2, ensure_ascii=False) + "\n")
        return 0
    lines = [f"{r.code}  {r.name:<30} {r.severity:<8} {'fix ' if r.fixable else '    '}{r.summary}" for r in rules]
    write_stdout("\n".join(lines) + "\n")
    return 0


def _as_dict(rule) -> dict:
    return {"code": rule.code, "name": rule.name, "severity": rule.severity, "summary": rule.summary,
            "fixable": rule.fixable, "security": rule.security, "reported_by": _reported_by(rule), "doc": rule.doc}
