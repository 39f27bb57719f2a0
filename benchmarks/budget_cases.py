"""What the budget benchmarks render: a committed conversation with its tools, the special tokens,
and the corpus templates (read from ``../shared/corpus``, never copied here)."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared" / "corpus"
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
CONVERSATIONS = ("short", "medium", "long")


def conversation(name: str = "medium") -> tuple[list, list]:
    """The messages of ``inputs/conversations.json``'s conversation ``name``, and the tools."""
    data = json.loads((HERE / "inputs" / "conversations.json").read_text(encoding="utf-8"))
    return data["conversations"][name], data["tools"]


def corpus_templates() -> list[Path]:
    """Every corpus template, sorted by path; exits with a message when the corpus is not there."""
    paths = sorted((CORPUS / "templates").rglob("*.jinja"))
    if not paths:
        raise SystemExit(f"corpus not found at {CORPUS}")
    return paths
