"""The README's exit-code table is true: every cell of it has an example run here, and every example has its cell.

The table (README.md, "## Exit codes") has one row per command and one column per code; a cell
holding "-" says the command never exits with that code. Adding a row or a cell without an example
here, or an example without its cell, fails ``test_every_cell_has_an_example``.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Callable

import pytest

from chatjinja.cli import COMMAND_MODULES, main

from .conftest import REPO

LEAKY = "{% for m in messages %}\n    {{ m.role }}\n{% endfor %}"
CLEAN = "{%- for m in messages %}{{- '[INST]' }}{%- endfor %}"
HELLO = {"messages": [{"role": "user", "content": "Hello"}]}


def _table() -> dict[str, dict[int, str]]:
    """``{command: {code: cell}}`` from the README's table."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header[0] == "command" and rows[1].startswith("|---")
    codes = [int(code) for code in header[1:]]
    table = {}
    for row in rows[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        command = re.fullmatch(r"`([a-z -]+)`", cells[0]).group(1)  # type: ignore[union-attr]
        table[command] = dict(zip(codes, cells[1:]))
    return table


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above tmp_path has [tool.chatjinja]
    monkeypatch.setenv("CHATJINJA_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "clean.jinja").write_text(CLEAN)
    (tmp_path / "leaky.jinja").write_text(LEAKY)
    (tmp_path / "in.json").write_text(json.dumps(HELLO))
    (tmp_path / "in.jsonl").write_text(json.dumps(HELLO) + "\n")
    (tmp_path / "some-bad.jsonl").write_text(json.dumps(HELLO) + "\n{not json\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages[0].content }}"}))
    (tmp_path / "rejected.json").write_text(json.dumps([{"name": "bad role", "messages": [{"role": "bogus", "content": "x"}]}]))
    return tmp_path


