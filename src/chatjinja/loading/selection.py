"""Choosing one chat template from what a model folder or GGUF holds, as transformers' ``get_chat_template`` does."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LoadError, TemplateNotFound
from .record import TemplateRecord

__all__ = ["TemplateEntry", "TemplateSet", "select_template", "AMBIGUOUS_MESSAGE"]

# transformers 5.25.0 ``PreTrainedTokenizerBase.get_chat_template``, verbatim but for the names.
AMBIGUOUS_MESSAGE = (
    "This model has multiple chat templates with no default specified! Please either pass a chat "
    "template or the name of the template you wish to use to the `chat_template` argument. Available "
    "template names are {names}."
)


@dataclass(frozen=True)
class TemplateEntry:
    """One template text and where it was read from (a ``.jinja`` file, or a key inside a JSON or GGUF file)."""

    name: str
    source: str
    file: Path
    key: str | None = None

    @property
    def where(self) -> str:
        """``path`` for a template file, ``path#key`` for a template stored inside another file."""
        return f"{self.file}#{self.key}" if self.key else str(self.file)


@dataclass(frozen=True)
class TemplateSet:
    """The chat template(s) a loader found, exactly as transformers would hold them.

    ``named`` is True when transformers holds a dict of named templates (``tokenizer.chat_template``
    is a dict), False when it holds one string (``templates`` then has the single key ``"default"``).
    ``rule`` says which transformers rule produced the set; ``shadowed`` lists templates that exist
    in the files but that rule ignores (with the reason in ``notes``).
    """

    location: Path
    templates: dict[str, TemplateEntry]
    named: bool
    rule: str
    special_tokens: dict[str, str] = field(default_factory=dict)
    shadowed: tuple[TemplateEntry, ...] = ()
    notes: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    def names(self) -> list[str]:
        return sorted(self.templates)


def _chat_template(entry: TemplateEntry, tset: TemplateSet, why: str, extra: dict[str, Any]) -> TemplateRecord:
    metadata: dict[str, Any] = {
        **tset.metadata,
        "loaded_from": str(tset.location),
        "file": str(entry.file),
        "rule": tset.rule,
        "chat_template_name": entry.name if tset.named else None,
        "template_names": tset.names() if tset.named else [],
        **extra,
    }
    if entry.key is None:
        metadata["path"] = str(entry.file)
    origin = "; ".join([f"{entry.where}: {why}", *tset.notes])
    return TemplateRecord(
        source=entry.source,
        name=entry.where,
        metadata=metadata,
        special_tokens=dict(tset.special_tokens),
        origin=origin,
    )


def select_template(tset: TemplateSet, name: str | None = None) -> TemplateRecord:
    """The template ``get_chat_template`` would use, as a ``ChatTemplate``.

    ``name`` picks a template by name (like ``apply_chat_template(chat_template="tool_use")``).
    Without it, a named set keeps all its templates in ``metadata["chat_templates"]`` and
    :meth:`ChatTemplate.select_source` picks ``tool_use`` at render time when tools are given, else
    ``default``, else raises transformers' ValueError; ``source`` is then ``default`` (or
    ``tool_use`` when that is the only template transformers could ever pick). A set with neither
    raises :class:`LoadError` at once, with transformers' message.
    """
    where = str(tset.location)
    if not tset.templates:
        raise TemplateNotFound(f"no chat template in {where}", source_name=where)
    if name is not None:
        entry = tset.templates.get(name)
        if entry is None:
            raise TemplateNotFound(
                f"{where} has no chat template named {name!r} (available: {', '.join(tset.names())})",
                source_name=where,
            )
        return _chat_template(entry, tset, f"{tset.rule}; chosen by name {name!r}", {})
    if not tset.named:
        return _chat_template(tset.templates["default"], tset, tset.rule, {})
    everything = {n: e.source for n, e in tset.templates.items()}
    if "default" in tset.templates:
        why = f"{tset.rule}; 'default' of {tset.names()}"
        if "tool_use" in tset.templates:
            why += " ('tool_use' is used instead when tools are given)"
        return _chat_template(tset.templates["default"], tset, why, {"chat_templates": everything})
    if "tool_use" in tset.templates:
        why = (
            f"{tset.rule}; 'tool_use' of {tset.names()}: there is no 'default', so transformers renders "
            "only when tools are given and raises otherwise"
        )
        return _chat_template(tset.templates["tool_use"], tset, why, {"chat_templates": everything})
    raise LoadError(f"{AMBIGUOUS_MESSAGE.format(names=tset.names())} ({where})", source_name=where)
