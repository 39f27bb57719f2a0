"""Resource budgets for rendering untrusted templates: the limits, the per-render meter, and the checks it runs.

A render runs inside :func:`guarded_render`, which puts a :class:`Meter` in a context variable; the
environment's sandbox hooks (binary operators, calls, filters, loops, output concatenation) charge
it and raise :class:`BudgetExceeded` the moment a limit would be crossed, *before* the expensive
operation runs. Nothing kills a process: the caller gets a clean exception. A render that stays
within every budget produces exactly the text it would produce without budgets.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import itertools
import re
import sys
import time

_monotonic = time.monotonic
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from string import Formatter
from types import TracebackType
from typing import Any, Iterator

import jinja2
import jinja2.exceptions
import jinja2.runtime
import jinja2.utils

__all__ = [
    "BudgetExceeded",
    "Budgets",
    "DEFAULT_BUDGETS",
    "Meter",
    "active_meter",
    "check_input_depth",
    "is_plain_checked",
    "check_source",
    "guarded_render",
    "strict_mode",
    "resolve_budgets",
    "source_nesting",
    "tree_depth",
]


class BudgetExceeded(jinja2.exceptions.TemplateError):
    """A render (or compile) would cross a resource budget: names the budget, its limit and the template line."""

    def __init__(self, budget: str, limit: Any, detail: str = "", lineno: int | None = None):
        self.budget = budget
        self.limit = limit
        self.detail = detail
        self.lineno = lineno
        super().__init__(self._text())

    def _text(self) -> str:
        text = f"budget {self.budget} exceeded (limit {self.limit})"
        if self.detail:
            text += f": {self.detail}"
        if self.lineno is not None:
            text += f" at template line {self.lineno}"
        return text

    @property
    def message(self) -> str:  # jinja2.TemplateError reads its message from here
        return self._text()

    def __str__(self) -> str:
        return self._text()

    def __reduce__(self) -> Any:
        return (BudgetExceeded, (self.budget, self.limit, self.detail, self.lineno))


@dataclass(frozen=True)
class Budgets:
    """Limits for one render. ``None`` turns a single budget off; ``Budgets.off()`` turns all off.

    The defaults are far above anything the real-world template corpus needs (see SECURITY.md).
    """

    #: characters in the rendered text
    max_output_chars: int | None = 32 * 1024 * 1024
    #: characters in any string a template builds (``*``, ``~``, ``+``, ``%``, filters, ``str`` methods)
    max_string_chars: int | None = 16 * 1024 * 1024
    #: items in any list/tuple/dict a template builds (``*``, ``+``, ``batch``, ``slice``, filters)
    max_sequence_items: int | None = 1024 * 1024
    #: what a render can hold in memory at once: the bytes (``sys.getsizeof``) of every big string or
    #: list/tuple/dict (``BIG_VALUE`` characters or items or more) it builds, added up, plus those of
    #: the items of every generator it turns into a list (``|list``, ``|join``, ``str.join``, ...)
    max_built_bytes: int | None = 256 * 1024 * 1024
    #: bits of any integer ``*`` or ``**`` would produce (checked before computing)
    max_int_bits: int | None = 65536
    #: total ``{% for %}`` iterations over the whole render
    max_loop_iterations: int | None = 1_000_000
    #: fuel: each loop iteration 1 + the filter and call sites of its body, each template, macro or block
    #: body the sites in it, and 1 per 1,024 characters a comparison or sort goes through (SECURITY.md)
    max_steps: int | None = 5_000_000
    #: nesting of macro calls, ``caller()`` and recursive ``loop()``
    max_recursion_depth: int | None = 64
    #: wall-clock seconds for one render
    timeout: float | None = 1.0
    #: nesting depth of the messages, tools, documents and variables passed in
    max_input_depth: int | None = 128
    #: characters of template source
    max_source_chars: int | None = 1024 * 1024
    #: nested brackets + blocks in the source (jinja2's parser recurses); the parsed tree may be 4x deeper
    max_source_nesting: int | None = 48

    @classmethod
    def off(cls) -> "Budgets":
        """Every budget off: jinja2's sandbox alone, as in transformers."""
        return cls(**{f.name: None for f in dataclasses.fields(cls)})

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def replace(self, **changes: Any) -> "Budgets":
        return dataclasses.replace(self, **changes)

    def __reduce__(self) -> Any:  # the limits only, not the cached properties (``meter_class`` is made per process)
        return (Budgets, tuple(getattr(self, name) for name in self.names()))

    @functools.cached_property
    def is_off(self) -> bool:
        return all(getattr(self, name) is None for name in self.names())

    @functools.cached_property
    def meter_class(self) -> type:
        """The :class:`Meter` subclass for these budgets, made once per ``Budgets``: the limits, as given
        and the same as numbers (``inf`` when off) for the hot paths: those the hooks read (``_LIMITS``)
        copied into each meter's slots (``Meter.__init__``), the others class attributes."""
        def cap(limit: Any) -> float:
            return _INF if limit is None else limit

        string_cap, items_cap = cap(self.max_string_chars), cap(self.max_sequence_items)
        limits = {
            "max_steps": self.max_steps,
            "max_loops": self.max_loop_iterations,
            "max_depth": self.max_recursion_depth,
            "max_string": self.max_string_chars,
            "max_items": self.max_sequence_items,
            "max_int_bits": self.max_int_bits,
            "max_output": self.max_output_chars,
            "output_cap": cap(self.max_output_chars),
            "string_cap": string_cap,
            "items_cap": items_cap,
            "built_cap": cap(self.max_built_bytes),
            "big": min(BIG_VALUE, string_cap + 1, items_cap + 1),
            "_loop_cap": cap(self.max_loop_iterations),
            "_step_cap": cap(self.max_steps),
            "depth_cap": cap(self.max_recursion_depth),
            "timeout": self.timeout,
        }
        hot = tuple(limits.pop(name) for name in _LIMITS)
        # (the first multiple of CLOCK_STEPS, or the step budget: where a new meter's ``room`` ends)
        first_mark = min(CLOCK_STEPS, cap(self.max_steps) + 1)
        return type("Meter", (Meter,), {"__slots__": (), "budgets": self, "_limits": hot, "_first_mark": first_mark, **limits})


