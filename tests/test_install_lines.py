"""Install lines that install: every ``pip install`` in README.md and docs/ is run (``--dry-run``), and
every pre-commit example names hooks that exist.

chatjinja is not on PyPI: a line that names it (``pip install 'chatjinja[tokenize]'``) finds no such
distribution, so the docs install from a checkout (``pip install '.[tokenize]'``). Each line is run as
``pip install --dry-run --no-deps`` from the root of this checkout: a local path has its metadata built
(no build isolation, pure-Python build: what pip reads, in about a second) and must provide every extra
the line asks for; another name must be installed already or found on the index (CI reaches PyPI). A line
with ``--find-links dist`` installs chatjinja from a wheel: one is built from this checkout with
``python -m build --wheel`` (pure Python) and must provide the extras the line asks for (what the wheel holds is
``tests/test_wheel.py``'s). A pre-commit ``repo:`` is
``local`` with the hooks of ``.pre-commit-hooks.yaml``, or names a ``rev:`` that is a commit of this
repository.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from chatjinja.cli import COMMAND_MODULES

from .conftest import REPO

# where a doc's line is run from: the root of a checkout ("."), or a checkout in a folder of its own
# (docs/guide/release.md's workflow checks chatjinja out into ./chatjinja)
CHECKOUTS = {".": REPO, "./chatjinja": REPO}
_LINE_RE = re.compile(r"pip install ([^`\n]+?)(?=`|\n|&&|$)")
_OPTIONS_WITH_VALUE = {"-r", "-c", "-t", "--target", "--index-url", "-i", "-f", "--find-links"}
_BUILD_ENV = {**os.environ, "CHATJINJA_PURE_PYTHON": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def install_lines() -> list[tuple[str, str]]:
    """``(where, arguments)`` of every ``pip install`` in the docs."""
    found = []
    for path in doc_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in _LINE_RE.finditer(line):
                found.append((f"{path.relative_to(REPO)}:{number}", match.group(1).strip()))
    return found


def requirements(arguments: str) -> list[str]:
    """The requirements of a ``pip install`` line (its options dropped)."""
    words = shlex.split(arguments)
    wanted, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in _OPTIONS_WITH_VALUE:
            skip = True
        elif not word.startswith("-"):
            wanted.append(word)
    return wanted


def from_wheel(arguments: str) -> bool:
    """Whether a ``pip install`` line installs from the wheels in ``dist/`` (``--find-links dist``)."""
    words = shlex.split(arguments)
    return any(a in ("-f", "--find-links") and b.rstrip("/") == "dist" for a, b in zip(words, words[1:]))


@functools.lru_cache(maxsize=1)
def built_wheel() -> Path:
    """A wheel built from this checkout, as the docs build it (``python -m build --wheel``; pure Python)."""
    out = Path(tempfile.mkdtemp(prefix="chatjinja-wheel-"))
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=300, cwd=REPO, env=_BUILD_ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = out.glob("chatjinja-*.whl")
    return wheel


def _split_extras(requirement: str) -> tuple[str, list[str]]:
    match = re.fullmatch(r"([^\[\]]+)(?:\[([^\]]*)\])?", requirement)
    assert match, f"cannot read requirement {requirement!r}"
    extras = [extra.strip() for extra in (match.group(2) or "").split(",") if extra.strip()]
    return match.group(1), extras


def _pip(*arguments: str, index: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-build-isolation", "-q", "--report", "-"]
    if not index:
        command.append("--no-index")
    return subprocess.run([*command, *arguments], capture_output=True, text=True, timeout=240, cwd=REPO, env=_BUILD_ENV)


def _missing_extras(result: subprocess.CompletedProcess, requirement: str, extras: list[str]) -> str | None:
    if result.returncode != 0:
        return f"pip cannot install {requirement}: {result.stderr.strip().splitlines()[-1:]}"
    (item,) = json.loads(result.stdout)["install"]
    missing = set(extras) - set(item["metadata"].get("provides_extra", []))
    return f"{requirement}: no such extra {sorted(missing)}" if missing else None


def problem(requirement: str, wheel: bool = False) -> str | None:
    """Why this requirement of a doc's line does not install from a checkout, or with ``wheel`` from the wheel
    built from it (``None``: it does)."""
    name, extras = _split_extras(requirement)
    if wheel:
        if name.lower() != "chatjinja":
            return f"{requirement}: only chatjinja is in the wheels built into dist/"
        return _missing_extras(_pip("--ignore-installed", "--find-links", str(built_wheel().parent), requirement), requirement, extras)
    if name.startswith((".", "/")):
        checkout = CHECKOUTS.get(name.rstrip("/"))
        if checkout is None:
            return f"{name} is not a checkout the docs set up ({', '.join(CHECKOUTS)})"
        result = _pip(f"{checkout}[{','.join(extras)}]" if extras else str(checkout))
        return _missing_extras(result, requirement, extras)
    if name.lower() == "chatjinja":
        return f"{requirement}: chatjinja is not on PyPI (install from a checkout: pip install '.[...]', or a wheel: --find-links dist)"
    if _pip(requirement).returncode == 0:  # installed here already
        return None
    result = _pip(requirement, index=True)
    return None if result.returncode == 0 else f"no distribution {requirement}: {result.stderr.strip().splitlines()[-1:]}"


def test_the_docs_have_install_lines() -> None:
    lines = install_lines()
    assert len(lines) >= 8, lines
    assert any("[tokenize]" in arguments for _, arguments in lines)


def test_every_install_line_installs() -> None:
    failures, seen = [], {}
    for where, arguments in install_lines():
        wheel = from_wheel(arguments)
        for requirement in requirements(arguments):
            if (requirement, wheel) not in seen:
                seen[requirement, wheel] = problem(requirement, wheel)
            if seen[requirement, wheel]:
                failures.append(f"{where}: {seen[requirement, wheel]}")
    assert not failures, "\n".join(failures)
    assert any(wheel for _, wheel in seen), "no line installs from a wheel"


@pytest.mark.parametrize(
    "requirement, expected",
    [
        ("chatjinja[tokenize]", "chatjinja is not on PyPI"),
        (".[no-such-extra]", "no such extra ['no-such-extra']"),
        ("./elsewhere", "not a checkout the docs set up"),
    ],
)
def test_a_line_that_does_not_install_is_found(requirement: str, expected: str) -> None:
    assert expected in (problem(requirement) or "")


def test_a_wheel_line_asking_for_a_missing_extra_is_found() -> None:
    assert from_wheel("--find-links dist 'chatjinja[tokenize]'") and not from_wheel("'.[tokenize]'")
    assert problem("chatjinja[tokenize]", wheel=True) is None
    assert "no such extra ['no-such-extra']" in (problem("chatjinja[no-such-extra]", wheel=True) or "")


# -- pre-commit -----------------------------------------------------------------------------------


def precommit_configs() -> list[tuple[str, dict]]:
    """Every YAML block of the docs that is a ``.pre-commit-config.yaml`` (has ``repos:``)."""
    found = []
    for path in doc_files():
        for block in re.findall(r"```ya?ml\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            config = yaml.safe_load(block)
            if isinstance(config, dict) and "repos" in config:
                found.append((str(path.relative_to(REPO)), config))
    return found


def _is_commit(rev: str) -> bool:
    return subprocess.run(["git", "rev-parse", "--verify", "-q", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True).returncode == 0


def precommit_problems(config: dict) -> list[str]:
    published = {hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    problems = []
    for repo in config["repos"]:
        if repo["repo"] != "local":
            if not _is_commit(str(repo.get("rev"))):
                problems.append(f"rev {repo.get('rev')!r} is not a tag or commit of this repository")
            problems += [f"no published hook {hook['id']!r}" for hook in repo["hooks"] if hook["id"] not in published]
            continue
        for hook in repo["hooks"]:
            ours = published.get(hook["id"])
            if ours is None:
                problems.append(f"no published hook {hook['id']!r}")
                continue
            for key in ("entry", "files", "types", "pass_filenames"):
                if hook.get(key) != ours.get(key):
                    problems.append(f"{hook['id']}: {key} {hook.get(key)!r} is not the published hook's {ours.get(key)!r}")
            program, command = hook["entry"].split()[:2]
            if program != "chatjinja" or command not in COMMAND_MODULES or hook.get("language") != "system":
                problems.append(f"{hook['id']}: a local hook runs the installed chatjinja's command (language: system)")
    return problems


def test_precommit_examples_name_hooks_that_exist() -> None:
    configs = precommit_configs()
    assert configs
    for where, config in configs:
        assert precommit_problems(config) == [], where


def test_a_precommit_example_with_a_missing_tag_is_found() -> None:
    config = {"repos": [{"repo": "https://example.invalid/chatjinja", "rev": "v0.1.0", "hooks": [{"id": "chatjinja-lint"}]}]}
    assert precommit_problems(config) == ["rev 'v0.1.0' is not a tag or commit of this repository"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    config["repos"][0]["rev"] = head
    assert precommit_problems(config) == []
