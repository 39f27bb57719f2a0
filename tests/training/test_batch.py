"""Tokenized batches: ``render_batch``/``render_jsonl``/Dask and ``render --tokenize`` give apply_chat_template's ids and masks, losing nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import chatjinja
from chatjinja.batch import render_jsonl
from tests.conftest import REPO
from tests.training.test_tokenize import CHAT, TAGGED


@pytest.fixture(scope="module")
def model_folder(bpe_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("model")
    shutil.copytree(bpe_folder, folder, dirs_exist_ok=True)
    (folder / "chat_template.jinja").write_text(TAGGED)
    return folder


def _expected(folder: Path, messages: list, **options: object) -> dict:
    out = chatjinja.apply_chat_template(messages, TAGGED, tokenizer=folder, tokenize=True, return_assistant_tokens_mask=True, **options)
    return {"input_ids": out["input_ids"], "assistant_masks": out["assistant_masks"]}


CONVERSATIONS = [CHAT, CHAT[:2], [{"role": "user", "content": "hi"}], CHAT[:3]]


@pytest.mark.parametrize("workers", [1, 2])
def test_render_batch_tokenized(model_folder: Path, workers: int) -> None:
    template = chatjinja.load_template(model_folder)
    got = chatjinja.render_batch(template, CONVERSATIONS, workers=workers, tokenize=True, sanitize_control_tokens=True)
    assert got == [_expected(model_folder, messages, sanitize_control_tokens=True) for messages in CONVERSATIONS]
    assert got[0]["input_ids"] != _expected(model_folder, CHAT)["input_ids"]  # the sanitized one differs: the option arrived


def test_batch_refuses_per_call_options(model_folder: Path) -> None:
    with pytest.raises(ValueError, match="padding is not a batch option"):
        chatjinja.render_batch(chatjinja.load_template(model_folder), CONVERSATIONS, tokenize=True, padding=True)
    with pytest.raises(ValueError, match="sanitize_control_tokens goes with tokenize=True"):
        chatjinja.render_batch(chatjinja.load_template(model_folder), CONVERSATIONS, sanitize_control_tokens=True)


def _input_file(tmp_path: Path) -> Path:
    lines = [json.dumps({"messages": messages}) for messages in CONVERSATIONS]
    lines.insert(1, "{not json")
    lines.append(json.dumps({"messages": []}))
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _check_output(folder: Path, text: str) -> None:
    records = [json.loads(line) for line in text.splitlines()]
    assert len(records) == len(CONVERSATIONS) + 2
    assert records[1] == {"error": "malformed JSON: Expecting property name enclosed in double quotes (column 2)", "line": 2}
    assert records[-1]["line"] == len(CONVERSATIONS) + 2 and "empty conversation" in records[-1]["error"]
    kept = [record for record in records if "error" not in record]
    assert kept == [_expected(folder, messages) for messages in CONVERSATIONS]


@pytest.mark.parametrize("workers", [1, 2])
def test_render_jsonl_tokenized_loses_nothing(model_folder: Path, tmp_path: Path, workers: int) -> None:
    out = tmp_path / "out.jsonl"
    summary = render_jsonl(chatjinja.load_template(model_folder), _input_file(tmp_path), out, workers=workers, tokenize=True)
    assert (summary.ok, summary.errors, summary.first_error_line) == (len(CONVERSATIONS), 2, 2)
    _check_output(model_folder, out.read_text())


def test_dask_path_tokenized(model_folder: Path, tmp_path: Path) -> None:
    pytest.importorskip("dask.bag")
    from chatjinja.batch import render_jsonl_dask

    out = tmp_path / "out.jsonl"
    summary = render_jsonl_dask(chatjinja.load_template(model_folder), str(_input_file(tmp_path)), out, scheduler="sync",
                                tokenize=True, tokenizer=str(model_folder))
    assert summary.errors == 2
    _check_output(model_folder, out.read_text())


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "chatjinja", "render", *args], capture_output=True, text=True, env=env)


def test_cli_batch_tokenize(model_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = _cli(str(model_folder), "--batch", str(_input_file(tmp_path)), "--tokenize", "-o", str(out), "--workers", "2")
    assert result.returncode == 1, result.stderr  # some lines failed
    assert "Traceback" not in result.stderr
    _check_output(model_folder, out.read_text())
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"messages": CHAT}))
    result = _cli(str(model_folder), "-i", str(single), "--tokenize")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == _expected(model_folder, CHAT)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tokenize"], "--tokenize needs --tokenizer PATH"),
        (["--tokenizer", "x"], "go with --tokenize"),
        (["--tokenize", "--json"], "drop --json"),
    ],
)
def test_cli_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    template = tmp_path / "t.jinja"
    template.write_text(TAGGED)
    result = _cli(str(template), *args)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_cli_missing_tokenizer_is_one_line(tmp_path: Path) -> None:
    template = tmp_path / "t.jinja"
    template.write_text(TAGGED)
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"messages": CHAT}))
    result = _cli(str(template), "-i", str(single), "--tokenize", "--tokenizer", str(tmp_path / "nope"))
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        f"error: tokenizer {str(tmp_path / 'nope')!r} does not exist (give a tokenizer.json file or a model folder)"
    ]
