"""The runner: parse the template once, walk its AST once dispatching nodes to the selected rules, apply suppressions.

A template the parser rejects gets exactly one ``LN002`` (jinja2's verdict, from the Lark parser
that has accept/reject parity with it); one beyond the static half's source limits
(:mod:`chatjinja.limits`: the renderer's size and nesting budgets, which the parser applies, and the
parsed tree's depth, which the analyser applies too) gets exactly one ``LN003``. No other rule runs on
either. A lint stops at its ``limits.MAX_FINDINGS``-th finding and reports one ``LN003`` where it stopped.
"""

from __future__ import annotations

import gc
from typing import Iterable

from .. import limits
from ..errors import TemplateSyntaxError
from ..limits import StaticLimitExceeded
from ..source import Source
from ..syntax import ast as A
from ..syntax import parse
from ..syntax.eof import last_token_start
from ..syntax.visitor import dispatch_table
from .config import LintConfig
from .context import STATEMENTS, TRACKED, Leave, LintContext
from .diagnostic import Diagnostic, Edit, Fix
from .registry import get_rule, known_selector, matches, select_rules
from .rule import Rule
from .suppression import find_suppressions

__all__ = ["lint", "lint_source"]

_SYNTAX = "LN002"
_UNUSED = "LN001"
_LIMITS = "LN003"
_ALWAYS = (_SYNTAX, _LIMITS)  # reported whatever is selected, unless ignored explicitly


def lint(
    source: str | Source,
    *,
    name: str | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    config: LintConfig | None = None,
    add_bos_token: bool | None = None,
    capabilities=None,
) -> list[Diagnostic]:
    """Lint one template's text; diagnostics are sorted by position.

    ``select``/``ignore`` take codes, code prefixes (``"SC"``) or rule names and override the
    configuration's. ``add_bos_token`` is the tokenizer's setting when known (``TK001`` then warns).
    ``capabilities`` (``chatjinja.analyze(text)``, when the caller has it already) saves the
    analyser's run; otherwise rules that read its facts have the runner compute them.
    """
    if isinstance(source, str):
        source = Source(source, name or "<string>")
    elif name is not None:
        source = Source(source.text, name)
    config = config or LintConfig()
    chosen_select = list(select) if select is not None else (list(config.select) if config.select is not None else None)
    chosen_ignore = list(ignore or ()) + list(config.ignores_for(_path_of(source.name)))
    rules = select_rules(chosen_select, chosen_ignore)
    always = tuple(code for code in _ALWAYS
                   if not any(matches(s, get_rule(code)) for s in chosen_ignore if s.upper() != "ALL"))
    return _run(source, rules, config, add_bos_token, capabilities, always)


def lint_source(source: Source, rules: tuple[Rule, ...], config: LintConfig | None = None,
                add_bos_token: bool | None = None, capabilities=None) -> list[Diagnostic]:
    """Lint with an explicit rule tuple (the CLI resolves selection once)."""
    return _run(source, rules, config or LintConfig(), add_bos_token, capabilities, _ALWAYS)


def _path_of(name: str) -> str | None:
    return None if name.startswith("<") else name


def _diag(rule: Rule, source: Source, start: int, end: int, message: str, config: LintConfig,
          severity: str | None = None, fix=None, engines: tuple[str, ...] = ()) -> Diagnostic:
    span = source.lines.span(start, end)
    level = config.severity_for(rule.code, severity or rule.severity)
    return Diagnostic(rule.code, rule.name, level, message, span, source.name, fix, engines or rule.engines)


def _run(source: Source, rules: tuple[Rule, ...], config: LintConfig, add_bos_token: bool | None,
         capabilities=None, always: tuple[str, ...] = _ALWAYS) -> list[Diagnostic]:
    # A 1 MiB template is hundreds of thousands of tree nodes and diagnostics, none of them garbage until
    # the lint returns: the cyclic collector would walk them all again and again (half the time of a
    # large lint) to free nothing, so it waits until the lint is done.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _lint_tree(source, rules, config, add_bos_token, capabilities, always)
    finally:
        if collecting:
            gc.enable()