DEFAULT_BUDGETS = Budgets()


def resolve_budgets(budgets: Any) -> Budgets | None:
    """``Budgets`` as given; ``None``/``False`` for off; ``True`` for the defaults; a dict overrides the defaults."""
    if budgets is DEFAULT_BUDGETS or budgets is None:  # (the two common values, already resolved)
        return budgets
    if budgets is False:
        return None
    if budgets is True:
        return DEFAULT_BUDGETS
    if isinstance(budgets, Budgets):
        return None if budgets.is_off else budgets
    if isinstance(budgets, Mapping):
        return resolve_budgets(DEFAULT_BUDGETS.replace(**budgets))
    raise TypeError(f"budgets must be a Budgets, a dict of limits, True or None, got {type(budgets).__name__}")


_INF = float("inf")
_getsizeof = sys.getsizeof
_PIECE_BYTES = 80  # the most a one-character string takes (sys.getsizeof of a 4-byte character)
_WORK_PER_STEP = 1024  # characters a comparison or sort may go through per step of fuel
_INF_WORK = 1 << 62
_PART_BYTES = 88  # a part of the output: the most a string's header takes (76), a list slot (8), rounded up
_MATERIALIZED_BATCH = 16 * 1024  # bytes counted per call of ``add_built`` while a generator is consumed

#: fuel charged when a body or loop starts looks at the clock each time the steps pass a multiple of this
CLOCK_STEPS = 1024
#: a built string or sequence at least this long counts towards ``max_built_bytes`` (smaller ones
#: pass the hot paths with one comparison against this constant)
BIG_VALUE = 1024


#: the limits a meter holds in its slots (those the hooks read), in the order of ``Meter._limits``
#: (``Budgets.meter_class``); the others, read when a budget is crossed, are class attributes
_LIMITS = ("max_string", "output_cap", "string_cap", "items_cap", "built_cap", "big", "_loop_cap", "_step_cap", "depth_cap")


