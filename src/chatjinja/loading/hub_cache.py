"""The Hugging Face hub cache, offline: ``org/name`` -> ``models--org--name/snapshots/<commit>/``, as huggingface_hub lays it out."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import TemplateNotFound

__all__ = ["HUB_REPO_ID", "hub_cache_dir", "hub_snapshot"]

# What huggingface_hub accepts as a model repo id: ``name`` or ``org/name``; we require the org.
HUB_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+$")


def hub_cache_dir() -> Path:
    """The cache huggingface_hub uses: ``HF_HUB_CACHE``, else ``HUGGINGFACE_HUB_CACHE``, else ``HF_HOME/hub``,
    where ``HF_HOME`` defaults to ``$XDG_CACHE_HOME/huggingface`` and that to ``~/.cache/huggingface``.

    Read from the environment at each call (huggingface_hub reads it once, at import).
    """
    default_home = os.path.join(os.path.expanduser("~"), ".cache")
    hf_home = os.path.expandvars(
        os.path.expanduser(os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", default_home), "huggingface")))
    )
    legacy = os.getenv("HUGGINGFACE_HUB_CACHE", os.path.join(hf_home, "hub"))
    return Path(os.path.expandvars(os.path.expanduser(os.getenv("HF_HUB_CACHE", legacy))))


def hub_snapshot(repo_id: str, cache_dir: str | os.PathLike | None = None, revision: str = "main") -> Path:
    """The snapshot folder of a cached model repo at ``revision`` (a branch or tag in ``refs/``, or a commit hash)."""
    cache = Path(cache_dir) if cache_dir is not None else hub_cache_dir()
    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    if not repo_dir.is_dir():
        raise TemplateNotFound(f"{repo_id} is not in the Hugging Face cache ({repo_dir} does not exist)", source_name=repo_id)
    commit = revision
    ref_file = repo_dir / "refs" / revision
    if ref_file.is_file():
        # huggingface_hub writes the commit without a newline; tolerate one.
        commit = ref_file.read_text(encoding="utf-8").strip()
    snapshot = repo_dir / "snapshots" / commit
    if not snapshot.is_dir():
        known = sorted(p.name for p in (repo_dir / "snapshots").iterdir()) if (repo_dir / "snapshots").is_dir() else []
        raise TemplateNotFound(
            f"{repo_id}: revision {revision!r} is not in the cache ({snapshot} does not exist; cached snapshots: "
            f"{', '.join(known) or 'none'})",
            source_name=str(repo_dir),
        )
    return snapshot
