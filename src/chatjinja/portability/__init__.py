"""Portability: the same chat template rendered by the other engines that serve it, compared with transformers."""

from .budget import PortabilityBudget
from .context import PortabilityCase, probe_cases, template_context
from .engines import (
    ENGINE_NAMES,
    Engine,
    EngineLimits,
    EngineResult,
    EngineUnavailable,
    available_engines,
    engine,
    engines_dir,
)
from .report import CaseComparison, EngineComparison, PortabilityReport, check_portability, format_json, format_sarif, format_text

__all__ = [
    "CaseComparison",
    "EngineComparison",
    "PortabilityBudget",
    "PortabilityReport",
    "check_portability",
    "ENGINE_NAMES",
    "Engine",
    "EngineLimits",
    "EngineResult",
    "EngineUnavailable",
    "PortabilityCase",
    "available_engines",
    "engine",
    "engines_dir",
    "format_json",
    "format_sarif",
    "format_text",
    "probe_cases",
    "template_context",
]
