"""Docs are tests: every code example in README.md and docs/ runs, and shows what it says it shows.

The conventions a page follows are in ``tests/docs_examples.py`` (and docs/README.md). The rule pages
(docs/rules/) are run by the linter's own tests.
"""

from __future__ import annotations

import doctest
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.docs_examples import Block, blocks_of, commands_of, output_matches

PAGES = [REPO / "README.md"] + sorted(p for p in (REPO / "docs").rglob("*.md") if "rules" not in p.relative_to(REPO / "docs").parts)
QUICK_START = "## Quick start"


def _page_blocks(page: Path) -> list[Block]:
    blocks = blocks_of(page)
    if page.name == "README.md" and page.parent == REPO:
        # the two quick-start commands build a venv and run the suite: .ci/run runs them (test_readme.py)
        text = page.read_text(encoding="utf-8")
        start = text.count("\n", 0, text.index(QUICK_START)) + 1
        end = text.count("\n", 0, text.index("\n## ", text.index(QUICK_START) + 1)) + 1
        blocks = [b for b in blocks if not start <= b.line <= end]
    return blocks


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("CHATJINJA_PURE_PYTHON", None)
    return env


def _prepare(directory: Path) -> None:
    (directory / "templates").symlink_to(REPO / "templates", target_is_directory=True)


def _run_command(line: str, cwd: Path, block: Block) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", line], cwd=cwd, env=_environment(), capture_output=True, text=True,
        timeout=300, stdin=subprocess.DEVNULL,
    )


def _run_doctest(block: Block, namespace: dict, where: str) -> None:
    test = doctest.DocTestParser().get_doctest(block.text, namespace, where, str(block.page), block.line)
    failures: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=failures.append, clear_globs=False)
    namespace.update(test.globs)  # (a DocTest works on a copy of the names it is given)
    assert runner.failures == 0, f"{where}: the example shows other output:\n" + "".join(failures)[-3000:]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_page_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _page_blocks(page)
    _prepare(tmp_path)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for block in blocks:
        where = block.id(REPO)
        if block.file is not None:
            target = tmp_path / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
            continue
        if not block.runs:
            continue
        if block.language == "python":
            try:
                exec(compile(block.text, where, "exec"), namespace)  # noqa: S102 - the docs' own examples
            except Exception as exc:  # noqa: BLE001 - name the block
                pytest.fail(f"{where}: the Python example raised {type(exc).__name__}: {exc}")
            continue
        if block.language == "pycon":
            _run_doctest(block, namespace, where)
            continue
        for command in commands_of(block):
            done = _run_command(command.line, tmp_path, block)
            if command.expected is None:
                assert done.returncode in (0, 1), f"{where}: `{command.line}` exited {done.returncode}: {done.stderr[-500:]}"
                errors = [l for l in done.stderr.splitlines() if l.startswith("error:")]
                assert not errors, f"{where}: `{command.line}` failed: {errors[0]}"
            else:
                actual = done.stdout.splitlines()
                assert output_matches(command.expected, actual), (
                    f"{where}: `{command.line}` printed:\n" + done.stdout[-2000:] + done.stderr[-500:]
                )


def test_every_page_has_an_example_or_says_why_not() -> None:
    """A guide page without a single executed example is prose nobody checks."""
    for page in PAGES:
        if "guide" in page.parts:
            assert any(b.runs for b in _page_blocks(page)), f"{page.relative_to(REPO)} has no executed example"


def test_output_matching() -> None:
    assert output_matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert output_matches(["a", "..."], ["a"])
    assert not output_matches(["a", "d"], ["a", "b", "d"])
    assert not output_matches(["a"], [])


_LINK = __import__("re").compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES + [REPO / "SECURITY.md", REPO / "COMPATIBILITY.md", REPO / "benchmarks" / "README.md"],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    """Every relative link of a page names a file or folder of the repository (anchors aside)."""
    for target in _LINK.findall(page.read_text(encoding="utf-8")):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.relative_to(REPO)} links to {target}, which does not exist"
