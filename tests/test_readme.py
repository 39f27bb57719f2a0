"""The README's quick start stays true: exactly two commands, and .ci/run runs the second verbatim."""

from __future__ import annotations

import re

from tests.conftest import REPO


def _quick_start_commands() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, flags=re.DOTALL)


def test_quick_start_has_exactly_two_commands():
    commands = _quick_start_commands()
    assert len(commands) == 2
    assert all("\n" not in c for c in commands)
    assert "chatjinja" in commands[0] and "templates" in commands[0]
    assert "pytest" in commands[1] and "[test]" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert _quick_start_commands()[1] in ci
