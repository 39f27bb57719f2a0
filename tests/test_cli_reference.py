"""docs/reference/cli.md is what the argument parser says: every command, argument, choice and default."""

from __future__ import annotations

import importlib.util

from tests.conftest import REPO


def _generator():
    spec = importlib.util.spec_from_file_location("cli_reference", REPO / "tools" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_matches_the_parser() -> None:
    generator = _generator()
    page = (REPO / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert page == generator.render(), "docs/reference/cli.md is stale: run `python tools/cli_reference.py`"


def test_every_option_of_every_command_is_on_the_page() -> None:
    from chatjinja.cli import build_parser

    generator = _generator()
    page = (REPO / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    commands = generator.subcommands(build_parser())
    assert len(commands) >= 9
    for name, parser in commands.items():
        section = page.split(f"## `chatjinja {name}`", 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            if action.dest == "help":
                continue  # every command takes --help (the page says so once)
            for flag in action.option_strings:
                assert f"`{flag}`" in section, f"{name}: {flag} missing from docs/reference/cli.md"
