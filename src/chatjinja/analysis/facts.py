"""The analyser's report: ``Capabilities`` and the typed, spanned facts it is built from (pure data, no parsing)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping

from ..source import Span

__all__ = [
    "SCHEMA_VERSION",
    "PROBED_FIELDS",
    "PROBED_ROLES",
    "MEDIA_CHUNK_TYPES",
    "CHUNK_TYPES",
    "TOOL_CALL_ARGUMENT_FORMS",
    "Capabilities",
    "ContentUse",
    "Disagreement",
    "Evidence",
    "RaiseSite",
    "RoleTest",
    "VariableUse",
    "disagreements",
]

SCHEMA_VERSION = 1

# The fields with a dynamic meaning (docs/CAPABILITIES.md); the probe measures exactly these.
PROBED_FIELDS = (
    "roles",
    "content_string",
    "chunk_types",
    "tool_definitions",
    "tool_calls",
    "tool_call_arguments",
    "parallel_tool_calls",
    "tool_call_ids",
    "generation_prompt",
    "reasoning",
    "documents",
    "requires_alternation",
)

# The roles the probe tries; ``roles`` never holds anything else (other names go to ``other_roles``).
PROBED_ROLES = ("assistant", "developer", "system", "tool", "user")
MEDIA_CHUNK_TYPES = ("image", "image_url", "video", "audio", "input_audio")
CHUNK_TYPES = ("text",) + MEDIA_CHUNK_TYPES
TOOL_CALL_ARGUMENT_FORMS = ("object", "string")


@dataclass(frozen=True, slots=True)
class Evidence:
    """One construct that decided a fact: where it is and what it says (``role == 'system'``)."""

    span: Span
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.span.line, "column": self.span.column, "end_line": self.span.end_line,
                "end_column": self.span.end_column, "note": self.note}


@dataclass(frozen=True, slots=True)
class RaiseSite:
    """A ``raise_exception(...)`` call: its message (``None`` unless constant), where, and the condition guarding it.

    ``message_source`` is the argument's source text; ``condition`` is the source text of the
    enclosing ``if``/``elif`` tests joined with ``and`` (``not (...)`` for an ``else`` branch),
    ``None`` when the call is unconditional. ``roles`` lists the probed roles whose messages can
    reach the site by the role tests in its guard (for an ``else`` after ``role == 'user'`` and
    ``role == 'assistant'``: the roles it rejects); empty when the guard tests no role.
    ``kind`` says what it polices: ``role``, ``alternation``, ``content``, ``tool`` or ``other``.
    """

    span: Span
    message: str | None
    message_source: str
    condition: str | None
    kind: str = "other"
    roles: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "message_source": self.message_source,
            "line": self.span.line,
            "column": self.span.column,
            "condition": self.condition,
            "kind": self.kind,
            "roles": list(self.roles),
        }


@dataclass(frozen=True, slots=True)
class RoleTest:
    """A comparison of a message's role with literal names (``==``, ``!=``, ``in``, ``not in``, ``selectattr``)."""

    span: Span
    roles: tuple[str, ...]
    operator: str  # "==", "!=", "in", "not in", "selectattr", "rejectattr"
    subject: str  # source text of the role expression, e.g. ``message['role']``

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.span.line, "column": self.span.column, "roles": list(self.roles),
                "operator": self.operator, "subject": self.subject}


@dataclass(frozen=True, slots=True)
class ContentUse:
    """A place where a message's content reaches the output or is inspected.

    ``how`` is ``output`` (a string content reaches the output here, found by the symbolic runs,
    so through aliases and macros), ``chunks`` (a text chunk's text reaches the output here),
    ``iterated`` (``for`` over a content), ``type-test`` (``is string`` / ``is iterable`` ...) or
    ``dump`` (``tojson``/``string`` of a whole content). ``roles`` are the probed roles whose
    messages reach it (for the syntactic kinds: allowed by the role tests guarding it).
    """

    span: Span
    how: str
    roles: tuple[str, ...]
    subject: str

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.span.line, "column": self.span.column, "how": self.how,
                "roles": list(self.roles), "subject": self.subject}


@dataclass(frozen=True, slots=True)
class VariableUse:
    """A template variable read from the render context (not assigned in the template), first read at ``span``."""

    name: str
    span: Span
    guarded: bool  # read under ``is defined`` / ``| default`` (optional) somewhere

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "line": self.span.line, "column": self.span.column, "optional": self.guarded}


