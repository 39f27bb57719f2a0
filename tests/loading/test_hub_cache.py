"""The Hugging Face cache layout, offline: ``org/name`` resolves through ``refs/main`` to a snapshot, as transformers finds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatjinja import TemplateNotFound, load_template
from chatjinja.loading import hub_cache_dir, hub_snapshot
from tests.loading.test_folders import CONVERSATION, LAYOUTS, TOOLS, write_folder

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OLD_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def make_cache(root: Path, repo: str = "acme/tiny-chat") -> Path:
    repo_dir = root / ("models--" + repo.replace("/", "--"))
    write_folder(repo_dir / "snapshots" / COMMIT, LAYOUTS["jinja-plus-additional"])
    write_folder(repo_dir / "snapshots" / OLD_COMMIT, LAYOUTS["config-string"])
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(COMMIT)  # huggingface_hub writes no newline
    (repo_dir / "refs" / "v1").write_text(OLD_COMMIT)
    # huggingface_hub's marker for "the repo has no such file", so transformers does not look for a config.json
    for commit in (COMMIT, OLD_COMMIT):
        (repo_dir / ".no_exist" / commit).mkdir(parents=True)
        (repo_dir / ".no_exist" / commit / "config.json").write_text("")
    return root


def test_cache_dir_follows_huggingface_hub_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hub_cache_dir() == tmp_path / "home" / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    assert hub_cache_dir() == tmp_path / "hfhome" / "hub"
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", str(tmp_path / "legacy"))
    assert hub_cache_dir() == tmp_path / "legacy"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert hub_cache_dir() == tmp_path / "hub"


def test_huggingface_hub_agrees_on_the_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """huggingface_hub reads the environment at import, so ask a fresh interpreter."""
    import json
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    code = "import json, huggingface_hub.constants as c; print(json.dumps(c.HF_HUB_CACHE))"
    theirs = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
    code = "import json; from chatjinja.loading import hub_cache_dir; print(json.dumps(str(hub_cache_dir())))"
    ours = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
    assert ours == theirs


def test_hub_id_resolves_refs_main(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    snapshot = cache / "models--acme--tiny-chat" / "snapshots" / COMMIT
    assert hub_snapshot("acme/tiny-chat") == snapshot
    template = load_template("acme/tiny-chat")
    assert template.name == str(snapshot / "chat_template.jinja")
    assert template.metadata["hub_repo"] == "acme/tiny-chat" and template.metadata["snapshot"] == str(snapshot)
    assert template.origin.startswith(f"hub cache acme/tiny-chat@main -> {snapshot}")
    assert load_template("hf:acme/tiny-chat@v1").name == f"{cache / 'models--acme--tiny-chat' / 'snapshots' / OLD_COMMIT / 'tokenizer_config.json'}#chat_template"
    assert load_template(f"acme/tiny-chat@{OLD_COMMIT}", cache_dir=cache).source == LAYOUTS["config-string"]["tokenizer_config.json"]["chat_template"]
    assert load_template("acme/tiny-chat", "rag").metadata["chat_template_name"] == "rag"


@pytest.mark.reference
def test_hub_cache_matches_transformers(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    import tests.reference  # noqa: F401 - sets HF_HUB_OFFLINE before transformers loads

    cache = make_cache(tmp_path / "cache")
    tok = AutoTokenizer.from_pretrained("acme/tiny-chat", cache_dir=str(cache), local_files_only=True)
    template = load_template("acme/tiny-chat", cache_dir=cache)
    assert template.metadata["chat_templates"] == tok.chat_template
    assert template.special_tokens == tok.special_tokens_map
    for kwargs in ({}, {"tools": TOOLS}):
        assert template.render(CONVERSATION, **kwargs) == tok.apply_chat_template(CONVERSATION, tokenize=False, **kwargs)


def test_missing_repo_and_revision(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache")
    with pytest.raises(TemplateNotFound, match=r"'acme/other'.*not in the Hugging Face cache .*never downloads"):
        load_template("acme/other", cache_dir=cache)
    with pytest.raises(TemplateNotFound, match=r"revision 'v9' is not in the cache .*cached snapshots: 0123"):
        load_template("hf:acme/tiny-chat@v9", cache_dir=cache)
