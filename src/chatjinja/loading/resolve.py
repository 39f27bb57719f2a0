"""``load_template``: turn what a user names (bundled name, model name, file path) into a ``ChatTemplate``."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import LoadError, TemplateNotFound
from ..template import ChatTemplate
from .bundled import find_bundled, load_bundled

__all__ = ["load_template", "read_template_file"]


def read_template_file(path: Path) -> ChatTemplate:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LoadError(f"cannot read {path}: {exc.strerror or exc}", source_name=str(path)) from None
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoadError(f"{path} is not UTF-8 text (byte {exc.start})", source_name=str(path)) from None
    return ChatTemplate(source=source, name=str(path), metadata={"path": str(path)}, origin=f"file {path}")


def load_template(path_or_name: str | os.PathLike, name: str | None = None) -> ChatTemplate:
    """Load a template by bundled name, model name from the manifest, or path to a template file."""
    text = os.fspath(path_or_name)
    path = Path(text)
    if path.is_file():
        return read_template_file(path)
    if find_bundled(text) is not None:
        return load_bundled(text)
    if path.exists():
        raise LoadError(f"{text} is not a template file", source_name=text)
    raise TemplateNotFound(f"no template file, bundled template or model named {text!r}", source_name=text)
