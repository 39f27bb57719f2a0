"""The render hooks run compiled when the install could compile them, and the pure-Python build of the
same source passes the parity, budget and attack suites too (``_implementation.py``, ``hatch_build.py``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from chatjinja.runtime import _hooks, _implementation

ROOT = Path(__file__).resolve().parents[2]
PURE = os.environ.get("CHATJINJA_PURE_PYTHON", "") not in ("", "0")


def _can_compile() -> str | None:
    """Why this interpreter cannot build the compiled hooks, or None."""
    if sys.implementation.name != "cpython":
        return f"mypyc compiles for CPython only, this is {sys.implementation.name}"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler}) on this machine"
    if not Path(sysconfig.get_paths()["include"], "Python.h").is_file():
        return "no Python headers (Python.h) on this machine"
    return None


@pytest.mark.skipif(PURE, reason="CHATJINJA_PURE_PYTHON is set: this run checks the pure-Python hooks")
def test_the_compiled_hooks_are_used_where_they_can_be_built():
    # An install with a compiler builds them (hatch_build.py); one that silently fell back, or a
    # _hooks.py edited since the build, shows here rather than as a slower render.
    reason = _can_compile()
    if reason is not None:
        pytest.skip(reason)
    assert _implementation.COMPILED, _implementation.DESCRIPTION
    native = _implementation.hooks
    assert native.__name__ == "chatjinja.runtime._hooks_native"
    assert native.SOURCE_SHA256 == hashlib.sha256(Path(_hooks.__file__).read_bytes()).hexdigest()
    assert type(native.Hooks.call).__name__ != "function"  # (compiled: not a Python function)


def test_a_stale_compiled_build_is_not_used():
    # a compiled module built from another _hooks.py (an edit since the install) is refused
    script = (
        "import sys, types\n"
        "from chatjinja.runtime import _implementation as i\n"
        "stale = types.ModuleType('chatjinja.runtime._hooks_native'); stale.SOURCE_SHA256 = '0' * 64\n"
        "sys.modules['chatjinja.runtime._hooks_native'] = stale\n"
        "module, why = i._choose()\n"
        "print(module.__name__, '|', why)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "CHATJINJA_PURE_PYTHON"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    assert out.startswith("chatjinja.runtime._hooks |"), out
    assert "reinstall" in out


@pytest.mark.skipif(PURE, reason="this is the pure-Python run itself")
def test_pure_python_hooks_pass_the_parity_budget_and_attack_suites():
    # The fallback a machine without a C compiler gets: the same source, not compiled. It must give
    # the same output as transformers, stop the same attacks, and keep every budget. (It also counts
    # what compiled code cannot show: ``test_indented_json_of_the_callers_data``'s walks.)
    suites = [
        "tests/security",
        "tests/runtime/test_budgets.py",
        "tests/runtime/test_parity_corpus.py",
        "tests/runtime/test_parity_bundled.py",
        "tests/runtime/test_implementation.py",
    ]
    env = {**os.environ, "CHATJINJA_PURE_PYTHON": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *suites],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )
    summary = result.stdout.strip().splitlines()[-1:] or [result.stderr[-2000:]]
    assert result.returncode == 0, "\n".join(result.stdout.splitlines()[-40:]) + result.stderr[-2000:]
    assert " passed" in summary[0] and "failed" not in summary[0], summary


def test_version_says_which_hooks_run():
    result = subprocess.run([sys.executable, "-m", "chatjinja", "--version"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"chatjinja {__import__('chatjinja').__version__} (render hooks: {_implementation.DESCRIPTION})\n"
