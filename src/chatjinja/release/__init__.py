"""Release gates for template publishers: ``diff_templates`` (what changed between two versions) and ``check_model`` (a model folder or GGUF), with their reports."""

from .check import SEVERITIES, CheckFinding, ModelCheck, check_github, check_json, check_model, check_sarif
from .diff import CapabilityChange, RenderDifference, TemplateDiff, diff_templates
from .report import check_text, diff_text

__all__ = [
    "CapabilityChange",
    "CheckFinding",
    "ModelCheck",
    "RenderDifference",
    "SEVERITIES",
    "TemplateDiff",
    "check_github",
    "check_json",
    "check_model",
    "check_sarif",
    "check_text",
    "diff_templates",
    "diff_text",
]
