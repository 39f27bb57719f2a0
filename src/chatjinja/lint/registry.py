"""The one table of lint rules: code → the module in ``chatjinja.lint.rules`` that defines it.

Codes are never reused: a retired rule keeps its row with ``None`` so the code stays taken.
Codes starting with ``SC`` are the security rules (``--select SC`` scans untrusted templates).
Codes starting with ``PT`` (portability: what other engines render differently) are opt-in: they run
only when selected (``--select PT``, a code, a name or ``ALL``), since a template published for
transformers alone is not wrong. A module may define several rules of one family (``RULES`` by code).
``chatjinja rules`` lists these and, after them, the codes other commands report (``OTHER_CODES``);
``lint`` runs only this table's rules.
"""

from __future__ import annotations

import functools
import importlib

from .rule import Rule

__all__ = ["RULE_TABLE", "OTHER_CODES", "OPT_IN", "all_rules", "listed_rules", "get_rule", "select_rules", "matches", "known_selector"]

RULE_TABLE: dict[str, str | None] = {
    # layout
    "WS001": "leaked_whitespace",
    # message content and printed values
    "CT001": "content_as_string",
    "CT002": "printed_non_string",
    # tools
    "TC001": "tool_arguments_shape",
    # roles and the generation prompt
    "RL001": "unknown_role",
    "RL002": "dropped_role",
    "GP001": "generation_prompt_unread",
    # special and control tokens, dates
    "TK001": "bos_token_written",
    "TK002": "control_token_concatenation",
    "DT001": "strftime_without_override",
    # jinja2 semantics traps
    "JN001": "method_name_as_key",
    "JN002": "markup_concatenation",
    # security-shaped rules
    "SC001": "template_loader",
    "SC002": "sandbox_escape",
    "SC003": "invisible_unicode",
    "SC004": "poisoned_branch",
    "SC005": "resource_abuse",
    # the linter itself
    "LN001": "unused_suppression",
    "LN002": "template_syntax",
    "LN003": "lint_limits",
    # portability: where minijinja, @huggingface/jinja or llama.cpp render differently (opt-in)
    "PT001": "pt_calls",
    "PT002": "pt_calls",
    "PT003": "pt_printing",
    "PT004": "pt_syntax",
    "PT005": "pt_syntax",
    "PT006": "pt_syntax",
    "PT007": "pt_syntax",
    "PT008": "pt_syntax",
    "PT009": "pt_calls",
    "PT010": "pt_printing",
    "PT011": "pt_printing",
    "PT012": "pt_calls",
    "PT013": "pt_syntax",
    "PT014": "pt_syntax",
    "PT015": "pt_syntax",
    "PT016": "pt_values",
    "PT017": "pt_values",
    "PT018": "pt_values",
    "PT019": "pt_syntax",
}

#: Code prefixes whose rules run only when selected explicitly (not by default).
OPT_IN = ("PT",)


# Codes reported by other commands, kept in their own module's table: prefix -> (module, attribute).
# Imported by name when listed, so the linter does not depend on the commands that reuse it.
OTHER_CODES: dict[str, tuple[str, str]] = {
    "MF": ("chatjinja.release.check", "FOLDER_RULES"),  # chatjinja check: the model folder's own findings
    "RP": ("chatjinja.serving.rules", "REPLY_RULES"),  # chatjinja check: replies that cannot be read back
    "TR": ("chatjinja.training.rules", "TRAINING_RULES"),  # chatjinja check: what trainers check (prefixes, the mask)
}


@functools.cache
def all_rules() -> tuple[Rule, ...]:
    rules = []
    for code, module_name in RULE_TABLE.items():
        if module_name is None:
            continue
        module = importlib.import_module(f"chatjinja.lint.rules.{module_name}")
        rule = module.RULES[code] if hasattr(module, "RULES") else module.RULE
        if rule.code != code:
            raise RuntimeError(f"rules/{module_name}.py defines {rule.code}, the table says {code}")
        rules.append(rule)
    return tuple(rules)


@functools.cache
def listed_rules() -> tuple[Rule, ...]:
    """Every code chatjinja reports: the lint rules, then each ``OTHER_CODES`` table (what ``chatjinja rules`` lists)."""
    rules = list(all_rules())
    for prefix, (module_name, attribute) in OTHER_CODES.items():
        if any(rule.code.startswith(prefix) for rule in rules):
            raise RuntimeError(f"prefix {prefix} belongs to {module_name}.{attribute}, but a rule before it uses it")
        for rule in getattr(importlib.import_module(module_name), attribute):
            if not rule.code.startswith(prefix):
                raise RuntimeError(f"{module_name}.{attribute} defines {rule.code}, outside its prefix {prefix}")
            rules.append(rule)
    if len({r.code for r in rules}) != len(rules) or len({r.name for r in rules}) != len(rules):
        raise RuntimeError("a rule code or name is defined twice")
    return tuple(rules)


def get_rule(code_or_name: str, *, listed: bool = False) -> Rule | None:
    """The lint rule with this code or name (``listed=True``: any code ``listed_rules`` has)."""
    wanted = code_or_name.strip()
    for rule in listed_rules() if listed else all_rules():
        if rule.code == wanted.upper() or rule.name == wanted.lower():
            return rule
    return None


def matches(selector: str, rule: Rule) -> bool:
    """``ALL``, a code prefix (``SC``, ``SC00``, ``SC001``) or a rule name selects a rule."""
    selector = selector.strip()
    return selector.upper() == "ALL" or rule.code.startswith(selector.upper()) or rule.name == selector.lower()


def select_rules(select: list[str] | None = None, ignore: list[str] | None = None) -> tuple[Rule, ...]:
    """The rules ``select`` names (default: every rule outside the ``OPT_IN`` families), minus ``ignore``."""
    if select is None:
        chosen = [r for r in all_rules() if not r.code.startswith(OPT_IN)]
    else:
        chosen = [r for r in all_rules() if any(matches(s, r) for s in select)]
    if ignore:
        chosen = [r for r in chosen if not any(matches(s, r) for s in ignore)]
    return tuple(chosen)


def known_selector(selector: str) -> bool:
    return any(matches(selector, r) for r in all_rules())
