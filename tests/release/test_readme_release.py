"""The README's "Release workflow" stays true: its commands parse, its hook ids exist, its diff output is real."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from chatjinja.cli import build_parser
from tests.conftest import REPO

SECTION = (REPO / "README.md").read_text(encoding="utf-8").split("## Release workflow", 1)[1].split("\n## ", 1)[0]


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)\n```", SECTION, flags=re.DOTALL)


def test_pre_commit_example_uses_published_hooks() -> None:
    published = {hook["id"] for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    config = next(yaml.safe_load(b) for b in blocks("yaml") if "repos" in b)
    used = {hook["id"] for repo in config["repos"] for hook in repo["hooks"]}
    assert used and used <= published


def test_github_actions_commands_parse() -> None:
    workflow = next(yaml.safe_load(b) for b in blocks("yaml") if "jobs" in b)
    commands = [
        line.strip()
        for step in workflow["jobs"]["lint"]["steps"]
        for line in str(step.get("run", "")).splitlines()
        if line.strip().startswith("chatjinja ")
    ]
    assert {c.split()[1] for c in commands} == {"lint", "diff", "check"}
    parser = build_parser()
    for command in commands:
        args = parser.parse_args(shlex.split(command)[1:])
        assert args.run is not None
    upload = [s for s in workflow["jobs"]["lint"]["steps"] if "upload-sarif" in str(s.get("uses", ""))]
    assert upload and upload[0]["with"]["sarif_file"] == "chatjinja.sarif"


def test_diff_example_is_real_output(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    shutil.copy(REPO / "templates" / "mistral-v1.jinja", tmp_path / "templates" / "mistral-v1.jinja")
    shutil.copy(Path(__file__).parent / "inputs" / "mistral-v1-fixed.jinja", tmp_path / "mistral-v1-fixed.jinja")
    console = blocks("console")[0].splitlines()
    command = console[0].removeprefix("$ ")
    out = subprocess.run([sys.executable, "-m", "chatjinja", *shlex.split(command)[1:]], cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    shown = [line for line in console[1:] if line != "..."]
    assert all(line in out for line in shown), [line for line in shown if line not in out]