def _lint_tree(source: Source, rules: tuple[Rule, ...], config: LintConfig, add_bos_token: bool | None,
               capabilities, always: tuple[str, ...]) -> list[Diagnostic]:
    text = source.text
    try:  # the limits are read when linting, so a test may lower one in chatjinja.limits
        tree = parse(source, max_source_chars=limits.MAX_SOURCE_CHARS, max_source_nesting=limits.MAX_SOURCE_NESTING,
                     max_source_tokens=limits.MAX_SOURCE_TOKENS)
    except StaticLimitExceeded as exc:
        if _LIMITS not in always:
            return []
        offset = min(exc.span.start, len(text)) if exc.span is not None else 0
        return [_diag(get_rule(_LIMITS), source, offset, offset, f"{exc.message}; nothing else was checked", config)]
    except TemplateSyntaxError as exc:
        if _SYNTAX not in always:
            return []
        offset = min(exc.span.start, len(text)) if exc.span is not None else 0
        if offset == len(text):
            offset = last_token_start(text)  # where jinja2's line number for the end of the template points
        return [_diag(get_rule(_SYNTAX), source, offset, offset, exc.message, config)]
    table = _table(rules)
    context = LintContext(source, tree, capabilities, add_bos_token, frozenset(table))
    if context.depth > limits.MAX_TREE_DEPTH:
        if _LIMITS not in always:
            return []
        at = context.deepest.span.start
        message = (f"max_source_nesting exceeded (limit {limits.MAX_SOURCE_NESTING}): the parsed template is more than "
                   f"{limits.MAX_TREE_DEPTH} levels deep here (an operator chain or attribute path); nothing else was checked")
        return [_diag(get_rule(_LIMITS), source, at, at, message, config)]
    found: list[Diagnostic] = []
    add = found.append
    span_of = source.lines.span
    name = source.name
    levels: dict[tuple[str, str | None], str] = {}  # (code, finding's severity) → the configured level
    most = limits.MAX_FINDINGS
    for rule, finding in _dispatch(context, rules, table):
        if len(found) == most:  # one finding past the budget: say where the lint stopped, and stop
            if _LIMITS not in always:
                return _suppress(source, context, rules, config, found, complete=False)
            message = (f"max_findings exceeded (limit {most}): the lint stopped at this finding ({rule.code}); "
                       f"nothing after it was checked")
            found.append(_diag(get_rule(_LIMITS), source, finding.start, finding.start, message, config))
            return _suppress(source, context, rules, config, found, complete=False)
        level = levels.get((rule.code, finding.severity))
        if level is None:
            level = levels[(rule.code, finding.severity)] = config.severity_for(rule.code, finding.severity or rule.severity)
        add(Diagnostic(rule.code, rule.name, level, finding.message, span_of(finding.start, finding.end), name,
                       finding.fix, finding.engines or rule.engines))
    return _suppress(source, context, rules, config, found)


def _dispatch(context: LintContext, rules: tuple[Rule, ...], table: dict | None = None):
    """Replay the index walk's dispatch sequence: each node goes to the rules that visit its type; then each rule's ``finish``."""
    if table is None:
        table = _table(rules)
    counts = context.open_counts
    innermost = context.innermost
    active = context.active_tests
    statements = context.statements
    guards: list = []  # the type tests each open If/CondExpr/And pushed
    tracked = TRACKED
    statement_kinds = STATEMENTS
    If, CondExpr, And = A.If, A.CondExpr, A.And
    get = table.get
    for node in context.events:
        kind = type(node)
        if kind is Leave:
            node = node.node
            kind = type(node)
            if kind in statement_kinds:
                statements.pop()
            if kind in tracked:
                counts[kind] -= 1
                innermost[kind].pop()
                if kind is If or kind is CondExpr or kind is And:
                    for key in guards.pop():
                        active[key] -= 1
            continue
        visitors = get(kind)
        if visitors is not None:
            for rule, check in visitors:
                for finding in check(node, context):
                    yield rule, finding
        if kind in tracked:
            if kind is If or kind is CondExpr or kind is And:
                if kind is If:
                    tests = context.type_tests_in(node.test, *(arm.test for arm in node.elifs))
                else:
                    tests = context.type_tests_in(node.test if kind is CondExpr else node.left)
                for key in tests:
                    active[key] += 1
                guards.append(tests)
            counts[kind] += 1
            innermost.setdefault(kind, []).append(node)
        if kind in statement_kinds:
            statements.append(node)
    for rule in rules:
        if rule.finish is not None:
            for finding in rule.finish(context):
                yield rule, finding


def _table(rules: tuple[Rule, ...]) -> dict[type, list]:
    """Each concrete node class → ``(rule, check)`` of the rules that visit it, in rule order."""
    return {kind: [(rule, rule.check_for(kind)) for rule in visitors]
            for kind, visitors in dispatch_table((rule.visits, rule) for rule in rules if rule.check is not None).items()}


def _drop_code(s, code: str) -> Fix | None:
    """The safe fix of an unused suppression: the comment without ``code`` (a blank comment when none is left).

    The comment tag and its ``-``/``+`` markers stay, so whitespace control, and every render, is unchanged.
    """
    rest = [c for c in s.codes if c != code]
    body = f" chatjinja: {'ignore-file' if s.file_wide else 'ignore'}[{', '.join(rest)}] " if rest else " "
    return Fix(f"Remove {code} from the suppression", (Edit(s.body_start, s.body_end, body),))


def _suppress(source: Source, context: LintContext, rules: tuple[Rule, ...], config: LintConfig,
              found: list[Diagnostic], complete: bool = True) -> list[Diagnostic]:
    """Drop the suppressed diagnostics; report unused suppressions (LN001) when the lint ran to the end."""
    suppressions = find_suppressions(context.comments, lambda off: source.lines.position(off)[0])
    file_wide = [s for s in suppressions if s.file_wide]
    by_line: dict[int, list] = {}  # a line's suppressions: each diagnostic looks at its own line's only
    for s in suppressions:
        if not s.file_wide:
            by_line.setdefault(s.line, []).append(s)
    kept: list[Diagnostic] = [] if suppressions else found
    for d in found if suppressions else ():
        silenced = False
        for s in (*file_wide, *by_line.get(d.span.line, ())):
            listed = s.covers(d.code, d.span.line)
            if listed is not None:
                s.used.add(listed)
                silenced = True
        if not silenced:
            kept.append(d)
    unused_rule = get_rule(_UNUSED)
    selected = {r.code for r in rules}
    if unused_rule is not None and _UNUSED in selected and complete:
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
                kept.append(_diag(unused_rule, source, s.start, s.end, message, config, fix=_drop_code(s, code)))
    kept.sort(key=_position)  # (one path: Diagnostic.sort_key without it)
    return kept


def _position(d: Diagnostic) -> tuple:
    span = d.span
    return (span.start, span.end, d.code, d.message)
