"""``diff_templates``: what changes between two versions of a chat template — capabilities, lint findings, renders."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..analysis import analyze, modes_of
from ..analysis.facts import PROBED_FIELDS, PROBED_ROLES, Capabilities
from ..errors import ChatJinjaError, TemplateSyntaxError
from ..lint import lint
from ..loading import TemplateRecord

__all__ = [
    "CapabilityChange",
    "LintChange",
    "RenderDifference",
    "TemplateDiff",
    "diff_templates",
]

# Passed to both templates unless a template brings its own (so a .jinja file and a model folder compare fairly).
DEFAULT_SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}

# How a lost or gained capability is said, per field of ``Capabilities`` (docs/CAPABILITIES.md).
_BOOL_MESSAGES = {  # (when the fact becomes false, when it becomes true)
    "content_string": ("stops rendering string content", "now renders string content"),
    "tool_definitions": ("stops rendering tool definitions", "now renders tool definitions"),
    "tool_calls": ("stops rendering tool calls", "now renders tool calls"),
    "parallel_tool_calls": ("drops parallel tool calls", "now renders parallel tool calls"),
    "tool_call_ids": ("stops rendering tool call ids", "now renders tool call ids"),
    "generation_prompt": ("stops adding a generation prompt", "now adds a generation prompt"),
    "reasoning": ("stops rendering reasoning", "now renders reasoning"),
    "documents": ("stops rendering documents", "now renders documents"),
    "requires_alternation": ("no longer requires alternating user/assistant turns", "now requires alternating user/assistant turns"),
}
_SET_FIELDS = ("roles", "chunk_types", "tool_call_arguments")
_CAPABILITY_FIELDS = PROBED_FIELDS  # measured by the probe; the analyser's answers for these are not compared

# The analyser's other facts (every other field of ``Capabilities``), and what a change of each means:
#   "lost/gained"  a set or flag users rely on: an item (or True) that goes away is lost, one that comes is gained
#   "changed"      a difference worth reading but neither a loss nor a gain
# with the words for (an item that goes away / becomes false, an item that comes / becomes true).
_STATIC_FACTS: dict[str, tuple[str, str, str]] = {
    "other_roles": ("lost/gained", "no longer handles the {} role", "now handles the {} role"),
    "variables": ("changed", "no longer reads {}", "now reads {}"),
    "special_tokens": ("changed", "no longer reads {}", "now reads {}"),
    "raises": ("changed", "no longer raises {}", "now raises {}"),
    "generation_tags": ("lost/gained",
                        "stops marking assistant turns with {% generation %} (return_assistant_tokens_mask no longer works)",
                        "now marks assistant turns with {% generation %}"),
    "uses_strftime_now": ("changed", "no longer calls strftime_now",
                          "now writes the current date (strftime_now): the prompt changes from day to day"),
    "control_tokens": ("changed", "no longer writes control tokens {}", "now writes control tokens {}"),
    "variable_uses": ("changed", "{} becomes required (no longer read under is defined / default)",
                      "{} becomes optional (read under is defined / default)"),
}
# Fields of ``Capabilities`` that are not facts of their own, and why.
_NOT_COMPARED = {
    "evidence": "the spans that decided the other facts: they move with every edit",
    "role_tests": "the role comparisons behind roles/other_roles, as source text: a renamed loop variable changes them",
    "content_uses": "where content is printed or inspected, as source text: content_string/chunk_types say what it means",
    "source_name": "the template's name",
    "origin": "which half produced the report",
    "schema_version": "the report's schema version",
    "modes": "the mode variables: a capability that changes in a mode is compared in that mode (``capability_changes``)",
    "in_modes": "the probed facts of each mode variant: compared per mode by ``capability_changes``",
    "modes_cut": "the mode variants not looked at: named in the notes",
}


def static_fact_fields(report: type = Capabilities) -> tuple[str, ...]:
    """The fields of ``Capabilities`` diff compares from the analyser: all but the probed ones and ``_NOT_COMPARED``.

    Derived from the dataclass, so a fact the analyser gains is compared (as ``changed``) before anyone
    writes its words into ``_STATIC_FACTS``.
    """
    return tuple(f.name for f in fields(report) if f.name not in PROBED_FIELDS and f.name not in _NOT_COMPARED)


@dataclass(frozen=True)
class CapabilityChange:
    """One capability fact that differs: ``change`` is ``lost``, ``gained`` or ``changed``."""

    field: str
    change: str
    old: Any
    new: Any
    message: str
    mode: str | None = None  # the mode variant it changes in (``enable_thinking=true``); None: the default mode

    def to_dict(self) -> dict[str, Any]:
        report = {"field": self.field, "change": self.change, "old": self.old, "new": self.new, "message": self.message}
        if self.mode is not None:
            report["mode"] = self.mode
        return report


@dataclass(frozen=True)
class LintChange:
    """A lint finding only the new template has (``new``) or only the old one had (``fixed``)."""

    status: str
    code: str
    severity: str
    message: str
    line: int
    column: int

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "code": self.code, "severity": self.severity, "message": self.message,
                "line": self.line, "column": self.column}


@dataclass(frozen=True)
class RenderDifference:
    """A probe conversation the two templates render differently (text, or ``ErrorName: message``)."""

    conversation: str
    old: str
    new: str
    old_is_error: bool
    new_is_error: bool
    offset: int  # first differing character
    line: int  # of ``offset`` in the old output, 1-based
    column: int

    def to_dict(self) -> dict[str, Any]:
        return {"conversation": self.conversation, "old": self.old, "new": self.new, "old_is_error": self.old_is_error,
                "new_is_error": self.new_is_error, "offset": self.offset, "line": self.line, "column": self.column}


@dataclass(frozen=True)
class TemplateDiff:
    old_name: str
    new_name: str
    capability_changes: tuple[CapabilityChange, ...]
    special_token_changes: tuple[tuple[str, str | None, str | None], ...]
    lint_changes: tuple[LintChange, ...]
    render_differences: tuple[RenderDifference, ...]
    conversations: int
    notes: tuple[str, ...] = field(default=())

    @property
    def lost(self) -> tuple[CapabilityChange, ...]:
        return tuple(c for c in self.capability_changes if c.change == "lost")

    @property
    def new_lint_findings(self) -> tuple[LintChange, ...]:
        return tuple(c for c in self.lint_changes if c.status == "new")

    def triggered(self, fail_on: set[str]) -> list[str]:
        """Which of ``lost``, ``changed``, ``render``, ``lint`` this diff triggers."""
        hits = []
        if "lost" in fail_on and self.lost:
            hits.append("lost")
        if "changed" in fail_on and self.capability_changes:
            hits.append("changed")
        if "render" in fail_on and self.render_differences:
            hits.append("render")
        if "lint" in fail_on and self.new_lint_findings:
            hits.append("lint")
        return hits

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old_name,
            "new": self.new_name,
            "capabilities": [c.to_dict() for c in self.capability_changes],
            "special_tokens": [{"name": n, "old": o, "new": w} for n, o, w in self.special_token_changes],
            "lint": [c.to_dict() for c in self.lint_changes],
            "renders": {"conversations": self.conversations, "differences": [d.to_dict() for d in self.render_differences]},
            "notes": list(self.notes),
        }


def _set_changes(name: str, old: tuple, new: tuple) -> list[CapabilityChange]:
    old_set, new_set = set(old), set(new)
    changes = []
    if name == "tool_call_arguments":
        if old_set - new_set:
            if new_set:
                only = "/".join(sorted(new_set))
                message = f"now requires {only} arguments ({'/'.join(sorted(old_set - new_set))} arguments no longer render)"
            else:
                message = "stops rendering tool call arguments"
            changes.append(CapabilityChange(name, "lost", list(old), list(new), message))
        if new_set - old_set:
            message = f"now also accepts {'/'.join(sorted(new_set - old_set))} arguments"
            changes.append(CapabilityChange(name, "gained", list(old), list(new), message))
        return changes
    noun = {"roles": "role", "chunk_types": "content chunks"}[name]
    for item in sorted(old_set - new_set):
        message = f"drops the {item} role" if name == "roles" else f"drops {item} {noun}"
        changes.append(CapabilityChange(name, "lost", list(old), list(new), message))
    for item in sorted(new_set - old_set):
        message = f"now renders the {item} role" if name == "roles" else f"now renders {item} {noun}"
        changes.append(CapabilityChange(name, "gained", list(old), list(new), message))
    return changes


def capability_changes(old: Any, new: Any) -> list[CapabilityChange]:
    """Compare two ``Capabilities`` field by field, in the default mode and in every mode variant either
    side has; a lost fact is one a user of the old template relied on."""
    changes = _field_changes(old.probed(), new.probed(), None)
    old_modes = {m.name: m.facts for m in old.in_modes}
    new_modes = {m.name: m.facts for m in new.in_modes}
    default_old, default_new = old.probed(), new.probed()
    for mode in sorted(set(old_modes) | set(new_modes)):
        before = {**default_old, **old_modes.get(mode, {})}
        after = {**default_new, **new_modes.get(mode, {})}
        differing = {k for k in _CAPABILITY_FIELDS if before[k] != after[k] and default_old[k] == default_new[k]}
        changes += [c for c in _field_changes(before, after, mode) if c.field in differing]
    return changes


def _as_fact(name: str, value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _field_changes(old: dict[str, Any], new: dict[str, Any], mode: str | None) -> list[CapabilityChange]:
    changes: list[CapabilityChange] = []
    for name in _CAPABILITY_FIELDS:
        before, after = _as_fact(name, old[name]), _as_fact(name, new[name])
        if before == after:
            continue
        if name in _SET_FIELDS:
            found = _set_changes(name, before, after)
        else:
            # the messages are (when the fact becomes false, when it becomes true); requires_alternation is a restriction
            restrictive = name == "requires_alternation"
            lost = bool(after) if restrictive else not after
            found = [CapabilityChange(name, "lost" if lost else "gained", before, after, _BOOL_MESSAGES[name][bool(after)])]
        if mode is not None:
            found = [replace(c, message=f"{c.message} when {mode}", mode=mode) for c in found]
        changes.extend(found)
    return changes


def _raise_items(sites: tuple) -> set[str]:
    """Each raised message once, with the probed roles that can reach it when that is not every role."""
    roles: dict[str, set[str]] = {}
    for site in sites:
        text = repr(site.message) if site.message is not None else site.message_source
        roles.setdefault(text, set()).update(site.roles or PROBED_ROLES)
    return {text if who == set(PROBED_ROLES) else f"{text} (for {'/'.join(sorted(who))})" for text, who in roles.items()}


def _comparable(name: str, value: Any) -> Any:
    """A field's value as a bool or a set of strings (positions and source text left out)."""
    if name == "raises":
        return _raise_items(value)
    if name == "variable_uses":
        return {use.name: use.guarded for use in value}
    if isinstance(value, bool):
        return value
    if isinstance(value, tuple) and all(isinstance(item, str) for item in value):
        return set(value)
    # a fact this table does not know yet: compare what its report says
    return repr([item.to_dict() if hasattr(item, "to_dict") else item for item in value]
                if isinstance(value, tuple) else value)


