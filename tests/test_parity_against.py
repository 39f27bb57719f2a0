"""tools/parity-against: the requirements it installs, the files it runs, and its report of a pytest run.

The venv it makes is not made here (a pip install takes minutes): its pytest run is driven with this
interpreter on a stub test file.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO
from tests.test_versions import _requirements

SCRIPT = REPO / "tools" / "parity-against"
STUB = '''
import pytest

pytestmark = pytest.mark.reference

def test_same():
    assert 1 == 1

def test_differs():
    assert 1 == 2, "chatjinja gives 1, transformers 2"

def test_skipped():
    pytest.skip("not here")

@pytest.mark.skip(reason="no marker")
def test_unmarked():
    pass
'''


def _script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("parity_against", str(SCRIPT))
    spec = importlib.util.spec_from_loader("parity_against", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_is_executable() -> None:
    assert SCRIPT.stat().st_mode & 0o111
    assert SCRIPT.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n")


def test_requirements_are_the_test_extra_with_transformers_pinned() -> None:
    wanted = _script().requirements("9.9.9")
    assert "jinja2>=3.1.6,<3.2" in wanted  # the project's own dependencies: the checkout is not installed
    assert [line for line in wanted if line.lower().startswith("transformers")] == ["transformers==9.9.9"]
    assert not [line for line in wanted if line.startswith("chatjinja")]
    # every other pin the version test reads (jinja2, lark, ...) is installed as the test extra states it
    for name, requirement in _requirements().items():
        if name != "transformers":
            assert any(line.lower().startswith(name) for line in wanted), requirement
    assert "tokenizers>=0.20,<0.24" in wanted  # from chatjinja[tokenize], an extra the test extra names


def test_runs_the_files_with_reference_tests() -> None:
    files = _script().reference_files()
    assert "tests/runtime/test_tool_schemas.py" in files and "tests/serving/test_dialects.py" in files
    assert "tests/test_versions.py" not in files
    assert all("mark.reference" in (REPO / name).read_text(encoding="utf-8") for name in files)


def test_reports_each_failure_in_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    stub = tmp_path / "test_stub.py"
    stub.write_text(STUB, encoding="utf-8")
    module = _script()
    monkeypatch.setattr(module, "environment", lambda version, wanted: Path(sys.executable))
    monkeypatch.setattr(module, "reference_files", lambda: [str(stub)])
    assert module.main(["9.9.9", "-n", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("transformers ") and "1 failed, 1 passed, 2 skipped" in out[0]
    assert len(out) == 2, out
    assert out[1].startswith("- ") and out[1].endswith("::test_differs: AssertionError: chatjinja gives 1, transformers 2")


def test_says_when_pytest_did_not_run(tmp_path: Path, monkeypatch, capsys) -> None:
    module = _script()
    monkeypatch.setattr(module, "environment", lambda version, wanted: Path(sys.executable))
    monkeypatch.setattr(module, "reference_files", lambda: [str(tmp_path / "missing_test.py")])
    with pytest.raises(SystemExit) as stopped:
        module.main(["9.9.9", "-n", "1"])
    assert stopped.value.code == 2
    assert "error: pytest did not run the suites (exit 4)" in capsys.readouterr().err
