"""The abstract values the symbolic executor computes with: input strings of unknown text, undefined names, and the operations on them.

Template literals and the structure of a conversation (roles, list lengths, which keys a message
has) are known exactly; the text a user supplies (contents, tool names, arguments, ids, reasoning,
documents) is a :class:`Sym` whose characters the analyser never knows. What it assumes about such
text is written down once, here: it is non-empty, has no surrounding whitespace, contains none of
the template's literal strings (so ``'<think>' in content`` is false, ``content.split('x')`` is
``[content]``), no ``{}`` replacement fields and no ``&<>'"``, and two different inputs are
different text (one input seen twice, like a tool name in a call and in its result, is one
symbol). Anything that would need the text itself is :data:`UNKNOWN`.

The analyser runs outside jinja2's sandbox, so no template-controlled string ever reaches Python's
``str.format`` or ``%`` with anything but plain literal data (:func:`safe_format`), and every
method it calls on a value is on a short allow-list.
"""

from __future__ import annotations

import json
import re
import string
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..limits import StaticLimitExceeded

__all__ = [
    "Sym",
    "Cat",
    "SymLen",
    "Unknown",
    "UNKNOWN",
    "Undefined",
    "Namespace",
    "Failure",
    "Generator",
    "Loop",
    "Builtin",
    "Method",
    "is_text",
    "truth",
    "concat",
    "to_text",
    "labels_in",
    "Fuel",
    "spend",
    "built",
    "built_items",
    "ANALYSIS_FUEL",
]

#: the work one analysis may do, in fuel units: a step of a symbolic run (statement, loop iteration,
#: call) is one, and so is each expression node of a statement list each time the list runs; every
#: 16 pieces joined and every 16 items a size estimate visits cost one, every item a sort, ``map``
#: or ``select`` visits costs one, every item ``repr`` or ``tojson`` writes costs ``_WRITE_COST``,
#: and every item of a list and every 64 characters of text built cost one (which bounds what the
#: analysis allocates). The corpus needs under 12,000 (a unit takes about a microsecond); a template
#: past this stops the analysis with ``StaticLimitExceeded``.
ANALYSIS_FUEL = 300_000
BUILT_CHARS_PER_UNIT = 64
_WRITE_COST = 8


class Fuel:
    """What one analysis has spent of its fuel (see :data:`ANALYSIS_FUEL`)."""

    __slots__ = ("spent", "limit")

    def __init__(self, limit: int = ANALYSIS_FUEL):
        self.spent = 0
        self.limit = limit

    def spend(self, units: int) -> None:
        self.spent += units
        if self.spent > self.limit:
            raise StaticLimitExceeded("analysis_fuel", self.limit, "the symbolic runs did more work than the analysis allows")


#: the fuel of the analysis running in this context (``None``: unmetered, as in tests that run one shape)
current_fuel: ContextVar["Fuel | None"] = ContextVar("chatjinja_analysis_fuel", default=None)


def spend(units: int) -> None:
    """Charge ``units`` of work to the running analysis's fuel."""
    fuel = current_fuel.get()
    if fuel is not None:
        fuel.spend(units)


