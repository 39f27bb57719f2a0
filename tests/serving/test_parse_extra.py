"""The ``parse`` extra: what it admits (an installed transformers 5.25 stays), and importing transformers' parser changes no environment variable."""

from __future__ import annotations

import json
import subprocess
import sys

from packaging.requirements import Requirement

from tests.conftest import REPO

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


def test_the_parse_extra_admits_transformers_5_24_and_5_25_and_names_regex() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extra = {Requirement(line).name: Requirement(line) for line in project["optional-dependencies"]["parse"]}
    # a resolver keeps an installed transformers 5.25.0 for `pip install '.[parse]'` only if the range admits it
    assert extra["transformers"].specifier.contains("5.25.0") and extra["transformers"].specifier.contains("5.24.0")
    assert "regex" in extra  # the reader's own dependency (delimiter patterns are written for it)


_PROBE = """
import json, logging, os, sys
writes = []
cls = os.environ.__class__
set_item, del_item = cls.__setitem__, cls.__delitem__
cls.__setitem__ = lambda self, key, value: (writes.append(key), set_item(self, key, value))[1]
cls.__delitem__ = lambda self, key: (writes.append(key), del_item(self, key))[1]
from chatjinja.serving import library
library.parser_module()
print(json.dumps({"writes": writes, "filters": len(logging.getLogger("transformers").filters)}))
"""


def test_importing_transformers_parser_leaves_the_environment_alone() -> None:
    """It set TRANSFORMERS_NO_ADVISORY_WARNINGS around the import (os.environ is the process's, read by other
    threads); the no-torch advice is now dropped by a logging filter on transformers' logger, during the import only."""
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert [key for key in report["writes"] if key.startswith("TRANSFORMERS")] == []
    assert report["filters"] == 0
    assert "PyTorch was not found" not in result.stderr
