"""Batch rendering: same texts as one-at-a-time rendering (and as transformers), in order, nothing lost."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import chatjinja
from chatjinja.cli import main
from chatjinja import load_template
from chatjinja.batch import RenderBatchError, RenderFailure, render_jsonl, render_jsonl_dask, render_line

from ..conftest import REPO
from ..reference import hf_outcome

TEMPLATE = "devstral-small-2-24b-instruct-2512"
INPUTS = json.loads((REPO / "benchmarks" / "inputs" / "conversations.json").read_text(encoding="utf-8"))
TOOLS = INPUTS["tools"]
CONVERSATIONS = [INPUTS["conversations"][name] for name in ("short", "medium", "long")]


@pytest.fixture(scope="module")
def template() -> Any:
    return load_template(TEMPLATE)


def _records(n: int) -> list[dict[str, Any]]:
    """n records cycling through the three benchmark conversations, with and without tools."""
    records = []
    for i in range(n):
        record: dict[str, Any] = {"messages": CONVERSATIONS[i % 3]}
        if i % 2:
            record["tools"] = TOOLS
        records.append(record)
    return records


def _bad_lines() -> list[bytes]:
    return [
        b"{not json",
        b"",
        json.dumps({"messages": [{"role": "bogus", "content": "x"}]}).encode(),
        json.dumps({"messages": [{"role": "user", "content": "x"}], "self": None}).encode(),
        b'{"messages": [{"role": "user", "content": "\xff"}]}',
        json.dumps([1, 2]).encode(),
        json.dumps({"messages": [[{"role": "user", "content": "x"}]]}).encode(),
    ]


@pytest.fixture
def jsonl(tmp_path: Path) -> Path:
    lines = [json.dumps(record, ensure_ascii=False).encode() for record in _records(60)]
    lines[7:7] = _bad_lines()
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_batch_matches_transformers(template: Any) -> None:
    texts = chatjinja.render_batch(template, CONVERSATIONS, tools=TOOLS)
    for conversation, text in zip(CONVERSATIONS, texts):
        expected = hf_outcome(template.source, conversation, tools=TOOLS, **template.special_tokens)
        assert expected == ("text", text)


@pytest.mark.parametrize("workers", [1, 2])
def test_batch_is_one_render_per_conversation_in_order(template: Any, workers: int) -> None:
    records = _records(30)
    texts = chatjinja.render_batch(template, records, workers=workers, chunksize=4)
    assert texts == [template.render(r["messages"], tools=r.get("tools")) for r in records]


def test_conversations_may_be_bare_message_lists_or_source_strings(template: Any) -> None:
    texts = chatjinja.render_batch(template.source, CONVERSATIONS, bos_token="<s>", eos_token="</s>")
    assert texts == chatjinja.render_batch(template, CONVERSATIONS)


def test_errors_raise_with_the_index_or_come_back_in_place(template: Any) -> None:
    conversations = [CONVERSATIONS[0], [{"role": "bogus", "content": "x"}], CONVERSATIONS[1]]
    with pytest.raises(RenderBatchError, match=r"conversation 1: TemplateError: Only user, assistant and tool roles") as info:
        chatjinja.render_batch(template, conversations)
    assert info.value.index == 1
    results = chatjinja.render_batch(template, conversations, errors="return", workers=2, chunksize=1)
    assert isinstance(results[1], RenderFailure) and results[1].index == 1
    assert results[0] == template.render(CONVERSATIONS[0]) and results[2] == template.render(CONVERSATIONS[1])


def test_bad_arguments(template: Any) -> None:
    with pytest.raises(ValueError, match="workers"):
        chatjinja.render_batch(template, CONVERSATIONS, workers=0)
    with pytest.raises(ValueError, match="errors"):
        chatjinja.render_batch(template, CONVERSATIONS, errors="ignore")
    with pytest.raises(TypeError, match="ChatTemplate"):
        chatjinja.render_batch(42, CONVERSATIONS)


def test_render_line_never_raises(template: Any) -> None:
    outputs = [json.loads(render_line(template, line)) for line in _bad_lines()]
    assert [list(o) for o in outputs] == [["error"]] * len(outputs)
    assert outputs[0]["error"].startswith("malformed JSON")
    assert outputs[1]["error"] == "empty line"
    assert outputs[3]["error"] == "TypeError: PreTrainedTokenizerBase.apply_chat_template() got multiple values for argument 'self'"
    assert "UTF-8" in outputs[4]["error"]


def _expected_lines(template: Any, path: Path) -> list[str]:
    """render_line on each input line; an error record also names its line number."""
    lines = []
    for number, line in enumerate(path.read_bytes().split(b"\n")[:-1], 1):
        record = json.loads(render_line(template, line))
        if "error" in record:
            record["line"] = number
        lines.append(json.dumps(record, ensure_ascii=False))
    return lines


@pytest.mark.parametrize("workers", [1, 2])
def test_jsonl_line_for_line(template: Any, jsonl: Path, tmp_path: Path, workers: int) -> None:
    out = tmp_path / "out.jsonl"
    seen: list[tuple[int, int]] = []
    summary = render_jsonl(template, jsonl, out, workers=workers, chunksize=8, progress=lambda d, t: seen.append((d, t)))
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == _expected_lines(template, jsonl)
    assert len(lines) == 67 and (summary.ok, summary.errors) == (60, 7)
    assert seen[-1] == (67, 67)
    records = [json.loads(line) for line in lines]
    # the seven bad lines sit between records 6 and 7
    assert records[6]["text"] == template.render(CONVERSATIONS[0])
    assert [list(r) for r in records[7:14]] == [["error", "line"]] * 7
    assert [r["line"] for r in records[7:14]] == list(range(8, 15))
    assert summary.first_error_line == 8
    assert records[14]["text"] == template.render(CONVERSATIONS[1], tools=TOOLS)


def test_interrupted_batch_leaves_no_output(template: Any, jsonl: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"

    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        render_jsonl(template, jsonl, out, chunksize=8, progress=interrupt)
    assert list(tmp_path.iterdir()) == [jsonl]


def test_cli_batch(template: Any, jsonl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["render", TEMPLATE, "--batch", str(jsonl), "-o", str(out), "--workers", "2"]) == 1  # some lines failed
    err = capsys.readouterr().err
    assert "rendered 67 conversations: 60 ok, 7 errors" in err and "2 workers" in err
    assert out.read_text(encoding="utf-8").splitlines() == _expected_lines(template, jsonl)

    clean = tmp_path / "clean.jsonl"
    clean.write_text("".join(json.dumps(r) + "\n" for r in _records(5)), encoding="utf-8")
    assert main(["render", TEMPLATE, "--batch", str(clean)]) == 0
    captured = capsys.readouterr()
    assert [json.loads(line)["text"] for line in captured.out.splitlines()] == [
        template.render(r["messages"], tools=r.get("tools")) for r in _records(5)
    ]
    assert "5 ok, 0 errors" in captured.err


@pytest.mark.parametrize(
    "extra",
    [["-o", "x.jsonl"], ["--workers", "2"]],
)
def test_cli_batch_only_options_need_batch(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", TEMPLATE, *extra]) == 2
    assert "error: --output and --workers go with --batch" in capsys.readouterr().err


def test_cli_batch_usage_and_input_errors(jsonl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", TEMPLATE, "--batch", str(jsonl), "--input", str(jsonl)]) == 2
    assert main(["render", TEMPLATE, "--batch", str(jsonl), "--workers", "-1"]) == 2
    assert main(["render", TEMPLATE, "--batch", str(tmp_path / "missing.jsonl")]) == 1
    assert "input file not found" in capsys.readouterr().err
    # an unwritable output: one error line, no traceback, nothing left behind
    assert main(["render", TEMPLATE, "--batch", str(jsonl), "-o", str(tmp_path / "no" / "such" / "dir.jsonl")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err


def test_cli_batch_template_that_does_not_compile(jsonl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for m in messages %}", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["render", str(broken), "--batch", str(jsonl), "-o", str(out)]) == 1
    assert capsys.readouterr().err.startswith("error: ")
    assert not out.exists()


def test_dask_local_cluster_gives_the_same_file(template: Any, jsonl: Path, tmp_path: Path) -> None:
    pytest.importorskip("dask.bag", reason="the dask extra is not installed")
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    single = tmp_path / "single.jsonl"
    render_jsonl(template, jsonl, single)
    on_dask = tmp_path / "dask.jsonl"
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, silence_logs=40
    ) as cluster, distributed.Client(cluster) as client:
        summary = render_jsonl_dask(template, str(jsonl), on_dask, blocksize=4096, scheduler=client)
        assert len(client.scheduler_info()["workers"]) == 2
    assert on_dask.read_bytes() == single.read_bytes()
    assert (summary.ok, summary.errors) == (60, 7)
    assert os.path.getsize(jsonl) > 3 * 4096  # so the input really was split across tasks


SURROGATE_LINE = b'{"messages": [{"role": "user", "content": "caf\xc3\xa9 \\udcff"}]}'


@pytest.mark.parametrize("workers", [1, 2])
def test_a_batch_loses_no_line_and_writes_valid_utf8(tmp_path: Path, workers: int) -> None:
    """Every kind of bad line gives one error record naming it; the file is written; lone surrogates are escaped."""
    template = chatjinja.ChatTemplate("{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}")
    good = b'{"messages": [{"role": "user", "content": "hi"}]}'
    lines = [good, SURROGATE_LINE, b"{not json", b"[1]", b"x" * 5000, good,
             json.dumps({"messages": [{"role": "user", "content": "y" * 100}]}).encode(), good]
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out.jsonl"
    summary = render_jsonl(template, source, out, workers=workers, chunksize=2, max_line_bytes=4096,
                           budgets={"max_output_chars": 50})
    text = out.read_bytes().decode("utf-8")  # valid UTF-8
    records = [json.loads(line) for line in text.splitlines()]
    assert len(records) == len(lines)
    assert "\\udcff" in text.splitlines()[1] and "caf\u00e9" in text.splitlines()[1]  # escaped, readable
    assert records[1]["text"] == template.render([{"role": "user", "content": "caf\u00e9 \udcff"}])
    errors = {r["line"]: r["error"] for r in records if "error" in r}
    assert sorted(errors) == [3, 4, 5, 7]
    assert errors[3].startswith("malformed JSON")
    assert errors[4].startswith("record must be a JSON object")
    assert errors[5] == "line is longer than the input limit of 4096 bytes"
    assert errors[7].startswith("BudgetExceeded")
    assert (summary.ok, summary.errors, summary.first_error_line) == (4, 4, 3)


def test_an_over_long_line_is_never_read_whole(template: Any, tmp_path: Path) -> None:
    """A 1 GiB line with no newline (a sparse file): refused by the cap, memory bounded by it, not by the line."""
    import tracemalloc

    source = tmp_path / "huge.jsonl"
    with open(source, "wb") as f:
        f.write(json.dumps(_records(1)[0]).encode() + b"\n")
        f.truncate(f.tell() + (1 << 30))  # then 1 GiB of zero bytes, no newline
    out = tmp_path / "out.jsonl"
    tracemalloc.start()
    try:
        summary = render_jsonl(template, source, out, max_line_bytes=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20  # a few MiB: the cap and the read buffer, not the 1 GiB line
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert list(records[0]) == ["text"]
    assert records[1] == {"error": "line is longer than the input limit of 1048576 bytes", "line": 2}
    assert (summary.ok, summary.errors) == (1, 1)


def test_cli_batch_with_bad_lines_writes_the_file_and_exits_1(template: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(SURROGATE_LINE + b"\n" + b"{bad\n")
    out = tmp_path / "out.jsonl"
    assert main(["render", TEMPLATE, "--batch", str(source), "-o", str(out)]) == 1
    assert "1 ok, 1 errors (first on line 2)" in capsys.readouterr().err
    records = [json.loads(line) for line in out.read_bytes().decode("utf-8").splitlines()]
    assert list(records[0]) == ["text"] and records[1]["line"] == 2
    assert main(["render", TEMPLATE, "--batch", str(source), "-o", str(out), "--max-input-bytes", "10"]) == 1
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert records[0] == {"error": "line is longer than the input limit of 10 bytes", "line": 1}
    capsys.readouterr()
    assert main(["render", TEMPLATE, "--batch", "/dev/zero"]) == 1
    assert capsys.readouterr().err == "error: /dev/zero is not a regular file (a batch input is read twice: give a file)\n"


def test_dask_batch_loses_no_line_either(template: Any, jsonl: Path, tmp_path: Path) -> None:
    pytest.importorskip("dask.bag", reason="the dask extra is not installed")
    with open(jsonl, "ab") as f:
        f.write(SURROGATE_LINE + b"\n" + b"z" * 20000 + b"\n")
    single = tmp_path / "single.jsonl"
    render_jsonl(template, jsonl, single, max_line_bytes=16384)
    on_dask = tmp_path / "dask.jsonl"
    summary = render_jsonl_dask(template, str(jsonl), on_dask, blocksize=4096, scheduler="synchronous", max_line_bytes=16384)
    assert on_dask.read_bytes() == single.read_bytes()  # the same records, line numbers included
    records = [json.loads(line) for line in on_dask.read_bytes().decode("utf-8").splitlines()]
    assert len(records) == 69 and records[-1] == {"error": "line is longer than the input limit of 16384 bytes", "line": 69}
    assert "text" in records[-2] and [r["line"] for r in records if "error" in r] == [*range(8, 15), 69]
    assert (summary.ok, summary.errors, summary.first_error_line) == (61, 8, 8)