class Meter:
    """What one render has spent so far, checked against its budgets (made only when budgets are on)."""

    __slots__ = ("strict", "room", "_mark", "loops", "depth", "output", "built", "deadline", "input_ids", "input_containers", "input_extra", "input_items", *_LIMITS)

    # The limits are made once per ``Budgets``, as class attributes of a subclass (``Budgets.meter_class``:
    # a meter is ``budgets.meter_class(strict)``); those the hooks read many times a render
    # (``_LIMITS``, in ``_limits``) are copied into the meter's slots when it is made: a slot is read
    # about 2.5 times as fast as a class attribute through an instance. ``big``: the hot paths let a
    # built value shorter than this pass with one comparison: it can neither cross the string or
    # sequence budget nor count towards the built bytes.
    budgets: Budgets
    _limits: tuple
    _first_mark: float
    max_steps: int | None
    max_loops: int | None
    max_depth: int | None
    max_string: int | None
    max_items: int | None
    max_int_bits: int | None
    max_output: int | None
    output_cap: float
    string_cap: float
    items_cap: float
    built_cap: float
    big: float
    _loop_cap: float
    _step_cap: float
    depth_cap: float
    timeout: float | None

    def __init__(self, strict: bool = False, inputs: list | None = None, extra: list | None = None):
        (
            self.max_string, self.output_cap, self.string_cap, self.items_cap, self.built_cap, self.big,
            self._loop_cap, self._step_cap, self.depth_cap,
        ) = self._limits  # (in the order of ``_LIMITS``: a test holds them to it)
        self.strict = strict
        self._mark = mark = self._first_mark  # no steps spent (``steps``)
        self.room = mark - 1
        self.loops = 0
        self.depth = 0
        self.output = 0
        self.built = 0
        timeout = self.timeout
        self.deadline = _INF if timeout is None else _monotonic() + timeout  # (no timeout: never passed)
        #: the containers the template was given, collected while the input was checked (alive for
        #: the whole render): their text is the caller's data, not something the template amplified,
        #: so printing them is not sized. ``input_ids``, the set of their ids, is made when first needed.
        self.input_containers: list = [] if inputs is None else inputs
        #: containers of the caller's data made for this render only (the message list, slices of
        #: the caller's lists), kept alive here; ``input_containers`` may be shared by several renders
        self.input_extra: list = [] if extra is None else extra
        self.input_ids: set[int] | None = None
        #: 1 + the number of items in all of them (``input_shape_bound``), counted when first needed
        self.input_items: float | None = None

    def make_input_ids(self) -> set[int]:
        """``input_ids``, made when first needed (``meter.input_ids or meter.make_input_ids()``)."""
        ids = set(map(id, self.input_containers))
        ids.update(map(id, self.input_extra))
        if len(ids) < len(self.input_containers) + len(self.input_extra) or id(_SHARED) in ids:
            # the caller's data reaches a container twice (a walk met it twice, or the DAG walk saw it):
            # its text can be far longer than its size (``[a, a]`` nested 40 deep), so none of it is
            # taken as the caller's text (0 is never an id)
            ids = {0}
        self.input_ids = ids
        return ids

    # -- fuel and time -------------------------------------------------------------------------
    # The steps spent are kept as ``room``: how many more fit before the next multiple of
    # ``CLOCK_STEPS`` (where the clock is looked at) or the step budget, whichever comes first, so a
    # body or a loop charged when it starts tests one number (``meter.room - cost >= 0``); ``spend``
    # does the rest. ``steps`` is what was spent: ``_mark - room - 1``.

    @property
    def steps(self) -> int:
        return self._mark - self.room - 1

    @steps.setter
    def steps(self, value: int) -> None:
        # (the same mark as ``Budgets.meter_class`` gives a new meter, for ``value`` 0)
        mark = min((value // CLOCK_STEPS + 1) * CLOCK_STEPS, self._step_cap + 1)
        self._mark = mark
        self.room = mark - value - 1

    def spend(self, cost: int) -> None:
        """``cost`` steps of fuel that do not fit in ``room``: the step budget, then the clock when the
        steps pass a multiple of ``CLOCK_STEPS``."""
        before = self.steps
        steps = before + cost
        if steps > self._step_cap:
            raise BudgetExceeded("max_steps", self.max_steps, f"{steps} steps")
        self.steps = steps
        if before // CLOCK_STEPS != steps // CLOCK_STEPS:
            self.check_time()

    def step(self, cost: int = 1) -> None:
        self.steps += cost
        if self.max_steps is not None and self.steps > self.max_steps:
            raise BudgetExceeded("max_steps", self.max_steps, f"{self.steps} steps")
        if ((self.steps & 31) == 0 or cost > 1) and _monotonic() > self.deadline:
            raise BudgetExceeded("timeout", self.budgets.timeout, "render took too long")  # type: ignore[union-attr]

    def loop_iterations(self, count: int, cost: int = 1) -> None:
        """``count`` loop iterations at once (the metered loops report in batches), each ``cost`` steps
        of fuel, clock included."""
        self.loops += count
        self.steps += count * cost
        if self.loops > self._loop_cap:
            raise BudgetExceeded("max_loop_iterations", self.max_loops, f"{self.loops} loop iterations")
        if self.steps > self._step_cap:
            raise BudgetExceeded("max_steps", self.max_steps, f"{self.steps} steps")
        self.check_time()

    def check_time(self) -> None:
        if _monotonic() > self.deadline:
            raise BudgetExceeded("timeout", self.budgets.timeout, "render took too long")  # type: ignore[union-attr]

    # -- sizes ---------------------------------------------------------------------------------
    def string_size(self, size: int, what: str = "string") -> None:
        if self.max_string is not None and size > self.max_string:
            raise BudgetExceeded("max_string_chars", self.max_string, f"{what} of {size} characters")

    def sequence_size(self, size: int, what: str = "sequence") -> None:
        if self.max_items is not None and size > self.max_items:
            raise BudgetExceeded("max_sequence_items", self.max_items, f"{what} of {size} items")

    def sized(self, value: Any, what: str = "result") -> Any:
        """Check a value that was just built (its own size, and a big one's bytes against ``max_built_bytes``); returns it."""
        kind = type(value)
        if kind is not list and kind is not dict and kind is not tuple:  # (exact lists come most: ``+``)
            if kind is str or kind is bytes or isinstance(value, (str, bytes)):
                if len(value) >= self.big:
                    self.big_string(value, what)
                return value
            if not isinstance(value, (list, tuple, dict)):
                return value
        size = len(value)
        if size >= self.big:
            if size > self.items_cap:
                self.sequence_size(size, what)
            if size >= BIG_VALUE:
                self.add_built(_getsizeof(value), what)
        return value

    def big_string(self, value: str, what: str) -> None:
        """A string of ``self.big`` characters or more was built: the string budget, then (from
        ``BIG_VALUE`` characters) its bytes."""
        size = len(value)
        if size > self.string_cap:
            self.string_size(size, what)
        if size >= BIG_VALUE:  # self.add_built(), inline
            self.built += _getsizeof(value)
            if self.built > self.built_cap:
                self.add_built(0, what)  # raises

    def add_built(self, size: int, what: str) -> None:
        self.built += size
        if self.built > self.built_cap:
            raise BudgetExceeded(
                "max_built_bytes", self.budgets.max_built_bytes, f"{self.built} bytes of big values built, the last a {what}"  # type: ignore[union-attr]
            )

    def add_pieces(self, text: str, count: int, what: str) -> None:
        """``count`` new strings cut from ``text`` (a split, a list of its characters): their bytes at
        most ``text``'s plus an object header each."""
        self.add_built(_getsizeof(text) + _PIECE_BYTES * count, what)

    def materializing(self, items: Any, what: str) -> Iterator[Any]:
        """``items`` (a generator or range that a filter or ``str.join`` is about to turn into a list),
        counted as it is consumed: a reference per item plus the item's own bytes go to the built bytes,
        and more than ``max_sequence_items`` items is refused."""
        count = 0
        size = 0
        cap = self.items_cap
        for item in items:
            count += 1
            size += _getsizeof(item) + 8  # (a shared or cached item is counted too: an upper bound)
            if size >= _MATERIALIZED_BATCH:
                if count > cap:
                    self.sequence_size(count, what)
                self.add_built(size, what)
                size = 0
            yield item
        if count > cap:
            self.sequence_size(count, what)

    def text_of(self, value: Any, what: str = "text") -> None:
        """Refuse to turn a container into text longer than the string budget (other values pass unchecked:
        their text is no longer than what the template already holds)."""
        kind = type(value)
        if kind is str or kind in _SCALARS or self.max_string is None or kind is _Undefined:
            return
        if kind in _TEXT_CONTAINERS or isinstance(value, _CONTAINER_CLASSES):
            ids = self.input_ids or self.make_input_ids()  # (made when first needed)
            if id(value) in ids:
                return
            size = text_size(value, self.max_string)
            if size > self.max_string:
                raise BudgetExceeded("max_string_chars", self.max_string, f"{what} of more than {self.max_string} characters")
            self.check_time()  # the walk of a big container takes a while

    def work(self, value: Any) -> float:
        """About how many characters an operation that compares or copies what ``value`` holds goes
        through: its length for a string, its text size for a container the template built (shared
        items counted each time: ``[a, b] * 500000`` is small but a sort of it compares megabytes a
        million times), 0 for the caller's own containers (one pass over the caller's data) and
        anything else. Stops counting past what the remaining fuel allows."""
        kind = type(value)
        if kind is str or kind is bytes:
            return len(value)
        if kind in _TEXT_CONTAINERS or isinstance(value, _CONTAINER_CLASSES):
            ids = self.input_ids or self.make_input_ids()  # (made when first needed)
            if id(value) in ids:
                return 0
            if (kind is list or kind is tuple) and _STR_ONLY.issuperset(map(type, value)):
                return sum(map(len, value)) + 4 * len(value) + 2  # strings only, at C speed (as text_size counts them)
            return text_size(value, (self._step_cap - self.steps + 1) * _WORK_PER_STEP)
        return 0

    def input_shape_bound(self, value: Any) -> float:
        """For one of the caller's containers, at most its (values, levels) product as ``_json_shape``
        counts them: every container inside it is the caller's too, so it has at most as many values as
        all of the caller's data, each at most as deep as the input depth budget allows. Also for a
        short list or tuple the template built of the caller's containers and plain values
        (``tool_calls|map(attribute='function')|list``): one level more, and the bound of each
        container item added up. ``inf`` for anything else. No walk of the caller's data: the count is
        one C-speed pass over the caller's containers, made once per render."""
        limit = self.budgets.max_input_depth
        if limit is None:
            return _INF
        ids = self.input_ids or self.make_input_ids()  # (made when first needed)
        # (levels: a container sits above level ``limit``, the outermost at level -1 at most, and
        # values one below the deepest container)
        if id(value) in ids:
            return self._input_items() * (limit + 2)
        kind = type(value)
        if (kind is list or kind is tuple) and len(value) < self.big:
            containers = 0
            for item in value:
                if type(item) not in _ATOMS:
                    if id(item) not in ids:
                        return _INF
                    containers += 1
            return (1 + len(value) + containers * self._input_items()) * (limit + 3)
        return _INF

    def _input_items(self) -> float:
        """1 + the number of items in all of the caller's containers (``inf`` if one is not an exact dict, list or tuple)."""
        items = self.input_items
        if items is None:
            containers, extra = self.input_containers, self.input_extra
            # exact types only: their ``len`` is what a walk of their values finds
            if _EXACT_CONTAINERS.issuperset(map(type, containers)) and _EXACT_CONTAINERS.issuperset(map(type, extra)):
                items = 1 + sum(map(len, containers)) + sum(map(len, extra))
            else:
                items = _INF
            self.input_items = items
        return items

    def add_input_copy(self, copy: Any, original: Any) -> None:
        """``copy`` (a slice of ``original``) holds only what ``original`` does: when that is the
        caller's data, so is the copy (its text is not sized again, its items not re-walked)."""
        ids = self.input_ids or self.make_input_ids()  # (made when first needed)
        if id(original) in ids:
            self.input_extra.append(copy)  # kept alive for the render, so its id stays its own
            ids.add(id(copy))

    def charge_work(self, chars: float, what: str) -> None:
        """Fuel for an operation that goes through ``chars`` characters in one C call (a comparison, a
        sort): one step per ``_WORK_PER_STEP`` characters, charged before it runs; the clock."""
        if chars < _WORK_PER_STEP:
            return
        cost = int(min(chars, _INF_WORK)) // _WORK_PER_STEP
        if cost:
            self.steps += cost
            if self.steps > self._step_cap:
                raise BudgetExceeded("max_steps", self.max_steps, f"{what} would go through about {int(min(chars, _INF_WORK))} characters")
        self.check_time()

    def int_bits(self, bits: int, what: str) -> None:
        if self.max_int_bits is not None and bits > self.max_int_bits:
            raise BudgetExceeded("max_int_bits", self.max_int_bits, f"{what} would have about {bits} bits")

    def output_parts(self, chars: int, count: int) -> None:
        """``count`` parts of ``chars`` characters collected into the render's output: the output budget,
        their bytes (at most 4 a character plus ``_PART_BYTES`` a part: a string object and the list's
        reference, whether or not the part is new) towards the built bytes, and the clock."""
        self.output += chars
        if self.output > self.output_cap:
            raise BudgetExceeded("max_output_chars", self.max_output, f"{self.output} characters of output")
        self.built += 4 * chars + _PART_BYTES * count
        if self.built > self.built_cap:
            self.add_built(0, f"output of {count} parts")  # raises
        if _monotonic() > self.deadline:
            self.check_time()  # raises


_meter: ContextVar[Meter | None] = ContextVar("chatjinja_budget_meter", default=None)
# strict mode of the render running in this context (apart from the meter: a render with budgets off
# has no meter, so every hook's budgets-off path is one ``is None`` test)
_strict: ContextVar[bool] = ContextVar("chatjinja_strict", default=False)


def active_meter() -> Meter | None:
    """The meter of the render running in this context, or ``None`` (budgets off)."""
    return _meter.get()


def strict_mode() -> bool:
    """Is the render running in this context in strict mode (a blocked access raises ``SecurityError``)?"""
    return _strict.get()


def _template_line(tb: TracebackType | None) -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class guarded_render:  # noqa: N801 - used as a context manager, like contextlib's
    """Run a render under ``budgets`` (and strict mode); a budget error gets the template line it happened on.

    With budgets, a ``RecursionError`` (template-built data nested too deep to print) becomes
    ``BudgetExceeded``. ``inputs`` are the containers of the caller's data (possibly shared by the
    renders of a batch), ``extra`` those made for this render only. A class rather than
    ``@contextmanager``: it wraps every render.
    """

    __slots__ = ("budgets", "meter", "strict", "_token", "_strict_token")

    def __init__(self, budgets: Budgets | None, strict: bool = False, inputs: list | None = None, extra: list | None = None):
        self.budgets = budgets
        self.strict = strict
        self.meter = None if budgets is None else budgets.meter_class(strict, inputs, extra)

    def __enter__(self) -> Meter | None:
        self._token = _meter.set(self.meter)
        self._strict_token = _strict.set(self.strict) if (self.strict or _strict.get()) else None
        return self.meter

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        _meter.reset(self._token)
        if self._strict_token is not None:
            _strict.reset(self._strict_token)
        if kind is None:
            return False
        if isinstance(exc, BudgetExceeded):
            if exc.lineno is None:
                exc.lineno = _template_line(tb)
                exc.args = (exc._text(),)
            return False
        budgets = self.budgets
        if isinstance(exc, RecursionError) and budgets is not None and budgets.max_recursion_depth is not None:
            raise BudgetExceeded(
                "max_recursion_depth", budgets.max_recursion_depth, "Python recursion limit reached", _template_line(tb)
            ) from None
        return False


# -- input data ----------------------------------------------------------------------------------


_ATOMS = frozenset({str, int, float, bool, type(None)})


def check_input_depth(value: Any, limit: int | None, what: str = "input", start: int = 0, seen: list | None = None) -> None:
    """Raise ``BudgetExceeded`` if ``value`` nests deeper than ``limit`` (walked iteratively, so cycles stop too).

    The outermost container is level 1 (``start=-1`` skips one more: the list of conversations of
    a batch); a container at a level above ``limit`` is refused. The list ``seen`` gets the
    containers walked.
    """
    if limit is None:
        return
    atoms = _ATOMS
    if type(value) in atoms:
        return
    stack: list[tuple[Any, int]] = [(value, start)]
    pop, push = stack.pop, stack.append
    remember = seen.append if seen is not None else None
    while stack:
        item, depth = pop()
        if depth >= limit:
            raise BudgetExceeded("max_input_depth", limit, f"{what} nests deeper than {limit} levels")
        kind = type(item)
        if kind is dict:
            children: Any = item.values()
        elif kind is list or kind is tuple:
            children = item
        elif isinstance(item, Mapping):
            children = list(item.values())
        elif isinstance(item, (list, tuple)):
            children = list(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            children = [getattr(item, field.name, None) for field in dataclasses.fields(item)]
        else:
            continue
        if remember is not None:
            remember(item)
        depth += 1
        for child in children:
            if type(child) not in atoms:
                push((child, depth))


class _NotPlain(Exception):
    pass


class _TooDeep(Exception):
    pass


class _ManyContainers(Exception):
    pass


#: the walk of an input value as a tree stops after about this many containers and walks it again as
#: a graph, each container once: Python data can share containers (``a = [a, a]`` 40 times is 41 lists
#: but 2**40 paths), which JSON data cannot
_TREE_WALK_CONTAINERS = 1 << 16
#: put among the caller's containers when they share some (``Meter.make_input_ids``)
_SHARED = object()


def _walk_plain(value: Any, level: int, limit: float, seen: list) -> None:
    """Check an exact dict or list at ``level``: only exact JSON types inside (else ``_NotPlain``),
    no container at a level ``>= limit`` (else ``_TooDeep``); ``seen`` gets every container (and
    ``_ManyContainers`` when it holds ``_TREE_WALK_CONTAINERS``)."""
    if level >= limit:
        raise _TooDeep
    seen.append(value)
    level += 1
    if type(value) is dict:
        for key in value:
            if type(key) is not str and type(key) not in _ATOMS:
                raise _NotPlain
        value = value.values()
    for item in value:
        kind = type(item)
        if kind is str:
            continue
        if kind is dict or kind is list:
            if len(seen) >= _TREE_WALK_CONTAINERS:
                raise _ManyContainers
            _walk_plain(item, level, limit, seen)
        elif kind not in _ATOMS:
            raise _NotPlain


_get_referents = gc.get_referents
# what ``gc.get_referents`` returns for a dict or list (its values, its keys unless all are exact
# strings; its items) is CPython's ``tp_traverse``: elsewhere every value is walked by ``_walk_plain``
_LEVELS_WALK = sys.implementation.name == "cpython"
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None), dict, list})
_is_plain_container_type = frozenset({dict, list}).__contains__
_compress = itertools.compress


