"""Shared test fixtures: where the corpus lives, and the transformers reference."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# The compile cache on disk is on by default; tests keep it out of the user's home directory, in a
# directory of their own that the process which made it deletes when it exits (pytest-xdist's workers
# inherit the variable, so only the main process makes one)
if "CHATJINJA_CACHE_DIR" not in os.environ:
    os.environ["CHATJINJA_CACHE_DIR"] = tempfile.mkdtemp(prefix="chatjinja-test-cache-")
    atexit.register(shutil.rmtree, os.environ["CHATJINJA_CACHE_DIR"], ignore_errors=True)

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
SEEDS = REPO.parent / "shared" / "seeds"
SHARED = REPO.parent / "shared"


def corpus_or_skip() -> Path:
    if not (CORPUS / "manifest.json").is_file():
        pytest.skip(f"../shared/corpus not found at {CORPUS}: corpus tests need the shared test data beside the checkout")
    return CORPUS


def corpus_templates() -> list[Path]:
    """Every corpus template file, sorted (empty when the corpus is absent)."""
    if not (CORPUS / "templates").is_dir():
        return []
    return sorted((CORPUS / "templates").rglob("*.jinja"))


def render_cases() -> list[dict]:
    path = CORPUS / "render_cases.json"
    if not path.is_file():
        return []
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return corpus_or_skip()
