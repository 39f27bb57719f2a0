"""The built wheel (not the checkout) carries the bundled templates and package data."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from tests.conftest import REPO

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
    site = tmp_path / "site"
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import chatjinja; from chatjinja.loading import bundled_templates_dir;"
        "assert chatjinja.__file__.startswith(sys.argv[1]), chatjinja.__file__;"
        "assert str(bundled_templates_dir()).startswith(sys.argv[1]);"
        f"names = {NAMES!r};"
        "texts = [chatjinja.load_template(n).render([{'role': 'user', 'content': 'hi'}]) for n in names];"
        "print(len(texts))"
    )
    result = subprocess.run([sys.executable, "-c", script, str(site)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "4"