def _walk_plain_levels(value: Any, level: int, limit: float, seen: list) -> None:
    """``_walk_plain`` a level at a time, each level in a few C calls: the items of every container of a
    level are ``gc.get_referents`` of them (a dict's values, and its keys unless all are exact
    strings), their types checked as a set, the containers among them the next level. Faster for wide
    data (a list of tool schemas); each call costs a few C calls per level, so narrow data is walked
    by ``_walk_plain``."""
    frontier = [value]
    count = 0
    while True:
        if level >= limit:
            raise _TooDeep
        seen += frontier
        count += len(frontier)
        if count >= _TREE_WALK_CONTAINERS:
            raise _ManyContainers
        items = _get_referents(*frontier)
        types = set(map(type, items))
        if not _PLAIN_TYPES.issuperset(types):
            raise _NotPlain
        if dict not in types and list not in types:
            return
        frontier = list(_compress(items, map(_is_plain_container_type, map(type, items))))
        level += 1


def _walk_plain_graph(root: Any, start: int, limit: float, seen: list) -> None:
    """``_walk_plain`` for data with many containers: each container walked once however many paths
    reach it, the depth that of its longest path (a cycle is too deep); ``_SHARED`` goes to ``seen``
    when a container is reached twice."""
    if start >= limit:
        raise _TooDeep
    heights: dict[int, int] = {}  # id -> levels of containers from it down, for those walked
    active: set[int] = set()  # ids of the containers on the current path
    frames: list[list] = []  # [container, its child containers left, the highest child so far]
    shared = False

    def enter(container: Any) -> None:
        active.add(id(container))
        seen.append(container)
        items = container
        if type(container) is dict:
            for key in container:
                if type(key) not in _ATOMS:
                    raise _NotPlain
            items = container.values()
        children = []
        for item in items:
            kind = type(item)
            if kind is dict or kind is list:
                children.append(item)
            elif kind not in _ATOMS:
                raise _NotPlain
        frames.append([container, iter(children), 0])

    enter(root)
    while frames:
        frame = frames[-1]
        child = next(frame[1], None)
        if child is None:  # (no child is None: they are containers)
            frames.pop()
            height = frame[2] + 1
            heights[id(frame[0])] = height
            active.discard(id(frame[0]))
            if frames and height > frames[-1][2]:
                frames[-1][2] = height
            continue
        key = id(child)
        level = start + len(frames)  # the child's
        if key in heights:
            shared = True
            if level + heights[key] - 1 >= limit:
                raise _TooDeep
            if heights[key] > frame[2]:
                frame[2] = heights[key]
        elif key in active or level >= limit:
            raise _TooDeep  # (a cycle: as deep as the walk would go)
        else:
            enter(child)
    if shared:
        seen.append(_SHARED)


