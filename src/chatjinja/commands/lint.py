"""``chatjinja lint TEMPLATE...``: run the lint rules; text, JSON, SARIF or GitHub output; ``--fix`` / ``--diff``."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ChatJinjaError
from ..files import DEFAULT_MAX_INPUT_BYTES, read_capped
from ..version import __version__
from ._common import TEMPLATE_HELP, InputError, UsageError, add_input_cap, input_cap, load_template_arg, write_atomic, write_stdout

FAIL_LEVELS = ("note", "warning", "error", "never")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lint",
        help="check templates for whitespace leaks, type traps, role bugs and sandbox-escape shapes",
        description="Lint chat templates: files, directories (every *.jinja, tokenizer_config.json and "
        "chat_template.json with a template inside, e.g. a model folder), bundled template names, GGUF files, or "
        "tokenizer_config.json files (their chat_template; positions are then relative to the template string). "
        "Exit 0 when nothing at or above --fail-level is found, 1 when something is or a TEMPLATE cannot be "
        "read, 2 for usage errors. Configuration: [tool.chatjinja] in the nearest pyproject.toml.",
    )
    parser.add_argument("templates", metavar="TEMPLATE", nargs="+",
                        help=TEMPLATE_HELP + "; also a directory: every *.jinja and every config with a template below it")
    parser.add_argument("--select", metavar="CODES", help="comma-separated codes, prefixes (SC, PT) or rule names to run (default: all but the opt-in PT rules; ALL: every rule)")
    parser.add_argument("--ignore", metavar="CODES", help="comma-separated codes, prefixes or names to skip")
    parser.add_argument("--fail-level", choices=FAIL_LEVELS,
                        help="lowest severity that makes the exit code 1 (default: warning; never: findings never do)")
    parser.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text", help="output format (default: text)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE (atomically) instead of stdout")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--fix", action="store_true", help="apply safe fixes (they cannot change any render) to template files in place")
    group.add_argument("--diff", action="store_true", help="print the fixes as unified diffs, safe and unsafe ones "
                       "marked apart; change nothing")
    parser.add_argument("--unsafe-fixes", action="store_true", help="with --fix, also apply the unsafe fixes, which "
                        "change the rendered prompt (WS001 removes leaked whitespace)")
    parser.add_argument("--no-config", action="store_true", help="ignore [tool.chatjinja] in pyproject.toml")
    add_input_cap(parser)
    parser.set_defaults(run=run)


@dataclass
class Target:
    """One template to lint: where its text came from and how to report positions in it."""

    name: str  # the path diagnostics are reported under
    text: str
    file: Path | None  # a template file --fix may rewrite (None for bundled templates and JSON configs)
    note: str = ""  # appended to messages (templates inside tokenizer_config.json)
    add_bos_token: bool | None = None


def _codes(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [c.strip() for c in value.split(",") if c.strip()]


def _read_text(path: Path, limit: int = DEFAULT_MAX_INPUT_BYTES) -> str:
    _, data = read_capped(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text (byte {exc.start})") from None


def _bos_setting(folder: Path) -> bool | None:
    config = folder / "tokenizer_config.json"
    if not config.is_file():
        return None
    try:
        value = json.loads(_read_text(config)).get("add_bos_token")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return value if isinstance(value, bool) else None


def _config_targets(path: Path, limit: int = DEFAULT_MAX_INPUT_BYTES) -> list[Target]:
    try:
        data = json.loads(_read_text(path, limit))
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} ({path}:{exc.lineno}:{exc.colno})") from None
    except RecursionError:
        raise InputError(f"malformed JSON: nested too deeply ({path})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a JSON object")
    if "chat_template" not in data:
        # Current model repositories keep the template in chat_template.jinja beside the config:
        # a config without one is nothing to lint (pre-commit passes every tokenizer_config.json)
        print(f"note: {path} has no 'chat_template'; nothing to lint there", file=sys.stderr)
        return []
    bos = data.get("add_bos_token") if isinstance(data.get("add_bos_token"), bool) else None
    template = data["chat_template"]
    if isinstance(template, str):
        return [Target(str(path), template, None, " (position in the chat_template string)", bos)]
    if isinstance(template, list):
        out = []
        for entry in template:
            if not isinstance(entry, dict) or not isinstance(entry.get("template"), str):
                raise InputError(f"{path}: chat_template list entries need 'name' and 'template' strings")
            name = str(entry.get("name", "default"))
            out.append(Target(str(path), entry["template"], None, f" (position in chat_template {name!r})", bos))
        return out
    raise InputError(f"{path}: chat_template must be a string or a list of {{name, template}}")


_CONFIG_NAMES = ("tokenizer_config.json", "chat_template.json")


def _has_chat_template(path: Path) -> bool:
    try:
        data = json.loads(_read_text(path))
    except (OSError, ValueError, RecursionError):
        return True  # let _config_targets say what is wrong with it
    return isinstance(data, dict) and "chat_template" in data


def _targets(arg: str, limit: int = DEFAULT_MAX_INPUT_BYTES) -> list[Target]:
    path = Path(arg)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.jinja") if p.is_file())
        configs = sorted(p for name in _CONFIG_NAMES for p in path.rglob(name) if p.is_file() and _has_chat_template(p))
        if not files and not configs:
            raise InputError(f"no *.jinja files and no tokenizer_config.json / chat_template.json with a chat_template under {arg}")
        targets = [Target(str(p), _read_text(p, limit), p, add_bos_token=_bos_setting(p.parent)) for p in files]
        for config in configs:
            targets.extend(_config_targets(config, limit))
        return targets
    if path.is_file() and path.suffix.lower() != ".gguf":
        if path.suffix.lower() == ".json":
            return _config_targets(path, limit)
        return [Target(str(path), _read_text(path, limit), path, add_bos_token=_bos_setting(path.parent))]
    try:
        template = load_template_arg(arg)  # bundled names, GGUF files, hf:org/name, path#name
    except (ChatJinjaError, OSError, ValueError) as exc:
        raise InputError(str(exc)) from None
    bos = template.metadata.get("add_bos_token")
    return [Target(template.name, template.source, None, add_bos_token=bos if isinstance(bos, bool) else None)]


def run(args: argparse.Namespace) -> int:
    from ..lint import (  # lazy: the CLI imports every command to build its parser; Lark and the linter load when linting
        ConfigError, LintConfig, all_rules, find_config, fix_diffs, fix_source, known_selector, lint, severity_rank,
    )
    from ..report import render_report  # lazy: the reporters load the linter, as above

    def config_for(path: Path | None) -> Any:
        try:
            return find_config(path)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None

    select, ignore = _codes(args.select), _codes(args.ignore)
    for code in [*(select or ()), *(ignore or ())]:
        if not known_selector(code):
            raise UsageError(f"unknown rule code or name {code!r} (see 'chatjinja rules')")
    targets = [t for arg in args.templates for t in _targets(arg, input_cap(args))]
    if args.unsafe_fixes and not args.fix:
        raise UsageError("--unsafe-fixes goes with --fix (--diff always shows unsafe fixes, marked)")
    if args.fix and any(t.file is None for t in targets):
        raise UsageError("--fix rewrites template files only; use --diff for bundled templates and tokenizer_config.json")
    cwd_config = LintConfig() if args.no_config else config_for(None)
    diagnostics = []
    sources: dict[str, str] = {}
    diffs: list[str] = []
    names_seen: dict[str, int] = {}
    for target in targets:
        config = cwd_config if (args.no_config or target.file is None) else config_for(target.file)
        found = lint(target.text, name=target.name, select=select, ignore=ignore, config=config,
                     add_bos_token=target.add_bos_token)
        if args.diff:
            diffs.extend(fix_diffs(target.text, target.name, found, select, ignore=ignore, config=config))
        if args.fix:
            unsafe = args.unsafe_fixes
            fixed = fix_source(target.text, select=select, ignore=ignore, config=config, unsafe=unsafe) if any(
                d.fix is not None and (d.fix.safe or unsafe) for d in found) else target.text
            if fixed != target.text:
                write_atomic(target.file, fixed)
                target.text = fixed
                found = lint(fixed, name=target.name, select=select, ignore=ignore, config=config,
                             add_bos_token=target.add_bos_token)
        if target.note:
            found = [_with_note(d, target.note) for d in found]
        names_seen[target.name] = names_seen.get(target.name, 0) + 1
        if names_seen[target.name] == 1:
            sources[target.name] = target.text
        else:
            sources.pop(target.name, None)
        diagnostics.extend(found)
    if args.diff:
        write_stdout("".join(diffs))
        return 1 if diffs else 0
    fail_level = args.fail_level or cwd_config.fail_level or "warning"
    report = render_report(args.format, diagnostics, rules=all_rules(), sources=sources, tool_version=__version__,
                           files=len(targets))
    if args.output:
        write_atomic(args.output, report)
    else:
        write_stdout(report)
    if fail_level == "never":
        return 0
    threshold = severity_rank(fail_level)
    return 1 if any(severity_rank(d.severity) >= threshold for d in diagnostics) else 0


def _with_note(d, note: str):
    return replace(d, message=d.message + note)

