"""``check_model``: lint and probe every template a model folder or GGUF holds, and cross-check the folder's files.

Besides the linter's findings it reports the folder's own, the ``MF`` codes of ``FOLDER_RULES`` (one row
each: code, name, severity, summary and the documentation ``chatjinja rules MF001`` prints and
``docs/rules/MF001.md`` holds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..analysis import analyze
from ..errors import TemplateNotFound
from ..lint import Diagnostic, lint
from ..lint.registry import listed_rules
from ..lint.rule import Rule
from ..loading.folder import SPECIAL_TOKENS_MAP_FILE, TOKENIZER_CONFIG_FILE, read_json_file, scan_model_folder
from ..loading.gguf_file import is_gguf_file, scan_gguf
from ..loading.selection import TemplateEntry, TemplateSet
from ..loading.special_tokens import NAMED_SPECIAL_TOKENS
from ..report import render_report
from ..serving.library import ParseExtraMissing
from ..serving.rules import REPLY_RULES
from ..training.rules import TRAINING_RULES
from ..source import Span
from ..version import __version__
from .diff import capability_changes, static_fact_changes

__all__ = ["CheckFinding", "CheckedTemplate", "ModelCheck", "check_model", "check_github", "check_json", "check_sarif", "FOLDER_RULES", "SEVERITIES"]

SEVERITIES = ("note", "warning", "error")

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


# The template the examples use: it reads eos_token and nothing the linter objects to.
_T = ("{%- for m in messages %}{{- m['role'] + ': ' }}{%- if m['content'] is string %}{{- m['content'] }}"
      "{%- endif %}{{- eos_token }}{%- endfor %}{%- if add_generation_prompt %}{{- 'assistant: ' }}{%- endif %}")
_T_OTHER = _T.replace("': '", "'> '")


def _files(*pairs: str) -> str:
    """A model folder as Markdown: each file's name, then its text in a fenced block (docs are executed by tests)."""
    blocks = []
    for name, text in zip(pairs[::2], pairs[1::2]):
        fence = "json" if name.endswith(".json") else "jinja"
        blocks.append(f"`{name}`:\n```{fence}\n{text}\n```")
    return "\n\n".join(blocks)


def _config(**keys: Any) -> str:
    return json.dumps(keys, ensure_ascii=False)


_ONE_TEMPLATE = _files("chat_template.jinja", _T, "tokenizer_config.json", _config(eos_token="</s>"))
_NO_FIX = "No fix: which copy is right is the publisher's decision."


def _doc(what: str, why: str, example: str, use_instead: str, fix: str = _NO_FIX) -> str:
    return (f"## What it does\n{what}\n\n## Why is this bad?\n{why}\n\n## Example\n{example}\n\n"
            f"## Use instead\n{use_instead}\n\n## Fix safety\n{fix}\n")


def _no_template_check(model: Any) -> Iterator[Any]:
    """Folder rules look at a model folder, not at one template: ``check_model`` reports them, ``lint`` never runs them."""
    return iter(())


def _folder_rule(code: str, name: str, severity: str, summary: str, doc: str) -> Rule:
    return Rule(code, name, severity, summary, doc, _no_template_check)


