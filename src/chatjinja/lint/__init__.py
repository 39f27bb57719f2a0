"""The chat-template linter: rules with stable codes, line:column diagnostics, suppressions and fixes.

Static half: never imports jinja2 or ``chatjinja.runtime``.
"""

from .config import ConfigError, LintConfig, find_config, load_config
from .diagnostic import SEVERITIES, Diagnostic, Edit, Fix, severity_rank
from .fix import apply_fixes, fix_diffs, fix_source, unified_diff
from .registry import all_rules, get_rule, known_selector, select_rules
from .rule import Rule
from .runner import lint, lint_source

__all__ = [
    "ConfigError", "Diagnostic", "Edit", "Fix", "LintConfig", "Rule", "SEVERITIES",
    "all_rules", "apply_fixes", "find_config", "fix_diffs", "fix_source", "get_rule", "known_selector", "lint",
    "lint_source", "load_config", "select_rules", "severity_rank", "unified_diff",
]