def is_plain_checked(
    value: Any, limit: int | None, what: str = "input", start: int = 0, seen: list | None = None, wide: bool = False
) -> bool:
    """True if ``value`` is plain JSON data (exact dict, list, str, int, float, bool, None), so a template
    can be handed the value itself: the sandbox cannot mutate it, and it has no methods of the caller's.

    Checks the input depth budget on the way, at the levels :func:`check_input_depth` counts, and adds
    the containers to the list ``seen``. False for anything else
    (then copy it and check it the general way): one walk instead of a copy plus a walk. ``wide``
    for data that is likely many containers wide (tools, documents): walked a level at a time.
    """
    kind = type(value)
    if kind is not dict and kind is not list:
        return kind in _ATOMS
    # (the containers of a value that turns out not to be plain stay in ``seen``: harmless, since
    # ``seen`` keeps them alive for the render, so no container the template builds can have their id)
    # the tree walks count the containers in the list they are given: one of its own when ``seen``
    # already holds many (a batch of conversations), so each value gets its own allowance
    walked = seen if seen is not None and len(seen) < _TREE_WALK_CONTAINERS // 2 else []
    mark = len(walked)
    try:
        cap = _INF if limit is None else limit
        try:
            if wide and _LEVELS_WALK:
                _walk_plain_levels(value, start, cap, walked)
            else:
                _walk_plain(value, start, cap, walked)
        except _ManyContainers:
            del walked[mark:]
            _walk_plain_graph(value, start, cap, walked)
    except _TooDeep:
        if limit is None:  # (a cycle without the depth budget: copied, as transformers copies it)
            return False
        raise BudgetExceeded("max_input_depth", limit, f"{what} nests deeper than {limit} levels") from None
    except (_NotPlain, RecursionError):
        return False
    finally:
        if seen is not None and walked is not seen:
            seen += walked
    return True


