"""The runner: scan a template once, build the model, run the selected rules, apply suppressions."""

from __future__ import annotations

from typing import Iterable

from ..source import Source
from .config import LintConfig
from .diagnostic import Diagnostic
from .lexer import ScanError
from .model import TemplateModel
from .registry import get_rule, known_selector, matches, select_rules
from .rule import Rule
from .suppression import find_suppressions

__all__ = ["lint", "lint_source"]

_SYNTAX = "LN002"
_UNUSED = "LN001"


def lint(
    source: str | Source,
    *,
    name: str | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    config: LintConfig | None = None,
    add_bos_token: bool | None = None,
    capabilities=None,
    analyze: bool = False,
) -> list[Diagnostic]:
    """Lint one template's text; diagnostics are sorted by position.

    ``select``/``ignore`` take codes, code prefixes (``"SC"``) or rule names and override the
    configuration's. ``add_bos_token`` is the tokenizer's setting when known (``TK001`` then warns).
    ``capabilities`` (``chatjinja.analyze(text)``, when the caller has it) lets rules read the
    analyser's facts; ``analyze=True`` runs the analyser here (slower: it parses the template).
    """
    if isinstance(source, str):
        source = Source(source, name or "<string>")
    elif name is not None:
        source = Source(source.text, name)
    config = config or LintConfig()
    chosen_select = list(select) if select is not None else (list(config.select) if config.select is not None else None)
    chosen_ignore = list(ignore or ()) + list(config.ignores_for(_path_of(source.name)))
    rules = select_rules(chosen_select, chosen_ignore)
    if capabilities is None and analyze:
        capabilities = _capabilities(source)
    syntax_rule = get_rule(_SYNTAX)
    report_syntax = not any(matches(s, syntax_rule) for s in chosen_ignore if s.upper() != "ALL")
    return _run(source, rules, config, add_bos_token, capabilities, report_syntax)


def _capabilities(source: Source):
    """The analyser's facts, or None when it cannot parse the template (LN002 or the lexical rules then speak)."""
    from ..analysis import analyze
    from ..errors import ChatJinjaError

    try:
        return analyze(source)
    except (ChatJinjaError, RecursionError, ValueError):
        return None


def lint_source(source: Source, rules: tuple[Rule, ...], config: LintConfig | None = None,
                add_bos_token: bool | None = None, capabilities=None) -> list[Diagnostic]:
    """Lint with an explicit rule tuple (the CLI resolves selection once)."""
    return _run(source, rules, config or LintConfig(), add_bos_token, capabilities)


def _path_of(name: str) -> str | None:
    return None if name.startswith("<") else name


def _diag(rule: Rule, source: Source, start: int, end: int, message: str, config: LintConfig,
          severity: str | None = None, fix=None) -> Diagnostic:
    span = source.lines.span(start, end)
    level = config.severity_for(rule.code, severity or rule.severity)
    return Diagnostic(rule.code, rule.name, level, message, span, source.name, fix)


def _run(source: Source, rules: tuple[Rule, ...], config: LintConfig, add_bos_token: bool | None,
         capabilities=None, report_syntax: bool = True) -> list[Diagnostic]:
    try:
        model = TemplateModel(source, add_bos_token=add_bos_token, capabilities=capabilities)
    except ScanError as exc:
        if not report_syntax:
            return []
        rule = get_rule(_SYNTAX)
        assert rule is not None
        offset = min(exc.offset, len(source.text))
        return [_diag(rule, source, offset, offset, f"template cannot be read: {exc}", config)]
    found: list[Diagnostic] = []
    for rule in rules:
        if rule.code in (_UNUSED, _SYNTAX):
            continue
        for f in rule.check(model):
            found.append(_diag(rule, source, f.start, f.end, f.message, config, f.severity, f.fix))
    suppressions = find_suppressions(source.text, model.tags, lambda off: source.lines.position(off)[0])
    kept: list[Diagnostic] = []
    for d in found:
        silenced = False
        for s in suppressions:
            listed = s.covers(d.code, d.span.line)
            if listed is not None:
                s.used.add(listed)
                silenced = True
        if not silenced:
            kept.append(d)
    unused_rule = get_rule(_UNUSED)
    selected = {r.code for r in rules}
    if unused_rule is not None and _UNUSED in selected:
        for s in suppressions:
            for code in s.codes:
                if code in s.used:
                    continue
                if not known_selector(code):
                    message = f"suppression names {code!r}, which is not a rule code"
                elif not any(r.code.startswith(code) for r in rules if r.code != _UNUSED):
                    continue  # the rule is not selected in this run: nothing to say about it
                else:
                    scope = "this file" if s.file_wide else f"line {s.line}"
                    message = f"unused suppression: {code} reports nothing on {scope}"
                kept.append(_diag(unused_rule, source, s.tag.start, s.tag.end, message, config))
    kept.sort(key=Diagnostic.sort_key)
    return kept
