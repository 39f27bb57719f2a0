"""The documented templates bundled in ``templates/`` and their manifest."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from ..errors import TemplateNotFound
from .record import TemplateRecord

__all__ = ["bundled_templates_dir", "bundled_manifest", "bundled_names", "find_bundled", "load_bundled"]


@functools.cache
def bundled_templates_dir() -> Path:
    """``chatjinja/_bundled_templates`` in an installed wheel, else ``templates/`` of the checkout."""
    package_dir = Path(__file__).resolve().parent.parent
    installed = package_dir / "_bundled_templates"
    if (installed / "manifest.json").is_file():
        return installed
    checkout = package_dir.parent.parent / "templates"
    if (checkout / "manifest.json").is_file():
        return checkout
    raise TemplateNotFound(f"bundled templates not found (looked in {installed} and {checkout})")


@functools.cache
def bundled_manifest() -> dict[str, Any]:
    with open(bundled_templates_dir() / "manifest.json", encoding="utf-8") as f:
        return json.load(f)


def bundled_names() -> list[str]:
    return [entry["name"] for entry in bundled_manifest()["templates"]]


def _key(name: str) -> str:
    return name.strip().lower()


def find_bundled(name: str) -> dict[str, Any] | None:
    """The manifest entry whose template name or listed model name is ``name``.

    Case-insensitive; an org prefix (``mistralai/``) is accepted and ignored.
    """
    wanted = _key(name)
    bare = wanted.rsplit("/", 1)[-1]
    for entry in bundled_manifest()["templates"]:
        names = [entry["name"], *entry.get("models", [])]
        keys = {_key(n) for n in names}
        if wanted in keys or bare in keys:
            return entry
    return None


def load_bundled(name: str) -> TemplateRecord:
    entry = find_bundled(name)
    if entry is None:
        raise TemplateNotFound(
            f"no bundled template or listed model named {name!r} (bundled: {', '.join(bundled_names())})"
        )
    path = bundled_templates_dir() / entry["file"]
    source = path.read_text(encoding="utf-8")
    metadata = dict(entry)
    metadata["path"] = str(path)
    return TemplateRecord(
        source=source,
        name=entry["name"],
        metadata=metadata,
        special_tokens=dict(entry.get("special_tokens") or {}),
        origin=f"bundled template {entry['name']!r}",
    )
