"""The render-time safety options every rendering command shares: budget flags, ``--no-budgets`` and ``--strict``."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from ._common import UsageError

__all__ = ["add_runtime_options", "runtime_options"]

# flag -> (Budgets field, type, help)
_BUDGET_FLAGS = (
    ("--max-output-chars", "max_output_chars", int, "characters of rendered text"),
    ("--max-string-chars", "max_string_chars", int, "characters in any string the template builds"),
    ("--max-sequence-items", "max_sequence_items", int, "items in any list the template builds"),
    ("--max-built-bytes", "max_built_bytes", int, "bytes of the big strings and lists a render builds, added up"),
    ("--max-int-bits", "max_int_bits", int, "bits of any integer the template computes"),
    ("--max-loop-iterations", "max_loop_iterations", int, "total for-loop iterations"),
    ("--max-steps", "max_steps", int, "fuel: loop iterations, filter and call sites, comparison work (SECURITY.md)"),
    ("--max-recursion-depth", "max_recursion_depth", int, "nested macro / recursive loop calls"),
    ("--timeout", "timeout", float, "wall-clock seconds per render"),
    ("--max-input-depth", "max_input_depth", int, "nesting depth of the input JSON"),
    ("--max-source-chars", "max_source_chars", int, "characters of template source"),
    ("--max-source-nesting", "max_source_nesting", int, "nested brackets and blocks in the template"),
)


def add_runtime_options(parser: argparse.ArgumentParser) -> None:
    """Add the budget flags (each overrides one default; 0 turns that budget off), ``--no-budgets`` and ``--strict``."""
    group = parser.add_argument_group("safety", "resource budgets for untrusted templates (see SECURITY.md); 0 turns one off")
    for flag, dest, kind, text in _BUDGET_FLAGS:
        group.add_argument(flag, dest=f"budget_{dest}", type=_limit(dest, kind), metavar="N" if kind is int else "S", help=text)
    group.add_argument("--no-budgets", action="store_true", help="render with jinja2's sandbox alone, as transformers does")
    group.add_argument(
        "--strict", action="store_true", help="fail with SecurityError on any blocked attribute instead of rendering it empty"
    )


def _limit(dest: str, kind: type) -> Callable[[str], Any]:
    """An argparse type: a number that budget.py accepts as a limit (finite, >= 0), else one line, exit 2."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"takes {'a whole number' if kind is int else 'a number of seconds'}, got {text!r}") from None
        try:
            _budget().check_limit(dest, value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def runtime_options(args: argparse.Namespace) -> dict[str, Any]:
    """``{"budgets": ..., "strict": ...}`` for ``ChatTemplate.render`` / ``apply_chat_template``."""
    defaults = _budget().DEFAULT_BUDGETS
    changes: dict[str, Any] = {}
    for flag, dest, _kind, _text in _BUDGET_FLAGS:
        value = getattr(args, f"budget_{dest}", None)
        if value is None:
            continue
        if value < 0:
            raise UsageError(f"{flag} must be 0 (off) or a positive number, got {value}")
        changes[dest] = None if value == 0 else value
    if getattr(args, "no_budgets", False):
        if changes:
            raise UsageError("--no-budgets cannot be combined with budget limits")
        budgets = None
    else:
        try:  # budget.py's own checks, as for the library
            budgets = defaults.replace(**changes) if changes else defaults
        except ValueError as exc:
            raise UsageError(str(exc).strip().splitlines()[0]) from None
    return {"budgets": budgets, "strict": bool(getattr(args, "strict", False))}


def _budget() -> Any:
    """``chatjinja.runtime.budget``, imported on first use."""
    from ..runtime import budget  # lazy: the CLI imports every command to build its parser; the runtime loads jinja2

    return budget
