"""The ``chatjinja`` command line: wires options to library calls; each command lives in ``chatjinja.commands``.

Exit codes (the table in README.md "Exit codes", checked by tests/test_exit_codes.py): 0 clean,
1 findings or a template/input/output error, 2 usage error, 130 interrupted. Errors are one line on
stderr (``error: <what> (<file>:<line>)``), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from .commands._common import fail_for
from .files import DEFAULT_MAX_INPUT_BYTES, limited_inputs
from .version import __version__

# Each module defines ``register(subparsers)``, which adds its parser(s) with ``set_defaults(run=...)``;
# ``run(args) -> int`` does the work. A module that is not there yet is left out.
COMMAND_MODULES = (
    "render",
    "templates",
    "analyze",
    "lint",
    "rules",
    "diff",
    "check",
    "conform",
    "cache",
    "portability",
    "response_template",
    "generation_tags",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every other usage error
        print(f"error: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(2)


class _Version(argparse.Action):
    """``--version``: the version and which build of the render hooks runs (imported only when asked:
    the static commands never load the runtime)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, default: str = argparse.SUPPRESS, help: str | None = None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object, option_string: str | None = None) -> None:
        from .runtime._implementation import DESCRIPTION  # lazy: only --version needs it, and it loads the runtime and jinja2

        print(f"chatjinja {__version__} (render hooks: {DESCRIPTION})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="chatjinja", description="Render, analyse and lint LLM chat templates.")
    parser.add_argument("--version", action=_Version, help="show the version and which build of the render hooks runs, and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"chatjinja.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"chatjinja.commands.{name}":
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        # --max-input-bytes caps the template and model files the loaders read, too
        with limited_inputs(getattr(args, "max_input_bytes", DEFAULT_MAX_INPUT_BYTES)):
            return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except BaseException as exc:  # noqa: BLE001 - the CLI never shows a traceback
        if isinstance(exc, SystemExit):
            raise
        message, code = fail_for(exc)
        print(f"error: {message}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
