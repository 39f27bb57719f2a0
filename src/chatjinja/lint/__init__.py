"""The chat-template linter: rules with stable codes, line:column diagnostics, suppressions and fixes.

Static half: never imports jinja2 or ``chatjinja.runtime``.
"""

from .config import LintConfig, find_config, load_config
from .diagnostic import SEVERITIES, Diagnostic, Edit, Fix
from .fix import apply_fixes, fix_source, unified_diff
from .registry import all_rules, get_rule, select_rules
from .rule import Rule
from .runner import lint, lint_source

__all__ = [
    "Diagnostic", "Edit", "Fix", "LintConfig", "Rule", "SEVERITIES",
    "all_rules", "apply_fixes", "find_config", "fix_source", "get_rule", "lint", "lint_source",
    "load_config", "select_rules", "unified_diff",
]
