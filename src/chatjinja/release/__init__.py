"""Release gates for template publishers: ``diff_templates`` (what changed between two versions) and ``check_model`` (a model folder or GGUF)."""

from .check import CheckFinding, ModelCheck, check_model
from .diff import CapabilityChange, RenderDifference, TemplateDiff, diff_templates

__all__ = [
    "CapabilityChange",
    "CheckFinding",
    "ModelCheck",
    "RenderDifference",
    "TemplateDiff",
    "check_model",
    "diff_templates",
]
