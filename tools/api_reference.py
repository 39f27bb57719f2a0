"""Write docs/reference/api.md from the public API's signatures and docstrings (``python tools/api_reference.py``).

``tests/test_cli_reference.py`` checks that the page is what this prints, so the reference cannot
drift from the code.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "api.md"

HEADER = """# Python API reference

Generated from the code by `python tools/api_reference.py` (a test checks that this page is what it
prints). The [guide](../README.md) shows each in use.
"""

# (section, [(module, name)]): everything ``import chatjinja`` exports, then the entry points of the subpackages
SECTIONS = [
    ("Rendering", [
        ("chatjinja", "apply_chat_template"), ("chatjinja", "ChatTemplate"), ("chatjinja", "load_template"),
        ("chatjinja", "render_batch"), ("chatjinja.batch", "render_jsonl"),
        ("chatjinja.batch", "render_jsonl_dask"), ("chatjinja.batch", "render_lines"),
        ("chatjinja.batch", "render_line"),
    ]),
    ("Budgets", [("chatjinja.runtime.budget", "Budgets"), ("chatjinja", "BudgetExceeded")]),
    ("Static analysis", [
        ("chatjinja", "parse"), ("chatjinja", "analyze"), ("chatjinja", "Capabilities"), ("chatjinja", "probe"),
        ("chatjinja.analysis", "disagreements"),
    ]),
    ("Observing a template", [
        ("chatjinja.observation", "space_of"), ("chatjinja.observation", "build_space"),
        ("chatjinja.observation", "Member"), ("chatjinja.observation", "observe"),
        ("chatjinja.observation", "render_text"), ("chatjinja.observation", "Outcome"),
        ("chatjinja.analysis", "modes_of"), ("chatjinja.analysis.modes", "Mode"),
        ("chatjinja.runtime.render", "render_source"), ("chatjinja.runtime.provenance", "Provenance"),
    ]),
    ("Parsing replies", [
        ("chatjinja", "response_template"), ("chatjinja", "write_response_template"), ("chatjinja", "parse_response"),
        ("chatjinja", "ResponseStream"), ("chatjinja", "ResponseTemplateError"), ("chatjinja", "ReplyError"),
        ("chatjinja.serving.parse", "UnreadableReply"), ("chatjinja.serving.parse", "ReplyTooLarge"),
    ]),
    ("Linting", [("chatjinja.lint", "lint"), ("chatjinja.lint", "fix_source"), ("chatjinja.lint", "Diagnostic")]),
    ("Training data", [
        ("chatjinja", "add_generation_tags"), ("chatjinja.training.generation_tags", "GenerationTagsRefused"),
    ]),
    ("Release gates and conformance", [
        ("chatjinja.release", "diff_templates"), ("chatjinja.release", "check_model"), ("chatjinja.conform", "conform"),
    ]),
    ("Portability", [
        ("chatjinja", "check_portability"), ("chatjinja.portability", "engine"),
        ("chatjinja.portability", "available_engines"), ("chatjinja.portability", "Engine"),
        ("chatjinja.portability", "EngineLimits"), ("chatjinja.portability", "PortabilityBudget"),
        ("chatjinja.portability", "template_context"),
    ]),
    ("Sources and errors", [
        ("chatjinja", "Source"), ("chatjinja", "Span"), ("chatjinja", "ChatJinjaError"), ("chatjinja", "LoadError"),
        ("chatjinja", "TemplateNotFound"), ("chatjinja", "TemplateSyntaxError"),
    ]),
]


def _signature(obj: object) -> str:
    try:
        text = str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return re.sub(r" at 0x[0-9a-f]+", "", text.replace("'", ""))  # (no memory addresses: the page must be reproducible)


def _doc(obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip()


def entry(module: str, name: str) -> str:
    if module == "chatjinja":  # the export table (the package attribute is loaded lazily from it)
        from chatjinja import _EXPORTS

        obj = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        obj = getattr(importlib.import_module(module), name)
    kind = "class" if inspect.isclass(obj) else "function"
    qualified = f"{module}.{name}"
    lines = [f"### `{qualified}`", "", "```text", f"{kind} {name}{_signature(obj)}", "```", ""]
    doc = _doc(obj)
    if doc:
        lines += [doc, ""]
    if inspect.isclass(obj):
        lines += _members(obj)
    return "\n".join(lines)


def _members(cls: type) -> list[str]:
    """The public methods and properties a class defines itself (not those of its bases, nor dataclass fields)."""
    lines: list[str] = []
    for member, value in vars(cls).items():
        if member.startswith("_"):
            continue
        if isinstance(value, property):
            lines += [f"- `{member}` (property)" + _summary(value)]
        elif isinstance(value, (classmethod, staticmethod)) or inspect.isfunction(value):
            function = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
            lines += [f"- `{member}{_signature(function)}`" + _summary(function)]
    return lines + [""] if lines else []


def _summary(obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    first = " ".join(doc.split("\n\n", 1)[0].split())
    return f": {first}" if first else ""


def render() -> str:
    parts = [HEADER]
    for title, names in SECTIONS:
        parts.append(f"## {title}\n")
        parts.extend(entry(module, name) for module, name in names)
    return "\n".join(parts).rstrip("\n") + "\n"


def exported_names() -> set[str]:
    return {name for _, names in SECTIONS for module, name in names if module == "chatjinja"}


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        sys.exit(0 if PAGE.read_text(encoding="utf-8") == render() else 1)
    PAGE.write_text(render(), encoding="utf-8")
