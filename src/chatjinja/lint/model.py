"""``TemplateModel``: the linted template as rules see it — tags, text runs, block nesting, paths and assignments.

Built once per template by the runner (one pass over the tags); rules only read it. The analyser's
``Capabilities`` facts are the long-term source of truth for roles and variables; until every fact a
rule needs is exposed there, the small derived facts rules share are computed here, in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterator

from ..source import Source, Span
from .lexer import Scan, Tag, Token, scan

__all__ = ["Branch", "Path", "TemplateModel", "KEYWORDS"]

# Names that are operators or literals, never the start of a data path.
KEYWORDS = frozenset("and or not in is if else true false none True False None recursive".split())
_OPENERS = {"if", "for", "macro", "call", "filter", "with", "block", "generation", "autoescape", "trans"}
_MIDDLES = {"elif", "else", "pluralize"}
TYPE_TESTS = frozenset({"string", "mapping", "iterable", "sequence", "none", "defined", "undefined", "number"})


@dataclass(eq=False)
class Branch:
    """One arm of a block: ``{% if c %}``, ``{% elif c %}``, ``{% else %}``, a loop body, a macro body ..."""

    keyword: str  # the keyword of the construct: if, for, macro, ...
    tag: Tag  # the tag opening this arm (if / elif / else / for ...)
    condition: list[Token]  # test tokens of if/elif arms; [] otherwise
    earlier: tuple["Branch", ...] = ()  # the earlier arms of the same if-chain
    end_tag: Tag | None = None
    arm: str = ""  # "if", "elif", "else" (or the keyword)
    children: list = field(default_factory=list)  # tags directly inside this arm
    stop: int | None = None  # index of the tag that ends this arm (the next elif/else, or the end tag)


@dataclass(frozen=True, slots=True)
class Path:
    """A data path such as ``message['content']`` or ``tool.function.arguments`` within a tag's tokens.

    ``segments`` are the names/keys after the base (``[0]`` style for integer subscripts);
    ``ends[k]`` is the index (in the tag's tokens) just after segment ``k`` (``ends[-1]`` after the base).
    """

    base: str
    segments: tuple[str, ...]
    start: int
    ends: tuple[int, ...]

    def key(self, upto: int | None = None) -> str:
        segs = self.segments if upto is None else self.segments[:upto]
        return ".".join((self.base, *segs))

    @property
    def end(self) -> int:
        return self.ends[-1]


def paths_in(tokens: list[Token]) -> Iterator[Path]:
    """Every maximal data path (name followed by ``.name`` / ``['key']`` / ``[0]``) in a token list."""
    i, n = 0, len(tokens)
    keywords = KEYWORDS
    while i < n:
        tok = tokens[i]
        if tok.kind != "name" or tok.value in keywords:
            i += 1
            continue
        if i > 0:
            prev = tokens[i - 1]
            if prev.kind == "op" and (
                prev.value == "." or (prev.value in "(," and i + 1 < n and tokens[i + 1].kind == "op" and tokens[i + 1].value == "=")
            ):
                i += 1  # an attribute name, or a keyword argument's name
                continue
        segments: list[str] = []
        ends: list[int] = [i + 1]
        j = i + 1
        while j + 1 < n:
            t = tokens[j]
            if t.kind != "op":
                break
            nxt = tokens[j + 1]
            if t.value == "." and nxt.kind == "name":
                segments.append(nxt.value)
                j += 2
            elif t.value == "[" and j + 2 < n and nxt.kind in ("string", "int") and tokens[j + 2].value == "]" and tokens[j + 2].kind == "op":
                segments.append(nxt.literal if nxt.kind == "string" else f"[{nxt.value}]")
                j += 3
            elif (
                t.value == "[" and j + 3 < n and nxt.kind == "op" and nxt.value == "-" and tokens[j + 2].kind == "int"
                and tokens[j + 3].kind == "op" and tokens[j + 3].value == "]"
            ):
                segments.append(f"[-{tokens[j + 2].value}]")
                j += 4
            else:
                break
            ends.append(j)
        yield Path(tok.value, tuple(segments), i, tuple(ends))
        i = j


class TemplateModel:
    """Everything a rule reads about one template."""

    def __init__(self, source: Source, *, add_bos_token: bool | None = None, scanned: Scan | None = None,
                 capabilities: Any = None):
        self.source = source
        # chatjinja.analysis.Capabilities when the caller ran the analyser (lint --deep, chatjinja check);
        # rules that have a fact for what they check read it from here instead of their lexical estimate.
        self.capabilities = capabilities
        self.text = source.text
        self.add_bos_token = add_bos_token
        self.scan = scanned if scanned is not None else scan(source.text)
        self.tags = self.scan.tags
        self.texts = self.scan.texts
        self.root = Branch("template", None, [])  # type: ignore[arg-type]
        self.arm_of: dict[int, Branch] = {}
        self._paths_cache: dict[int, list[Path]] = {}
        self._guards_cache: dict[int, set[tuple[str, str]]] = {}
        self._arm_tests: dict[int, set[tuple[str, str]]] = {}
        self._refs_cache: dict[tuple[int, str], list[tuple[Path, int]]] = {}  # tag index of an if/elif/else/for/macro ... tag → the arm it opens
        self._build_scopes()

    # -- positions -------------------------------------------------------------------------
    def span(self, start: int, end: int) -> Span:
        return self.source.lines.span(start, end)

    # -- structure -------------------------------------------------------------------------
    def _build_scopes(self) -> None:
        stack: list[Branch] = []
        for tag in self.tags:
            if tag.kind != "block":
                tag.scope = tuple(stack)
                (stack[-1] if stack else self.root).children.append(tag)
                continue
            kw = tag.keyword
            if kw in _MIDDLES and stack and stack[-1].keyword in ("if", "for", "trans"):
                prev = stack.pop()
                prev.stop = tag.index
                earlier = (*prev.earlier, prev) if prev.keyword == "if" else ()
                cond = tag.tokens[1:] if kw == "elif" else []
                branch = Branch(prev.keyword, tag, cond, earlier, arm=kw)
                self.arm_of[tag.index] = branch
                tag.scope = tuple(stack)
                stack.append(branch)
            elif kw.startswith("end") and stack and (stack[-1].keyword == kw[3:] or kw[3:] == "set"):
                if kw == "endset":
                    while stack and stack[-1].keyword != "set":
                        stack.pop()
                branch = stack.pop() if stack else None
                if branch is not None:
                    branch.stop = tag.index
                    branch.end_tag = tag
                    for b in branch.earlier:
                        b.end_tag = tag
                tag.scope = tuple(stack)
            elif kw in _OPENERS or (kw == "set" and not any(t.is_op("=") for t in tag.tokens)):
                tag.scope = tuple(stack)
                (stack[-1] if stack else self.root).children.append(tag)
                cond = tag.tokens[1:] if kw == "if" else []
                branch = Branch(kw, tag, cond, arm=kw)
                self.arm_of[tag.index] = branch
                stack.append(branch)
            else:
                tag.scope = tuple(stack)
                (stack[-1] if stack else self.root).children.append(tag)

    def tags_in(self, branch: Branch) -> Iterator[Tag]:
        """Tags strictly inside an arm (nested ones too)."""
        start = branch.tag.index + 1
        stop = self._arm_stop(branch)
        for tag in self.tags[start:stop]:
            yield tag

    def _arm_stop(self, branch: Branch) -> int:
        if branch.stop is not None:
            return branch.stop
        # the arm ends at the next sibling arm (elif/else) or the end tag
        for tag in self.tags[branch.tag.index + 1 :]:
            if branch in tag.scope:
                continue
            if tag.scope == branch.tag.scope and tag.keyword in ("elif", "else", f"end{branch.keyword}"):
                return tag.index
        return len(self.tags)

    def arm_text_ranges(self, branch: Branch) -> tuple[int, int]:
        stop = self._arm_stop(branch)
        end = self.tags[stop].start if stop < len(self.tags) else len(self.text)
        return branch.tag.end, end

    # -- derived facts ---------------------------------------------------------------------
    @cached_property
    def assignments(self) -> dict[str, list[tuple[Tag, list[Token]]]]:
        """``{% set name = value %}`` (and ``ns.attr``) → the value tokens of each assignment."""
        out: dict[str, list[tuple[Tag, list[Token]]]] = {}
        for tag in self.tags:
            if tag.keyword != "set":
                continue
            toks = tag.tokens
            eq = next((i for i, t in enumerate(toks) if t.is_op("=")), None)
            if eq is None:
                continue
            target = "".join(t.value for t in toks[1:eq])
            for name in target.split(","):
                out.setdefault(name.strip(), []).append((tag, toks[eq + 1 :]))
        return out

    @cached_property
    def namespaces(self) -> frozenset[str]:
        """Variables set to ``namespace(...)``: ``ns.content`` is the template's own value, not a message's."""
        return frozenset(name for name, values in self.assignments.items()
                         if any(v and v[0].kind == "name" and v[0].value == "namespace" for _tag, v in values))

    @cached_property
    def chunk_vars(self) -> frozenset[str]:
        """Loop variables over a message's content (``for block in message['content']``): ``block['content']`` is a chunk's."""
        out = set()
        for tag in self.tags:
            if tag.keyword == "for" and len(tag.tokens) > 3 and tag.tokens[2].is_name("in"):
                rest = [p for p in paths_in(tag.tokens[3:])]
                if rest and rest[0].start == 0 and rest[0].segments[-1:] == ("content",):
                    out.add(tag.tokens[1].value)
        return frozenset(out)

    def aliases_of(self, suffix: str) -> set[str]:
        """Variables assigned straight from a path whose last segment is ``suffix`` (``set c = m['content']``)."""
        key = ("aliases", suffix)
        cached = self.__dict__.get(key)
        if cached is not None:
            return cached
        names = {name for name in self.assignments if _is_unguarded_alias(self, name, suffix)}
        self.__dict__[key] = names
        return names

    def guards(self, tag: Tag) -> set[tuple[str, str]]:
        """(path key, type test) pairs tested by the if-arms enclosing ``tag`` (earlier arms of a chain too)."""
        cached = self._guards_cache.get(tag.index)
        if cached is not None:
            return cached
        out: set[tuple[str, str]] = set()
        for branch in tag.scope:
            tests = self._arm_tests.get(id(branch))
            if tests is None:
                tests = set()
                for arm in (*branch.earlier, branch):
                    tests |= type_tests(arm.condition)
                self._arm_tests[id(branch)] = tests
            out |= tests
        self._guards_cache[tag.index] = out
        return out

    def paths(self, tag: Tag) -> list[Path]:
        """``paths_in(tag.tokens)``, computed once per tag."""
        cached = self._paths_cache.get(tag.index)
        if cached is None:
            cached = list(paths_in(tag.tokens)) if tag.tokens else []
            if tag.kind == "block" and cached and cached[0].start == 0:
                cached = cached[1:]  # the statement keyword (for, set, call, ...)
            self._paths_cache[tag.index] = cached
        return cached

    def refs(self, tag: Tag, suffix: str) -> list[tuple[Path, int]]:
        """(path, n): ``path.key(n)`` is a value whose last key is ``suffix`` (``message['content']``) or an alias of one."""
        return _refs(self, tag, suffix)

    def guarded(self, tag: Tag, key: str, tests: tuple[str, ...] = ("string", "mapping", "iterable", "sequence")) -> bool:
        """Whether an enclosing if-arm (or a raising precondition) type-tests ``key``."""
        found = self.guards(tag) | self.raise_guards
        if tag.keyword in ("if", "elif"):
            found = found | type_tests(tag.tokens[1:])
        return any(k == key and t in tests for k, t in found)

    def is_output(self, tag: Tag) -> bool:
        """A ``{{ }}`` tag, i.e. one whose value is written into the prompt."""
        return tag.kind == "var"

    @cached_property
    def raise_guards(self) -> set[tuple[str, str]]:
        """Type tests of if-arms whose body calls ``raise_exception`` (a checked precondition)."""
        out: set[tuple[str, str]] = set()
        text = self.text
        if "raise_exception" not in text:
            return out
        for tag in self.tags:
            if tag.keyword in ("if", "elif"):
                branch = self.arm_of.get(tag.index)
                if branch is None or not branch.condition:
                    continue
                start, end = self.arm_text_ranges(branch)
                if text.find("raise_exception", start, end) != -1:
                    out |= type_tests(branch.condition)
        return out

def type_tests(tokens: list[Token]) -> set[tuple[str, str]]:
    """``path is [not] string`` / ``not path is mapping`` ... in a condition → {(path key, test)}."""
    out: set[tuple[str, str]] = set()
    if not tokens or not any(t.kind == "name" and t.value == "is" for t in tokens):
        return out
    for p in paths_in(tokens):
        j = p.end
        if j < len(tokens) and tokens[j].is_name("is"):
            k = j + 1
            if k < len(tokens) and tokens[k].is_name("not"):
                k += 1
            if k < len(tokens) and tokens[k].kind == "name" and tokens[k].value in TYPE_TESTS:
                out.add((p.key(), tokens[k].value))
    return out


def _refs(model: "TemplateModel", tag: Tag, suffix: str) -> list[tuple[Path, int]]:
    key = (tag.index, suffix)
    cached = model._refs_cache.get(key)
    if cached is not None:
        return cached
    aliases = model.aliases_of(suffix)
    out: list[tuple[Path, int]] = []
    if not tag.tokens or (not aliases and model.text.find(suffix, tag.inner_start, tag.inner_end) == -1):
        model._refs_cache[key] = out
        return out
    namespaces = model.namespaces
    chunk_vars = model.chunk_vars if suffix == "content" else frozenset()
    for p in model.paths(tag):
        if p.base in aliases:
            out.append((p, 0))
        for k, seg in enumerate(p.segments):
            if seg == suffix and not (k == 0 and (p.base in ("loop", "self") or p.base in namespaces or p.base in chunk_vars)):
                out.append((p, k + 1))
    model._refs_cache[key] = out
    return out


def _is_unguarded_alias(model: "TemplateModel", name: str, suffix: str) -> bool:
    values = model.assignments.get(name, [])
    if not values:
        return False
    for _tag, value in values:  # cheap rejection first: the value must end in the key
        last = value[-1] if value else None
        if last is None or not ((last.kind == "name" and last.value == suffix) or (last.kind == "string" and last.literal == suffix)
                                or (last.kind == "op" and last.value == "]")):
            return False
    for tag, value in values:
        ps = list(paths_in(value))
        if not (len(ps) == 1 and ps[0].start == 0 and ps[0].end == len(value) and ps[0].segments[-1:] == (suffix,)):
            return False
        if any(key == ps[0].key() for key, _test in model.guards(tag)):
            return False
    return True

