"""Never silently empty, and tagged once: transformers' warning for masks asked of a template without
``{% generation %}`` reaches stderr by default (once per template source), the CLI batch summary counts
the records with no assistant token, and ``assistant_masks="derived"`` tags a template (or refuses it)
once per source: once per batch run, however many conversations and workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import chatjinja
import chatjinja.training.apply as apply
import chatjinja.training.generation_tags as generation_tags
from chatjinja.runtime import render as runtime_render
from tests.conftest import REPO
from tests.training.test_tokenize import CHAT, TAGGED, UNTAGGED

pytestmark = pytest.mark.reference

WARNING = "return_assistant_tokens_mask==True but chat template does not contain `{% generation %}` keyword."
REFUSED = "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'user' %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"


def _python(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with no logging configured: what a user's script sees."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}, cwd=REPO,
    )


def test_transformers_warning_is_visible_by_default_once_per_source(bpe_folder: Path) -> None:
    code = f"""
import chatjinja
for source in [{UNTAGGED!r}] * 3 + [{UNTAGGED + ' '!r}] * 2 + [{TAGGED!r}]:
    out = chatjinja.apply_chat_template({CHAT!r}, source, tokenizer={str(bpe_folder)!r}, tokenize=True, return_assistant_tokens_mask=True)
print(sum(out["assistant_masks"]))
"""
    result = _python(code)
    assert result.returncode == 0, result.stderr
    # two untagged sources, three and two calls: one line each; the tagged one says nothing
    assert result.stderr.splitlines() == [WARNING, WARNING]
    assert int(result.stdout) > 0
    # transformers' own words (its handler prefixes its name)
    theirs = _python(
        "import logging, transformers\n"
        f"tok = transformers.AutoTokenizer.from_pretrained({str(bpe_folder)!r})\n"
        f"tok.apply_chat_template({CHAT!r}, chat_template={UNTAGGED!r}, return_assistant_tokens_mask=True)\n"
    )
    assert f"[transformers] {WARNING}" in theirs.stderr.splitlines()


def test_an_application_that_configures_logging_gets_the_warning_once(bpe_folder: Path) -> None:
    code = f"""
import logging, chatjinja
logging.basicConfig(format="app: %(name)s %(levelname)s %(message)s")
chatjinja.apply_chat_template({CHAT!r}, {UNTAGGED!r}, tokenizer={str(bpe_folder)!r}, tokenize=True, return_assistant_tokens_mask=True)
"""
    result = _python(code)
    assert result.stderr.splitlines() == [f"app: chatjinja WARNING {WARNING}"]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_cli_batch_counts_records_with_no_assistant_token(bpe_folder: Path, tmp_path: Path, workers: str) -> None:
    (tmp_path / "untagged.jinja").write_text(UNTAGGED)
    (tmp_path / "tagged.jinja").write_text(TAGGED)
    records = [{"messages": CHAT}, {"messages": CHAT[:2]}, {"messages": [{"role": "user", "content": "hi"}]}, "not an object"]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))

    def run(template: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "chatjinja", "render", template, "--batch", "in.jsonl", "--tokenize", "--tokenizer",
             str(bpe_folder), "--workers", workers, "-o", "out.jsonl"],
            capture_output=True, text=True, timeout=300, cwd=tmp_path, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
        )

    untagged = run("untagged.jinja")
    lines = untagged.stderr.splitlines()
    assert lines[0] == WARNING and len(lines) == 2, untagged.stderr  # once for the run, whatever the workers
    assert lines[1].startswith("rendered 4 conversations: 3 ok, 1 errors (first on line 4), 3 with no assistant token, ")
    assert untagged.returncode == 1  # the bad line; all-zero masks alone exit 0 (README's exit codes)
    tagged = run("tagged.jinja")
    (line,) = tagged.stderr.splitlines()
    # the user-only conversation has no assistant token even with tags
    assert line.startswith("rendered 4 conversations: 3 ok, 1 errors (first on line 4), 1 with no assistant token, ")
    text = subprocess.run(
        [sys.executable, "-m", "chatjinja", "render", "tagged.jinja", "--batch", "in.jsonl", "-o", "text.jsonl"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert "assistant token" not in text.stderr  # a text batch has no masks to count


class _Counter:
    """``add_generation_tags`` counting its calls in a file (worker processes count too)."""

    def __init__(self, path: Path):
        self.path = path
        self.original = generation_tags.add_generation_tags

    def __call__(self, source: str) -> str:
        with open(self.path, "a") as f:
            f.write("x")
        return self.original(source)

    @property
    def calls(self) -> int:
        return len(self.path.read_text()) if self.path.exists() else 0


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> _Counter:
    counting = _Counter(tmp_path / "calls")
    monkeypatch.setattr(generation_tags, "add_generation_tags", counting)  # where apply calls it
    monkeypatch.setattr(apply, "_DERIVED", type(apply._DERIVED)())  # nothing tagged yet in this process
    return counting


@pytest.mark.parametrize("workers", [1, 2])
def test_a_refused_template_is_tagged_once_per_batch(bpe_folder: Path, counter: _Counter, workers: int) -> None:
    conversations = [CHAT, CHAT[:2], CHAT[:3], CHAT] * 5
    results = chatjinja.render_batch(REFUSED, conversations, workers=workers, errors="return", tokenize=True,
                                     tokenizer=bpe_folder, assistant_masks="derived")
    assert counter.calls == 1
    # the refusal is named in every record that needed it
    assert [failure.error for failure in results] == ["GenerationTagsRefused: the template renders no assistant message content"] * 20


@pytest.mark.parametrize("workers", [1, 2])
def test_a_template_is_tagged_once_per_batch(bpe_folder: Path, counter: _Counter, workers: int) -> None:
    conversations = [CHAT, CHAT[:2], CHAT[:3], CHAT] * 5
    got = chatjinja.render_batch(UNTAGGED, conversations, workers=workers, tokenize=True, tokenizer=bpe_folder, assistant_masks="derived")
    assert counter.calls == 1
    tagged = chatjinja.add_generation_tags(UNTAGGED)
    assert got == [
        {key: out[key] for key in ("input_ids", "assistant_masks")}
        for out in (chatjinja.apply_chat_template(c, tagged, tokenizer=bpe_folder, tokenize=True, return_assistant_tokens_mask=True)
                    for c in conversations)
    ]


def test_calls_tag_once_per_source(bpe_folder: Path, counter: _Counter) -> None:
    for _ in range(3):
        with pytest.raises(chatjinja.training.generation_tags.GenerationTagsRefused, match="renders no assistant message content"):
            chatjinja.apply_chat_template(CHAT, REFUSED, tokenizer=bpe_folder, tokenize=True, return_assistant_tokens_mask=True,
                                          assistant_masks="derived")
        chatjinja.apply_chat_template(CHAT, UNTAGGED, return_assistant_spans=True, assistant_masks="derived")
    assert counter.calls == 2


def test_the_warning_cache_is_bounded() -> None:
    runtime_render._WARNED.clear()
    for i in range(runtime_render._WARNED_SIZE + 10):
        runtime_render.warn_once("w", str(i))
    assert len(runtime_render._WARNED) <= runtime_render._WARNED_SIZE
