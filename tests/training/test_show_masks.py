"""``chatjinja render --tokenize --show-masks``: the marked text is the rendered text, its tokens are the ids, its marked runs are the mask.

The mask and ids compared are transformers' own (``apply_chat_template(tokenize=True,
return_assistant_tokens_mask=True)`` on the same model folder), the text is transformers' render.
"""

from __future__ import annotations

import json
import re

import pytest

from chatjinja.cli import main
from chatjinja.training import show
from chatjinja.training.rules import TRAINING_RULES
from tests.conftest import CORPUS
from tests.training.conftest import reference_tokenizer

pytestmark = pytest.mark.reference

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
TEMPLATES = {
    "inline": TRAINING_RULES[1].use_instead(),  # {% generation %} around the reply and its <|end|>
    "qwen3": (CORPUS / "templates" / "trl" / "qwen3_training.jinja"),
}
CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "héllo wörld 👋 how are you"},
                {"role": "assistant", "content": "fine thanks 😀 and you"}, {"role": "user", "content": "done"},
                {"role": "assistant", "content": "again ñ"}]


def parse(shown: str) -> tuple[list[str], list[int]]:
    """The shown text back into (token texts, mask): each of · « » is one boundary, « starts and » ends a trained run."""
    pieces, mask, trained, current = [], [], False, ""
    if shown.startswith(show.OPEN):
        shown, trained = shown[1:], True
    if shown.endswith(show.CLOSE):
        shown = shown[:-1]
    for char in shown:
        if char in (show.BOUNDARY, show.OPEN, show.CLOSE):
            pieces.append(current)
            mask.append(int(trained))
            current, trained = "", {show.OPEN: True, show.CLOSE: False}.get(char, trained)
        else:
            current += char
    pieces.append(current)
    mask.append(int(trained))
    return pieces, mask


