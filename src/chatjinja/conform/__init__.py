"""Ground-truth conformance: a chat template's renderings compared with mistral-common's for a tokenizer version."""

from .reference import (
    MISTRAL_COMMON_VERSION,
    VERSIONS,
    Reference,
    ReferenceUnavailable,
    UnknownReference,
    load_reference,
    parse_against,
)
from .report import CaseResult, ConformanceReport, format_json, format_markdown_table, format_text
from .runner import conform
from .suite import ConversationCase, builtin_suite, cases_from_json, documented_conversation

__all__ = [
    "MISTRAL_COMMON_VERSION",
    "VERSIONS",
    "CaseResult",
    "ConformanceReport",
    "ConversationCase",
    "Reference",
    "ReferenceUnavailable",
    "UnknownReference",
    "builtin_suite",
    "cases_from_json",
    "conform",
    "documented_conversation",
    "format_json",
    "format_markdown_table",
    "format_text",
    "load_reference",
    "parse_against",
]