def _unlink_refused(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache entry that cannot be deleted (root ignores permission bits: refused as a read-only directory would)."""
    assert main(["render", "clean.jinja", "-i", "in.json"]) == 0  # one entry in the cache
    (entry,) = (workdir / "cache").glob("*.jcode")
    original = Path.unlink

    def refuse(self: Path, missing_ok: bool = False) -> None:
        if self.name == entry.name:
            raise PermissionError(13, "Permission denied")
        original(self, missing_ok)

    monkeypatch.setattr(Path, "unlink", refuse)


def _needs_minijinja(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chatjinja.portability import EngineUnavailable, engine

    try:
        engine("minijinja")
    except EngineUnavailable as missing:
        pytest.skip(f"minijinja unavailable: {missing.reason}")


def _needs_mistral(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mistral_common", reason="the [mistral] extra is not installed")


# (command row, exit code) -> (argv, setup or None)
EXAMPLES: dict[tuple[str, int], tuple[list[str], Callable[[Path, pytest.MonkeyPatch], None] | None]] = {
    ("render", 0): (["render", "clean.jinja", "-i", "in.json"], None),
    ("render", 1): (["render", "clean.jinja", "-i", "missing.json"], None),
    ("render", 2): (["render", "clean.jinja", "-i", "in.json", "--timeout", "nan"], None),
    ("render --batch", 0): (["render", "clean.jinja", "--batch", "in.jsonl", "-o", "out.jsonl"], None),
    ("render --batch", 1): (["render", "clean.jinja", "--batch", "some-bad.jsonl", "-o", "out.jsonl"], None),
    ("render --batch", 2): (["render", "clean.jinja", "--batch", "in.jsonl", "--input", "in.json"], None),
    ("templates", 0): (["templates"], None),
    ("templates", 2): (["templates", "--bogus"], None),
    ("analyze", 0): (["analyze", "clean.jinja"], None),
    ("analyze", 1): (["analyze", "missing.jinja"], None),
    ("analyze", 2): (["analyze", "clean.jinja", "--format", "xml"], None),
    ("lint", 0): (["lint", "clean.jinja"], None),
    ("lint", 1): (["lint", "leaky.jinja"], None),
    ("lint", 2): (["lint", "clean.jinja", "--select", "XX999"], None),
    ("rules", 0): (["rules"], None),
    ("rules", 2): (["rules", "NOPE1"], None),
    ("diff", 0): (["diff", "clean.jinja", "clean.jinja"], None),
    ("diff", 1): (["diff", "clean.jinja", "missing.jinja"], None),
    ("diff", 2): (["diff", "clean.jinja", "clean.jinja", "--fail-on", "bogus"], None),
    ("check", 0): (["check", "model", "--fail-level", "error"], None),
    ("check", 1): (["check", "model"], None),
    ("check", 2): (["check", "model", "--fail-level", "loud"], None),
    ("conform", 0): (["conform", "mistral-v2-v3", "--against", "mistral-common:v3", "--conversations", "rejected.json"], _needs_mistral),
    ("conform", 1): (["conform", "missing.jinja", "--against", "mistral-common:v3"], _needs_mistral),
    ("conform", 2): (["conform", "mistral-v2-v3", "--against", "mistral-common:v99"], None),
    ("portability", 0): (["portability", "clean.jinja", "--engines", "minijinja"], _needs_minijinja),
    ("portability", 1): (["portability", "missing.jinja"], None),
    ("portability", 2): (["portability", "clean.jinja", "--engines", "jinja3"], None),
    ("cache", 0): (["cache"], None),
    ("cache", 1): (["cache", "clear"], _unlink_refused),
    ("cache", 2): (["cache", "info", "--max-mb", "5"], None),
}


def test_the_table_has_one_row_per_command() -> None:
    table = _table()
    assert {row.split()[0] for row in table} == set(COMMAND_MODULES)
    assert all(set(cells) == {0, 1, 2, 130} for cells in table.values())


def test_every_cell_has_an_example() -> None:
    cells = {(row, code) for row, by_code in _table().items() for code, text in by_code.items() if text != "-" and code != 130}
    assert cells == set(EXAMPLES)


@pytest.mark.parametrize("row, code", sorted(EXAMPLES))
def test_the_example_exits_as_the_table_says(
    row: str, code: int, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, setup = EXAMPLES[row, code]
    if setup is not None:
        setup(workdir, monkeypatch)
    capsys.readouterr()
    try:
        got = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        got = exc.code
    err = capsys.readouterr().err
    assert got == code, err
    if code != 0 and row != "render --batch" and row != "cache":
        assert err.startswith("error: ") or err == "", err  # findings are reports on stdout; errors one line
    assert "Traceback" not in err
    if row == "render --batch" and code == 1:  # the failed line did not cost the file
        assert len((workdir / "out.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize("row", sorted(_table()))
def test_an_interrupt_exits_130(row: str, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C in any command: ``error: interrupted``, exit 130 (the command's work raises KeyboardInterrupt)."""
    command = row.split()[0]
    module = importlib.import_module(f"chatjinja.commands.{command}")

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "run", interrupted)  # register() binds run when the parser is built
    argv = next(argv for (r, code), (argv, _) in EXAMPLES.items() if r == row and code == 0)
    assert main(argv) == 130
    assert capsys.readouterr().err == "error: interrupted\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "missing.jinja", "-i", "in.json"],
        ["render", "clean.jinja", "-i", "missing.json"],
        ["render", "clean.jinja", "--batch", "missing.jsonl"],
        ["analyze", "missing.jinja"],
        ["lint", "missing.jinja"],
        ["diff", "clean.jinja", "missing.jinja"],
        ["check", "missing"],
        ["conform", "missing.jinja", "--against", "mistral-common:v3"],
        ["conform", "mistral-v2-v3", "--against", "mistral-common:v3", "--conversations", "missing.json"],
        ["portability", "missing.jinja"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_a_missing_file_exits_1_in_every_command(
    argv: list[str], workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if argv[0] == "conform":
        _needs_mistral(workdir, monkeypatch)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "missing" in err, err
