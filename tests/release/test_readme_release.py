"""The release guide's configuration stays true: its hook ids exist and its GitHub Actions commands parse.

(Its shell examples are run by tests/test_docs_examples.py.)
"""

from __future__ import annotations

import re
import shlex

import yaml

from chatjinja.cli import build_parser
from tests.conftest import REPO

SECTION = (REPO / "docs" / "guide" / "release.md").read_text(encoding="utf-8")


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