def _template(name: str, tmp_path) -> tuple[str, str]:
    source = TEMPLATES[name]
    if not isinstance(source, str):
        if not source.is_file():
            pytest.skip("the corpus is not present")
        source = source.read_text(encoding="utf-8")
    path = tmp_path / "chat_template.jinja"
    path.write_text(source, encoding="utf-8")
    return source, str(path)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_shown_text_is_the_render_and_the_marks_are_the_mask(name, bpe_folder, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    source, path = _template(name, tmp_path)
    (tmp_path / "in.json").write_text(json.dumps({"messages": CONVERSATION}), encoding="utf-8")
    assert main(["render", path, "-i", str(tmp_path / "in.json"), "--tokenize", "--tokenizer", str(bpe_folder), "--show-masks"]) == 0
    shown = capsys.readouterr().out
    assert shown.endswith("\n") and "\x1b" not in shown  # captured: not a terminal, no colours
    reference = reference_tokenizer(bpe_folder)
    text = reference.apply_chat_template(CONVERSATION, chat_template=source, tokenize=False)
    out = reference.apply_chat_template(CONVERSATION, chat_template=source, tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    assert re.sub("[·«»]", "", shown[:-1]) == text
    pieces, mask = parse(shown[:-1])
    assert mask == list(out["assistant_masks"]) and 1 in mask and 0 in mask
    assert len(pieces) == len(out["input_ids"])
    # each shown piece is its token: the pieces up to each boundary decode from the ids up to it
    ids = list(out["input_ids"])
    for cut in range(0, len(ids) + 1, 7):
        assert "".join(pieces[:cut]) == reference.decode(ids[:cut]) or "\ufffd" in reference.decode(ids[:cut])


def test_batch_numbers_each_record_and_reports_a_bad_line(bpe_folder, tmp_path, capsys) -> None:
    _, path = _template("inline", tmp_path)
    lines = [json.dumps({"messages": CONVERSATION[:3]}), "not json", json.dumps({"messages": CONVERSATION})]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(["render", path, "--batch", str(tmp_path / "in.jsonl"), "--tokenize", "--tokenizer", str(bpe_folder), "--show-masks"])
    out = capsys.readouterr().out
    assert code == 1
    records = out.split("\n\n")
    assert records[0].startswith("#1\n") and records[1].startswith("#2 error: ") and records[2].startswith("#3\n")
    assert records[0].count("«") == 1 and records[2].count("«") == 2


def test_batch_lines_over_the_input_cap_are_refused_unread(bpe_folder, tmp_path, capsys) -> None:
    """``--max-input-bytes`` bounds each line of a --show-masks batch, as of a JSONL batch: an error record, the rest shown."""
    _, path = _template("inline", tmp_path)
    short = json.dumps({"messages": CONVERSATION[:3]})
    lines = [short, json.dumps({"messages": [{"role": "user", "content": "x" * 5000}]}), short]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(["render", path, "--batch", str(tmp_path / "in.jsonl"), "--tokenize", "--tokenizer", str(bpe_folder),
                 "--show-masks", "--max-input-bytes", "1000"])
    records = capsys.readouterr().out.split("\n\n")
    assert code == 1
    assert records[0].startswith("#1\n") and records[2].startswith("#3\n")
    assert records[1] == "#2 error: InputError: line is longer than the input limit of 1000 bytes"


def test_a_batch_input_is_numbered(bpe_folder, tmp_path, capsys) -> None:
    _, path = _template("inline", tmp_path)
    (tmp_path / "in.json").write_text(json.dumps({"messages": [CONVERSATION[:3], CONVERSATION]}), encoding="utf-8")
    assert main(["render", path, "-i", str(tmp_path / "in.json"), "--tokenize", "--tokenizer", str(bpe_folder), "--show-masks"]) == 0
    out = capsys.readouterr().out
    assert re.findall(r"^#\d+$", out, re.M) == ["#1", "#2"]


def test_colours_only_on_a_terminal_without_no_color(monkeypatch) -> None:
    class Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert show.use_colour(Terminal()) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert show.use_colour(Terminal()) is False
    monkeypatch.delenv("NO_COLOR")
    pieces, mask = ["<|user|>", "hi\n", "<|assistant|>", "ok", "<|end|>\n"], [0, 0, 0, 1, 1]
    coloured = show.show_masks(pieces, mask, colour=True)
    assert _ANSI.sub("", coloured) == "".join(pieces)
    assert coloured.count("\x1b[30;") == 2  # the two trained tokens, black on green
    assert show.show_masks(pieces, mask) == "<|user|>·hi\n·<|assistant|>«ok·<|end|>\n»"


def test_show_masks_needs_tokenize(tmp_path, capsys) -> None:
    _, path = _template("inline", tmp_path)
    (tmp_path / "in.json").write_text(json.dumps({"messages": CONVERSATION}), encoding="utf-8")
    assert main(["render", path, "-i", str(tmp_path / "in.json"), "--show-masks"]) == 2


UNTAGGED = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def test_a_batch_summary_counts_the_conversations_with_no_assistant_token(bpe_folder, tmp_path, capsys) -> None:
    """Never silently empty: a --show-masks batch ends with the JSONL batch's summary, all-zero masks counted."""
    _, path = _template("inline", tmp_path)
    untagged = tmp_path / "untagged.jinja"
    untagged.write_text(UNTAGGED, encoding="utf-8")
    lines = [json.dumps({"messages": CONVERSATION[:3]}), "not json", json.dumps({"messages": CONVERSATION[:2]})]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    common = ["--batch", str(tmp_path / "in.jsonl"), "--tokenize", "--tokenizer", str(bpe_folder), "--show-masks"]
    assert main(["render", path, *common]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("rendered 3 conversations: 2 ok, 1 errors (first on line 2), 1 with no assistant token, "), last
    assert main(["render", str(untagged), *common]) == 1
    err = capsys.readouterr().err  # (transformers' warning goes through logging: tests/training/test_mask.py)
    assert err.strip().splitlines()[-1].startswith("rendered 3 conversations: 2 ok, 1 errors (first on line 2), "
                                                   "2 with no assistant token, ")


def test_one_conversation_with_no_assistant_token_says_so(bpe_folder, tmp_path, capsys) -> None:
    untagged = tmp_path / "untagged.jinja"
    untagged.write_text(UNTAGGED, encoding="utf-8")
    (tmp_path / "in.json").write_text(json.dumps({"messages": CONVERSATION}), encoding="utf-8")
    assert main(["render", str(untagged), "-i", str(tmp_path / "in.json"), "--tokenize", "--tokenizer", str(bpe_folder),
                 "--show-masks"]) == 0
    captured = capsys.readouterr()
    assert "«" not in captured.out
    assert captured.err.strip().splitlines()[-1] == "note: the conversation has no assistant token (its assistant mask is all zero)"
    _, path = _template("inline", tmp_path)
    assert main(["render", path, "-i", str(tmp_path / "in.json"), "--tokenize", "--tokenizer", str(bpe_folder), "--show-masks"]) == 0
    assert "no assistant token" not in capsys.readouterr().err