def static_fact_changes(before: Any, after: Any) -> list[CapabilityChange]:
    """Compare the analyser's facts of two templates, every field :func:`static_fact_fields` names."""
    changes: list[CapabilityChange] = []
    for name in static_fact_fields(type(before)):
        b, a = _comparable(name, getattr(before, name)), _comparable(name, getattr(after, name))
        if b == a:
            continue
        kind, gone, come = _STATIC_FACTS.get(name, ("changed", f"{name} was {{}}", f"{name} is now {{}}"))
        if isinstance(b, bool):
            change = ("gained" if a else "lost") if kind == "lost/gained" else "changed"
            changes.append(CapabilityChange(name, change, b, a, come if a else gone))
        elif isinstance(b, dict):  # variable_uses: a variable read on both sides that became required or optional
            for var in sorted(set(b) & set(a)):
                if b[var] != a[var]:
                    message = (come if a[var] else gone).format(var)
                    changes.append(CapabilityChange(name, "changed", {var: b[var]}, {var: a[var]}, message))
        elif isinstance(b, set):
            if kind == "lost/gained":
                changes += [CapabilityChange(name, "lost", sorted(b), sorted(a), gone.format(item)) for item in sorted(b - a)]
                changes += [CapabilityChange(name, "gained", sorted(b), sorted(a), come.format(item)) for item in sorted(a - b)]
            else:
                parts = []
                if a - b:
                    parts.append(come.format(", ".join(sorted(a - b))))
                if b - a:
                    parts.append(gone.format(", ".join(sorted(b - a))))
                changes.append(CapabilityChange(name, "changed", sorted(b), sorted(a), "; ".join(parts)))
        else:
            changes.append(CapabilityChange(name, "changed", b, a, f"{gone.format(b)}; {come.format(a)}"))
    return changes


