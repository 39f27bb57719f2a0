"""``.pre-commit-hooks.yaml``: each hook's entry, run the way pre-commit runs it, on a temporary repository's files."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.loading.test_folders import write_folder

CLEAN = """\
{%- for message in messages %}
    {%- if message['role'] == 'user' and message['content'] is string %}
        {{- '<|user|>\\n' + message['content'] + '\\n' }}
    {%- elif message['role'] == 'assistant' and message['content'] is string %}
        {{- '<|assistant|>\\n' + message['content'] + '\\n' }}
    {%- elif message['role'] == 'system' and message['content'] is string %}
        {{- '<|system|>\\n' + message['content'] + '\\n' }}
    {%- else %}
        {{- raise_exception('Unsupported message: ' + message['role']) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|assistant|>\\n' }}
{%- endif %}
"""
HOOKS = {hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}


def chatjinja_executable() -> str:
    script = Path(sys.executable).parent / "chatjinja"
    return str(script) if script.exists() else shutil.which("chatjinja") or "chatjinja"


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "templates").mkdir()
    (repo / "templates" / "clean.jinja").write_text(CLEAN)
    shutil.copy(REPO / "templates" / "mistral-v1.jinja", repo / "templates" / "leaky.jinja")  # layout whitespace leaks
    write_folder(repo / "model", {"chat_template.jinja": CLEAN, "tokenizer_config.json": {"bos_token": "<s>", "eos_token": "</s>"}}, tokenizer=False)
    write_folder(repo / "legacy-model", {"tokenizer_config.json": {"bos_token": "<s>", "chat_template": CLEAN}}, tokenizer=False)
    (repo / "model" / "config.json").write_text("{}")
    (repo / "README.md").write_text("# a model\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    return repo


def staged_files(repo: Path) -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=repo, check=True, capture_output=True, text=True).stdout
    return out.split()


def run_hook(hook_id: str, repo: Path, files: list[str] | None = None, args: list[str] | None = None) -> subprocess.CompletedProcess:
    """What pre-commit does: filter the files with ``files``, then run ``entry + args (+ files)``."""
    hook = HOOKS[hook_id]
    pattern = re.compile(hook["files"])
    chosen = [f for f in (files if files is not None else staged_files(repo)) if pattern.search(f)]
    command = shlex.split(hook["entry"])
    command[0] = chatjinja_executable() if command[0] == "chatjinja" else command[0]
    command += list(hook.get("args", []) if args is None else args)
    if hook.get("pass_filenames", True):
        command += chosen
    return subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=120)


def test_hooks_are_well_formed() -> None:
    assert set(HOOKS) == {"chatjinja-lint", "chatjinja-check"}
    for hook in HOOKS.values():
        assert hook["language"] == "python" and hook["entry"].startswith("chatjinja ")
        assert {"id", "name", "entry", "language"} <= set(hook)


def test_lint_hook_selects_templates_and_configs(repository: Path) -> None:
    pattern = re.compile(HOOKS["chatjinja-lint"]["files"])
    assert [f for f in staged_files(repository) if pattern.search(f)] == [
        "legacy-model/tokenizer_config.json", "model/chat_template.jinja", "model/tokenizer_config.json",
        "templates/clean.jinja", "templates/leaky.jinja"]


def test_lint_hook_passes_clean_files_and_fails_a_leaky_template(repository: Path) -> None:
    # the hook mechanism is under test, not the rule set: one rule, as a repository's hook args may choose
    select = ["--select", "WS001"]
    clean = run_hook("chatjinja-lint", repository, files=["templates/clean.jinja", "legacy-model/tokenizer_config.json", "README.md"],
                     args=select)
    assert clean.returncode == 0, (clean.stdout, clean.stderr)
    leaky = run_hook("chatjinja-lint", repository, files=["templates/clean.jinja", "templates/leaky.jinja"], args=select)
    assert leaky.returncode == 1, (leaky.stdout, leaky.stderr)
    assert "templates/leaky.jinja" in leaky.stdout and "WS001" in leaky.stdout
    assert "Traceback" not in leaky.stderr


def test_lint_hook_on_a_config_without_template(repository: Path) -> None:
    """A tokenizer_config.json with no chat_template (the template is in chat_template.jinja) is skipped with a note."""
    result = run_hook("chatjinja-lint", repository, files=["model/tokenizer_config.json"], args=["--select", "WS001"])
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "note: model/tokenizer_config.json has no 'chat_template'; nothing to lint there" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_hook_on_the_model_folder(repository: Path) -> None:
    result = run_hook("chatjinja-check", repository, args=["model"])
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "model/chat_template.jinja  [default, used]" in result.stdout
    (repository / "model" / "tokenizer_config.json").write_text('{"bos_token": "<s>", "chat_template": "{{ eos_token }}"}')
    result = run_hook("chatjinja-check", repository, args=["model"])
    assert result.returncode == 1 and "MF001" in result.stdout
    # the manifest's default args check the repository root, which is no model folder here
    result = run_hook("chatjinja-check", repository)
    assert result.returncode == 1 and result.stderr.startswith("error: no chat template in .")
