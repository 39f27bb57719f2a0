"""Options mean the same in every command: TEMPLATE's help, --output, --fail-level never."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from chatjinja.cli import build_parser, main
from chatjinja.commands._common import TEMPLATE_HELP


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("command", ["render", "analyze", "lint", "conform"])
def test_template_help_lists_every_kind_from_one_place(command: str) -> None:
    (template,) = [a for a in _subcommands()[command]._actions if a.metavar == "TEMPLATE"]
    assert template.help.startswith(TEMPLATE_HELP)
    for kind in ("template file", "model folder", "tokenizer_config.json", "chat_template.json", "GGUF file",
                 "bundled template", "hf:org/name", "#name"):
        assert kind in TEMPLATE_HELP


def test_analyze_writes_its_report_to_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o022)
    try:
        assert main(["analyze", "mistral-v1", "--format", "json", "-o", "caps.json"]) == 0
    finally:
        os.umask(old)
    assert capsys.readouterr().out == ""
    assert json.loads((tmp_path / "caps.json").read_text())["template"] == "mistral-v1"
    assert (tmp_path / "caps.json").stat().st_mode & 0o777 == 0o644
    assert main(["analyze", "mistral-v1", "-o", "no/such/caps.txt"]) == 1
    assert capsys.readouterr().err == "error: cannot write no/such/caps.txt: directory no/such does not exist\n"


@pytest.mark.parametrize("command", ["lint", "check"])
def test_fail_level_never_in_every_command_that_has_a_fail_level(command: str) -> None:
    (option,) = [a for a in _subcommands()[command]._actions if "--fail-level" in a.option_strings]
    assert tuple(option.choices) == ("note", "warning", "error", "never")