def built(size: int) -> None:
    """Charge building a string of ``size`` characters (only long ones cost)."""
    if size >= BUILT_CHARS_PER_UNIT:
        spend(size // BUILT_CHARS_PER_UNIT)


def built_items(count: int) -> None:
    """Charge building a list or tuple of ``count`` items (one unit each: an item is a pointer, and often a new object)."""
    if count:
        spend(count)


def _built_result(result: Any) -> None:
    """Charge a method's result: a string by its characters, a list by its items and the characters of its strings."""
    if isinstance(result, (str, bytes)):
        built(len(result))
    elif isinstance(result, (list, tuple)):
        built_items(len(result))
        built(sum(len(item) for item in result if isinstance(item, (str, bytes))))


class Failure(Exception):
    """A render of this conversation shape would raise: ``kind`` is ``raise``, ``type``, ``undefined``, ``security`` or ``limit``."""

    def __init__(self, kind: str, message: str, span: Any = None, site: Any = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.span = span
        self.site = site


@dataclass(frozen=True, slots=True)
class Sym:
    """A string from the input whose characters are unknown; ``label`` says which input it is (``content:user``)."""

    label: str
    size: int | None = None  # the length, when the conversation shape fixes it (tool-call ids)

    def derived(self, how: str) -> "Sym":
        return Sym(f"{self.label}|{how}")


@dataclass(frozen=True, slots=True)
class Cat:
    """A string built from literal pieces and :class:`Sym` pieces."""

    parts: tuple

    def __hash__(self) -> int:
        return hash(self.parts)


@dataclass(frozen=True, slots=True)
class SymLen:
    """The length of a non-empty input string: a positive integer the analyser does not know."""

    of: Any = None


class Unknown:
    """A value the analyser cannot know (the result of an operation that needs an input's text)."""

    __slots__ = ("labels",)

    def __init__(self, labels: frozenset = frozenset()):
        self.labels = labels

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()


@dataclass(frozen=True, slots=True)
class Undefined:
    """jinja2's default ``Undefined``: prints as ``''``, iterates as empty, raises on attribute access and arithmetic."""

    name: str
    owner: Any = None

    def fail(self, span: Any = None) -> Failure:
        return Failure("undefined", f"{self.name!r} is undefined", span)


class Generator(list):
    """The lazy result of ``map``/``select``/``selectattr``/...: iterable, always true, but no ``len``, index or JSON."""

    __slots__ = ()


def _looking(method: Any) -> Any:
    """``method`` of dict/list, noting on the watched container that a run looked inside it."""

    def look(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.read = True
        return method(self, *args, **kwargs)

    look.__name__ = method.__name__
    return look


class Watched(dict):
    """A dict of the conversation that notes when a run looks inside it, so one run can stand for others.

    Two conversation shapes that differ only inside this dict make identical runs when the run never
    looks inside: it then stands for both. What counts as a look depends on how they differ:

    * ``keys`` ``None`` (any value may differ, and which keys there are, but not how many): getting
      any value, membership, iteration and the key list are looks; ``len`` is not;
    * ``keys`` given, ``extra`` false (the same keys in the same order, the values of ``keys``
      differ): only getting one of those values is a look;
    * ``keys`` given, ``extra`` true (this dict has ``keys`` and the other does not): getting one
      of them, asking whether it is there, iteration, the key list and ``len`` are looks.

    Whatever shows the values (items, values, text, equality, copies, changes) is always a look.
    Every read goes through these methods (the analyser's values code reads dicts by method, never
    by ``type(x) is dict`` alone: its fast paths fall back to the same reads, and C code reads a
    dict subclass through its methods when ``__iter__`` is overridden), and the type keeps the name
    ``dict`` for the messages that name a value's type. A watched dict holds input symbols, so it
    is never "plain" data to ``str.format`` either way.
    """

    __slots__ = ("keys_", "extra", "read")

    def __init__(self, items: dict, keys: frozenset | None = None, extra: bool = False):
        super().__init__(items)
        self.keys_ = keys
        self.extra = extra
        self.read = False

    def __getitem__(self, name: Any) -> Any:
        if self.keys_ is None or name in self.keys_:
            self.read = True
        return dict.__getitem__(self, name)

    def get(self, name: Any, default: Any = None) -> Any:
        if self.keys_ is None or name in self.keys_:
            self.read = True
        return dict.get(self, name, default)

    def __contains__(self, name: Any) -> bool:
        if self.keys_ is None or (self.extra and name in self.keys_):
            self.read = True
        return dict.__contains__(self, name)

    def __iter__(self) -> Any:
        if self.keys_ is None or self.extra:
            self.read = True
        return dict.__iter__(self)

    def keys(self) -> Any:
        if self.keys_ is None or self.extra:
            self.read = True
        return dict.keys(self)

    def __reversed__(self) -> Any:
        if self.keys_ is None or self.extra:
            self.read = True
        return dict.__reversed__(self)

    def __len__(self) -> int:
        if self.extra:
            self.read = True
        return dict.__len__(self)

    for _name in ("values", "items", "copy", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
                  "__repr__", "__or__", "__ror__", "__ior__", "__reduce__", "__reduce_ex__", "pop", "popitem",
                  "setdefault", "update", "clear", "__setitem__", "__delitem__"):
        locals()[_name] = _looking(getattr(dict, _name))
    del _name
    __hash__ = None  # type: ignore[assignment]


Watched.__name__ = Watched.__qualname__ = "dict"


class WatchedList(list):
    """A list of the conversation that notes when a run looks inside it (see :class:`Watched`).

    Anything that tells its items or its length apart is a look (the lists it stands for differ
    in length): items, iteration, length and truth, membership, text, equality, arithmetic.
    C code that reads a list subclass without its methods (``PySequence_Fast``, ``list.extend``)
    only does so for exact lists, so every read comes through here. It holds chunks with input
    symbols, so it is never "plain" data to ``str.format`` either way.
    """

    __slots__ = ("read",)

    def __init__(self, items: list):
        super().__init__(items)
        self.read = False

    for _name in ("__getitem__", "__iter__", "__len__", "__contains__", "__reversed__", "__eq__", "__ne__", "__lt__",
                  "__le__", "__gt__", "__ge__", "__repr__", "__add__", "__iadd__", "__mul__", "__rmul__", "__imul__",
                  "index", "count", "copy", "__reduce__", "__reduce_ex__", "append", "extend", "insert", "pop",
                  "remove", "clear", "sort", "reverse", "__setitem__", "__delitem__"):
        locals()[_name] = _looking(getattr(list, _name))
    del _name
    __hash__ = None  # type: ignore[assignment]

    def __radd__(self, other: Any) -> Any:
        # (``[...] + watched``: without it, list concatenation reads the items directly)
        self.read = True
        if not isinstance(other, list):
            return NotImplemented
        return list.__add__(other, self)


WatchedList.__name__ = WatchedList.__qualname__ = "list"


class Namespace:
    """``namespace(...)``: the one mutable object a template can build."""

    __slots__ = ("attrs",)

    def __init__(self, attrs: dict):
        self.attrs = attrs


@dataclass
class Loop:
    """The ``loop`` variable of a ``for``."""

    index0: int
    length: int
    items: list
    depth0: int = 0
    recurse: Any = None

    def attribute(self, name: str) -> Any:
        i, n = self.index0, self.length
        if name == "first":
            return i == 0
        if name == "last":
            return i == n - 1
        if name == "index0":
            return i
        if name == "index":
            return i + 1
        if name == "revindex0":
            return n - i - 1
        if name == "revindex":
            return n - i
        if name == "length":
            return n
        if name == "depth0":
            return self.depth0
        if name == "depth":
            return self.depth0 + 1
        if name == "previtem":
            return self.items[i - 1] if i > 0 else Undefined("previtem")
        if name == "nextitem":
            return self.items[i + 1] if i + 1 < n else Undefined("nextitem")
        if name == "cycle":
            return Builtin(lambda *args: args[i % len(args)] if args else UNKNOWN)
        if name == "changed":
            return Builtin(lambda *args: UNKNOWN)
        return Undefined(f"loop.{name}")


@dataclass(frozen=True)
class Builtin:
    fn: Callable

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def is_text(value: Any) -> bool:
    return type(value) is str or isinstance(value, (str, Sym, Cat))


def is_unknown(value: Any) -> bool:
    return isinstance(value, (Unknown, SymLen))


def labels_in(value: Any, seen: set | None = None) -> set[str]:
    """Every input label a value holds (inside strings, lists, mappings)."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Sym):
            found.add(item.label)
        elif isinstance(item, Cat):
            stack.extend(item.parts)
        elif isinstance(item, Unknown):
            found.update(item.labels)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, Namespace):
            stack.extend(item.attrs.values())
    return found


# Plain Python types whose truth is Python's (none of them is callable or an analyser value).
_PLAIN_TRUTH = frozenset({str, int, float, list, dict, tuple, type(None)})


def truth(value: Any) -> bool | None:
    """Truthiness, ``None`` when it depends on text the analyser does not know."""
    cls = type(value)
    if cls is bool:
        return value
    if cls in _PLAIN_TRUTH:
        return bool(value)
    if isinstance(value, (Sym, SymLen)):
        return True  # input text is non-empty
    if isinstance(value, Cat):
        return True if any(isinstance(p, Sym) or p for p in value.parts) else False
    if isinstance(value, Unknown):
        return None
    if isinstance(value, Undefined):
        return False
    if isinstance(value, (Namespace, Loop, Builtin, Generator)) or callable(value):
        return True
    try:
        return bool(value)
    except Exception:  # noqa: BLE001
        return None


# Literal text the analyser builds is bounded like a render's strings (the runtime's max_string_chars),
# and checked before anything that large is built (format widths, repetition, padding).
MAX_TEXT = 16 * 1024 * 1024
MAX_ITEMS = 1024 * 1024
MAX_INT_BITS = 65536
_WIDTH = re.compile(r"%[-+ #0]*(\d+)|%[-+ #0]*\d*\.(\d+)|\{[^{}]*?:[^{}]*?(\d+)[^{}]*\}")


def check_widths(template: str) -> None:
    """Refuse a printf/format string whose field widths would build a huge string."""
    for match in _WIDTH.finditer(template):
        for group in match.groups():
            if group and int(group) > MAX_TEXT:
                raise Failure("limit", f"format width {group} too large")


def _plain(value: Any) -> bool:
    """A value Python may format itself: plain JSON-like data built from literals, nothing else."""
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) in (list, tuple):
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return False


def safe_format(template: str, args: tuple, kwargs: dict) -> Any:
    """``template.format(...)`` without Python's attribute and index traversal in field names.

    The analyser runs outside jinja2's sandbox, so ``'{0.__class__}'.format(x)`` must never reach
    ``str.format``: any field name with ``.`` or ``[``, any conversion, and any argument that is not
    plain literal data make the result unknown.
    """
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise Failure("type", str(exc)) from None
    for _, name, _spec, _conversion in fields:
        if name and any(part.startswith("_") for part in re.split(r"[.\[\]]", name)[1:]):
            # jinja2's sandboxed formatter refuses unsafe attributes the same way
            raise Failure("security", f"access to attribute in format field {name!r} is unsafe")
    simple = all(name is None or (("." not in name) and ("[" not in name) and conversion is None
                                  and "{" not in (spec or "")) for _, name, spec, conversion in fields)
    if not simple or not all(_plain(a) for a in (*args, *kwargs.values())):
        return Unknown(labels_in(list(args)) | labels_in(kwargs))
    check_widths(template)
    size = len(template)
    for index, (_, name, _spec, _conversion) in enumerate(fields):
        if name is None:
            continue
        argument = kwargs.get(name) if name and not name.isdigit() else None
        if argument is None and args:
            argument = args[int(name)] if name.isdigit() and int(name) < len(args) else args[min(index, len(args) - 1)]
        size += _text_size(argument)
        if size > MAX_TEXT:
            raise Failure("limit", "formatted string too large")
    built(size)
    try:
        return template.format(*args, **kwargs)
    except (IndexError, KeyError, ValueError, TypeError) as exc:
        raise Failure("type", str(exc)) from None


def safe_printf(template: str, values: Any) -> Any:
    """``template % values`` on plain literal data only (``%r`` would call repr on analyser objects)."""
    if not _plain(values):
        return Unknown(labels_in(values))
    check_widths(template)
    if "*" in template:  # a width or precision taken from the values (``'%*d' % (width, n)``)
        for number in values if isinstance(values, tuple) else (values,):
            if isinstance(number, int) and abs(number) > MAX_TEXT:
                raise Failure("limit", f"format width {number} too large")
    size = len(template) + template.count("%") * _text_size(values)
    check_size(size)
    built(size)
    try:
        return template % values
    except (TypeError, ValueError, KeyError) as exc:
        raise Failure("type", str(exc)) from None


def check_size(size: int) -> None:
    if size > MAX_TEXT:
        raise Failure("limit", f"string of {size} characters too large")


def concat(parts: Iterable[Any]) -> Any:
    """Join string pieces, folding literal neighbours; a plain ``str`` when no input text is involved."""
    out: list = []
    count = 0
    for part in parts:
        count += 1
        pieces = part.parts if isinstance(part, Cat) else (part,)
        for piece in pieces:
            if isinstance(piece, str):
                if not piece:
                    continue
                if out and isinstance(out[-1], str):
                    size = len(out[-1]) + len(piece)
                    if size >= BUILT_CHARS_PER_UNIT:
                        check_size(size)
                        built(size)
                    out[-1] += piece
                    continue
            out.append(piece)
    if count > 16:
        spend(count >> 4)
    if not out:
        return ""
    if len(out) == 1 and isinstance(out[0], (str, Sym)):
        return out[0]
    return Cat(tuple(out))


def to_text(value: Any, span: Any = None) -> Any:
    """``str(value)`` as jinja2 prints it (``{{ value }}``, ``|string``, ``~``)."""
    if type(value) is str:
        return value
    if isinstance(value, (str, Sym, Cat)):
        return value
    if isinstance(value, Undefined):
        return ""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return _number_text(value, str, span)
    if isinstance(value, (SymLen, Unknown, Generator)):
        return Unknown(labels_in(value))
    if isinstance(value, (dict, list, tuple)):
        return _repr(value)
    if isinstance(value, Namespace):
        return "<Namespace>"
    return Unknown()


def _text_size(value: Any, limit: int = MAX_TEXT, writing: bool = False) -> int:
    """A cheap upper bound on the characters ``repr``/``tojson`` of ``value`` takes (stops past ``limit``).

    The items visited are charged to the fuel: ``_WRITE_COST`` each when the value is about to be
    written out (``writing``), else one per 16.
    """
    total = visited = 0
    stack = [value]
    while stack and total <= limit:
        visited += 1
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, Cat):
            stack.extend(item.parts)
        elif isinstance(item, dict):
            total += 2 + 4 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            total += 2 + 2 * len(item)
            stack.extend(item)
        else:
            total += 8
    if writing:
        spend(visited * _WRITE_COST)
    elif visited > 16:
        spend(visited >> 4)
    return total


def _repr(value: Any) -> Any:
    """Python ``repr`` of a container holding input text (what ``{{ content }}`` prints for a list of chunks)."""
    if isinstance(value, (dict, list, tuple)):
        check_size(_text_size(value, writing=True))
    return _repr_checked(value)


def _repr_checked(value: Any) -> Any:
    if isinstance(value, Sym):
        return concat(["'", value, "'"])
    if isinstance(value, Cat):
        return concat(["'", value, "'"])
    if isinstance(value, dict):
        parts: list = ["{"]
        for i, (key, item) in enumerate(value.items()):
            if i:
                parts.append(", ")
            parts += [_repr_checked(key), ": ", _repr_checked(item)]
        parts.append("}")
        return concat(parts)
    if isinstance(value, (list, tuple)):
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
        parts = [open_]
        for i, item in enumerate(value):
            if i:
                parts.append(", ")
            parts.append(_repr_checked(item))
        parts.append(close)
        return concat(parts)
    if isinstance(value, (Unknown, SymLen)):
        return Unknown(labels_in(value))
    if isinstance(value, Undefined):
        return "Undefined"
    if isinstance(value, int):
        return _number_text(value, repr)
    return repr(value)


def _number_text(value: Any, convert: Any, span: Any = None) -> str:
    """``str``/``repr`` of a number; an integer of more decimal digits than Python writes
    (``sys.get_int_max_str_digits()``) fails the run with Python's ValueError, as the render fails."""
    try:
        return convert(value)
    except ValueError as exc:
        raise Failure("type", str(exc), span) from None


def to_json(value: Any, indent: Any = None, span: Any = None, _checked: bool = False) -> Any:
    """``|tojson`` (transformers' ``json.dumps``): input strings stay symbolic inside the quotes."""
    if not _checked and isinstance(value, (dict, list, tuple)):
        size = _text_size(value, writing=True)
        if isinstance(indent, int) and not isinstance(indent, bool) and indent > 0:
            size += indent * size  # every item on a line of its own, indented (a cheap upper bound)
        check_size(size)
    if isinstance(value, Undefined):
        raise Failure("type", "Object of type Undefined is not JSON serializable", span)
    if isinstance(value, (Sym, Cat)):
        return concat(['"', value, '"'])
    if isinstance(value, (Unknown, SymLen)):
        return Unknown(labels_in(value))
    if isinstance(value, Namespace):
        raise Failure("type", "Object of type Namespace is not JSON serializable", span)
    if isinstance(value, Generator):
        raise Failure("type", "Object of type generator is not JSON serializable", span)
    if isinstance(value, dict):
        sep = ", " if indent is None else ","
        parts: list = ["{"]
        for i, (key, item) in enumerate(value.items()):
            if i:
                parts.append(sep)
            key_text = to_json(key if isinstance(key, (Sym, Cat)) else str(key) if not isinstance(key, str) else key)
            parts += [key_text, ": ", to_json(item, indent, span, True)]
        parts.append("}")
        return concat(parts)
    if isinstance(value, (list, tuple)):
        parts = ["["]
        for i, item in enumerate(value):
            if i:
                parts.append(", ")
            parts.append(to_json(item, indent, span, True))
        parts.append("]")
        return concat(parts)
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        raise Failure("type", f"Object of type {type(value).__name__} is not JSON serializable", span) from None


def length(value: Any, span: Any = None) -> Any:
    if isinstance(value, Sym):
        return value.size if value.size is not None else SymLen(value)
    if isinstance(value, Cat):
        fixed = sum(len(p) for p in value.parts if isinstance(p, str))
        return SymLen(value) if fixed == 0 else AtLeast(fixed + 1)
    if isinstance(value, Undefined):
        return 0
    if isinstance(value, (Unknown, SymLen)):
        return UNKNOWN
    if isinstance(value, Namespace):
        raise Failure("type", "object of type 'Namespace' has no len()", span)
    if isinstance(value, Generator):
        raise Failure("type", "object of type 'generator' has no len()", span)
    if value is None or isinstance(value, (bool, int, float)):
        raise Failure("type", f"object of type '{type(value).__name__}' has no len()", span)
    try:
        return len(value)
    except TypeError:
        return UNKNOWN


@dataclass(frozen=True, slots=True)
class AtLeast(SymLen):
    minimum: int = 1


def compare(op: str, left: Any, right: Any, span: Any = None) -> Any:
    """``==``, ``!=``, ``<`` ... with the analyser's assumptions about input text; ``UNKNOWN`` when undecidable."""
    if type(left) is str and type(right) is str and (op == "eq" or op == "ne"):
        return (left == right) if op == "eq" else (left != right)
    if op in ("eq", "ne"):
        result = _equal(left, right)
        if result is None:
            return UNKNOWN
        return result if op == "eq" else not result
    if op in ("in", "notin"):
        result = contains(right, left, span)
        if isinstance(result, Unknown):
            return UNKNOWN
        return result if op == "in" else not result
    for side in (left, right):
        if isinstance(side, Undefined):
            raise Failure("undefined", f"{side.name!r} is undefined", span)
    if isinstance(left, SymLen) or isinstance(right, SymLen):
        return _compare_length(op, left, right)
    if any(isinstance(s, (Unknown, Sym, Cat)) for s in (left, right)):
        return UNKNOWN
    try:
        return _ordered(op, left, right)
    except TypeError as exc:
        raise Failure("type", str(exc), span) from None


def _ordered(op: str, left: Any, right: Any) -> bool:
    if op == "lt":
        return left < right
    if op == "gt":
        return left > right
    if op == "lteq":
        return left <= right
    if op == "gteq":
        return left >= right
    raise ValueError(op)


def _compare_length(op: str, left: Any, right: Any) -> Any:
    minimum = left.minimum if isinstance(left, AtLeast) else 1
    if isinstance(left, SymLen) and isinstance(right, int) and not isinstance(right, bool):
        if op == "gt" and right < minimum:
            return True
        if op == "gteq" and right <= minimum:
            return True
        if op == "lt" and right <= minimum:
            return False
        if op == "lteq" and right < minimum:
            return False
    if isinstance(right, SymLen) and isinstance(left, int) and not isinstance(left, bool):
        flipped = {"lt": "gt", "gt": "lt", "lteq": "gteq", "gteq": "lteq"}[op]
        return _compare_length(flipped, right, left)
    return UNKNOWN


def _equal(left: Any, right: Any) -> bool | None:
    if type(left) is str and type(right) is str:
        return left == right
    if isinstance(left, Undefined) or isinstance(right, Undefined):
        return isinstance(left, Undefined) and isinstance(right, Undefined)
    if isinstance(left, SymLen) or isinstance(right, SymLen):
        other = right if isinstance(left, SymLen) else left
        if isinstance(other, int) and not isinstance(other, bool) and other <= 0:
            return False
        return None
    if isinstance(left, (Sym, Cat)) or isinstance(right, (Sym, Cat)):
        if left == right:
            return True
        if isinstance(left, (Unknown, SymLen)) or isinstance(right, (Unknown, SymLen)):
            return None
        # input text is never a template literal, and different inputs are different text
        return False
    if isinstance(left, Unknown) or isinstance(right, Unknown):
        return None
    if left is right:
        return True
    if isinstance(left, (dict, list, tuple)) or isinstance(right, (dict, list, tuple)):
        if _holds_unknown(left) or _holds_unknown(right):
            return None
    try:
        return bool(left == right)
    except Exception:  # noqa: BLE001
        return None


def _holds_unknown(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (Unknown, SymLen)):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def contains(container: Any, item: Any, span: Any = None) -> Any:
    """``item in container``."""
    if isinstance(container, Undefined):
        return False  # Undefined iterates as empty
    if isinstance(container, (Sym, Cat)):
        if isinstance(item, str):
            if item == "":
                return True
            if isinstance(container, Cat):
                literal = "".join(p for p in container.parts if isinstance(p, str))
                if item in literal:
                    return True
            return False  # input text holds no template literal
        return UNKNOWN
    if isinstance(container, str):
        if isinstance(item, str):
            return item in container
        if isinstance(item, (Sym, Cat)):
            return False
        if isinstance(item, Undefined):
            raise Failure("type", "'in <string>' requires string as left operand, not Undefined", span)
        return UNKNOWN
    if isinstance(container, dict):
        if isinstance(item, (Sym, Cat)):
            return True if item in container else (UNKNOWN if any(isinstance(k, (Sym, Cat)) for k in container) else False)
        try:
            return item in container
        except TypeError:
            return UNKNOWN
    if isinstance(container, (list, tuple)):
        unknown = False
        for element in container:
            equal = _equal(item, element)
            if equal:
                return True
            if equal is None:
                unknown = True
        return UNKNOWN if unknown else False
    if isinstance(container, Namespace):
        return item in container.attrs
    if container is None or isinstance(container, (int, float, bool)):
        raise Failure("type", f"argument of type '{type(container).__name__}' is not iterable", span)
    return UNKNOWN


def iterate(value: Any, span: Any = None) -> list:
    """The items a ``for`` visits (mappings give keys, strings give characters)."""
    if isinstance(value, (list, tuple)):
        built_items(len(value))
        return list(value)
    if isinstance(value, dict):
        return list(value.keys())
    if isinstance(value, (str, bytes)):
        if len(value) > MAX_ITEMS:
            raise Failure("limit", f"more than {MAX_ITEMS} items", span)
        spend(len(value))  # a new string object per character
        return list(value)
    if isinstance(value, (Sym, Cat)):
        return [Sym("char")]  # some characters of an input string
    if isinstance(value, Undefined):
        return []
    if value is None or isinstance(value, (bool, int, float)):
        raise Failure("type", f"'{type(value).__name__}' object is not iterable", span)
    if isinstance(value, (Unknown, SymLen)):
        return [UNKNOWN]
    raise Failure("type", f"'{type(value).__name__}' object is not iterable", span)


def get_item(obj: Any, key: Any, span: Any = None) -> Any:
    """``obj[key]`` with the sandbox's fallback to attributes; a missing key is ``Undefined``."""
    if type(obj) is dict and type(key) is str and key in obj:
        return obj[key]
    if isinstance(obj, Undefined):
        raise obj.fail(span)
    if isinstance(key, slice):
        return _slice(obj, key)
    if isinstance(obj, dict):
        if isinstance(key, (Unknown, SymLen)):
            return UNKNOWN
        try:
            if key in obj:
                return obj[key]
        except TypeError:
            return Undefined(str(key), obj)
        if isinstance(key, str):
            return get_attribute(obj, key, span, fallback=False)
        return Undefined(str(key), obj)
    if isinstance(obj, Generator):
        return Undefined(str(key), obj)
    if isinstance(obj, (list, tuple)):
        if isinstance(key, bool):
            key = int(key)
        if isinstance(key, int):
            try:
                return obj[key]
            except IndexError:
                return Undefined(f"[{key}]", obj)
        if isinstance(key, str):
            return get_attribute(obj, key, span, fallback=False)
        if isinstance(key, (Unknown, SymLen)):
            return UNKNOWN
        return Undefined(str(key), obj)
    if isinstance(obj, (Sym, Cat)):
        if isinstance(key, int):
            return obj.derived(f"[{key}]") if isinstance(obj, Sym) else Unknown(labels_in(obj))
        if isinstance(key, str):
            return get_attribute(obj, key, span, fallback=False)
        return UNKNOWN
    if isinstance(obj, str):
        if isinstance(key, int) and not isinstance(key, bool):
            try:
                return obj[key]
            except IndexError:
                return Undefined(f"[{key}]", obj)
        if isinstance(key, str):
            return get_attribute(obj, key, span, fallback=False)
        return UNKNOWN
    if isinstance(obj, Namespace):
        return Undefined(str(key), obj)
    if isinstance(obj, Loop):
        return obj.attribute(key) if isinstance(key, str) else Undefined(str(key))
    if isinstance(obj, (Unknown, SymLen)):
        return Unknown(labels_in(obj))
    return Undefined(str(key), obj)


def _slice(obj: Any, key: slice) -> Any:
    """``obj[a:b]``: jinja2 compiles slices to plain Python subscription, so errors are not turned into Undefined."""
    if isinstance(obj, Generator):
        raise Failure("type", "'generator' object is not subscriptable")
    if isinstance(obj, (list, tuple, str)):
        try:
            return obj[key]
        except TypeError as exc:
            raise Failure("type", str(exc)) from None
    if isinstance(obj, Sym):
        return obj if key == slice(None, None, None) else obj.derived("slice")
    if isinstance(obj, Undefined):
        raise obj.fail()
    if isinstance(obj, dict):
        raise Failure("type", "unhashable type: 'slice'")
    if obj is None or isinstance(obj, (bool, int, float, Namespace)):
        raise Failure("type", f"'{type(obj).__name__}' object is not subscriptable")
    return Unknown(labels_in(obj))


_STR_METHODS = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "lower", "upper",
    "title", "capitalize", "format", "find", "rfind", "count", "join", "splitlines", "isdigit", "isalpha",
    "isspace", "index", "partition", "rpartition", "removeprefix", "removesuffix", "casefold", "swapcase",
    "center", "ljust", "rjust", "zfill", "isalnum", "islower", "isupper", "encode",
}
_DICT_METHODS = {"get", "items", "keys", "values", "copy"}
_LIST_METHODS = {"index", "count", "copy"}
_MUTATING = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "sort", "reverse"}


def get_attribute(obj: Any, name: str, span: Any = None, fallback: bool = True) -> Any:
    """``obj.name``: a method or attribute first, then (for ``obj.name`` syntax) the item ``obj['name']``."""
    if type(obj) is dict:
        if name in _DICT_METHODS or name in _MUTATING:
            return Method(obj, name)
        if fallback and name in obj:
            return obj[name]
        return Undefined(name, obj)
    if isinstance(obj, Undefined):
        raise obj.fail(span)
    if isinstance(obj, Namespace):
        return obj.attrs.get(name, Undefined(name, obj))
    if isinstance(obj, Loop):
        return obj.attribute(name)
    if isinstance(obj, dict):
        if name in _DICT_METHODS or name in _MUTATING:
            return Method(obj, name)
        if fallback and name in obj:
            return obj[name]
        return Undefined(name, obj)
    if isinstance(obj, (list, tuple)):
        if name in _LIST_METHODS or name in _MUTATING:
            return Method(obj, name)
        return Undefined(name, obj)
    if is_text(obj):
        if name in _STR_METHODS:
            return Method(obj, name)
        return Undefined(name, obj)
    if isinstance(obj, (Unknown, SymLen)):
        return Unknown(labels_in(obj))
    if obj is None or isinstance(obj, (bool, int, float)):
        return Undefined(name, obj)
    return Undefined(name, obj)


@dataclass(frozen=True)
class Method:
    """A bound method of a template value (``content.strip``, ``message.get``)."""

    obj: Any
    name: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.name in _MUTATING and not (isinstance(self.obj, Namespace)):
            raise Failure("security", f"access to attribute {self.name!r} of {type(self.obj).__name__!r} object is unsafe")
        if isinstance(self.obj, dict):
            return _dict_method(self.obj, self.name, args, kwargs)
        if isinstance(self.obj, (list, tuple)):
            if self.name == "copy":
                return list(self.obj)
            if self.name == "count":
                return UNKNOWN if labels_in(self.obj) else self.obj.count(*args)
            return UNKNOWN
        return string_method(self.obj, self.name, args, kwargs)


def _dict_method(obj: dict, name: str, args: tuple, kwargs: dict) -> Any:
    if name == "get":
        key = args[0] if args else kwargs.get("key")
        default = args[1] if len(args) > 1 else kwargs.get("default")
        if isinstance(key, (Unknown, SymLen)):
            return UNKNOWN
        try:
            return obj.get(key, default)
        except TypeError:
            return default
    if name == "items":
        return [(k, v) for k, v in obj.items()]
    if name == "keys":
        return list(obj.keys())
    if name == "values":
        return list(obj.values())
    if name == "copy":
        return dict(obj)
    return UNKNOWN


def string_method(obj: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """A ``str`` method on literal text (exact) or on input text (under the analyser's assumptions)."""
    if name == "format" and isinstance(obj, str):
        return safe_format(obj, args, kwargs)
    if isinstance(obj, str) and not any(isinstance(a, (Sym, Cat, Unknown, SymLen, Undefined)) for a in (*args, *kwargs.values())):
        for number in (*args, *kwargs.values()):
            if isinstance(number, int) and number > MAX_TEXT:
                raise Failure("limit", f"{name} argument {number} too large")
        if name in ("split", "rsplit", "splitlines") and len(obj) > MAX_ITEMS:
            separator = args[0] if args and isinstance(args[0], str) and args[0] else None
            pieces = obj.count(separator) if separator else obj.count(" ") + obj.count("\n") + obj.count("\t")
            if pieces > MAX_ITEMS:
                raise Failure("limit", f"{name} gives more than {MAX_ITEMS} items")
        if name == "replace" and len(obj) * (1 + sum(len(a) for a in args if isinstance(a, str))) > MAX_TEXT:
            raise Failure("limit", f"{name} result too large")
        if name == "join" and args and isinstance(args[0], (list, tuple)):
            check_size(_text_size(args[0]) + len(obj) * len(args[0]))
        try:
            result = getattr(obj, name)(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            raise Failure("type", str(exc)) from None
        _built_result(result)
        return list(result) if isinstance(result, tuple) else result
    if name in ("strip", "lstrip", "rstrip"):
        if isinstance(obj, Cat):
            return _strip_cat(obj, name, args[0] if args else None)
        return obj
    if name in ("split", "rsplit"):
        separator = args[0] if args else kwargs.get("sep")
        if isinstance(obj, Cat) and isinstance(separator, str) and separator:
            return _split_cat(obj, separator)
        return [obj]
    if name == "splitlines":
        return [obj]
    if name in ("startswith", "endswith"):
        prefix = args[0] if args else None
        prefixes = prefix if isinstance(prefix, (list, tuple)) else (prefix,)
        if all(isinstance(p, str) for p in prefixes):
            if any(p == "" for p in prefixes):
                return True
            if isinstance(obj, Cat):
                edge = obj.parts[0] if name == "startswith" else obj.parts[-1]
                if isinstance(edge, str):
                    return any(edge.startswith(p) if name == "startswith" else edge.endswith(p) for p in prefixes)
            return False
        return UNKNOWN
    if name == "replace":
        return obj
    if name in ("removeprefix", "removesuffix"):
        return obj
    if name in ("find", "rfind", "index"):
        needle = args[0] if args else None
        if isinstance(needle, str) and needle and isinstance(obj, Sym):
            if name == "index":
                raise Failure("type", "substring not found")
            return -1
        return UNKNOWN
    if name == "count":
        needle = args[0] if args else None
        if isinstance(needle, str) and needle and isinstance(obj, Sym):
            return 0
        return UNKNOWN
    if name in ("lower", "upper", "title", "capitalize", "casefold", "swapcase"):
        if isinstance(obj, Sym):
            return obj.derived(name)
        if isinstance(obj, Cat) and name in ("lower", "upper", "casefold", "swapcase"):
            return concat([getattr(p, name)() if isinstance(p, str) else p.derived(name) if isinstance(p, Sym) else Unknown()
                           for p in obj.parts])
        return Unknown(labels_in(obj))
    if name == "join":
        items = args[0] if args else []
        if isinstance(items, (list, tuple)):
            parts: list = []
            for i, item in enumerate(items):
                if i:
                    parts.append(obj)
                parts.append(to_text(item))
            return concat(parts)
        return Unknown(labels_in(obj) | labels_in(items))
    if name == "format":
        if isinstance(obj, Sym):
            return obj  # input text holds no replacement fields
        return Unknown(labels_in(obj) | labels_in(list(args)) | labels_in(kwargs))
    if name in ("isdigit", "isspace"):
        return False if isinstance(obj, Sym) else UNKNOWN  # input text is not a number or blank
    if name in ("isalpha", "isalnum", "islower", "isupper"):
        return UNKNOWN
    if name in ("partition", "rpartition"):
        separator = args[0] if args else None
        if isinstance(separator, str) and isinstance(obj, Sym):
            return [obj, "", ""] if name == "partition" else ["", "", obj]
        return UNKNOWN
    return Unknown(labels_in(obj))


def _strip_cat(value: Cat, name: str, chars: Any) -> Any:
    parts = list(value.parts)
    if name in ("strip", "lstrip") and parts and isinstance(parts[0], str):
        parts[0] = parts[0].lstrip(chars)
    if name in ("strip", "rstrip") and parts and isinstance(parts[-1], str):
        parts[-1] = parts[-1].rstrip(chars)
    return concat(parts)


def _split_cat(value: Cat, separator: str) -> list:
    pieces: list = [[]]
    for part in value.parts:
        if isinstance(part, str):
            chunks = part.split(separator)
            pieces[-1].append(chunks[0])
            for chunk in chunks[1:]:
                pieces.append([chunk])
        else:
            pieces[-1].append(part)
    return [concat(p) for p in pieces]


_TEXT_TYPES = frozenset({str, Sym, Cat})


def arithmetic(op: str, left: Any, right: Any, span: Any = None) -> Any:
    """``+ - * / // % **`` and ``~`` (``op == 'concat'``)."""
    if type(left) is str and type(right) is str and (op == "add" or op == "concat"):
        size = len(left) + len(right)
        if size >= BUILT_CHARS_PER_UNIT:
            check_size(size)
            built(size)
        return left + right
    if op == "concat":
        return concat([to_text(left, span), to_text(right, span)])
    if op == "add" and type(left) in _TEXT_TYPES and type(right) in _TEXT_TYPES:
        return concat([left, right])  # (what the text case below does, without the checks text cannot fail)
    for side in (left, right):
        if isinstance(side, Undefined):
            raise side.fail(span)
    if op == "add":
        if is_text(left) and is_text(right):
            return concat([left, right])
        if isinstance(left, list) and isinstance(right, list):
            if isinstance(left, Generator) or isinstance(right, Generator):
                raise Failure("type", "unsupported operand type(s) for +: 'generator'", span)
            if len(left) + len(right) > MAX_ITEMS:
                raise Failure("limit", "list too long", span)
            built_items(len(left) + len(right))
            return left + right
        if isinstance(left, (Unknown, SymLen)) or isinstance(right, (Unknown, SymLen)):
            return Unknown(labels_in(left) | labels_in(right))
        if is_text(left) or is_text(right):
            other = right if is_text(left) else left
            raise Failure("type", f"can only concatenate str (not \"{type(other).__name__}\") to str", span)
    if any(isinstance(s, (Unknown, SymLen, Sym, Cat)) for s in (left, right)):
        if op == "mul" and is_text(left) and isinstance(right, int):
            return concat([left] * max(right, 0)) if right < 8 else Unknown(labels_in(left))
        return Unknown(labels_in(left) | labels_in(right))
    try:
        if op == "add":
            return left + right
        if op == "sub":
            return left - right
        if op == "mul":
            if isinstance(left, int) and isinstance(right, int) and abs(left).bit_length() + abs(right).bit_length() > MAX_INT_BITS:
                raise Failure("limit", "integer too large", span)
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, bytes, list, tuple)) and isinstance(times, int) and not isinstance(times, bool):
                    size = times * len(seq)  # computed before anything that large is built
                    text = isinstance(seq, (str, bytes))
                    if size > (MAX_TEXT if text else MAX_ITEMS):
                        raise Failure("limit", "repetition too large", span)
                    built(size) if text else built_items(size)
            return left * right
        if op == "div":
            return left / right
        if op == "floordiv":
            return left // right
        if op == "mod":
            if isinstance(left, str):
                return safe_printf(left, right)
            return left % right
        if op == "pow":
            if isinstance(right, (int, float)) and abs(right) > 64:
                raise Failure("limit", "power too large", span)
            if isinstance(left, int) and isinstance(right, int) and abs(left).bit_length() * max(right, 0) > MAX_INT_BITS:
                raise Failure("limit", "integer too large", span)
            return left ** right
    except ZeroDivisionError:
        raise Failure("type", "division by zero", span) from None
    except TypeError as exc:
        raise Failure("type", str(exc), span) from None
    raise ValueError(op)


def to_number(value: Any, kind: type, default: Any = 0) -> Any:
    if isinstance(value, (Sym, Cat, Unknown, SymLen)):
        return UNKNOWN
    try:
        if kind is int and isinstance(value, str):
            return int(value)
        return kind(value)
    except (TypeError, ValueError, OverflowError):
        try:
            return kind(float(value)) if kind is int else default
        except (TypeError, ValueError, OverflowError):
            return default

