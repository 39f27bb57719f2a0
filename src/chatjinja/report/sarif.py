"""SARIF 2.1.0 report: one run, every rule with descriptions and help, results with 1-based code-point columns."""

from __future__ import annotations

import json
from typing import Sequence
from urllib.parse import quote

from ..lint.diagnostic import Diagnostic
from ..lint.rule import Rule

__all__ = ["render", "to_document"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/chatjinja/chatjinja"


def _uri(path: str) -> str:
    return quote(path.replace("\\", "/"), safe="/:@-._~!$&'()*+,;=")


def _rule_descriptor(rule: Rule) -> dict:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.section("What it does")},
        "help": {"text": rule.section("Why is this bad?"), "markdown": rule.doc},
        "defaultConfiguration": {"level": rule.severity},
        "properties": _rule_properties(rule),
    }


def _rule_properties(rule: Rule) -> dict:
    if rule.engines:  # a portability rule: the engines its divergence class affects
        return {"tags": ["portability"], "engines": list(rule.engines)}
    return {"tags": ["security"] if rule.security else ["correctness"]}


def _result(d: Diagnostic, index: dict[str, int]) -> dict:
    region = {
        "startLine": d.span.line,
        "startColumn": d.span.column,
        "endLine": d.span.end_line,
        "endColumn": max(d.span.end_column, 1),
        "charOffset": d.span.start,
        "charLength": d.span.end - d.span.start,
    }
    result = {
        "ruleId": d.code,
        "level": d.severity,
        "message": {"text": d.message},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(d.path)}, "region": region}}],
    }
    if d.code in index:
        result["ruleIndex"] = index[d.code]
    if d.engines:
        result["properties"] = {"engines": list(d.engines)}
    if d.fix is not None:
        result["fixes"] = [
            {
                "description": {"text": d.fix.title},
                "artifactChanges": [
                    {
                        "artifactLocation": {"uri": _uri(d.path)},
                        "replacements": [
                            {"deletedRegion": {"charOffset": e.start, "charLength": e.end - e.start},
                             "insertedContent": {"text": e.text}}
                            for e in d.fix.edits
                        ],
                    }
                ],
            }
        ]
    return result


def to_document(diagnostics: Sequence[Diagnostic], *, rules: Sequence[Rule], tool_version: str = "") -> dict:
    index = {rule.code: i for i, rule in enumerate(rules)}
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "chatjinja",
                        "version": tool_version or "0",
                        "informationUri": INFORMATION_URI,
                        "rules": [_rule_descriptor(r) for r in rules],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": [_result(d, index) for d in diagnostics],
            }
        ],
    }


def render(diagnostics: Sequence[Diagnostic], *, rules: Sequence[Rule], tool_version: str = "") -> str:
    return json.dumps(to_document(diagnostics, rules=rules, tool_version=tool_version), indent=2, ensure_ascii=False) + "\n"