@dataclass(frozen=True)
class Capabilities:
    """What a chat template supports (see docs/CAPABILITIES.md), with the spans that decided each fact.

    The first twelve fields have a dynamic meaning the probe (:func:`chatjinja.probe`) measures;
    the rest only static analysis gives. ``to_dict()`` is the JSON report.
    """

    roles: tuple[str, ...] = ()
    content_string: bool = False
    chunk_types: tuple[str, ...] = ()
    tool_definitions: bool = False
    tool_calls: bool = False
    tool_call_arguments: tuple[str, ...] = ()
    parallel_tool_calls: bool = False
    tool_call_ids: bool = False
    generation_prompt: bool = False
    reasoning: bool = False
    documents: bool = False
    requires_alternation: bool = False
    # static-only facts
    other_roles: tuple[str, ...] = ()
    variables: tuple[str, ...] = ()
    special_tokens: tuple[str, ...] = ()
    raises: tuple[RaiseSite, ...] = ()
    generation_tags: bool = False
    uses_strftime_now: bool = False
    control_tokens: tuple[str, ...] = ()
    evidence: Mapping[str, tuple[Evidence, ...]] = field(default_factory=dict)
    # typed facts for consumers such as the linter (not all of them are in the JSON report)
    role_tests: tuple[RoleTest, ...] = ()
    content_uses: tuple[ContentUse, ...] = ()
    variable_uses: tuple[VariableUse, ...] = ()
    # the template's modes (analysis/modes.py), the probed facts that differ in each variant and the
    # variants not looked at (past ``MAX_MODE_VARIANTS`` or the modes' fuel)
    modes: tuple[Any, ...] = ()
    in_modes: tuple[Any, ...] = ()
    modes_cut: tuple[str, ...] = ()
    source_name: str = "<string>"
    origin: str = "static"  # "static" (the analyser) or "probe"
    schema_version: int = SCHEMA_VERSION

    def when(self, name: str) -> list[tuple[str, Any]]:
        """``(mode variant, value)`` for each variant in which the probed field ``name`` differs from the default."""
        return [(m.name, m.facts[name]) for m in self.in_modes if name in m.facts]

    def probed(self) -> dict[str, Any]:
        """The twelve probed fields as JSON values (lists for tuples)."""
        return {name: _json(getattr(self, name)) for name in PROBED_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        report: dict[str, Any] = {"schema_version": self.schema_version, "template": self.source_name,
                                  "origin": self.origin}
        report.update(self.probed())
        report["modes"] = [m.to_dict() for m in self.modes]
        report["in_modes"] = [m.to_dict() for m in self.in_modes]
        if self.modes_cut:
            report["modes_cut"] = list(self.modes_cut)
        if self.origin == "static":
            report.update(
                {
                    "other_roles": list(self.other_roles),
                    "variables": list(self.variables),
                    "special_tokens": list(self.special_tokens),
                    "raises": [site.to_dict() for site in self.raises],
                    "generation_tags": self.generation_tags,
                    "uses_strftime_now": self.uses_strftime_now,
                    "control_tokens": list(self.control_tokens),
                    "evidence": {name: [e.to_dict() for e in items] for name, items in self.evidence.items() if items},
                }
            )
        return report


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True, slots=True)
class Disagreement:
    """A probed field where the static answer and the probe differ."""

    field: str
    static: Any
    probe: Any
    evidence: tuple[Evidence, ...] = ()


def disagreements(static: Capabilities, probe: Capabilities | Mapping[str, Any], only: Iterable[str] = PROBED_FIELDS) -> list[Disagreement]:
    """The probed fields on which ``static`` and ``probe`` differ, with the static evidence for each."""
    theirs = probe.probed() if isinstance(probe, Capabilities) else dict(probe)
    ours = static.probed()
    found = []
    for name in only:
        if ours[name] != _json(theirs[name]):
            found.append(Disagreement(name, ours[name], _json(theirs[name]), tuple(static.evidence.get(name, ()))))
    if isinstance(probe, Capabilities):  # and in each mode variant (a field is "field (mode)")
        static_modes = {m.name: m.facts for m in static.in_modes}
        probe_modes = {m.name: m.facts for m in probe.in_modes}
        for mode in sorted(set(static_modes) | set(probe_modes)):
            a, b = static_modes.get(mode, {}), probe_modes.get(mode, {})
            for name in only:
                if name in a or name in b:
                    mine, theirs_value = a.get(name, ours[name]), b.get(name, _json(theirs[name]))
                    if mine != theirs_value:
                        found.append(Disagreement(f"{name} ({mode})", mine, theirs_value, ()))
    return found


def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Capabilities))