# -- template source -----------------------------------------------------------------------------

# (deadline, limit) of the compile running in this context: lexing, parsing and code generation
# look at the clock every ``_COMPILE_CLOCK_EVERY`` tokens or nodes (jinja2 compiles a statement-heavy
# template at about 60 KB/s, so the source budget alone leaves seconds of work)
_compile_deadline: ContextVar[tuple[float, float] | None] = ContextVar("chatjinja_compile_deadline", default=None)
_COMPILE_CLOCK_EVERY = 512


def check_compile_time() -> None:
    deadline = _compile_deadline.get()
    if deadline is not None and _monotonic() > deadline[0]:
        raise BudgetExceeded(
            "timeout", deadline[1], f"compiling the template took over {deadline[1] / 2:g} s (half the timeout; raise the timeout for a template this big)"
        )


def clocked_tokens(tokens: Iterator[Any]) -> Iterator[Any]:
    """``tokens``, looking at the compile deadline every ``_COMPILE_CLOCK_EVERY`` tokens."""
    count = 0
    for token in tokens:
        count += 1
        if count == _COMPILE_CLOCK_EVERY:
            count = 0
            check_compile_time()
        yield token

_BLOCK_OPENERS = frozenset({"if", "for", "macro", "call", "filter", "block", "with", "generation", "autoescape", "trans"})


