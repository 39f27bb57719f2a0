"""A response template (the dict transformers' ``parse_response`` takes), checked as transformers 5.25 checks it and compiled once.

The rules and messages are those of ``transformers.utils.chat_parsing.response_templates``; an
invalid template raises :class:`~chatjinja.serving.derive.ResponseTemplateError` (a ``ValueError``,
as transformers raises). The delimiters are prepared by :mod:`.patterns`.
"""

from __future__ import annotations

import functools
import json
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

from .content import CONTENT_PARSERS
from .derive import ResponseTemplateError
from .patterns import Delimiter, literal_pattern, prepare, regex

__all__ = ["Field", "ResponseTemplate", "load"]

_FIELD_KEYS = {"open", "open_pattern", "close", "close_pattern", "content", "content_args", "repeats", "join",
               "optional", "transform", "transform_each"}
_PLACEHOLDER = regex.compile(r"\{(\w+(?:\.\w+)*)\}") if regex else None


@dataclass(frozen=True)
class Field:
    name: str
    open: Delimiter | None
    close: Delimiter | None
    content: str
    content_args: dict
    repeats: bool
    join: str | None
    optional: bool
    transform: Any
    transform_each: bool


@dataclass(frozen=True)
class ResponseTemplate:
    defaults: dict
    fields: dict[str, Field]
    start_anchor: Any  # a compiled pattern: the prefix is read from after its last match
    implicit: str | None  # the field without an open delimiter: what is written outside every other field


def _fail(message: str) -> ResponseTemplateError:
    return ResponseTemplateError(message)


def _delimiter(scope: str, field: dict, literal_key: str, pattern_key: str) -> Delimiter | None:
    if literal_key in field and pattern_key in field:
        raise _fail(f"{scope}: cannot specify both '{literal_key}' and '{pattern_key}'")
    if literal_key in field:
        raw = field[literal_key]
        if isinstance(raw, str):
            literals = [raw]
        elif isinstance(raw, list):
            if not raw:
                raise _fail(f"{scope}: '{literal_key}' list must contain at least one literal")
            if not all(isinstance(s, str) for s in raw):
                raise _fail(f"{scope}: '{literal_key}' list must contain only strings")
            literals = list(dict.fromkeys(raw))
        else:
            raise _fail(f"{scope}: '{literal_key}' must be a string or list of strings, got {type(raw).__name__}")
        if any(s == "" for s in literals):
            raise _fail(f"{scope}: '{literal_key}' literals cannot be empty strings")
        return prepare(literal_pattern(literals))
    if pattern_key in field:
        if not isinstance(field[pattern_key], str):
            raise _fail(f"{scope}: invalid {pattern_key} regex: first argument must be a string or compiled pattern")
        try:
            return prepare(field[pattern_key])
        except regex.error as e:
            raise _fail(f"{scope}: invalid {pattern_key} regex: {e}") from None
    return None


def _check_transform(scope: str, transform: Any) -> None:
    pending = [transform]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, str) and _PLACEHOLDER.search(value) and not _PLACEHOLDER.fullmatch(value):
            raise _fail(
                f"{scope}: transform string {value!r} mixes a {{placeholder}} with literal text. "
                'Use either a whole-string placeholder (e.g. "{content}") or a plain literal; '
                "string interpolation is not supported."
            )


def _field(name: str, field: Any) -> Field:
    scope = f"Field '{name}'"
    if not isinstance(field, dict):
        raise _fail(f"{scope} must be a dict")
    if unknown := set(field) - _FIELD_KEYS:
        raise _fail(f"{scope}: unknown keys {sorted(unknown)}")
    content = field.get("content", "text")
    if content not in CONTENT_PARSERS:
        raise _fail(f"{scope}: unknown content parser '{content}'. Available: {sorted(CONTENT_PARSERS)}")
    open_d = _delimiter(scope, field, "open", "open_pattern")
    close_d = _delimiter(scope, field, "close", "close_pattern")
    join = field.get("join")
    if join is not None and not isinstance(join, str):
        raise _fail(f"{scope}: 'join' must be a string, got {type(join).__name__}")
    if join is not None and not field.get("repeats", False):
        raise _fail(f"{scope}: 'join' requires 'repeats': true")
    transform = field.get("transform")
    transform_each = field.get("transform_each", False)
    if not isinstance(transform_each, bool):
        raise _fail(f"{scope}: transform_each must be a bool, got {type(transform_each).__name__}")
    if transform_each and transform is None:
        raise _fail(f"{scope}: transform_each is set but no transform was provided")
    if transform is not None:
        _check_transform(scope, transform)
    else:
        captured = set()
        for delimiter in (open_d, close_d):
            if delimiter is not None:
                captured |= set(delimiter.search.groupindex) - {"_cjtail"}
        if captured:
            raise _fail(
                f"{scope}: open_pattern/close_pattern declares named group(s) "
                f"{sorted(captured)}, but the field has no 'transform'. Named captures "
                f"are only surfaced through a 'transform' template (where they appear "
                f"alongside 'content'). Either add a 'transform' that uses the captures, or "
                f"remove the named groups from the pattern."
            )
    return Field(name, open_d, close_d, content, field.get("content_args", {}), field.get("repeats", False), join,
                 field.get("optional", True), transform, transform_each)


def _anchor(spec: dict) -> Any:
    scope = "response_template"
    if "start_anchor" in spec and "start_anchor_pattern" in spec:
        raise _fail(f"{scope}: cannot specify both 'start_anchor' and 'start_anchor_pattern'")
    delimiter = _delimiter(scope, spec, "start_anchor", "start_anchor_pattern")
    if delimiter is None:
        raise _fail("response_template must define 'start_anchor' or 'start_anchor_pattern'.")
    return regex.compile(delimiter.source, regex.DOTALL)


def _load(spec: dict) -> ResponseTemplate:
    version = spec.get("version", 1)
    if version != 1:
        raise _fail(f"Unsupported response_template version: {version}")
    if unknown := set(spec) - {"version", "defaults", "fields", "start_anchor", "start_anchor_pattern"}:
        raise _fail(f"Unknown keys in response_template: {sorted(unknown)}")
    if not isinstance(spec.get("defaults", {}), dict):
        raise _fail("response_template.defaults must be a dict")
    fields_raw = spec.get("fields", {})
    if not isinstance(fields_raw, dict) or not fields_raw:
        raise _fail("response_template.fields must be a non-empty dict")
    fields = {name: _field(name, raw) for name, raw in fields_raw.items()}
    implicit = [name for name, field in fields.items() if field.open is None]
    if len(implicit) > 1:
        raise _fail(
            "At most one field may omit 'open'/'open_pattern' (that field becomes the "
            f"implicit-open / leftover sink). Found: {', '.join(implicit)}"
        )
    return ResponseTemplate(deepcopy(spec.get("defaults", {})), fields, _anchor(spec), implicit[0] if implicit else None)


@functools.lru_cache(maxsize=256)
def _cached(key: str) -> ResponseTemplate:
    return _load(json.loads(key))


def load(spec: Any) -> ResponseTemplate:
    """The compiled template (cached by content: a server passes the same dict for every reply)."""
    if isinstance(spec, ResponseTemplate):
        return spec
    if not isinstance(spec, dict):
        raise _fail(f"response_template must be a dict, got {type(spec).__name__}")
    try:
        key = json.dumps(spec)
    except (TypeError, ValueError):  # not JSON data (a tuple, a compiled pattern): checked uncached
        return _load(spec)
    return _cached(key)
