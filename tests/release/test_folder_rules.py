"""The MF codes ``check`` reports: one table, listed by ``chatjinja rules``, one page each, and the pages' examples run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chatjinja.cli import main
from chatjinja.lint.registry import all_rules, get_rule, listed_rules
from chatjinja.release import check_model
from chatjinja.release.check import FOLDER_RULES
from tests.conftest import REPO

CHECK_SOURCE = (REPO / "src" / "chatjinja" / "release" / "check.py").read_text(encoding="utf-8")
_FILE_RE = re.compile(r"^`([^`\n]+)`:\n```\w*\n(.*?)\n```", re.M | re.S)


def emitted_codes() -> set[str]:
    """Every code check.py can report of its own: the literals passed to ``_finding``."""
    return set(re.findall(r'_finding\("([A-Z]{2}\d{3})"', CHECK_SOURCE))


def folder_files(section: str) -> dict[str, str]:
    """A documentation section's model folder: each ``name``: line followed by a fenced block with the file's text."""
    return {name: text for name, text in _FILE_RE.findall(section)}


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")  # exactly the block: no newline is added
    return root


def test_every_emitted_code_is_listed_and_has_a_page(capsys: pytest.CaptureFixture) -> None:
    emitted = emitted_codes()
    assert len(emitted) >= 6, emitted
    assert emitted == {rule.code for rule in FOLDER_RULES}
    listed = {rule.code for rule in listed_rules()}
    assert emitted <= listed and not emitted & {rule.code for rule in all_rules()}  # listed, but lint never runs them
    assert main(["rules"]) == 0
    shown = {line.split()[0] for line in capsys.readouterr().out.splitlines()}
    assert emitted <= shown
    for code in sorted(emitted):
        assert (REPO / "docs" / "rules" / f"{code}.md").is_file(), code
        assert main(["rules", code]) == 0
        page = capsys.readouterr().out
        assert page.startswith(f"# {code} ") and "Reported by `chatjinja check`" in page
        assert page == (REPO / "docs" / "rules" / f"{code}.md").read_text(encoding="utf-8")
    assert main(["rules", "no-default-template", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["code"], data["reported_by"]) == ("MF006", "check")


def test_lint_does_not_take_folder_codes(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages[0]['content'] }}")
    assert get_rule("MF001") is None and get_rule("MF001", listed=True) is not None
    assert main(["lint", str(template), "--select", "MF001"]) == 2
    assert "unknown rule code" in capsys.readouterr().err


@pytest.mark.parametrize("rule", FOLDER_RULES, ids=lambda r: r.code)
def test_example_folder_reports_the_code(rule, tmp_path: Path) -> None:
    files = folder_files(rule.section("Example"))
    assert files, f"{rule.code}: the Example has no files"
    check = check_model(write(tmp_path / "model", files))
    assert {f.code for f in check.findings} == {rule.code}, [(f.code, f.message) for f in check.findings]
    assert all(f.severity == rule.severity for f in check.findings)


@pytest.mark.parametrize("rule", FOLDER_RULES, ids=lambda r: r.code)
def test_use_instead_folder_is_clean(rule, tmp_path: Path) -> None:
    files = folder_files(rule.section("Use instead"))
    assert files, f"{rule.code}: Use instead has no files"
    check = check_model(write(tmp_path / "model", files))
    assert [(f.code, f.message) for f in check.findings] == []


def test_listing_the_codes_stays_in_the_static_half() -> None:
    """``chatjinja rules`` imports check.py for its table: that must not pull in jinja2 or the runtime."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom chatjinja.cli import main\nassert main(['rules']) == 0 and main(['rules', 'MF001']) == 0\n"
        "bad = [m for m in sys.modules if m == 'jinja2' or m.startswith(('jinja2.', 'chatjinja.runtime', 'markupsafe'))]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