# The one table of the codes ``check`` adds to the linter's (chatjinja.lint.registry lists both; codes are never reused).
FOLDER_RULES: tuple[Rule, ...] = (
    _folder_rule("MF001", "shadowed-template", "warning", "A template is shadowed by a different one in another file", _doc(
        "Finds a chat template that transformers never loads because a *different* template in another file of the\n"
        "folder wins: `chat_template.jinja` and `additional_chat_templates/*.jinja` replace `tokenizer_config.json`'s\n"
        "`chat_template` (the tokenizer rule), and `chat_template.json` wins for `AutoProcessor` (the processor rule).",
        "Readers and other tools see a template transformers never renders, and an edit to the shadowed copy changes\n"
        "nothing.",
        _files("chat_template.jinja", _T, "tokenizer_config.json", _config(eos_token="</s>", chat_template=_T_OTHER)),
        "Keep the template in one file (here `chat_template.jinja`) and delete the other copy:\n\n" + _ONE_TEMPLATE)),
    _folder_rule("MF002", "duplicate-template", "note", "A shadowed copy of a template is identical to the loaded one", _doc(
        "Finds a chat template stored twice with the same text (`chat_template.jinja` and `tokenizer_config.json`'s\n"
        "`chat_template`): transformers reads one copy, the other is redundant.",
        "Two copies drift apart at the next edit, and then the folder has a shadowed template (MF001).",
        _files("chat_template.jinja", _T, "tokenizer_config.json", _config(eos_token="</s>", chat_template=_T)),
        "Keep one copy:\n\n" + _ONE_TEMPLATE)),
    _folder_rule("MF003", "processor-tokenizer-disagree", "warning", "AutoTokenizer and AutoProcessor load different templates", _doc(
        "Finds a `chat_template.json` (read by `AutoProcessor`) whose template differs from the one `AutoTokenizer`\n"
        "loads (`chat_template.jinja` or `tokenizer_config.json`).",
        "The same model renders different prompts depending on how it is loaded.",
        _files("chat_template.jinja", _T, "chat_template.json", _config(chat_template=_T_OTHER),
               "tokenizer_config.json", _config(eos_token="</s>")),
        "One template for both (transformers reads `chat_template.jinja` for the processor too when there is no\n"
        "`chat_template.json`):\n\n" + _ONE_TEMPLATE)),
    _folder_rule("MF004", "undefined-special-token", "warning", "The template reads a *_token variable the folder does not define", _doc(
        "Finds a `*_token` variable (`bos_token`, `eos_token`, ...) the loaded template reads but the folder (or the\n"
        "GGUF file) does not define, so transformers does not pass it.",
        "An undefined token renders as an empty string: the prompt silently loses it (no error is raised).",
        _files("chat_template.jinja", _T, "tokenizer_config.json", _config(bos_token="<s>")),
        "Define every token the template reads:\n\n" + _ONE_TEMPLATE,
        "No fix: only the publisher knows the token's text.")),
    _folder_rule("MF005", "special-token-disagreement", "warning", "tokenizer_config.json and special_tokens_map.json disagree on a token", _doc(
        "Finds a special token that `tokenizer_config.json` and `special_tokens_map.json` give different texts (when\n"
        "the config has no `added_tokens_decoder`, transformers then takes the map's).",
        "`special_tokens_map.json` wins in transformers; the config misleads whoever reads it.",
        _files("chat_template.jinja", _T, "tokenizer_config.json", _config(eos_token="<|end|>"),
               "special_tokens_map.json", _config(eos_token={"content": "</s>"})),
        "Give the token the same text in both files:\n\n" + _files(
            "chat_template.jinja", _T, "tokenizer_config.json", _config(eos_token="</s>"),
            "special_tokens_map.json", _config(eos_token={"content": "</s>"})))),
    _folder_rule("MF006", "no-default-template", "error", "A named set of templates has no default", _doc(
        "Finds a folder whose templates all have names (`additional_chat_templates/*.jinja`, or a list in\n"
        "`tokenizer_config.json`) and none is called `default`: transformers cannot choose one without a name\n"
        "(`tool_use` is chosen only when tools are given).",
        "`apply_chat_template` raises unless a template name (or tools, for `tool_use`) is passed.",
        _files("additional_chat_templates/tool_use.jinja", _T, "tokenizer_config.json", _config(eos_token="</s>")),
        "Give the set a default (`chat_template.jinja` is the `default` template):\n\n" + _files(
            "chat_template.jinja", _T, "additional_chat_templates/tool_use.jinja", _T,
            "tokenizer_config.json", _config(eos_token="</s>")),
        "No fix: which template is the default is the publisher's decision.")),
)
_SEVERITY = {rule.code: rule.severity for rule in FOLDER_RULES}


def _finding(code: str, message: str, path: str) -> CheckFinding:
    """A folder finding, at the severity its row in ``FOLDER_RULES`` gives."""
    return CheckFinding(code, _SEVERITY[code], message, path)


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
    from ..runtime.environment import undeclared_variables  # lazy: `chatjinja rules` imports this module for FOLDER_RULES and must not load jinja2

    try:
        names = undeclared_variables(source)
    except Exception:  # noqa: BLE001 - a template that does not parse is reported by lint
        return ()
    return tuple(sorted(n for n in names if n.endswith("_token")))