def _analysed(template: TemplateRecord, side: str) -> Any:
    """The analyser's facts (``None`` if it cannot analyse them); a template that does not parse raises one line.

    The line is ``old/new template cannot be read: file:line:column: what``, from the Lark parser
    (column included), or from jinja2 (line only) in case jinja2 alone rejects the template.
    """
    try:
        facts = analyze(template)
    except TemplateSyntaxError as exc:
        raise TemplateSyntaxError(f"{side} template cannot be read: {exc.location()}: {exc.message}",
                                  span=exc.span, source_name=exc.source_name) from None
    except ChatJinjaError:  # e.g. nested too deeply to analyse: the probe and the renders still compare it
        facts = None
    # jinja2 must accept it too (renders use jinja2); its errors carry a line only
    from ..runtime.environment import default_environment  # lazy: `chatjinja rules` loads this package (release.check's FOLDER_RULES) and must not load jinja2

    try:
        default_environment().parse(template.source)
    except Exception as exc:  # noqa: BLE001 - jinja2.TemplateSyntaxError, or a budget error while compiling
        line = getattr(exc, "lineno", None)
        where = f"{template.name}:{line}" if line else template.name
        raise TemplateSyntaxError(f"{side} template cannot be read: {where}: {getattr(exc, 'message', None) or exc}",
                                  source_name=template.name) from None
    return facts