def source_nesting(source: str, environment: jinja2.Environment, limit: int | None = None) -> int:
    """The deepest nesting of brackets plus open blocks, from jinja2's (iterative) lexer; stops early past ``limit``."""
    brackets = blocks = deepest = 0
    in_set = set_is_block = after_block_begin = False
    for _lineno, kind, value in clocked_tokens(_tokens_until_error(environment, source)):
        if kind == "whitespace":
            continue
        if kind == "operator":
            if value in ("(", "[", "{"):
                brackets += 1
            elif value in (")", "]", "}"):
                brackets = max(0, brackets - 1)
            elif value == "=" and in_set and brackets == 0:
                set_is_block = False
        elif kind == "block_begin":
            after_block_begin = True
            continue
        elif kind == "block_end":
            if in_set and set_is_block:
                blocks += 1
            in_set = False
        elif kind == "name" and after_block_begin:
            if value in _BLOCK_OPENERS:
                blocks += 1
            elif value == "set":
                in_set, set_is_block = True, True
            elif value.startswith("end"):
                blocks = max(0, blocks - 1)
        after_block_begin = False
        if brackets + blocks > deepest:
            deepest = brackets + blocks
            if limit is not None and deepest > limit:
                return deepest
    return deepest


def _tokens_until_error(environment: jinja2.Environment, source: str) -> Iterator[tuple[int, str, str]]:
    # A lexer error is left for the parser to raise, so the message is jinja2's own (it may find a
    # parse error earlier in the stream than the lexer error).
    try:
        yield from environment.lex(source)
    except jinja2.exceptions.TemplateSyntaxError:
        return