def _facts(source: str) -> tuple[Any, Any]:
    """(probed capabilities, the analyser's facts) of a template; ``None`` for what cannot be had (lint says why)."""
    from ..probing import probe  # lazy: `chatjinja rules` imports this module for FOLDER_RULES and must not load jinja2

    try:
        probed = probe(source)
    except Exception:  # noqa: BLE001 - a template that does not parse or render is reported by lint
        probed = None
    try:
        static = analyze(source)
    except Exception:  # noqa: BLE001
        static = None
    return probed, static


def _summary(source: str) -> str | None:
    caps, static = _facts(source)
    if caps is None:
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
    if static is not None and static.generation_tags:
        parts.append("{% generation %} tags")
    if static is not None and static.uses_strftime_now:
        parts.append("strftime_now")
    labels = {"tool_definitions": "tools", "tool_calls": "tool calls", "parallel_tool_calls": "parallel calls",
              "reasoning": "reasoning", "documents": "documents", "generation_prompt": "generation prompt",
              "requires_alternation": "requires alternation"}
    for mode in caps.in_modes:  # what changes in a mode variant: "reasoning when thinking=true"
        for name, value in mode.facts.items():
            if name in labels and isinstance(value, bool):
                parts.append(f"{'' if value else 'no '}{labels[name]} when {mode.name}")
            elif isinstance(value, list):
                parts.append(f"{name.replace('_', ' ')} {'/'.join(value) or 'none'} when {mode.name}")
    return ", ".join(parts)


def _differences(shadow: TemplateEntry, loaded: TemplateEntry) -> str:
    """What the loaded template does differently from the shadowed one readers see (diff's words), or ``""``."""
    (shadow_caps, shadow_static), (loaded_caps, loaded_static) = _facts(shadow.source), _facts(loaded.source)
    changes = []
    if shadow_caps is not None and loaded_caps is not None:
        changes += capability_changes(shadow_caps, loaded_caps)
    if shadow_static is not None and loaded_static is not None:
        changes += static_fact_changes(shadow_static, loaded_static)
    if not changes:
        return ""
    return "; the loaded one " + "; ".join(change.message for change in changes)


def _lint_findings(entry: TemplateEntry, add_bos_token: bool | None) -> list[CheckFinding]:
    return [
        CheckFinding(d.code, d.severity, d.message, entry.where, d.span.line, d.span.column)
        for d in lint(entry.source, name=entry.where, add_bos_token=add_bos_token)
    ]


def _reply_findings(entry: TemplateEntry, notes: list[str]) -> list[CheckFinding]:
    """RP: replies the template writes that its derived response template cannot read back (chatjinja.serving.rules)."""
    from ..serving.derive import reply_problems  # lazy: `chatjinja rules` imports this module for FOLDER_RULES and must not load jinja2

    severity = {rule.code: rule.severity for rule in REPLY_RULES}
    try:
        problems = reply_problems(entry.source)
    except ParseExtraMissing:
        note = "transformers not installed (chatjinja[parse]): replies were not checked (RP)"
        if note not in notes:
            notes.append(note)
        return []
    return [CheckFinding(code, severity[code], message, entry.where) for code, message in problems]


def _training_findings(entry: TemplateEntry, special_tokens: dict[str, str], tokenizer: Path | None) -> list[CheckFinding]:
    """TR: properties trainers check (prefix-preserving, end of turn and only the assistant in the mask; chatjinja.training.rules)."""
    from ..training.properties import property_problems  # lazy: `chatjinja rules` imports this module for FOLDER_RULES and must not load jinja2

    severity = {rule.code: rule.severity for rule in TRAINING_RULES}
    variables = {key: value for key, value in special_tokens.items() if isinstance(value, str)}  # as transformers renders
    return [CheckFinding(code, severity[code], message, entry.where) for code, message in property_problems(entry.source, variables, tokenizer)]


