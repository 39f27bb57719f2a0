"""The built wheel (not the checkout) carries the bundled templates and package data."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from tests.conftest import REPO
from tests.runtime.test_implementation import PURE, _can_compile

NAMES = ["devstral-small-2-24b-instruct-2512", "mistral-v1", "mistral-v2-v3", "mistral-v3-tekken"]


def test_installed_wheel_loads_all_bundled_templates(tmp_path):
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("chatjinja-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(tmp_path / "site")
    assert "chatjinja/_bundled_templates/manifest.json" in names
    assert not any(name.startswith("templates/") for name in names)
    grammar = [name for name in names if name.endswith(".lark")]
    assert len(grammar) == len(list((REPO / "src" / "chatjinja").rglob("*.lark")))
    # the engine drivers of chatjinja portability are package data too
    drivers = {"hfjs_driver.mjs", "llamacpp_driver.cpp", "minijinja_driver.py"}
    assert {f"chatjinja/portability/drivers/{name}" for name in drivers} <= set(names)
    # the render hooks: always their source; compiled (and the wheel tagged for this interpreter)
    # where this machine can compile them (the test extra brings mypy: no build isolation here)
    assert "chatjinja/runtime/_hooks.py" in names
    native = sorted(name for name in names if name.startswith("chatjinja/runtime/_hooks_native"))
    compiled = _can_compile() is None and not PURE  # (CHATJINJA_PURE_PYTHON=1: a pure build, on purpose)
    if compiled:
        assert len(native) == 2 and all(name.endswith(".so") or name.endswith(".pyd") for name in native), native
        assert "py3-none-any" not in wheel.name, wheel.name
    else:
        assert native == [] and wheel.name.endswith("py3-none-any.whl"), (native, wheel.name)
    site = tmp_path / "site"
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import chatjinja; from chatjinja.loading import bundled_templates_dir;"
        "assert chatjinja.__file__.startswith(sys.argv[1]), chatjinja.__file__;"
        "assert str(bundled_templates_dir()).startswith(sys.argv[1]);"
        f"names = {NAMES!r};"
        "texts = [chatjinja.load_template(n).render([{'role': 'user', 'content': 'hi'}]) for n in names];"
        "from chatjinja.runtime import _implementation;"
        "print(len(texts), _implementation.COMPILED)"
    )
    result = subprocess.run([sys.executable, "-c", script, str(site)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"4 {compiled}"
