"""docs/reference/cli.md and api.md are what the argument parser and the code say: every command, option, export and signature."""

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


def test_api_reference_matches_the_code() -> None:
    spec = importlib.util.spec_from_file_location("api_reference", REPO / "tools" / "api_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = (REPO / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    assert page == module.render(), "docs/reference/api.md is stale: run `python tools/api_reference.py`"


def test_api_reference_covers_every_export() -> None:
    import chatjinja

    spec = importlib.util.spec_from_file_location("api_reference", REPO / "tools" / "api_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    missing = set(chatjinja.__all__) - {"__version__"} - module.exported_names()
    assert not missing, f"exported but not in docs/reference/api.md: {sorted(missing)}"


def test_budgets_reference_states_the_defaults_and_flags() -> None:
    """docs/reference/budgets.md: one row per budget, its default as Budgets() has it, its CLI flag as the parser has it."""
    import re

    from chatjinja.cli import build_parser
    from chatjinja.runtime.budget import Budgets

    page = (REPO / "docs" / "reference" / "budgets.md").read_text(encoding="utf-8")
    rows = {m.group(1): (m.group(2), m.group(3)) for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \|.*\| `(--[\w-]+)[^|]*` \|$", page, re.M)}
    defaults = Budgets()
    assert sorted(rows) == sorted(Budgets.names())
    render_flags = {flag for action in build_parser()._subparsers._group_actions[0].choices["render"]._actions
                    for flag in action.option_strings}
    for name, (shown, flag) in rows.items():
        value = getattr(defaults, name)
        number = float(re.match(r"[\d,.]+", shown).group(0).replace(",", ""))
        assert number == value, f"{name}: the page says {shown}, Budgets() has {value}"
        assert flag in render_flags, f"{name}: {flag} is not an option of chatjinja render"