def _lint_changes(old: TemplateRecord, new: TemplateRecord) -> tuple[LintChange, ...]:
    before = lint(old.source, name=old.name, add_bos_token=old.metadata.get("add_bos_token"))
    after = lint(new.source, name=new.name, add_bos_token=new.metadata.get("add_bos_token"))
    # A finding is the same when code and message match: positions move when a template is edited.
    remaining = Counter((d.code, d.message) for d in before)
    changes: list[LintChange] = []
    for d in after:
        key = (d.code, d.message)
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            changes.append(LintChange("new", d.code, d.severity, d.message, d.span.line, d.span.column))
    still = Counter((d.code, d.message) for d in after)
    for d in before:
        key = (d.code, d.message)
        if still[key] > 0:
            still[key] -= 1
        else:
            changes.append(LintChange("fixed", d.code, d.severity, d.message, d.span.line, d.span.column))
    return tuple(changes)


def _render(template: TemplateRecord, member: Any, render_text: Any) -> tuple[str, bool]:
    tokens = {**DEFAULT_SPECIAL_TOKENS, **template.special_tokens}
    try:
        source = template.select_source(member.options.get("tools"))
    except Exception as exc:  # noqa: BLE001 - the error is the outcome
        return f"{type(exc).__name__}: {str(exc).strip()}", True
    outcome = render_text(source, json.loads(json.dumps(member.messages)), variables={**tokens, **dict(member.variables)},
                          **member.options)
    if outcome.ok:
        return outcome.text, False
    return outcome.error.splitlines()[0], True


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


