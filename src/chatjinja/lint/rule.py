"""``Rule``: a lint rule's identity (code, kebab-case name, severity), its documentation, the node types it visits and its checks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

if TYPE_CHECKING:
    from .context import LintContext
    from .diagnostic import Fix

__all__ = ["Rule", "Finding", "doc_section"]

CODE_RE = re.compile(r"^[A-Z]{2}\d{3}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety")


@dataclass(frozen=True, slots=True)
class Finding:
    """What a rule's check yields: a message at source offsets, maybe with a fix."""

    start: int
    end: int
    message: str
    fix: "Fix | None" = None
    severity: str | None = None  # overrides the rule's default (e.g. a note that becomes a warning)
    engines: tuple[str, ...] = ()  # PT rules: the engines this finding predicts a divergence in (default: the rule's)


@dataclass(frozen=True)
class Rule:
    """One lint rule. ``doc`` is Markdown with the sections in ``DOC_SECTIONS`` (each a ``## `` heading).

    The runner walks the AST once and calls ``check(node, context)`` for every node whose type is
    in ``visits`` (any node class of ``syntax.ast`` but ``Tag``: delimiters are reached through the
    nodes that own them; a base class such as ``ast.Expr`` stands for every class below it, as in
    ``syntax.visitor.dispatch_table``); ``finish(context)`` runs after the walk, for what only the whole
    template says. A rule with one check per node class declares them in ``checks`` (``{class: check}``,
    looked up by the class's MRO): the runner calls that one directly, ``check`` stays the entry point for
    other callers. A check returns any iterable: a generator, or ``()`` for a node it rejects at a glance
    (the cheap path for the many nodes a rule visits and passes over).
    """

    code: str
    name: str
    severity: str
    summary: str
    doc: str
    visits: tuple[type, ...] = ()
    check: Callable[[Any, "LintContext"], Iterable[Finding]] | None = None
    finish: Callable[["LintContext"], Iterable[Finding]] | None = None
    fixable: bool = False
    engines: tuple[str, ...] = ()  # PT rules: the engines (minijinja, hfjs, llamacpp) the divergence class affects
    checks: Mapping[type, Callable[[Any, "LintContext"], Iterable[Finding]]] | None = field(default=None, compare=False)

    def check_for(self, cls: type) -> Callable[[Any, "LintContext"], Iterable[Finding]] | None:
        """The check the runner calls for nodes of the concrete class ``cls``."""
        if self.checks is not None:
            for base in cls.__mro__:
                found = self.checks.get(base)
                if found is not None:
                    return found
        return self.check

    def __post_init__(self) -> None:
        if not CODE_RE.match(self.code):
            raise ValueError(f"rule code {self.code!r} is not two capital letters and three digits")
        if not NAME_RE.match(self.name):
            raise ValueError(f"rule name {self.name!r} is not kebab-case")
        for section in DOC_SECTIONS:
            if f"## {section}" not in self.doc:
                raise ValueError(f"rule {self.code} documentation has no '## {section}' section")

    @property
    def security(self) -> bool:
        return self.code.startswith("SC")

    def section(self, title: str) -> str:
        return doc_section(self.doc, title)

    def example(self) -> str:
        """The template in the "Example" section (the first fenced block)."""
        return _fenced(self.section("Example"))

    def use_instead(self) -> str:
        return _fenced(self.section("Use instead"))

    def examples(self) -> list[str]:
        """Every template in the "Example" section (the first is ``example()``; each triggers the rule)."""
        return _FENCE_RE.findall(self.section("Example"))


def doc_section(doc: str, title: str) -> str:
    marker = f"## {title}\n"
    start = doc.index(marker) + len(marker)
    stop = doc.find("\n## ", start)
    return doc[start : stop if stop != -1 else len(doc)].strip("\n")


_FENCE_RE = re.compile(r"```(?:jinja)?\n(.*?)\n```", re.S)


def _fenced(section: str) -> str:
    m = _FENCE_RE.search(section)
    if m is None:
        raise ValueError("documentation section has no fenced template")
    return m.group(1)
