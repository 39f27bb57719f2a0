"""``check_model``: lint and probe every template a model folder or GGUF holds, and cross-check the folder's files.

Folder findings (codes ``MF``, next to the linter's own codes):

* ``MF001`` (warning) a template in one file is shadowed by a *different* template in another
  (``chat_template.jinja`` vs ``tokenizer_config.json``): transformers loads one, readers see the other.
* ``MF002`` (note) the shadowed copy is identical: redundant, but harmless.
* ``MF003`` (warning) ``AutoTokenizer`` and ``AutoProcessor`` load different templates (``chat_template.json``).
* ``MF004`` (warning) the template reads a ``*_token`` variable the folder does not define: it renders empty.
* ``MF005`` (warning) ``tokenizer_config.json`` and ``special_tokens_map.json`` disagree on a token (the map wins).
* ``MF006`` (error) no template transformers can choose without a name (a named set with no ``default``;
  ``tool_use`` only renders when tools are given).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TemplateNotFound
from ..loading.folder import SPECIAL_TOKENS_MAP_FILE, TOKENIZER_CONFIG_FILE, read_json_file, scan_model_folder
from ..loading.gguf_file import is_gguf_file, scan_gguf
from ..loading.selection import TemplateEntry, TemplateSet
from ..loading.special_tokens import NAMED_SPECIAL_TOKENS

__all__ = ["CheckFinding", "CheckedTemplate", "ModelCheck", "check_model", "check_sarif", "FOLDER_RULES", "SEVERITIES"]

SEVERITIES = ("note", "warning", "error")

# code, kebab-case name, severity, summary, why (the module docstring has the long form)
FOLDER_RULES = (
    ("MF001", "shadowed-template", "warning", "A template is shadowed by a different one in another file",
     "Readers and other tools see a template transformers never loads."),
    ("MF002", "duplicate-template", "note", "A shadowed copy of a template is identical to the loaded one",
     "Two copies drift apart at the next edit."),
    ("MF003", "processor-tokenizer-disagree", "warning", "AutoTokenizer and AutoProcessor load different templates",
     "The same model renders different prompts depending on how it is loaded."),
    ("MF004", "undefined-special-token", "warning", "The template reads a *_token variable the folder does not define",
     "An undefined token renders as an empty string: the prompt silently loses it."),
    ("MF005", "special-token-disagreement", "warning", "tokenizer_config.json and special_tokens_map.json disagree on a token",
     "special_tokens_map.json wins in transformers; the config misleads its readers."),
    ("MF006", "no-default-template", "error", "A named set of templates has no default",
     "transformers raises unless a template name (or tools, for tool_use) is passed."),
)


@dataclass(frozen=True)
class CheckFinding:
    code: str
    severity: str
    message: str
    path: str
    line: int | None = None
    column: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "message": self.message, "path": self.path,
                "line": self.line, "column": self.column}


@dataclass(frozen=True)
class CheckedTemplate:
    name: str
    where: str
    used: bool  # transformers (or llama.cpp, for GGUF named templates) loads it
    capabilities: str | None = None  # one-line summary of the probed facts
    tokens_read: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "where": self.where, "used": self.used, "capabilities": self.capabilities,
                "tokens_read": list(self.tokens_read)}


@dataclass(frozen=True)
class ModelCheck:
    location: str
    rule: str
    templates: tuple[CheckedTemplate, ...]
    special_tokens: dict[str, str]
    findings: tuple[CheckFinding, ...]
    notes: tuple[str, ...] = field(default=())

    def worst(self) -> str | None:
        levels = [SEVERITIES.index(f.severity) for f in self.findings]
        return SEVERITIES[max(levels)] if levels else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "rule": self.rule,
            "templates": [t.to_dict() for t in self.templates],
            "special_tokens": dict(self.special_tokens),
            "findings": [f.to_dict() for f in self.findings],
            "notes": list(self.notes),
        }


def _tokens_read(source: str) -> tuple[str, ...]:
    """The ``*_token`` variables a template reads from its context (jinja2's own undeclared-variable walk)."""
    import jinja2.meta

    from ..runtime.environment import default_environment

    try:
        names = jinja2.meta.find_undeclared_variables(default_environment().parse(source))
    except Exception:  # noqa: BLE001 - a template that does not parse is reported by lint
        return ()
    return tuple(sorted(n for n in names if n.endswith("_token")))


def _summary(source: str) -> str | None:
    try:
        from ..probe import probe

        caps = probe(source)
    except Exception:  # noqa: BLE001
        return None
    parts = [f"roles {'/'.join(caps.roles) or 'none'}"]
    for name, label in (("tool_definitions", "tools"), ("tool_calls", "tool calls"), ("parallel_tool_calls", "parallel calls"),
                        ("reasoning", "reasoning"), ("documents", "documents"), ("generation_prompt", "generation prompt")):
        if getattr(caps, name):
            parts.append(label)
    if caps.tool_call_arguments:
        parts.append(f"arguments {'/'.join(caps.tool_call_arguments)}")
    if caps.chunk_types:
        parts.append(f"chunks {'/'.join(caps.chunk_types)}")
    if caps.requires_alternation:
        parts.append("requires alternation")
    return ", ".join(parts)


def _lint_findings(entry: TemplateEntry, add_bos_token: bool | None) -> list[CheckFinding]:
    try:
        from ..lint import lint
    except ImportError:
        return []
    return [
        CheckFinding(d.code, d.severity, d.message, entry.where, d.span.line, d.span.column)
        for d in lint(entry.source, name=entry.where, add_bos_token=add_bos_token)
    ]


def _shadow_findings(tset: TemplateSet) -> list[CheckFinding]:
    found = []
    used = {e.name: e for e in tset.templates.values()}
    for shadow in tset.shadowed:
        winner = used.get(shadow.name)
        processor = shadow.file.name == "chat_template.json" or "processor" in tset.rule
        if winner is None:
            message = (f"template {shadow.name!r} in {shadow.where} is never loaded: transformers takes the "
                       f"{'/'.join(sorted(used)) or 'other'} template(s) from {', '.join(sorted({str(e.file.name) for e in used.values()}))}")
            found.append(CheckFinding("MF001", "warning", message, shadow.where))
        elif winner.source == shadow.source:
            found.append(CheckFinding("MF002", "note", f"{shadow.where} repeats {winner.where} (identical; transformers reads {winner.file.name})", shadow.where))
        elif processor and shadow.file.name == "chat_template.json":
            found.append(CheckFinding(
                "MF003", "warning",
                f"AutoTokenizer uses {winner.where} but AutoProcessor uses {shadow.where}, and they differ",
                shadow.where,
            ))
        else:
            found.append(CheckFinding(
                "MF001", "warning",
                f"{shadow.where} differs from {winner.where}, which transformers loads instead ({tset.rule})",
                shadow.where,
            ))
    return found


def _token_map_findings(folder: Path) -> list[CheckFinding]:
    config_file, map_file = folder / TOKENIZER_CONFIG_FILE, folder / SPECIAL_TOKENS_MAP_FILE
    if not (config_file.is_file() and map_file.is_file()):
        return []
    config, tokens_map = read_json_file(config_file), read_json_file(map_file)
    if "added_tokens_decoder" in config:
        return []  # transformers does not read the map then

    def content(value: Any) -> Any:
        return value.get("content") if isinstance(value, dict) else value

    found = []
    for key in NAMED_SPECIAL_TOKENS:
        if key in config and key in tokens_map and content(config[key]) != content(tokens_map[key]):
            found.append(CheckFinding(
                "MF005", "warning",
                f"{key} is {content(config[key])!r} in {TOKENIZER_CONFIG_FILE} but {content(tokens_map[key])!r} in "
                f"{SPECIAL_TOKENS_MAP_FILE}; transformers uses {content(tokens_map[key])!r}",
                str(map_file),
            ))
    return found


def check_model(path: str | Path, rules: str = "auto") -> ModelCheck:
    """Lint and probe every template in a model folder (or GGUF file) and cross-check the folder's files."""
    path = Path(path)
    if path.is_file() and is_gguf_file(path):
        tset = scan_gguf(path)
    elif path.is_dir():
        tset = scan_model_folder(path, rules)
    else:
        raise TemplateNotFound(f"{path} is not a model folder or GGUF file", source_name=str(path))
    if not tset.templates and not tset.shadowed:
        raise TemplateNotFound(f"no chat template in {path}", source_name=str(path))

    add_bos = tset.metadata.get("add_bos_token")
    findings: list[CheckFinding] = []
    checked: list[CheckedTemplate] = []
    for entry, used in [*((e, True) for e in tset.templates.values()), *((e, False) for e in tset.shadowed)]:
        tokens = _tokens_read(entry.source)
        checked.append(CheckedTemplate(entry.name, entry.where, used, _summary(entry.source), tokens))
        findings.extend(_lint_findings(entry, add_bos))
        if used:
            for token in tokens:
                if token not in tset.special_tokens:
                    findings.append(CheckFinding(
                        "MF004", "warning",
                        f"the template reads {token}, which {path.name} does not define: it renders as an empty string",
                        entry.where,
                    ))
    findings.extend(_shadow_findings(tset))
    if path.is_dir():
        findings.extend(_token_map_findings(path))
    if tset.templates and tset.named and "default" not in tset.templates:
        names = sorted(tset.templates)
        if "tool_use" in names:
            message = f"no 'default' template ({names}): transformers renders only when tools are given and raises otherwise"
        else:
            message = f"no 'default' template ({names}): transformers raises unless a template name is passed"
        findings.append(CheckFinding("MF006", "error", message, str(path)))
    notes = list(tset.notes)
    try:
        import chatjinja.lint  # noqa: F401
    except ImportError:
        notes.append("linter not available: templates were not linted")
    return ModelCheck(str(path), tset.rule, tuple(checked), dict(tset.special_tokens), tuple(findings), tuple(notes))


def check_json(check: ModelCheck) -> str:
    return json.dumps(check.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _folder_rule(code: str, name: str, severity: str, summary: str, why: str) -> Any:
    from ..lint.rule import Rule

    doc = (f"## What it does\n\n{summary}.\n\n## Why is this bad?\n\n{why}\n\n## Example\n\nSee `chatjinja check`.\n\n"
           "## Use instead\n\nKeep one template per name, and define every special token it reads.\n\n## Fix safety\n\nNo fix.\n")
    return Rule(code, name, severity, summary, doc, lambda model: iter(()))


def check_sarif(check: ModelCheck) -> str:
    """The findings as SARIF 2.1.0 (lint rules and the ``MF`` folder rules); ``file#key`` locations point at ``file``."""
    from .. import __version__
    from ..lint import Diagnostic, all_rules
    from ..report.sarif import render
    from ..source import Span

    rules = [*all_rules(), *(_folder_rule(*row) for row in FOLDER_RULES)]
    names = {rule.code: rule.name for rule in rules}
    diagnostics = []
    for f in check.findings:
        line, column = f.line or 1, f.column or 1
        span = Span(line, column, line, column, 0, 0)
        path = f.path.split("#", 1)[0]
        diagnostics.append(Diagnostic(f.code, names.get(f.code, f.code.lower()), f.severity, f.message, span, path))
    return render(diagnostics, rules=rules, tool_version=__version__)
