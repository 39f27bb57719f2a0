"""Renders that say where each character came from: the output site that printed it and, where it is
a message's value, which message and field.

Built into the code generator, not into the template source (llama.cpp's engine marks input strings
in its string type the same way: ``common/jinja/string.h``, ``is_input``):

- :class:`ProvenanceCodeGenerator` compiles every child of every ``{{ }}``/text output through
  ``environment.trace_text(site, value)``, numbering the sites in one walk of the tree
  (:func:`output_sites`). It is a separate compilation in a separate environment: a render without
  provenance runs the code it always ran (free when off).
- The conversation's strings reach the template as :class:`Traced` strings that carry their origin
  (``("messages", 2, "content")``); concatenation (``+``, ``~``, a block's or macro's buffer), slicing,
  ``strip``/``trim`` and ``split`` keep the origins of what they keep. Anything else a template does to
  a value (a filter, ``replace``, ``tojson``) makes a new string: its characters belong to the site that
  prints them, with no origin.
- The text is the text of the render without provenance, character for character (a test checks it
  on every corpus template).

:func:`render_traced` is the entry point; ``chatjinja.observation`` reads what it returns.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import jinja2
import jinja2.nodes
from markupsafe import Markup

from .budget import Budgets, BudgetExceeded, check_source
from .environment import ChatTemplateEnvironment, NoFoldCodeGenerator

__all__ = ["Provenance", "Segment", "Site", "Traced", "output_sites", "traced_data", "compile_traced"]

# (start, end, site, origin): ``site`` indexes :attr:`Provenance.sites` (None only inside a Traced
# value not printed yet); ``origin`` is ``(path, offset)`` for characters printed from an input value
# (its path, as ``("messages", 2, "content")``, and where in the value the stretch starts), else None.
Segment = tuple[int, int, "int | None", "tuple | None"]


@dataclass(frozen=True)
class Site:
    """One output site: a ``{{ expression }}`` or a stretch of literal text, by source line."""

    index: int
    line: int
    kind: str  # "text" (template text) or "expression"
    text: str  # the literal text, or the expression's jinja2 node dump (shortened)


@dataclass(frozen=True)
class Provenance:
    """Where each character of one render came from: ``segments`` cover ``[0, len(text))`` in order."""

    text: str
    segments: tuple[Segment, ...]
    sites: tuple[Site, ...]

    def at(self, offset: int) -> Segment:
        """The segment holding character ``offset``."""
        lo, hi = 0, len(self.segments)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.segments[mid][1] <= offset:
                lo = mid + 1
            else:
                hi = mid
        return self.segments[lo]

    def origins(self) -> Iterator[tuple[int, int, tuple, int]]:
        """``(start, end, path, offset)`` of every stretch printed from an input value: ``text[start:end]``
        is the value at ``path`` from ``offset`` on."""
        for start, end, _site, origin in self.segments:
            if origin is not None:
                yield start, end, origin[0], origin[1]


def _shifted(segments: Iterable[Segment], by: int) -> list[Segment]:
    return [(a + by, b + by, s, o) for a, b, s, o in segments]


def _clipped(segments: Iterable[Segment], start: int, stop: int) -> list[Segment]:
    """The segments within ``[start, stop)``, cut to it and moved to start at 0."""
    out = []
    for a, b, s, o in segments:
        if b <= start or a >= stop:
            continue
        a2, b2 = max(a, start), min(b, stop)
        if o is not None and a2 != a:
            o = (o[0], o[1] + a2 - a)
        out.append((a2 - start, b2 - start, s, o))
    return out


def _segments_of(value: str) -> list[Segment]:
    return list(value.segments) if isinstance(value, Traced) else [(0, len(value), None, None)] if value else []


class Traced(str):
    """A string that knows where its characters came from (``segments``, relative to itself)."""

    segments: tuple[Segment, ...]

    def __new__(cls, text: str, segments: Iterable[Segment] = ()) -> "Traced":
        self = str.__new__(cls, text)
        self.segments = tuple(segments)
        return self

    def __str__(self) -> str:  # str() keeps the origins (``budget_text`` calls it)
        return self

    def __reduce_ex__(self, protocol: Any) -> Any:  # a copy or a pickle is the plain string
        return (str, (str.__str__(self),))

    def __add__(self, other: Any) -> Any:
        if isinstance(other, Markup):
            return NotImplemented  # Markup's own __radd__ escapes this string first, as it does a plain one
        if not isinstance(other, str):
            # as ``str + other`` goes: the right operand's ``__radd__`` first (an Undefined raises its
            # own error), then str's concatenation, which raises str's own TypeError
            reflected = getattr(type(other), "__radd__", None)
            if reflected is not None:
                result = reflected(other, self)
                if result is not NotImplemented:
                    return result
            return str.__add__(self, other)
        return Traced(str.__add__(self, other), [*self.segments, *_shifted(_segments_of(other), len(self))])

    def __radd__(self, other: Any) -> Any:
        if not isinstance(other, str):
            return NotImplemented
        return Traced(str.__add__(other, self), [*_segments_of(other), *_shifted(self.segments, len(other))])

    def __getitem__(self, key: Any) -> Any:
        piece = str.__getitem__(self, key)
        if isinstance(key, slice) and (key.step is None or key.step == 1):
            start, stop, _ = key.indices(len(self))
            return Traced(piece, _clipped(self.segments, start, max(start, stop)))
        return piece

    def _cut(self, start: int, stop: int) -> "Traced":
        return Traced(str.__getitem__(self, slice(start, stop)), _clipped(self.segments, start, stop))

    def strip(self, chars: Any = None) -> Any:
        stripped = str.lstrip(self, chars)
        start = len(self) - len(stripped)
        return self._cut(start, start + len(str.rstrip(stripped, chars)))

    def lstrip(self, chars: Any = None) -> Any:
        return self._cut(len(self) - len(str.lstrip(self, chars)), len(self))

    def rstrip(self, chars: Any = None) -> Any:
        return self._cut(0, len(str.rstrip(self, chars)))

    def split(self, sep: Any = None, maxsplit: int = -1) -> Any:
        pieces = str.split(self, sep, maxsplit)
        if sep is None or not isinstance(sep, str) or not sep:
            return pieces
        out, at = [], 0
        for piece in pieces:
            out.append(self._cut(at, at + len(piece)))
            at += len(piece) + len(sep)
        return out


# Error messages name the type of a value (``'str object' has no attribute 'items'``, ``can only
# concatenate list (not "str") to list``): a traced string is named as the string it is.
Traced.__name__ = Traced.__qualname__ = "str"
Traced.__module__ = "builtins"


def traced_data(value: Any, path: tuple) -> Any:
    """``value`` with every string inside it a :class:`Traced` string whose origin is its path."""
    if isinstance(value, str):
        return Traced(value, [(0, len(value), None, (path, 0))]) if value else value
    if isinstance(value, dict):
        return {k: traced_data(v, (*path, k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(traced_data(v, (*path, i)) for i, v in enumerate(value)) if isinstance(value, list) \
            else tuple(traced_data(v, (*path, i)) for i, v in enumerate(value))
    return value


def _leaves(value: Any, sort_keys: bool, depth: int = 0) -> Iterator[str]:
    """The strings of a container in the order ``json.dumps``/``repr`` print them (keys before their values)."""
    if depth > 64:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        items = sorted(value.items()) if sort_keys else value.items()
        for key, item in items:
            if isinstance(key, str):
                yield key
            yield from _leaves(item, sort_keys, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item, sort_keys, depth + 1)


def _printed_leaves(text: str, value: Any, quote: Any, sort_keys: bool = False) -> list[Segment]:
    """The origins of the traced strings inside ``value`` as they stand in ``text``, its ``json.dumps`` or
    ``repr``: each string is found quoted, in printing order, after the one before; one printed with
    escapes (its text is not the value's) has no origin."""
    segments: list[Segment] = []
    at = 0
    try:
        leaves = list(_leaves(value, sort_keys))
    except TypeError:  # (keys sort_keys cannot order: json.dumps raised already)
        return segments
    for leaf in leaves:
        quoted = quote(leaf)
        found = text.find(quoted, at)
        if found < 0:
            continue
        at = found + len(quoted)
        if isinstance(leaf, Traced) and quoted[1:-1] == leaf:
            segments.extend(_shifted((seg for seg in leaf.segments if seg[3] is not None), found + 1))
    return segments


def _joined(parts: Iterable[str]) -> list[Segment]:
    segments: list[Segment] = []
    at = 0
    for part in parts:
        if not isinstance(part, str):
            part = str(part)
        segments.extend(_shifted(_segments_of(part), at))
        at += len(part)
    return segments


def output_sites(tree: jinja2.nodes.Template) -> list[jinja2.nodes.Node]:
    """Every child of every output node, in one fixed walk of the tree: the site numbers."""
    return [child for output in tree.find_all(jinja2.nodes.Output) for child in output.nodes]


def _site(index: int, node: jinja2.nodes.Node) -> Site:
    if isinstance(node, jinja2.nodes.TemplateData):
        return Site(index, node.lineno, "text", node.data)
    text = repr(node)
    return Site(index, node.lineno, "expression", text if len(text) <= 200 else text[:197] + "...")


class ProvenanceCodeGenerator(NoFoldCodeGenerator):
    """The renderer's code generator, with every output child printed through ``environment.trace_text``."""

    def visit_Template(self, node: jinja2.nodes.Template, frame: Any = None) -> None:
        self._site_numbers = {id(child): index for index, child in enumerate(output_sites(node))}
        super().visit_Template(node, frame)

    def _output_child_to_const(self, node: jinja2.nodes.Expr, frame: Any, finalize: Any) -> str:
        raise jinja2.nodes.Impossible()  # every child at run time, so each is traced

    def _output_child_pre(self, node: jinja2.nodes.Expr, frame: Any, finalize: Any) -> None:
        self.write(f"environment.trace_text({self._site_numbers.get(id(node), -1)}, ")
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            super()._output_child_pre(node, frame, finalize)
        elif finalize.src is not None:  # (else trace_text makes the text: ``budget_text`` of the value itself)
            self.write(finalize.src)

    def _output_child_post(self, node: jinja2.nodes.Expr, frame: Any, finalize: Any) -> None:
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            super()._output_child_post(node, frame, finalize)
        elif finalize.src is not None:
            self.write(")")
        self.write(")")


# the segments of the output of the render running in this context
_collected: ContextVar[list | None] = ContextVar("chatjinja_provenance", default=None)
# how many segments the traced render running here has made: each is a tuple the output budget does not
# count, so a template printing many tiny parts is stopped at ``MAX_SEGMENTS`` (a ``BudgetExceeded``)
_made: ContextVar[list[int] | None] = ContextVar("chatjinja_provenance_made", default=None)
#: the most segments one traced render may make (each about 100 bytes: 200 MB at the limit)
MAX_SEGMENTS = 2_000_000


def _count(segments: int) -> None:
    made = _made.get()
    if made is not None:
        made[0] += segments
        if made[0] > MAX_SEGMENTS:
            raise BudgetExceeded("max_provenance_segments", MAX_SEGMENTS,
                                 f"more than {MAX_SEGMENTS} stretches of traced output")


class ProvenanceEnvironment(ChatTemplateEnvironment):
    """The chat-template environment compiling with :class:`ProvenanceCodeGenerator` (never cached on disk)."""

    code_generator_class = ProvenanceCodeGenerator

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        base_text, base_concat, base_tilde = self.budget_text, self.concat, self.budget_concat

        def trace_text(site: int, value: Any) -> Any:
            text = base_text(value)
            if not isinstance(text, str):
                return text
            if isinstance(value, (dict, list, tuple)) and not isinstance(text, Traced):  # printed as repr
                text = Traced(text, _printed_leaves(text, value, repr))
            segments: list[Segment] = []
            at = 0
            _count(len(text.segments) + 1 if isinstance(text, Traced) else 1)
            for a, b, s, o in _segments_of(text) if isinstance(text, Traced) else []:
                if a > at:
                    segments.append((at, a, site, None))
                segments.append((a, b, site if s is None else s, o))
                at = b
            if at < len(text):
                segments.append((at, len(text), site, None))
            return Traced(text, segments)

        def concat(parts: Any) -> Any:
            if type(parts) is list:
                return Traced(base_concat(parts), _joined(parts))
            collected = _collected.get()
            if collected is None:
                return base_concat(parts)
            return base_concat(_tapped(parts, collected))

        def budget_concat(parts: Any) -> Any:
            text = base_tilde(parts)
            if any(isinstance(p, Traced) for p in parts):
                return Traced(text, [s for s in _joined(parts) if s[3] is not None or s[2] is not None])
            return text

        base_json = self.filters["tojson"]

        def tojson(value: Any, *args: Any, **kwargs: Any) -> Any:
            text = base_json(value, *args, **kwargs)
            ensure_ascii = kwargs.get("ensure_ascii", args[0] if args else False)
            sort_keys = kwargs.get("sort_keys", args[3] if len(args) > 3 else False)
            found = _printed_leaves(text, value, lambda s: json.dumps(s, ensure_ascii=ensure_ascii), bool(sort_keys))
            return Traced(text, found) if found else text

        self.trace_text = trace_text
        self.concat = concat
        self.budget_concat = budget_concat
        self.filters["tojson"] = tojson


def _tapped(parts: Iterator[Any], collected: list) -> Iterator[Any]:
    at = 0
    for part in parts:
        if isinstance(part, Traced):
            collected.extend(_shifted(part.segments, at))
        yield part
        at += len(part)


_environment: ProvenanceEnvironment | None = None
_lock = threading.Lock()
_cache: "OrderedDict[str, tuple[jinja2.Template, tuple[Site, ...]]]" = OrderedDict()
_CACHE_SIZE = 32


def compile_traced(source: str, budgets: Budgets | None) -> tuple[jinja2.Template, tuple[Site, ...]]:
    """``source`` compiled with provenance, and its output sites (cached in memory, never on disk)."""
    global _environment
    check_source(source, budgets)
    with _lock:
        if _environment is None:
            _environment = ProvenanceEnvironment()
        hit = _cache.get(source)
        if hit is not None:
            _cache.move_to_end(source)
            return hit
    env = _environment
    max_nesting = None if budgets is None else budgets.max_source_nesting
    template = env.compile_budgeted(source, max_nesting)
    sites = tuple(_site(i, node) for i, node in enumerate(output_sites(env.parse(source))))
    with _lock:
        _cache[source] = (template, sites)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return template, sites


class collecting:
    """Context manager: the segments of the root output of the renders inside it are appended to ``into``."""

    def __init__(self, into: list) -> None:
        self.into = into

    def __enter__(self) -> list:
        self._token = _collected.set(self.into)
        self._made = _made.set([0])
        return self.into

    def __exit__(self, *exc: Any) -> None:
        _made.reset(self._made)
        _collected.reset(self._token)


def finished(text: str, segments: list, sites: tuple[Site, ...]) -> Provenance:
    """The provenance of a finished render, its segments cut to ``text`` (``continue_final_message`` cuts the end)."""
    out = [s for s in segments if s[0] < len(text)]
    if out and out[-1][1] > len(text):
        a, b, s, o = out[-1]
        out[-1] = (a, len(text), s, o)
    return Provenance(text, tuple(out), sites)


__all__ += ["BudgetExceeded", "collecting", "finished"]