def _shadow_findings(tset: TemplateSet) -> list[CheckFinding]:
    found = []
    used = {e.name: e for e in tset.templates.values()}
    for shadow in tset.shadowed:
        winner = used.get(shadow.name)
        processor = shadow.file.name == "chat_template.json" or "processor" in tset.rule
        if winner is None:
            message = (f"template {shadow.name!r} in {shadow.where} is never loaded: transformers takes the "
                       f"{'/'.join(sorted(used)) or 'other'} template(s) from {', '.join(sorted({str(e.file.name) for e in used.values()}))}")
            found.append(_finding("MF001", message, shadow.where))
        elif winner.source == shadow.source:
            message = f"{shadow.where} repeats {winner.where} (identical; transformers reads {winner.file.name})"
            found.append(_finding("MF002", message, shadow.where))
        elif processor and shadow.file.name == "chat_template.json":
            message = (f"AutoTokenizer uses {winner.where} but AutoProcessor uses {shadow.where}, and they differ"
                       + _differences(shadow, winner))
            found.append(_finding("MF003", message, shadow.where))
        else:
            message = (f"{shadow.where} differs from {winner.where}, which transformers loads instead ({tset.rule})"
                       + _differences(shadow, winner))
            found.append(_finding("MF001", message, shadow.where))
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
            message = (f"{key} is {content(config[key])!r} in {TOKENIZER_CONFIG_FILE} but {content(tokens_map[key])!r} in "
                       f"{SPECIAL_TOKENS_MAP_FILE}; transformers uses {content(tokens_map[key])!r}")
            found.append(_finding("MF005", message, str(map_file)))
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
    notes = list(tset.notes)
    checked: list[CheckedTemplate] = []
    for entry, used in [*((e, True) for e in tset.templates.values()), *((e, False) for e in tset.shadowed)]:
        tokens = _tokens_read(entry.source)
        checked.append(CheckedTemplate(entry.name, entry.where, used, _summary(entry.source), tokens))
        findings.extend(_lint_findings(entry, add_bos))
        if used:
            findings.extend(_reply_findings(entry, notes))
            tokenizer = path if path.is_dir() and (path / "tokenizer.json").is_file() else None
            findings.extend(_training_findings(entry, dict(tset.special_tokens), tokenizer))
            for token in tokens:
                if token not in tset.special_tokens:
                    message = f"the template reads {token}, which {path.name} does not define: it renders as an empty string"
                    findings.append(_finding("MF004", message, entry.where))
    findings.extend(_shadow_findings(tset))
    if path.is_dir():
        findings.extend(_token_map_findings(path))
    if tset.templates and tset.named and "default" not in tset.templates:
        names = sorted(tset.templates)
        if "tool_use" in names:
            message = f"no 'default' template ({names}): transformers renders only when tools are given and raises otherwise"
        else:
            message = f"no 'default' template ({names}): transformers raises unless a template name is passed"
        findings.append(_finding("MF006", message, str(path)))
    return ModelCheck(str(path), tset.rule, tuple(checked), dict(tset.special_tokens), tuple(findings), tuple(notes))


def check_json(check: ModelCheck) -> str:
    return json.dumps(check.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _diagnostics(check: ModelCheck) -> list[Any]:
    """The findings as lint ``Diagnostic``s (``file#key`` locations point at ``file``; a finding with no line is at 1:1)."""
    names = {rule.code: rule.name for rule in listed_rules()}
    diagnostics = []
    for f in check.findings:
        line, column = f.line or 1, f.column or 1
        span = Span(line, column, line, column, 0, 0)
        path = f.path.split("#", 1)[0]
        diagnostics.append(Diagnostic(f.code, names.get(f.code, f.code.lower()), f.severity, f.message, span, path))
    return diagnostics


def check_sarif(check: ModelCheck) -> str:
    """The findings as SARIF 2.1.0 (lint rules and the ``MF`` folder rules)."""
    document = json.loads(render_report("sarif", _diagnostics(check), rules=listed_rules(), tool_version=__version__))
    # the facts of each template checked (in every mode: "reasoning when thinking=true"), as the run's properties
    document["runs"][0]["properties"] = {"templates": [t.to_dict() for t in check.templates]}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def check_github(check: ModelCheck) -> str:
    """The findings as GitHub Actions workflow commands (``::warning file=...,line=...::MF004 ...``), as ``lint`` writes them."""
    return render_report("github", _diagnostics(check), rules=())