def comparison_space(old: TemplateRecord, new: TemplateRecord) -> Any:
    """The conversation space both templates are rendered on: one needle neither holds, the modes of both."""
    from ..observation import build_space  # lazy: `chatjinja rules` loads this package (release.check's FOLDER_RULES) and must not load jinja2

    modes: dict[str, Any] = {}
    for mode in (*modes_of(old.source), *modes_of(new.source)):
        known = modes.get(mode.name)
        values = mode.values if known is None else known.values + tuple(v for v in mode.values if v not in known.values)
        modes[mode.name] = replace(mode, values=values)
    return build_space(old.source + "\n" + new.source, tuple(modes.values()))


def render_differences(old: TemplateRecord, new: TemplateRecord, space: Any = None) -> list[RenderDifference]:
    """Render every member of the conversation space (``comparison_space``) with both templates; keep the ones that differ."""
    from ..observation import render_text  # lazy: as comparison_space

    found = []
    for member in space if space is not None else comparison_space(old, new):
        name = member.name
        before, before_error = _render(old, member, render_text)
        after, after_error = _render(new, member, render_text)
        if (before, before_error) == (after, after_error):
            continue
        offset = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
        line, column = _position(before, offset)
        found.append(RenderDifference(name, before, after, before_error, after_error, offset, line, column))
    return found


def diff_templates(old: TemplateRecord, new: TemplateRecord) -> TemplateDiff:
    """Capabilities (measured by :func:`chatjinja.probe`), the analyser's other facts, lint findings and probe renders.

    Raises :class:`chatjinja.TemplateSyntaxError` ("old/new template cannot be read: file:line:column: ...")
    when either template does not parse.
    """
    from ..probing import probe  # lazy: `chatjinja rules` loads this package (release.check's FOLDER_RULES) and must not load jinja2

    before, after = _analysed(old, "old"), _analysed(new, "new")
    old_facts, new_facts = probe(old.source), probe(new.source)
    changes = capability_changes(old_facts, new_facts)
    notes: list[str] = []
    for side, facts in (("old", old_facts), ("new", new_facts)):
        if facts.modes_cut:
            notes.append(f"{side} template: mode variants not compared (past the limit): {', '.join(facts.modes_cut)}")
    if before is None or after is None:
        static = []
        notes.append("static analysis failed: the analyser's facts (generation tags, special tokens, ...) not compared")
    else:
        static = static_fact_changes(before, after)
    lint_changes = _lint_changes(old, new)
    space = comparison_space(old, new)
    # A bare .jinja file states no special tokens: compare them only when both sides come with some.
    token_changes: tuple = ()
    if old.special_tokens and new.special_tokens:
        names = list(dict.fromkeys([*old.special_tokens, *new.special_tokens]))
        token_changes = tuple(
            (n, old.special_tokens.get(n), new.special_tokens.get(n))
            for n in names
            if old.special_tokens.get(n) != new.special_tokens.get(n)
        )
    elif old.special_tokens or new.special_tokens:
        notes.append("special tokens not compared: only one side states them (the other is a bare template)")
    return TemplateDiff(
        old_name=old.name,
        new_name=new.name,
        capability_changes=tuple(changes + static),
        special_token_changes=token_changes,
        lint_changes=lint_changes,
        render_differences=tuple(render_differences(old, new, space)),
        conversations=len(space),
        notes=tuple(notes),
    )
