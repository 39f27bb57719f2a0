"""``load_template``: turn what a user names (file, model folder, GGUF, config, bundled name, hub id) into a ``TemplateRecord``;
``template_record``: the one decision of what a template argument is."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import LoadError, TemplateNotFound
from ..source import Source
from .bundled import find_bundled, load_bundled
from .folder import load_config_dict, load_config_file, load_model_folder, read_text_file
from .gguf_file import is_gguf_file, load_gguf
from .hub_cache import HUB_REPO_ID, hub_cache_dir, hub_snapshot
from .paths import refuse_path
from .record import TemplateRecord

__all__ = ["load_template", "read_template_file", "load_hub_model", "template_record"]

HUB_PREFIX = "hf:"


def read_template_file(path: Path) -> TemplateRecord:
    source = read_text_file(path)
    return TemplateRecord(source=source, name=str(path), metadata={"path": str(path)}, origin=f"file {path}")


def load_hub_model(
    repo_id: str, name: str | None = None, *, cache_dir: str | os.PathLike | None = None, rules: str = "auto"
) -> TemplateRecord:
    """A model from the Hugging Face cache, offline: ``org/name`` or ``org/name@revision`` (default ``main``)."""
    repo, _, revision = repo_id.partition("@")
    snapshot = hub_snapshot(repo, cache_dir, revision or "main")
    template = load_model_folder(snapshot, name, rules)
    origin = f"hub cache {repo}@{revision or 'main'} -> {snapshot}; {template.origin}"
    metadata = {**template.metadata, "hub_repo": repo, "hub_revision": revision or "main", "snapshot": str(snapshot)}
    return TemplateRecord(template.source, template.name, metadata, template.special_tokens, origin)


def template_record(template: object) -> TemplateRecord:
    """What a template argument is (of ``apply_chat_template``, ``render_batch``, Dask, ``probe``,
    ``response_template``, ``check_portability``, ...), as a :class:`TemplateRecord`.

    A ``TemplateRecord`` (``ChatTemplate`` included) is itself; a ``str`` is the template source (one
    without ``{{``, ``{%`` or ``{#`` that names an existing file or model folder raises ``LoadError``
    pointing at ``load_template``); a :class:`~chatjinja.Source` is its text and name; a
    ``pathlib.Path`` (any ``os.PathLike``) or a dict (a ``tokenizer_config.json``-shaped object, or
    named template sources) is loaded with :func:`load_template`.
    """
    if isinstance(template, TemplateRecord):
        return template
    if isinstance(template, str):
        refuse_path(template, "the template")
        return TemplateRecord(template)
    if isinstance(template, Source):
        return TemplateRecord(template.text, template.name)
    if isinstance(template, (os.PathLike, dict)):
        return load_template(template)
    raise TypeError(
        "template must be a ChatTemplate, the template source, a pathlib.Path or a dict (or a chatjinja.Source), got "
        f"{type(template).__name__}"
    )


_FILE_SUFFIXES = (".jinja", ".j2", ".jinja2", ".json", ".gguf")


def load_template(
    path_or_name: str | os.PathLike | dict,
    name: str | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    rules: str = "auto",
) -> TemplateRecord:
    """Load a chat template from whatever the user points at, in this order:

    1. ``hf:org/name[@revision]``: the Hugging Face cache (``cache_dir``, else the standard location);
    2. a folder: a model folder, with transformers' precedence (``rules``: ``auto``, ``tokenizer``, ``processor``);
    3. a file: a GGUF (by ``.gguf`` name or magic), a ``tokenizer_config.json`` / ``chat_template.json``
       (any ``.json``), else a template file;
    4. a bundled template name or a model name listed in the bundled manifest;
    5. ``org/name[@revision]`` found in the Hugging Face cache.

    ``name`` picks one of several named templates (``tool_use``, ...), as does a ``#name`` suffix
    (``path/to/model#tool_use``, ``model.gguf#rag``) so every CLI command can pick one; without it a named set is
    resolved the way transformers' ``get_chat_template`` does (see ``TemplateRecord.select_source``).
    ``origin`` says which file and which rule gave the template.

    A dict is a ``tokenizer_config.json`` already parsed (``{"chat_template": ..., "bos_token": ...}``)
    or named template sources (``{"default": ..., "tool_use": ...}``); see
    :func:`~chatjinja.loading.folder.load_config_dict`.
    """
    if isinstance(path_or_name, dict):
        return load_config_dict(path_or_name, name)
    if not isinstance(path_or_name, (str, os.PathLike)):
        raise TypeError(
            "load_template takes a path, a name or a dict (a tokenizer_config.json-shaped object or named "
            f"templates), got {type(path_or_name).__name__}"
        )
    text = os.fspath(path_or_name)
    if name is None and "#" in text and not Path(text).exists():
        base, _, wanted = text.rpartition("#")
        if base and wanted:
            return load_template(base, wanted, cache_dir=cache_dir, rules=rules)
    if text.startswith(HUB_PREFIX):
        return load_hub_model(text[len(HUB_PREFIX) :], name, cache_dir=cache_dir, rules=rules)
    path = Path(text)
    if path.is_dir():
        return load_model_folder(path, name, rules)
    if path.is_file():
        if is_gguf_file(path):
            return load_gguf(path, name)
        if path.suffix.lower() == ".json":
            return load_config_file(path, name)
        if name not in (None, "default"):
            raise TemplateNotFound(f"{path} holds one template; there is no template named {name!r}", source_name=text)
        return read_template_file(path)
    if find_bundled(text) is not None:
        return load_bundled(text)
    if path.exists():
        raise LoadError(f"{text} is not a template file", source_name=text)
    if HUB_REPO_ID.match(text.partition("@")[0]):
        cache = Path(cache_dir) if cache_dir is not None else hub_cache_dir()
        if (cache / ("models--" + text.partition("@")[0].replace("/", "--"))).is_dir():
            return load_hub_model(text, name, cache_dir=cache, rules=rules)
        raise TemplateNotFound(
            f"no template file, bundled template or model named {text!r} "
            f"(no such model folder, and not in the Hugging Face cache {cache}; chatjinja never downloads)",
            source_name=text,
        )
    if path.suffix.lower() in _FILE_SUFFIXES:  # clearly meant as a file: say just that
        raise TemplateNotFound(f"file not found: {text}", source_name=text)
    raise TemplateNotFound(
        f"no template file, bundled template or model named {text!r} (and no model folder or GGUF file there)",
        source_name=text,
    )