def tree_depth(node: Any, limit: int | None = None) -> int:
    """Depth of a jinja2 AST, walked iteratively; stops early past ``limit``."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if limit is not None and deepest > limit:
                return deepest
        for child in current.iter_child_nodes():
            stack.append((child, depth + 1))
    return deepest


def check_source(source: str, budgets: Budgets | None) -> None:
    """The source size budget (checked before any lexing)."""
    if budgets is None or budgets.max_source_chars is None:
        return
    if len(source) > budgets.max_source_chars:
        raise BudgetExceeded("max_source_chars", budgets.max_source_chars, f"template source has {len(source)} characters")


# -- text of containers ------------------------------------------------------------------------

_SCALARS = frozenset({int, float, bool, type(None)})
_STR_ONLY = frozenset({str})
_Undefined = jinja2.runtime.Undefined
_EXACT_CONTAINERS = frozenset({dict, list, tuple})
# values whose text repeats what they hold (``repr`` of containers, ``<Namespace {...}>``)
_TEXT_CONTAINERS = frozenset({dict, list, tuple, set, frozenset, type({}.keys()), type({}.values()), type({}.items())})
_CONTAINER_CLASSES = (Mapping, list, tuple, set, frozenset, jinja2.utils.Namespace)


class _TooBig(Exception):
    pass


def text_size(value: Any, limit: float) -> float:
    """About ``len(str(value))``, without building it: strings and items summed, shared parts counted
    each time they appear (as ``repr`` prints them) but measured once; stops early past ``limit``.

    ``['x' * 10**7] * 1000`` is a small list whose text is 10**10 characters: printing it, ``~``,
    ``|string``, ``tojson`` or ``'%s' %`` would build that text in one C call.
    """
    memo: dict[int, float] = {}
    scalars = _SCALARS

    def size(item: Any) -> float:
        kind = type(item)
        if kind is str:
            return len(item) + 2
        if kind in scalars:
            return 2 + item.bit_length() // 3 if kind is int else 24
        key = id(item)
        known = memo.get(key)
        if known is not None:
            return known
        memo[key] = 5  # a cycle prints as [...]
        if kind is dict or isinstance(item, Mapping):
            total = 2.0 + 4 * len(item)
            for k, v in item.items():  # leaves inline: most items are strings and numbers
                total += len(k) + 2 if type(k) is str else size(k)
                kv = type(v)
                total += len(v) + 2 if kv is str else (2 + v.bit_length() // 3 if kv is int else 24) if kv in scalars else size(v)
                if total > limit:
                    raise _TooBig
        elif kind in _TEXT_CONTAINERS or isinstance(item, (list, tuple, set, frozenset)):
            total = 2.0 + 2 * len(item)
            for v in item:
                kv = type(v)
                total += len(v) + 2 if kv is str else (2 + v.bit_length() // 3 if kv is int else 24) if kv in scalars else size(v)
                if total > limit:
                    raise _TooBig
        elif isinstance(item, jinja2.utils.Namespace):
            total = 14 + size(object.__getattribute__(item, "_Namespace__attrs"))
        elif isinstance(item, (str, bytes)):
            total = len(item) + 3
        else:
            total = 64.0
        memo[key] = total
        if total > limit:
            raise _TooBig
        return total

    try:
        return size(value)  # a RecursionError (data nested too deep to print) propagates: str() would raise it too
    except _TooBig:
        return limit + 1


# -- format strings --------------------------------------------------------------------------------

_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")


def _number(text: str, limit: int) -> int:
    return int(text) if len(text) <= 12 else limit + 1


def check_percent_format(meter: Meter, fmt: str, args: Any) -> None:
    """``fmt % args``: refuse a field width or precision above the string budget before formatting."""
    limit = meter.max_string
    if limit is None or "%" not in fmt:
        return
    star = False
    for match in _PERCENT_SPEC.finditer(fmt):
        for group in match.groups():
            if group == "*":
                star = True
            elif group:
                meter.string_size(_number(group, limit), "formatted field")
    if star:
        for value in args if isinstance(args, tuple) else (args,):
            if isinstance(value, int):
                meter.string_size(abs(value), "formatted field")
    _check_field_text(meter, fmt, fmt.count("%"), args.values() if isinstance(args, Mapping) else args if isinstance(args, tuple) else (args,))


def _check_field_text(meter: Meter, fmt: str, fields: int, values: Any) -> None:
    """Every field could print the biggest argument: refuse when that could pass the string budget."""
    limit = meter.max_string
    if limit is None or not fields:
        return
    biggest = 0.0
    for value in values:
        biggest = max(biggest, len(value) if type(value) is str else text_size(value, limit))
    if len(fmt) + fields * biggest > limit:
        meter.string_size(int(len(fmt) + fields * biggest), "formatted string")


def check_brace_format(meter: Meter, fmt: str, args: tuple, kwargs: Any) -> None:
    """``fmt.format(...)``: refuse a width or precision in a format spec above the string budget."""
    limit = meter.max_string
    if limit is None or "{" not in fmt:
        return
    try:
        fields = list(Formatter().parse(fmt))
    except ValueError:
        return  # malformed: str.format raises the same error itself
    nested = False
    for _literal, _name, spec, _conversion in fields:
        if not spec:
            continue
        if "{" in spec:
            nested = True
        for digits in _DIGITS.findall(spec):
            meter.string_size(_number(digits, limit), "formatted field")
    values = list(args) + (list(kwargs.values()) if isinstance(kwargs, Mapping) else [])
    if nested:
        for value in values:
            if isinstance(value, int):
                meter.string_size(abs(value), "formatted field")
    _check_field_text(meter, fmt, sum(1 for field in fields if field[1] is not None), values)
