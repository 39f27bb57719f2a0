"""The render side of resource budgets: the per-render :class:`Meter` and the hooks that charge it at
every operator, call, filter, loop and output of a render.

They run hundreds of times a render, so this module is compiled with mypyc when the package is
built (``hatch_build.py``; it becomes ``_hooks_native``). It is also plain Python, and runs as it is
when no compiled build is there, with the same behaviour (``_implementation.py`` chooses which).
What that asks of this file:

- Everything a template can hand over is typed ``Any``: compiled code checks the declared types of
  arguments, and a declared type Python would not check would change what a template can do. The
  meter's own counters and limits are ``int`` and ``float`` (native numbers when compiled).
- Classes here derive from ``object`` only, and define no exceptions (``BudgetExceeded`` is in
  ``exceptions.py``). Hooks that need the environment are methods of :class:`Hooks`, one per
  environment, whose bound methods the environment holds as attributes (a compiled function does not
  bind as a method). Filters are wrapped by instances of the ``Metered*`` classes, not closures: jinja2
  reads ``jinja_pass_arg`` from them, and a compiled function has no attributes.
- Module constants are ``Final`` (a compiled module reads them as C statics, not through its dict).
- Parameters that a template's keyword arguments could collide with have ``__``-prefixed names:
  positional-only parameters (``/``) are not enforced by compiled code, name mangling is.
- It imports nothing from chatjinja but ``exceptions`` and ``template_globals``, which import neither.
"""

from __future__ import annotations

import json
import operator
import re
import sys
import time
import itertools
import types
from collections.abc import Mapping
from contextvars import ContextVar
from inspect import GEN_CREATED as _GEN_CREATED
from inspect import getgeneratorstate as _generator_state
from string import Formatter
from typing import Any, Callable, Final, Iterator

import jinja2
import jinja2.filters
import jinja2.runtime
import jinja2.sandbox
import jinja2.utils

from .exceptions import BudgetExceeded
from .template_globals import GENERATION_SUPPORT, TemplateDict, TemplateNamespace, raise_exception, strftime_now

_monotonic: Final[Callable[[], float]] = time.monotonic  # (typed: a native float, compared natively)
_INF: Final = float("inf")
#: a limit that is off: an int no count reaches, so every limit is an int and compared natively (an
#: ``int`` against a ``float`` is a boxed comparison in compiled code); below 2**62 with room to add to
NO_LIMIT: Final = 1 << 60
_getsizeof: Final = sys.getsizeof
_PIECE_BYTES: Final = 80  # the most a one-character string takes (sys.getsizeof of a 4-byte character)
_WORK_PER_STEP: Final = 1024  # characters a comparison or sort may go through per step of fuel
_INF_WORK: Final = 1 << 62
_PART_BYTES: Final = 88  # a part of the output: the most a string's header takes (76), a list slot (8), rounded up
_MATERIALIZED_BATCH: Final = 16 * 1024  # bytes counted per call of ``add_built`` while a generator is consumed
_CHARGED_BATCH: Final = 256  # items of a generator in a chain of lazy filters charged at a time (``Meter.charged_items``)

#: fuel charged when a body or loop starts looks at the clock each time the steps pass a multiple of this
CLOCK_STEPS: Final = 1024
#: a built string or sequence at least this long counts towards ``max_built_bytes`` (smaller ones
#: pass the hot paths with one comparison against this constant)
BIG_VALUE: Final = 1024

#: stands for "the caller's data reaches a container twice" in the ids of the caller's containers
#: (``Meter.make_input_ids``; ``budget.py``'s input walk adds it)
SHARED: Final = object()

_ATOMS: Final = frozenset({str, int, float, bool, type(None)})
_SCALARS: Final = frozenset({int, float, bool, type(None)})
_Undefined: Final = jinja2.runtime.Undefined
_EXACT_CONTAINERS: Final = frozenset({dict, list, tuple})
# values whose text repeats what they hold (``repr`` of containers, ``<Namespace {...}>``)
_TEXT_CONTAINERS: Final = frozenset({dict, list, tuple, set, frozenset, type({}.keys()), type({}.values()), type({}.items())})
_CONTAINER_CLASSES: Final = (Mapping, list, tuple, set, frozenset, jinja2.utils.Namespace)


class Meter:
    """What one render has spent so far, checked against its budgets (made only when budgets are on).

    ``budgets.meter_limits`` (``Budgets``, made once per ``Budgets``) gives the limits the hot paths
    read, as numbers (``inf`` when off); the others are read from ``budgets`` when one is crossed.
    ``big``: the hot paths let a built value shorter than this pass with one comparison: it can
    neither cross the string or sequence budget nor count towards the built bytes.
    """

    __slots__ = (
        "budgets", "strict", "room", "_mark", "loops", "depth", "output", "built", "deadline", "input_ids",
        "input_containers", "input_extra", "input_items", "max_string", "max_items", "output_cap", "string_cap",
        "items_cap", "built_cap", "big", "_loop_cap", "_step_cap", "depth_cap",
    )

    def __init__(self, budgets: Any, strict: bool = False, inputs: list | None = None, extra: list | None = None) -> None:
        self.budgets = budgets
        max_string: Any
        max_items: Any
        output_cap: int
        string_cap: int
        items_cap: int
        built_cap: int
        big: int
        loop_cap: int
        step_cap: int
        depth_cap: int
        mark: int
        timeout: Any
        (
            max_string, max_items, output_cap, string_cap, items_cap, built_cap, big, loop_cap, step_cap, depth_cap,
            mark, timeout,
        ) = budgets.meter_limits
        self.max_string = max_string
        self.max_items = max_items
        self.output_cap = output_cap
        self.string_cap = string_cap
        self.items_cap = items_cap
        self.built_cap = built_cap
        self.big = big
        self._loop_cap = loop_cap
        self._step_cap = step_cap
        self.depth_cap = depth_cap
        self.strict = strict
        self._mark = mark  # no steps spent (``steps``)
        self.room = mark - 1
        self.loops = 0
        self.depth = 0
        self.output = 0
        self.built = 0
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
        """``input_ids``, made when first needed (``meter.input_ids or meter.make_input_ids()``).

        An object's key here (and in ``text_size``'s memo) is ``id(obj) >> 4``: every object is at a
        multiple of 16 bytes, so the key is as unique as the address, and a set of raw addresses
        (whose low bits are all zero) collides on almost every insertion."""
        ids: set[int]
        if COMPILED_BUILD:
            ids = set()
            for container in self.input_containers:
                ids.add(id(container) >> 4)
            for container in self.input_extra:
                ids.add(id(container) >> 4)
        else:  # (interpreted: at C speed; ``(4).__rrshift__(key)`` is ``key >> 4``)
            ids = set(map(_SHIFT, map(id, self.input_containers)))
            ids.update(map(_SHIFT, map(id, self.input_extra)))
        if len(ids) < len(self.input_containers) + len(self.input_extra) or id(SHARED) >> 4 in ids:
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
        # (the same mark as ``Budgets.meter_limits`` gives a new meter, for ``value`` 0)
        mark = (value // CLOCK_STEPS + 1) * CLOCK_STEPS
        if mark > self._step_cap + 1:
            mark = self._step_cap + 1
        self._mark = mark
        self.room = mark - value - 1

    def spend(self, cost: int) -> None:
        """``cost`` steps of fuel that do not fit in ``room``: the step budget, then the clock when the
        steps pass a multiple of ``CLOCK_STEPS``."""
        before = self.steps
        steps = before + cost
        if steps > self._step_cap:
            raise BudgetExceeded("max_steps", self.budgets.max_steps, f"{steps} steps")
        self.steps = steps
        if before // CLOCK_STEPS != steps // CLOCK_STEPS:
            self.check_time()

    def step(self, cost: int = 1) -> None:
        steps = self.steps + cost
        self.steps = steps
        if steps > self._step_cap:
            raise BudgetExceeded("max_steps", self.budgets.max_steps, f"{steps} steps")
        if ((steps & 31) == 0 or cost > 1) and _monotonic() > self.deadline:
            raise BudgetExceeded("timeout", self.budgets.timeout, "render took too long")

    def loop_iterations(self, count: int, cost: int = 1) -> None:
        """``count`` loop iterations at once (the metered loops report in batches), each ``cost`` steps
        of fuel, clock included."""
        self.loops += count
        steps = self.steps + count * cost
        self.steps = steps
        if self.loops > self._loop_cap:
            raise BudgetExceeded("max_loop_iterations", self.budgets.max_loop_iterations, f"{self.loops} loop iterations")
        if steps > self._step_cap:
            raise BudgetExceeded("max_steps", self.budgets.max_steps, f"{steps} steps")
        self.check_time()

    def check_time(self) -> None:
        if _monotonic() > self.deadline:
            raise BudgetExceeded("timeout", self.budgets.timeout, "render took too long")

    # -- sizes ---------------------------------------------------------------------------------
    def string_size(self, size: Any, what: str = "string") -> None:
        if self.max_string is not None and size > self.max_string:
            raise BudgetExceeded("max_string_chars", self.max_string, f"{what} of {size} characters")

    def sequence_size(self, size: Any, what: str = "sequence") -> None:
        if self.max_items is not None and size > self.max_items:
            raise BudgetExceeded("max_sequence_items", self.max_items, f"{what} of {size} items")

    def int_bits(self, bits: Any, what: str) -> None:
        limit = self.budgets.max_int_bits
        if limit is not None and bits > limit:
            raise BudgetExceeded("max_int_bits", limit, f"{what} would have about {bits} bits")

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

    def big_string(self, value: Any, what: str) -> None:
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
                "max_built_bytes", self.budgets.max_built_bytes, f"{self.built} bytes of big values built, the last a {what}"
            )

    def add_pieces(self, text: Any, count: int, what: str) -> None:
        """``count`` new strings cut from ``text`` (a split, a list of its characters): their bytes at
        most ``text``'s plus an object header each."""
        self.add_built(_getsizeof(text) + _PIECE_BYTES * count, what)

    def materializing(self, items: Any, what: str) -> Iterator[Any]:
        """``items`` (a generator or range that a filter or ``str.join`` is about to turn into a list),
        counted as it is consumed: a reference per item plus the item's own bytes go to the built bytes,
        and more than ``max_sequence_items`` items is refused; a step of fuel per item (the generator's
        work for it, which no hook sees), charged with each batch."""
        count = 0
        size = 0
        charged = 0
        cap = self.items_cap
        for item in items:
            count += 1
            size += _getsizeof(item) + 8  # (a shared or cached item is counted too: an upper bound)
            if size >= _MATERIALIZED_BATCH:
                if count > cap:
                    self.sequence_size(count, what)
                self.add_built(size, what)
                size = 0
                self.charge_call((count - charged) << 10, 0, what)
                charged = count
            yield item
        if count > cap:
            self.sequence_size(count, what)
        if count > charged:
            self.charge_call((count - charged) << 10, 0, what)

    def charged_items(self, items: Any, fuel: int, what: str) -> Iterator[Any]:
        """``items`` (a generator that a lazy filter such as ``map`` or ``select`` goes through, in a
        chain), ``fuel`` (in 1/1,024 steps) charged for each item as it is taken, 256 at a time: the
        first filter of a chain is charged for its sized value, the later ones here, so a chain that
        drops its items before anything consumes them is charged (and clocked) too."""
        count = 0
        for item in items:
            count += 1
            if count == _CHARGED_BATCH:
                self.charge_call(count * fuel, 0, what)
                count = 0
            yield item
        if count:
            self.charge_call(count * fuel, 0, what)

    def text_of(self, value: Any, what: str = "text") -> None:
        """Refuse to turn a container into text longer than the string budget (other values pass unchecked:
        their text is no longer than what the template already holds)."""
        kind = type(value)
        if kind is str or kind in _SCALARS or self.max_string is None or kind is _Undefined:
            return
        if kind in _TEXT_CONTAINERS or kind is bytes or isinstance(value, _CONTAINER_CLASSES):
            ids = self.input_ids or self.make_input_ids()  # (made when first needed)
            if id(value) >> 4 in ids:
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
            if id(value) >> 4 in ids:
                return 0
            if (kind is list or kind is tuple) and _all_strings(value):
                return _total_length(value) + 4 * len(value) + 2  # strings only (as text_size counts them)
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
        if id(value) >> 4 in ids:
            return self._input_items() * (limit + 2)
        kind = type(value)
        if (kind is list or kind is tuple) and len(value) < self.big:
            containers = 0
            for item in value:
                if type(item) not in _ATOMS:
                    if id(item) >> 4 not in ids:
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
                items = float(1 + sum(map(len, containers)) + sum(map(len, extra)))
            else:
                items = _INF
            self.input_items = items
        return items

    def add_input_copy(self, copy: Any, original: Any) -> None:
        """``copy`` (a slice of ``original``) holds only what ``original`` does: when that is the
        caller's data, so is the copy (its text is not sized again, its items not re-walked)."""
        ids = self.input_ids or self.make_input_ids()  # (made when first needed)
        if id(original) >> 4 in ids:
            self.input_extra.append(copy)  # kept alive for the render, so its id stays its own
            ids.add(id(copy) >> 4)

    def charge_work(self, chars: float, what: str) -> None:
        """Fuel for an operation that goes through ``chars`` characters in one C call (a comparison, a
        sort): one step per ``_WORK_PER_STEP`` characters, charged before it runs; the clock."""
        if chars < _WORK_PER_STEP:
            return
        cost = int(min(chars, _INF_WORK)) // _WORK_PER_STEP
        if cost:
            steps = self.steps + cost
            self.steps = steps
            if steps > self._step_cap:
                raise BudgetExceeded(
                    "max_steps", self.budgets.max_steps, f"{what} would go through about {int(min(chars, _INF_WORK))} characters"
                )
        self.check_time()

    def charge_call(self, work: int, scratch: int, what: str) -> None:
        """One call of a filter or method, before it runs (``_FILTER_COSTS``, ``_METHOD_COSTS``): ``work``
        is its fuel in 1/1,024 steps, ``scratch`` the bytes it may allocate while it runs, which must fit
        in what is left of ``max_built_bytes`` (not added to it: they are freed when the call returns).
        The clock as ``Meter.spend`` looks at it. A single C call is never interrupted, so its cost is
        bounded here."""
        if scratch > self.built_cap - self.built:
            raise BudgetExceeded(
                "max_built_bytes", self.budgets.max_built_bytes,
                f"{what} would allocate about {scratch} bytes while it runs, with {self.built} bytes of big values built",
            )
        cost = work >> 10
        room = self.room - cost
        if room >= 0:  # (as ``Hooks.budget_charge``: the clock when the steps pass a multiple of CLOCK_STEPS)
            self.room = room
            return
        if self.steps + cost > self._step_cap:
            raise BudgetExceeded("max_steps", self.budgets.max_steps, f"{what} would cost about {cost} steps")
        self.spend(cost)

    def output_parts(self, chars: int, count: int) -> None:
        """``count`` parts of ``chars`` characters collected into the render's output: the output budget,
        their bytes (at most 4 a character plus ``_PART_BYTES`` a part: a string object and the list's
        reference, whether or not the part is new) towards the built bytes, and the clock."""
        self.output += chars
        if self.output > self.output_cap:
            raise BudgetExceeded("max_output_chars", self.budgets.max_output_chars, f"{self.output} characters of output")
        self.built += 4 * chars + _PART_BYTES * count
        if self.built > self.built_cap:
            self.add_built(0, f"output of {count} parts")  # raises
        if _monotonic() > self.deadline:
            self.check_time()  # raises


_meter: Final[ContextVar[Meter | None]] = ContextVar("chatjinja_budget_meter", default=None)
# strict mode of the render running in this context (apart from the meter: a render with budgets off
# has no meter, so every hook's budgets-off path is one ``is None`` test)
_strict: Final[ContextVar[bool]] = ContextVar("chatjinja_strict", default=False)
#: the hooks' first step: the meter of the render running in this context (a bound method called
#: directly, where ``_active_meter()`` would look the method up at every call)
_active_meter: Final[Callable[[], Meter | None]] = _meter.get


# -- text of containers ------------------------------------------------------------------------


class _TooBig(Exception):
    pass


def text_size(value: Any, limit: float) -> float:
    """About ``len(str(value))``, without building it: strings and items summed, shared parts counted
    each time they appear (as ``repr`` prints them) but measured once; stops early past ``limit``.

    ``['x' * 10**7] * 1000`` is a small list whose text is 10**10 characters: printing it, ``~``,
    ``|string``, ``tojson`` or ``'%s' %`` would build that text in one C call.
    """
    try:
        return _TextSize(limit).size(value)  # a RecursionError (data nested too deep to print) propagates: str() would raise it too
    except _TooBig:
        return limit + 1


class _TextSize:
    # Compiled code calls itself without Python's recursion check (the C stack would overflow on data
    # nested 10**5 deep), so the nesting is counted here: past the recursion limit, the same
    # RecursionError as the pure-Python recursion (and ``str()``) gives.
    __slots__ = ("memo", "limit", "depth", "max_depth")

    def __init__(self, limit: float) -> None:
        self.memo: dict[int, float] = {}
        self.limit = limit
        self.depth = 0
        self.max_depth: int = sys.getrecursionlimit()

    def size(self, item: Any) -> float:
        kind = type(item)
        if kind is str:
            return len(item) + 2
        if kind in _SCALARS:
            return 2 + item.bit_length() // 3 if kind is int else 24
        key = id(item) >> 4
        known = self.memo.get(key)
        if known is not None:
            return known
        self.depth += 1  # (not taken back when an error ends the walk)
        if self.depth > self.max_depth:
            raise RecursionError("maximum recursion depth exceeded while getting the repr of an object")
        self.memo[key] = 5.0  # a cycle prints as [...]
        limit = self.limit
        total: float
        if kind is dict or (kind not in _TEXT_CONTAINERS and isinstance(item, Mapping)):  # (no ABC check for a list)
            total = 2.0 + 4 * len(item)
            for k, v in item.items():  # leaves inline: most items are strings and numbers
                total += len(k) + 2 if type(k) is str else self.size(k)
                kv = type(v)
                total += len(v) + 2 if kv is str else (2 + v.bit_length() // 3 if kv is int else 24) if kv in _SCALARS else self.size(v)
                if total > limit:
                    raise _TooBig
        elif kind in _TEXT_CONTAINERS or isinstance(item, (list, tuple, set, frozenset)):
            total = 2.0 + 2 * len(item)
            for v in item:
                kv = type(v)
                total += len(v) + 2 if kv is str else (2 + v.bit_length() // 3 if kv is int else 24) if kv in _SCALARS else self.size(v)
                if total > limit:
                    raise _TooBig
        elif isinstance(item, jinja2.utils.Namespace):
            total = 14 + self.size(object.__getattribute__(item, "_Namespace__attrs"))
        elif isinstance(item, (str, bytes)):
            # (``repr`` of bytes escapes what is not printable ASCII: up to 4 characters a byte)
            total = float(len(item) + 3) if isinstance(item, str) else float(4 * len(item) + 3)
        else:
            total = 64.0
        self.memo[key] = total
        if total > limit:
            raise _TooBig
        self.depth -= 1
        return total


# -- format strings --------------------------------------------------------------------------------

_PERCENT_SPEC: Final = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS: Final = re.compile(r"\d+")


def _number(text: str, limit: Any) -> Any:
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


def check_brace_format(meter: Meter, fmt: str, args: Any, kwargs: Any) -> None:
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


# -- the environment's hooks -------------------------------------------------------------------

_LOOP_BATCH: Final = 32  # iterations a metered loop counts before it reports them
_LOOP_UPFRONT: Final = 1024  # the longest sequence a loop is charged for in full when it starts
_OUTPUT_CHUNK_BITS: Final = 12
_OUTPUT_CHUNK: Final = 1 << _OUTPUT_CHUNK_BITS  # parts of output collected and counted at a time
_Generator: Final = types.GeneratorType
# what a loop can be charged for in full when it starts (``len`` is what it will iterate over)
_PLAIN_SEQUENCES: Final = frozenset({list, tuple, dict, str, range, type({}.items()), type({}.keys()), type({}.values())})
_ITEMS_CODE: Final = jinja2.filters.do_items.__code__
#: the operators the sandbox sends to ``Hooks.call_binop`` (``ChatTemplateEnvironment.intercepted_binops``)
INTERCEPTED_BINOPS: Final = ("*", "**", "+", "%")
_BINOP_RESULTS: Final = {operator: f"result of '{operator}'" for operator in INTERCEPTED_BINOPS}
_COMPARE_OPERATORS: Final = {
    "eq": operator.eq, "ne": operator.ne, "gt": operator.gt, "gteq": operator.ge, "lt": operator.lt, "lteq": operator.le,
}
_WIDTH_METHODS: Final = frozenset({"center", "ljust", "rjust", "zfill"})
_Macro: Final = jinja2.runtime.Macro
_LoopContext: Final = jinja2.runtime.LoopContext
_LOOP_CHANGED: Final = jinja2.runtime.LoopContext.changed
# the callables ``_check_call`` knows: str methods, the str.format wrappers, lipsum, strftime_now
_CHECKED_CALLABLE_TYPES: Final = frozenset({types.FunctionType, types.MethodType})
_BuiltinMethod: Final = types.BuiltinMethodType
_Method: Final = types.MethodType
_safe_range: Final = jinja2.sandbox.safe_range
# the str methods ``_check_call`` has a size check for (any other builtin method is not looked at)
# the ones that cut a string into new strings and return them in a list or tuple
_SPLITTING_METHODS: Final = frozenset({"split", "rsplit", "splitlines", "partition", "rpartition"})
_CHECKED_STR_METHODS: Final = _WIDTH_METHODS | _SPLITTING_METHODS | {"expandtabs", "join", "replace", "translate"}
# what ``Context.call`` calls unchanged and ``SandboxedEnvironment.is_safe_callable`` allows: builtin
# methods (``'a'.strip``, ``d.items``), macros, the ``dict`` global (plus ``namespace`` and
# ``raise_exception``, by identity)
_SIZED_OWNERS: Final = frozenset({str, list, dict, tuple})
_DIRECT_CALL_TYPES: Final = frozenset({types.BuiltinMethodType, _Macro, TemplateDict})
# results ``Meter.sized`` never checks (not a str, bytes, list, tuple or dict)
_UNSIZED_RESULTS: Final = frozenset(
    {
        bool, int, float, type(None), type({}.items()), type({}.keys()), type({}.values()), types.GeneratorType,
        TemplateNamespace, jinja2.runtime.Undefined,
    }
)
_PAIR_BYTES: Final = 120  # a 2-tuple (56 bytes) plus, for groupby, the group's list and namedtuple
_ARG_BYTES: Final = 40  # a reference in the argument tuple plus a new int (28-32 bytes)
_DictItems: Final[type] = type({}.items())
_CONSUMED_ITERABLES: Final = frozenset({_Generator, range, _DictItems})

#: the hooks the environment holds as attributes (``Hooks``), by the names its compiled code calls
HOOK_NAMES: Final = (
    "call_binop", "budget_add", "call", "concat", "budget_iter", "budget_slice", "budget_compare", "budget_in",
    "budget_charge", "budget_buffered", "budget_text", "budget_concat",
)


class Hooks:
    """The environment's budget hooks: each is a pass-through while no meter is active.

    One per environment (``ChatTemplateEnvironment`` holds its bound methods, ``HOOK_NAMES``), with what
    the hooks need from it: ``sandbox_call`` is the sandbox's own ``call`` (jinja2's checks, then
    ``Context.call``), ``undefined`` its undefined type, ``binop_table`` its operators.
    """

    def __init__(self, sandbox_call: Any, undefined: Any, binop_table: Any) -> None:
        self.sandbox_call = sandbox_call
        self.undefined = undefined
        self.binop_table = binop_table

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "%" and type(left) is int and type(right) is int:  # no bigger than ``right``
            return left % right
        meter = _active_meter()
        if meter is None:
            return self.binop_table[operator](left, right)
        result: Any  # (declared: the first assignment below would make it a str)
        if operator == "+" and type(left) is str and type(right) is str:  # the common case, inline
            if meter.max_string is not None and len(left) + len(right) > meter.max_string:
                meter.string_size(len(left) + len(right), "'+' concatenation")
            result = left + right
            if len(result) >= meter.big:
                meter.big_string(result, "'+' concatenation")
            return result
        _check_binop(meter, operator, left, right)
        result = self.binop_table[operator](left, right)
        # '%' is the only one whose size is not known in advance; a big result of any counts as built
        return meter.sized(result, _BINOP_RESULTS[operator])

    def budget_add(self, left: Any, right: Any) -> Any:
        """``left + right``, then its size checked: a sum is at most as big as its two operands, so
        computing it first is safe (unlike ``*``, ``**`` and ``%``, checked before in ``call_binop``)."""
        result = left + right
        kind = type(result)
        if kind is str:  # (the most common sum in chat templates)
            meter = _active_meter()
            if meter is not None and len(result) >= meter.big:
                meter.big_string(result, "'+' concatenation")
            return result
        if kind is int or kind is float:
            return result
        meter = _active_meter()
        if meter is None:
            return result
        return meter.sized(result, "'+' concatenation")

    def call(self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        kind = type(__obj)
        meter = _active_meter()
        owner: Any = None
        owner_kind: Any = None
        if meter is not None:
            if kind is _BuiltinMethod:
                # the common case needs no metering: ``.get``/``.items`` of a small dict (a value it
                # holds, a view, a small copy) or an unchecked method of a short string (its result at
                # most 4 times as long); neither keeps its arguments
                owner = __obj.__self__
                owner_kind = type(owner)
                if (owner_kind is dict and len(owner) < meter.big) or (
                    owner_kind is str and len(owner) * 4 < meter.big and __obj.__name__ not in _CHECKED_STR_METHODS
                ):
                    meter = None
            elif kind is _Macro:  # a macro (the rest of the common cases), inline
                # (its arguments are not counted as built, unlike ``f(*iterable)`` below: a macro keeps
                # them only in ``varargs``, for the call, or in what it builds from them, which is sized)
                depth = meter.depth
                if depth >= meter.depth_cap:
                    raise BudgetExceeded("max_recursion_depth", meter.budgets.max_recursion_depth, f"{depth + 1} nested macro/loop calls")
                meter.depth = depth + 1
                if kwargs:  # as Context.call calls a macro
                    kwargs.pop("_loop_vars", None)
                    kwargs.pop("_block_vars", None)
                try:
                    return __obj(*args, **kwargs)
                except StopIteration:
                    return self.undefined("value was undefined because a callable raised a StopIteration exception")
                finally:
                    # (a macro body returns ``concat`` of its buffer, which sized and counted it)
                    meter.depth = depth
            elif __obj is TemplateNamespace and not args:
                # ``namespace(a=..., b=...)``: no iterable to consume (keyword arguments are not
                # metered: a dict unpacked into them is already a dict the template holds), the
                # result never sized
                meter = None
            elif __obj is _safe_range or (kind is _Method and __obj.__func__ is GENERATION_SUPPORT):
                # ``range(...)`` (lazy, at most jinja2's 100,000 items; a loop over it is metered) and a
                # ``{% generation %}`` block (its body's output was sized when it was joined)
                meter = None
        # Callables jinja2's sandbox always allows and ``Context.call`` calls as they are (no
        # ``pass_context``-style argument): called here directly, as ``Context.call`` would.
        direct = kind in _DIRECT_CALL_TYPES or __obj is TemplateNamespace or __obj is raise_exception
        if meter is None:
            if not direct:
                return self.sandbox_call(__context, __obj, *args, **kwargs)
            if kwargs:
                kwargs.pop("_loop_vars", None)
                kwargs.pop("_block_vars", None)
            try:
                return __obj(*args, **kwargs)
            except StopIteration:
                return self.undefined("value was undefined because a callable raised a StopIteration exception")
        # (no fuel here: the call site was charged with the code around it, see ``_fuel``)
        if len(args) >= meter.big:
            # ``f(*iterable)``: the arguments are a new tuple, its items often new objects (numbers of
            # a range), which the callee may keep (``cycler(*range(100000))``)
            meter.add_built(_getsizeof(args) + _ARG_BYTES * len(args), "tuple of call arguments")
        if kind is _LoopContext:  # ``loop(...)`` of a recursive loop (a macro is counted above, inline)
            # (a recursive loop meters what it is given itself: ``NoFoldCodeGenerator.write``)
            depth = meter.depth + 1
            if depth > meter.depth_cap:
                raise BudgetExceeded("max_recursion_depth", meter.budgets.max_recursion_depth, f"{depth} nested macro/loop calls")
            meter.depth = depth
            try:
                return self.sandbox_call(__context, __obj, *args, **kwargs)
            except StopIteration:
                return self.undefined("value was undefined because a callable raised a StopIteration exception")
            finally:
                # (a recursive loop body returns ``concat`` of its buffer, which sized and counted it)
                meter.depth = depth - 1
        if kind is _BuiltinMethod:
            _charge_method(meter, __obj, owner, args, kwargs)
            if isinstance(owner, (str, bytes)) and __obj.__name__ in _CHECKED_STR_METHODS:
                name = __obj.__name__
                if name == "join":
                    args = _consumed_args(meter, args, "str.join() of an iterable")
                _check_call(meter, __obj, args, kwargs)
                if name in _SPLITTING_METHODS:
                    # new strings inside a list or tuple: counted from the text they are cut from
                    if kwargs:
                        kwargs.pop("_loop_vars", None)
                        kwargs.pop("_block_vars", None)
                    result = meter.sized(__obj(*args, **kwargs), f"str.{name}() result")
                    if len(owner) >= meter.big and not (len(result) == 1 and result[0] is owner):
                        meter.add_pieces(owner, len(result), f"str.{name}() result")
                    return result
        elif kind in _CHECKED_CALLABLE_TYPES:
            _check_call(meter, __obj, args, kwargs)
            if kind is _Method:
                if isinstance(__obj.__self__, str):  # ``Markup``'s methods (from ``|escape``)
                    _charge_method(meter, __obj, __obj.__self__, args, kwargs)
                elif __obj.__func__ is _LOOP_CHANGED and args:  # compares its arguments with the last ones
                    meter.charge_work(meter.work(list(args)), "loop.changed() comparison")
            if kind is _Method and type(__obj.__self__) is TemplateDict:  # dict.fromkeys(...)
                args = _consumed_args(meter, args, "dict.fromkeys() of an iterable")
        elif kind is TemplateDict or __obj is TemplateNamespace:
            args = _consumed_args(meter, args, "dict() or namespace() of an iterable")
            # (a copy of each item: ``namespace`` checks each name in Python, about 4 steps a name)
            _charge_items(meter, args, kwargs, 4096 if __obj is TemplateNamespace else 64, "dict() or namespace()")
        if direct:
            if kwargs:
                kwargs.pop("_loop_vars", None)
                kwargs.pop("_block_vars", None)
            try:
                result = __obj(*args, **kwargs)
            except StopIteration:
                return self.undefined("value was undefined because a callable raised a StopIteration exception")
        else:
            result = self.sandbox_call(__context, __obj, *args, **kwargs)
        result_kind = type(result)
        if result_kind is str:
            if len(result) >= meter.big:
                meter.big_string(result, "call result")
            return result
        if result_kind is list or result_kind is dict or result_kind is tuple:
            if len(result) < meter.big:
                return result
        elif result_kind in _UNSIZED_RESULTS:
            return result
        return meter.sized(result, "call result")

    def concat(self, parts: Any) -> str:
        """``"".join``, counting: a buffer (list) is a built string, anything else is the render's output.

        The output (the root render function's generator) is collected part by part, and each
        ``_OUTPUT_CHUNK`` parts are counted against the output budget and the built bytes before the
        next is taken (``Meter.output_parts``), so parts cannot pile up unseen; a budget crossed is
        thrown into the generator, so the error names the template line it stopped at.
        """
        meter = _active_meter()
        if meter is None:
            return "".join(parts)
        if type(parts) is list:
            size = _list_length(parts)
            if size < meter.big:
                return "".join(parts)
            if size > meter.string_cap:
                meter.string_size(size, "block output")
            text = "".join(parts)
            meter.big_string(text, "block output")
            return text
        iterator = iter(parts)
        if not COMPILED_BUILD:
            return _collect_output(meter, iterator)
        collected: list = []
        size = 0
        count = 0
        for part in iterator:
            collected.append(part)
            size += len(part) if type(part) is str else len(part)  # (a str's length read directly, compiled)
            count += 1
            if count == _OUTPUT_CHUNK:
                _count_output(meter, iterator, size, count)
                size = 0
                count = 0
        _count_output(meter, iterator, size, count)
        return "".join(collected)

    def budget_iter(self, iterable: Any, cost: int = 1) -> Any:
        """A loop's iterable, metered: each iteration is a loop iteration and ``cost`` steps of fuel
        (one for the iteration, one for each filter and call site in the loop's body)."""
        meter = _active_meter()
        if meter is None:
            return iterable
        kind = type(iterable)
        count: int
        if kind is list or kind in _PLAIN_SEQUENCES:  # (a list first: one pointer comparison, compiled)
            count = len(iterable)
        elif kind is _Generator and iterable.gi_code is _ITEMS_CODE:  # ``x|items``
            count = _items_length(iterable)
        else:
            count = _LOOP_UPFRONT + 1
        # A loop over a sequence of up to _LOOP_UPFRONT items is charged its whole length when it
        # starts (also if it ends in a break), with no per-item wrapper, unless that would cross a
        # budget: then it is counted as it goes, so a loop left early is never refused for the items
        # it skipped. The clock as ``budget_charge`` looks at it (``Meter.spend``).
        room = meter.room - count * cost
        loops = meter.loops + count
        if room >= 0 and loops <= meter._loop_cap:
            # (the common case: no clock to look at, no budget crossed; the room is under
            # CLOCK_STEPS, so count is at most _LOOP_UPFRONT here)
            meter.room = room
            meter.loops = loops
            return iterable
        if count <= _LOOP_UPFRONT and loops <= meter._loop_cap and meter.steps + count * cost <= meter._step_cap:
            meter.loops = loops
            meter.spend(count * cost)
            return iterable
        if kind is _Undefined:  # iterates over nothing
            return iterable
        if hasattr(kind, "__len__") and not isinstance(iterable, jinja2.runtime.Undefined):
            return _SizedMeteredIterable(iterable, meter, cost)
        return _MeteredIterable(iterable, meter, cost)

    def budget_slice(self, value: Any, key: Any) -> Any:
        """``value[key]`` for a slice (a copy): sized, and counted as built when big."""
        result = value[key]
        meter = _active_meter()
        if meter is None:
            return result
        kind = type(result)
        if (kind is str or kind is list or kind is tuple or kind is bytes) and len(result) >= meter.big:
            meter.check_time()
            meter.sized(result, "slice")
        if kind is list or kind is tuple:
            meter.add_input_copy(result, value)
        return result

    def budget_compare(self, left: Any, operator: str, right: Any) -> Any:
        """A comparison whose operands the source does not bound (``_unbounded_comparison``): fuel for
        the characters it may go through, charged before it runs, when an operand is long or a container."""
        meter = _active_meter()
        if meter is not None:
            kind = type(left)
            if kind is str:  # two long strings: compared character by character
                if len(left) >= meter.big and type(right) is str and len(right) >= meter.big:
                    meter.charge_work(min(len(left), len(right)), f"'{operator}' comparison")
            elif kind in _SIZED_OWNERS and type(right) is kind:  # two containers: item by item
                meter.charge_work(min(meter.work(left), meter.work(right)), f"'{operator}' comparison")
        return _COMPARE_OPERATORS[operator](left, right)

    def budget_in(self, item: Any, container: Any) -> Any:
        """``item in container`` whose container the source does not bound: fuel for the characters
        it may go through (a string searched, a list's items compared, a long key hashed)."""
        meter = _active_meter()
        if meter is not None:
            kind = type(container)
            if kind is dict:
                if type(item) is str and len(item) >= meter.big:
                    meter.charge_work(len(item), "'in' comparison")
            elif kind is str:
                if len(container) >= meter.big:
                    meter.charge_work(len(container), "'in' comparison")
            elif kind is list or kind is tuple:
                if type(item) is str:
                    # a string is compared with each item in O(1) unless the item is a string of its
                    # length (then at most its length in characters): without a look at the items
                    # when that is under a step (``'k' not in handled_keys``), else the smaller bound
                    chars = len(container) * (len(item) + 1)
                    if chars >= _WORK_PER_STEP:
                        meter.charge_work(min(chars, meter.work(container)), "'in' comparison")
                else:
                    meter.charge_work(meter.work(container), "'in' comparison")
        return item in container

    def budget_charge(self, cost: int) -> None:
        """A function body (template, macro, call block, block) starts: ``cost`` steps of fuel, and the
        clock each time the steps pass a multiple of ``CLOCK_STEPS`` (``Meter.spend``)."""
        meter = _active_meter()
        if meter is None:
            return
        room = meter.room - cost
        if room >= 0:
            meter.room = room
        else:
            meter.spend(cost)

    def budget_buffered(self, buffer: Any, count: int) -> None:
        """``count`` parts were just written into a block's buffer, in a loop: each time the buffer
        passes a multiple of ``_OUTPUT_CHUNK`` parts, the last chunk is counted as ``concat`` counts
        the output (so parts cannot pile up unseen; the whole is sized when the buffer is joined)."""
        size = len(buffer)
        if (size - count) >> _OUTPUT_CHUNK_BITS == size >> _OUTPUT_CHUNK_BITS:
            return
        meter = _active_meter()
        if meter is None:
            return
        meter.output_parts(_list_length(buffer[-_OUTPUT_CHUNK:]), _OUTPUT_CHUNK)

    def budget_text(self, value: Any) -> Any:
        """``str(value)`` for ``{{ ... }}`` output, refusing a container whose text would pass the string budget."""
        if type(value) is str:
            return value
        meter = _active_meter()
        if meter is not None:
            meter.text_of(value, "printed value")
            return meter.sized(str(value), "printed value")
        return str(value)

    def budget_concat(self, parts: Any) -> str:
        """``~``: strings only (the common case) are joined at C speed and sized after, as ``+`` is (the
        result is no bigger than the strings that already exist); any other part is sized before
        ``str()`` runs on it."""
        text: str | None
        try:
            text = "".join(parts)
        except TypeError:  # a part that is not a string
            text = None
        meter = _active_meter()
        if meter is None:
            return "".join(map(str, parts)) if text is None else text
        if text is None:
            for part in parts:
                if type(part) is not str:
                    meter.text_of(part, "'~' operand")
            strings = list(map(str, parts))
            size = _list_length(strings)
            if size > meter.string_cap:
                meter.string_size(size, "'~' concatenation")
            text = "".join(strings)
        if len(text) >= meter.big:
            meter.big_string(text, "'~' concatenation")
        return text


def _count_output(meter: Meter, iterator: Any, size: int, count: int) -> None:
    """``count`` parts of the output, ``size`` characters (``Meter.output_parts``); a budget crossed is
    thrown into the render's generator, so the error names the template line it stopped at."""
    try:
        meter.output_parts(size, count)
    except BudgetExceeded as error:
        throw = getattr(iterator, "throw", None)
        if throw is not None:
            throw(error)  # raises it at the generator's yield, in the template's code
        raise


def _collect_output(meter: Meter, iterator: Any) -> str:
    """``Hooks.concat`` of the output, interpreted: collected ``_OUTPUT_CHUNK`` parts at a time at C
    speed (``islice``), each chunk counted before the next is taken."""
    chunk = collected = list(itertools.islice(iterator, _OUTPUT_CHUNK))
    while True:
        _count_output(meter, iterator, sum(map(len, chunk)), len(chunk))
        if len(chunk) < _OUTPUT_CHUNK:
            return "".join(collected)
        chunk = list(itertools.islice(iterator, _OUTPUT_CHUNK))
        collected += chunk


def _total_length(parts: Any) -> int:
    """``sum(map(len, parts))``; compiled, as a loop, several times as fast (a ``map`` and the ``sum``
    over it cost more than the few parts of most buffers)."""
    if not COMPILED_BUILD:
        return sum(map(len, parts))
    size = 0
    for part in parts:
        size += len(part)
    return size


def _list_length(parts: list) -> int:
    """``_total_length`` of an exact list (compiled: indexed directly, a str's length read directly)."""
    if not COMPILED_BUILD:
        return sum(map(len, parts))
    size = 0
    for part in parts:
        size += len(part) if type(part) is str else len(part)
    return size


def _all_strings(items: Any) -> bool:
    """Is every item exactly a ``str``? (``frozenset({str}).issuperset(map(type, items))``, as a loop.)"""
    for item in items:
        if type(item) is not str:
            return False
    return True


#: is this module compiled (mypyc)? A few loops are written two ways: a Python loop is faster compiled,
#: a C-speed builtin (``sum(map(len, ...))``) faster interpreted. Both give the same numbers; the pure
#: Python build runs the parity, budget and attack suites too (``tests/runtime/test_implementation.py``).
COMPILED_BUILD: Final = not isinstance(_list_length, types.FunctionType)
_SHIFT: Final = (4).__rrshift__


def _items_length(generator: Any) -> int:
    """How many pairs a ``|items`` generator (jinja2's ``do_items``) will yield: the length of its
    dict when it has not started and the dict is an exact one (which a template cannot change: the
    sandbox refuses its mutating methods); else more than a loop is charged for upfront."""
    if _generator_state(generator) == _GEN_CREATED:
        value = generator.gi_frame.f_locals.get("value")
        if type(value) is dict:
            return len(value)
    return _LOOP_UPFRONT + 1


class _MeteredIterable:
    __slots__ = ("_iterable", "_meter", "_cost")

    def __init__(self, iterable: Any, meter: Meter, cost: int) -> None:
        self._iterable = iterable
        self._meter = meter
        self._cost = cost

    def __iter__(self) -> Iterator[Any]:
        # Counted in batches of 32 (a local counter is far cheaper than the meter's), checked at
        # every batch and at the end of the loop; a loop left early adds its rest unchecked.
        meter = self._meter
        cost = self._cost
        pending = 0
        try:
            for item in self._iterable:
                pending += 1
                if pending == _LOOP_BATCH:
                    pending = 0
                    meter.loop_iterations(_LOOP_BATCH, cost)
                yield item
            if pending:
                count, pending = pending, 0
                meter.loop_iterations(count, cost)
        finally:
            if pending:
                meter.loops += pending
                meter.steps += pending * cost


class _SizedMeteredIterable(_MeteredIterable):
    __slots__ = ()

    def __len__(self) -> int:
        return len(self._iterable)


def _check_binop(meter: Meter, operator: str, left: Any, right: Any) -> None:
    """Refuse an operation whose result would cross a size budget, before computing it."""
    if operator == "*":
        if isinstance(left, int) and isinstance(right, int):
            meter.int_bits(left.bit_length() + right.bit_length(), "product")
            return
        seq: Any
        count: Any
        if isinstance(right, int):
            seq, count = left, right
        elif isinstance(left, int):
            seq, count = right, left
        else:
            return
        if isinstance(seq, (str, bytes)):
            meter.string_size(len(seq) * max(count, 0), "repeated string")
        elif isinstance(seq, (list, tuple)):
            meter.sequence_size(len(seq) * max(count, 0), "repeated sequence")
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            meter.int_bits(abs(left).bit_length() * right, "power")
    elif operator == "+":
        if isinstance(left, (str, bytes)) and isinstance(right, (str, bytes)):
            meter.string_size(len(left) + len(right), "'+' concatenation")
        elif isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
            meter.sequence_size(len(left) + len(right), "'+' concatenation")
    elif operator == "%" and isinstance(left, str):
        check_percent_format(meter, left, right)


def _consumed_args(meter: Meter, args: Any, what: str) -> Any:
    """``args`` with each generator, range or dict ``.items()`` counted as the callee consumes it
    (``Meter.materializing``): ``str.join()``, ``dict()``, ``dict.fromkeys()`` and ``namespace()`` build
    from them."""
    if not any(type(arg) in _CONSUMED_ITERABLES for arg in args):
        return args
    return tuple(meter.materializing(arg, what) if type(arg) in _CONSUMED_ITERABLES else arg for arg in args)


def _arg(args: Any, kwargs: Any, index: int, name: str, default: Any = None) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _check_call(meter: Meter, obj: Any, args: Any, kwargs: Any) -> None:
    """Size checks for the calls a template can make that build big strings from small arguments."""
    # (``obj`` is a builtin method of a string, a function or a method: each attribute is looked up
    # where it is, so no lookup fails, which would format an AttributeError's message for nothing)
    kind = type(obj)
    wrapped: Any = None
    owner: Any = None
    if kind is _BuiltinMethod:
        owner = obj.__self__
    else:
        func = obj.__func__ if kind is _Method else obj
        attributes = getattr(func, "__dict__", None)
        if type(attributes) is dict:
            wrapped = attributes.get("__wrapped__")
        if kind is _Method:
            owner = obj.__self__
    if wrapped is not None and getattr(wrapped, "__name__", None) in ("format", "format_map"):
        fmt = getattr(wrapped, "__self__", None)
        if isinstance(fmt, str):
            values = args[0] if (wrapped.__name__ == "format_map" and args) else kwargs
            check_brace_format(meter, fmt, args, values if hasattr(values, "values") else {})
        return
    if isinstance(owner, (str, bytes)):  # (bytes: from ``str.encode``; they have the same methods)
        name = getattr(obj, "__name__", "")
        if name in _WIDTH_METHODS:
            width = _arg(args, kwargs, 0, "width", 0)
            if isinstance(width, int):
                meter.string_size(width, f"str.{name}() result")
        elif name == "expandtabs":
            size = _arg(args, kwargs, 0, "tabsize", 8)
            if isinstance(size, int):
                tabs = owner.count("\t" if isinstance(owner, str) else b"\t")  # type: ignore[arg-type]
                meter.string_size(len(owner) + tabs * max(size, 0), "str.expandtabs() result")
        elif name == "join":
            _check_join(meter, owner, _arg(args, kwargs, 0, "iterable"))
        elif name == "replace":
            _check_replace(meter, owner, _arg(args, kwargs, 0, "old"), _arg(args, kwargs, 1, "new"), _arg(args, kwargs, 2, "count", -1))
        elif name == "translate" and isinstance(owner, str):
            _check_translate(meter, owner, _arg(args, kwargs, 0, "table"))
        elif name in ("split", "rsplit", "splitlines") and meter.max_items is not None and len(owner) // 2 >= meter.max_items:
            _check_split(meter, owner, name, args, kwargs)
        return
    if obj is jinja2.utils.generate_lorem_ipsum:
        n = _arg(args, kwargs, 0, "n", 5)
        most = _arg(args, kwargs, 3, "max", 100)
        if isinstance(n, int) and isinstance(most, int):
            meter.string_size(max(n, 0) * max(most, 0) * 16, "lipsum() result")
            # (a Python loop over every word: about 2 steps a word)
            meter.charge_call(max(n, 0) * max(most, 1) * 2048, 0, "lipsum()")
    elif obj is strftime_now:
        fmt = _arg(args, kwargs, 0, "format", "")
        if isinstance(fmt, str):
            meter.string_size(len(fmt) * 16, "strftime_now() result")


# What str.split() and str.splitlines() split at (every str.isspace() character / line boundary).
_WHITESPACE: Final = tuple(chr(c) for c in range(0x3001) if chr(c).isspace())
_LINE_BREAKS: Final = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


_BYTE_WHITESPACE: Final = (b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c")
_BYTE_LINE_BREAKS: Final = (b"\n", b"\r")


def _check_split(meter: Meter, text: Any, name: str, args: Any, kwargs: Any) -> None:
    """A split of a long string: count the pieces (C-level) before the list of them is built."""
    pieces: int
    binary = isinstance(text, bytes)
    if name == "splitlines":
        pieces = sum(map(text.count, _BYTE_LINE_BREAKS if binary else _LINE_BREAKS)) + 1
    else:
        separator = _arg(args, kwargs, 0, "sep")
        if separator is None:  # at most one more word than whitespace characters
            pieces = sum(map(text.count, _BYTE_WHITESPACE if binary else _WHITESPACE)) + 1
        elif isinstance(separator, (str, bytes)) and separator:
            pieces = text.count(separator) + 1
        else:
            return
        limit = _arg(args, kwargs, 1, "maxsplit", -1)
        if isinstance(limit, int) and limit >= 0:
            pieces = min(pieces, limit + 1)
    meter.sequence_size(pieces, f"str.{name}() result")


def _check_join(meter: Meter, separator: Any, items: Any) -> None:
    kind = type(items)
    if kind is not list and kind is not tuple and meter.max_string is not None and isinstance(items, (Mapping, set, frozenset, type({}.keys()), type({}.values()), type({}.items()))):
        # (the keys or items, as text: at most the text of the container) plus a separator between each two
        limit = meter.max_string
        width = len(separator) if type(separator) is str else text_size(separator, limit)
        size = text_size(items, limit) + min(width, limit + 1) * max(len(items) - 1, 0)
        meter.string_size(int(min(size, limit + 1)), "joined string")
        return
    if kind is str and meter.max_string is not None:  # the characters of a string (``|join`` turns the separator into text)
        width = len(separator) if type(separator) is str else text_size(separator, meter.string_cap)
        meter.string_size(int(min(len(items) + width * max(len(items) - 1, 0), meter.string_cap + 1)), "joined string")
        return
    if isinstance(items, (list, tuple)) and meter.max_string is not None:
        limit = meter.max_string
        if _all_strings(items):  # the common case: strings only
            total = _total_length(items)
            if len(items) > 1:
                if type(separator) is str:
                    total += len(separator) * (len(items) - 1)
                else:  # (``|join`` turns it into text)
                    total += int(min(text_size(separator, limit), limit + 1)) * (len(items) - 1)
            if total > limit:
                meter.string_size(total, "joined string")
            return
        size = 0.0
        for item in items:
            size += len(item) if type(item) is str else text_size(item, limit)
            if size > limit:
                break
        size += (len(separator) if type(separator) is str else text_size(separator, limit)) * max(len(items) - 1, 0)
        meter.string_size(int(min(size, limit + 1)) if size > limit else int(size), "joined string")


def _check_translate(meter: Meter, text: str, table: Any) -> None:
    """``str.translate(table)``: every character may become the longest string in the table."""
    values: Any
    if isinstance(table, Mapping):
        values = table.values()
    elif isinstance(table, (list, tuple)):
        values = table
    else:
        return  # a string maps a character to a character; nothing else a template holds is subscriptable
    longest = max((len(value) for value in values if isinstance(value, str)), default=1)
    meter.string_size(len(text) * max(longest, 1), "str.translate() result")


def _check_replace(meter: Meter, text: Any, old: Any, new: Any, count: Any) -> None:
    if not (
        (isinstance(text, str) and isinstance(old, str) and isinstance(new, str))
        or (isinstance(text, bytes) and isinstance(old, bytes) and isinstance(new, bytes))
    ) or len(new) <= len(old):
        return
    hits = text.count(old) if old else len(text) + 1  # type: ignore[arg-type]  # (str with str, bytes with bytes)
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    meter.string_size(len(text) + hits * (len(new) - len(old)), "replaced string")


def _json_shape(value: Any, limit: Any) -> tuple[int, int]:
    """(number of nodes, deepest level) of a JSON-ish value, walked iteratively; stops counting past ``limit`` nodes."""
    nodes, deepest = 0, 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack and nodes <= limit:
        item, depth = stack.pop()
        nodes += 1
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((child, depth + 1) for child in item)
    return nodes, deepest


def _check_json(meter: Meter, value: Any, indent: Any) -> None:
    """``tojson`` of anything but an atom: refuse JSON text over the string budget before it is built."""
    if meter.max_string is None:
        return
    if id(value) >> 4 not in (meter.input_ids or meter.make_input_ids()):  # (the caller's own: the caller's text)
        meter.text_of(value, "JSON text")
    if indent is None:
        return
    width = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
    if width > 0 and meter.input_shape_bound(value) * width > meter.max_string:
        # (the caller's data small enough as a whole is not walked: the common case, tools)
        nodes, deepest = _json_shape(value, meter.max_string)
        meter.string_size(nodes * deepest * width, "indented JSON")


def metered_json(meter: Meter, x: Any, ensure_ascii: Any, indent: Any, separators: Any, sort_keys: Any) -> str:
    """``tojson`` with budgets on (``environment.tojson`` keeps transformers' signature and calls this):
    the clock, the text of a container (``_check_json``), the result's size."""
    if _monotonic() > meter.deadline:
        meter.check_time()
    # (an atom's JSON is sized after: a string's at most 6 times as long; the caller's own container
    # without an indent, the common case, is looked up here: its text is the caller's data)
    if type(x) not in _ATOMS and (indent is not None or id(x) >> 4 not in (meter.input_ids or meter.make_input_ids())):
        _check_json(meter, x, indent)
        if indent is not None and id(x) >> 4 not in (meter.input_ids or meter.make_input_ids()):
            # an indent makes ``json`` encode in Python, a few calls a value: 2 steps a character of its
            # text (the caller's own data is one pass over the caller's data, as elsewhere)
            chars = int(min(text_size(x, meter.string_cap), meter.string_cap + 1))
            meter.charge_call(chars * 2048, chars * 8, "|tojson(indent=...)")
    text: str = json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    if len(text) >= meter.big:
        meter.big_string(text, "result of |tojson")
    return text


# -- filters -------------------------------------------------------------------------------------


def _pre_center(meter: Meter, args: Any, kwargs: Any) -> None:
    _pre_text(meter, args, kwargs)
    width = _arg(args, kwargs, 1, "width", 80)
    if isinstance(width, int):
        meter.string_size(width, "centred string")


def _pre_indent(meter: Meter, args: Any, kwargs: Any) -> None:
    _pre_text(meter, args, kwargs)
    width = _arg(args, kwargs, 1, "width", 4)
    text = args[0] if args else ""
    size = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    if isinstance(text, str) and size > 0:
        meter.string_size(len(text) + (text.count("\n") + 1) * size, "indented string")


def _pre_wordwrap(meter: Meter, args: Any, kwargs: Any) -> None:
    _pre_text(meter, args, kwargs)
    text = args[0] if args else ""
    width = _arg(args, kwargs, 1, "width", 79)
    wrap = _arg(args, kwargs, 3, "wrapstring", "\n")
    if isinstance(text, str) and isinstance(wrap, str) and isinstance(width, int):
        lines = len(text) // max(width, 1) + text.count("\n") + 1
        meter.string_size(len(text) + lines * len(wrap), "wrapped string")


def _pre_replace(meter: Meter, args: Any, kwargs: Any) -> None:
    _pre_text(meter, args, kwargs)
    if len(args) >= 3:
        _check_replace(meter, args[0], args[1], args[2], _arg(args, kwargs, 3, "count", -1))


def _pre_urlencode(meter: Meter, args: Any, kwargs: Any) -> None:
    """A string becomes at most 3 characters a byte of its UTF-8 (``%XX``): 3 an ASCII character, 12 another."""
    _pre_text(meter, args, kwargs)
    if args and type(args[0]) is str:
        meter.string_size(len(args[0]) * (3 if args[0].isascii() else 12), "URL-encoded string")


def _pre_join(meter: Meter, args: Any, kwargs: Any) -> None:
    if not args:
        return
    if _arg(args, kwargs, 2, "attribute") is None:
        _check_join(meter, _arg(args, kwargs, 1, "d", ""), args[0])
    else:
        _charge_attribute(meter, args[0], "|join(attribute=...)")


def _charge_attribute(meter: Meter, value: Any, what: str) -> None:
    """An attribute looked up on each item, in Python (``environment.getitem``): 8 steps an item."""
    if isinstance(value, (str, list, tuple, Mapping)) and len(value) >= _WORK_PER_STEP // 8:
        meter.charge_call(len(value) * 8192, 0, what)


def _pre_text(meter: Meter, args: Any, kwargs: Any) -> None:
    """Filters that turn their value into text first (``soft_str``)."""
    if args:
        meter.text_of(args[0], "filtered value")


def _pre_sized(meter: Meter, args: Any, kwargs: Any) -> None:
    """Filters that copy their value into a list: refuse a value longer than the sequence budget first."""
    if args and isinstance(args[0], (str, list, tuple, dict)):
        meter.sequence_size(len(args[0]), "filtered sequence")


def _pre_ordering(meter: Meter, args: Any, kwargs: Any) -> None:
    """Filters that compare the items (``sort``, ``unique``, ``min``, ``max``, ``dictsort``, ``groupby``)
    and, case-insensitive by default, first make a lower-case copy of each string key: the copies are
    counted as built bytes, the comparisons as fuel (a sort compares each item about log2(n) times)."""
    _pre_sized(meter, args, kwargs)
    if not args or type(args[0]) is str:
        return
    work = meter.work(args[0])
    if work >= BIG_VALUE:
        count: int = len(args[0]) if hasattr(args[0], "__len__") else 1
        meter.add_built(int(min(work, meter.built_cap)) + _PIECE_BYTES * count, "lower-case keys")
        meter.charge_work(work * max(1, count.bit_length()), "comparing the items")


def _pre_selecting(meter: Meter, args: Any, kwargs: Any) -> None:
    """``select``/``reject``(``attr``) run a test on each item, usually a comparison: fuel for the
    characters they may go through."""
    if args and type(args[0]) is not str:
        work = meter.work(args[0])
        if work >= BIG_VALUE:
            meter.charge_work(work, "testing the items")


def _pre_sum(meter: Meter, args: Any, kwargs: Any) -> None:
    """``sum`` over lists or strings concatenates: quadratic work, charged as fuel, and a size check."""
    if not args or not isinstance(args[0], (list, tuple)) or not args[0]:
        return
    items = args[0]
    if isinstance(items[0], (list, tuple, str)):
        total = sum(len(item) for item in items if isinstance(item, (list, tuple, str)))
        meter.sequence_size(total, "summed sequence")
        meter.step(len(items) * total // 100)


def _pre_format(meter: Meter, args: Any, kwargs: Any) -> None:
    _pre_text(meter, args, kwargs)
    if args and isinstance(args[0], str):
        check_percent_format(meter, args[0], kwargs or tuple(args[1:]))


def _pre_count(meter: Meter, args: Any, kwargs: Any, index: int, name: str) -> None:
    count = _arg(args, kwargs, index, name)
    if isinstance(count, int):
        meter.sequence_size(count, f"|{name}")
        meter.step(max(count, 0))


def _pre_batch(meter: Meter, args: Any, kwargs: Any) -> None:
    _pre_count(meter, args, kwargs, 1, "linecount")


def _pre_slice(meter: Meter, args: Any, kwargs: Any) -> None:
    _pre_count(meter, args, kwargs, 1, "slices")


_FILTER_CHECKS: Final[dict[str, Callable[[Meter, Any, Any], None]]] = {
    "center": _pre_center,
    "indent": _pre_indent,
    "wordwrap": _pre_wordwrap,
    "replace": _pre_replace,
    "join": _pre_join,
    "urlencode": _pre_urlencode,
    "format": _pre_format,
    "batch": _pre_batch,
    "slice": _pre_slice,
    "sum": _pre_sum,
    **{name: _pre_sized for name in ("list", "reverse")},
    **{name: _pre_ordering for name in ("sort", "unique", "dictsort", "min", "max", "groupby")},
    **{name: _pre_selecting for name in ("select", "reject", "selectattr", "rejectattr")},
    **{
        name: _pre_text
        for name in (
            "string", "upper", "lower", "capitalize", "title", "trim", "striptags", "escape", "e",
            "forceescape", "safe", "urlize", "wordcount", "truncate", "pprint", "xmlattr",
        )
    },
}


# filters that turn a generator argument (from map, select, ...) into a list or a string: the
# generator is counted as they consume it (``Meter.materializing``)
_CONSUMING_FILTERS: Final = frozenset(
    "batch dictsort first groupby join last list max min random reverse slice sort sum unique".split()
)
# of those, the ones that turn a range (new numbers) or a dict's items (new pairs) into a list,
# counted like a generator (not |last, |reverse, |random, which treat a range or a dict view as a
# sequence), and the ones that turn a string into a list (or lists) of its characters
_LISTING_FILTERS: Final = frozenset({"batch", "groupby", "join", "list", "slice", "sort", "unique"})
_CUTTING_FILTERS: Final = frozenset({"batch", "list", "slice", "sort"})
# filters whose result is a generator that keeps the filter's arguments (any others are let go when
# the filter returns: a big argument tuple, ``|f(*iterable)``, is counted only for these)
_KEEPING_FILTERS: Final = frozenset({"map", "select", "reject", "selectattr", "rejectattr"})
# filters whose result is a list of new pairs or groups (counted in full, not only from 1,024 items)
_PAIRING_FILTERS: Final = frozenset({"dictsort", "groupby"})

# one pass at C speed over a string or sequence the template already holds (or O(1)): the clock is
# looked at only when the value is a big string for these, at every call for the others
_UNTIMED_FILTERS: Final = frozenset(
    """abs attr capitalize count d default e escape first float forceescape int items last length lower
    safe string title trim upper""".split()
)

# filters with nothing to meter: O(1), they return a value the template already holds or a number,
# and keep nothing (their fuel is charged with the code around them): not wrapped at all
_UNMETERED_FILTERS: Final = frozenset({"abs", "attr", "count", "d", "default", "first", "items", "last", "length"})

# one C-speed pass over a string, whose result is at most ``_TEXT_GROWTH`` times as long whatever the
# other arguments (a case mapping triples a character at most, an escape makes ``&#34;`` of ``"``): on a
# string that short of the ``big`` threshold there is nothing to check or count, and no clock to look at
_SCALED_TEXT_FILTERS: Final = frozenset({"trim", "upper", "lower", "capitalize", "title", "string", "safe", "escape", "e", "forceescape"})
_TEXT_GROWTH: Final = 5


# What one call costs, charged before it runs (``Meter.charge_call``): (steps per 1,024 characters of
# its string, or of the text of a value it turns into text; bytes per such character it may allocate
# while it runs; steps per 1,024 items of a container; bytes per item). One step is about 200 ns on the
# reference machine (the step budget is 5,000,000 for a 1 s timeout), so each factor is the worst time
# in ns per character or item measured (the slowest of several inputs of 256 Ki characters or items:
# words, lines, markup, entities; ``benchmarks/README.md``), times 5.12 and twice that to spare (a
# loaded machine), rounded up to a power of two; the bytes are tracemalloc's peak per character or
# item, rounded up. A filter missing here is
# charged ``_UNKNOWN_COST`` (the most any filter costs); ``tests/security/test_single_calls.py`` checks
# that every filter, test, global and method a template can reach has a cost.
_FILTER_COSTS: Final[dict[str, tuple[int, int, int, int]]] = {
    "urlize": (16384, 64, 0, 0), "wordwrap": (16384, 32, 0, 0), "striptags": (4096, 40, 0, 0),
    "pprint": (8192, 80, 0, 0), "xmlattr": (2048, 16, 32768, 128), "title": (2048, 72, 0, 0),
    "indent": (512, 40, 0, 0), "wordcount": (512, 24, 0, 0), "urlencode": (512, 16, 8192, 64),
    "join": (512, 16, 512, 32), "int": (256, 4, 0, 0), "float": (32, 4, 0, 0),
    "capitalize": (64, 16, 0, 0), "escape": (64, 16, 0, 0), "e": (64, 16, 0, 0), "forceescape": (64, 16, 0, 0),
    "upper": (8, 4, 0, 0), "lower": (8, 4, 0, 0), "trim": (8, 4, 0, 0), "safe": (8, 4, 0, 0),
    "string": (64, 16, 0, 0), "truncate": (8, 4, 0, 0), "center": (8, 4, 0, 0), "format": (16, 4, 0, 0),
    "replace": (128, 4, 0, 0), "filesizeformat": (0, 0, 0, 0), "round": (0, 0, 0, 0), "random": (0, 0, 0, 0),
    "sort": (8192, 136, 8192, 160), "dictsort": (8192, 136, 8192, 192), "unique": (2048, 8, 8192, 96),
    "groupby": (8192, 136, 32768, 512), "min": (4096, 8, 4096, 8), "max": (4096, 8, 4096, 8),
    "batch": (4096, 32, 4096, 32), "slice": (4096, 32, 4096, 32), "list": (32, 8, 32, 8), "reverse": (8, 4, 32, 8),
    "sum": (0, 0, 4096, 8), "tojson": (16, 8, 512, 24),
    # lazy: the generator they return goes through the items later, one Python call each
    "map": (8192, 0, 8192, 0), "select": (8192, 0, 8192, 0), "reject": (8192, 0, 8192, 0),
    "selectattr": (16384, 0, 16384, 0), "rejectattr": (16384, 0, 16384, 0),
}
_UNKNOWN_COST: Final = (16384, 136, 32768, 512)
# filters charged for the text of a container too (they go through every item's text)
_TEXT_COST_FILTERS: Final = frozenset({"pprint", "xmlattr", "urlencode", "tojson", "string"})

# Methods a template can call on a string, bytes or container (``Hooks.call``): steps per 1,024
# characters (of the string and of the sized arguments) or items, measured as ``_FILTER_COSTS`` are.
# Any other method costs ``_UNKNOWN_METHOD_COST``. (A short string's unchecked method is not looked at:
# at most 255 characters, a few microseconds.)
_METHOD_COSTS: Final[dict[str, int]] = {
    **{name: 128 for name in ("split", "rsplit")},
    **{
        name: 64
        for name in (
            "swapcase", "title", "islower", "isupper", "istitle", "expandtabs", "strip", "lstrip", "rstrip",
            "capitalize", "splitlines", "isprintable", "format", "format_map", "isidentifier", "isalnum", "isalpha",
            "isdecimal", "isdigit", "isnumeric", "isspace", "zfill", "center", "ljust", "rjust",
        )
    },
    **{
        name: 8
        for name in (
            "count", "find", "rfind", "index", "rindex", "replace", "upper", "lower", "casefold", "translate",
            "encode", "decode", "partition", "rpartition", "join", "removeprefix", "removesuffix", "startswith",
            "endswith", "isascii", "maketrans", "hex", "fromhex",
            "get", "keys", "values", "items", "copy", "fromkeys",
            # (of sets, which no template can make: a caller's data is JSON, jinja2's globals make none)
            "isdisjoint", "issubset", "issuperset", "union", "intersection", "difference", "symmetric_difference",
            "intersection_update",
        )
    },
    "escape": 64,  # ``Markup.escape``
    "striptags": 4096, "unescape": 1024,  # ``Markup``'s (Python-level, as ``|striptags``)
}
_UNKNOWN_METHOD_COST: Final = 128
# list and tuple methods that compare an argument with each item (charged as ``in`` is, too)
_COMPARING_METHODS: Final = frozenset({"index", "count"})


def _charge_items(meter: Meter, args: Any, kwargs: Any, fuel: int, what: str) -> None:
    """``fuel`` (in 1/1,024 steps) per item of the sized arguments and per keyword argument."""
    units = len(kwargs)
    for arg in args:
        if isinstance(arg, (str, bytes, list, tuple, Mapping)):
            units += len(arg)
    if units * fuel >= _WORK_PER_STEP:
        meter.charge_call(units * fuel, 0, what)


def _charge_method(meter: Meter, method: Any, owner: Any, args: Any, kwargs: Any) -> None:
    """A builtin method of ``owner`` (a string or container, or a class for ``str.maketrans``): its
    cost (``_METHOD_COSTS``) per character or item of the owner and of the sized arguments; the size of
    what the two int methods that build from a size (``to_bytes``, ``from_bytes``) would make."""
    kind = type(owner)
    units = len(owner) if kind is str or kind is list or kind is dict or kind is tuple or isinstance(owner, (str, bytes, list, tuple, Mapping, set, frozenset)) else 0
    for arg in args:
        if isinstance(arg, (str, bytes, list, tuple, Mapping)):
            units += len(arg)
    name = method.__name__
    if isinstance(owner, int) or owner is int:
        if name == "to_bytes":
            length = _arg(args, kwargs, 0, "length", 1)
            if isinstance(length, int):
                meter.string_size(length, "int.to_bytes() result")
        elif name == "from_bytes":
            data = _arg(args, kwargs, 0, "bytes", b"")
            if isinstance(data, (str, bytes, list, tuple)):
                meter.int_bits(8 * len(data), "int.from_bytes() result")
    work = units * _METHOD_COSTS.get(name, _UNKNOWN_METHOD_COST)
    if work >= _WORK_PER_STEP:
        meter.charge_call(work, 0, f"{type(owner).__name__}.{name}()")
    if name in _COMPARING_METHODS and isinstance(owner, (list, tuple)) and len(owner) >= meter.big:
        meter.charge_work(meter.work(owner), f"{type(owner).__name__}.{name}() comparisons")


class MeteredFilter:
    """A filter, wrapped (``metered_filter``): the filter's own size check first, the clock, the result's size after."""

    def __init__(self, name: str, func: Any) -> None:
        self.func = func
        self.jinja_pass_arg: Any = getattr(func, "jinja_pass_arg", None)  # (what jinja2 reads to pass a context)
        self.chatjinja_metered = True
        self.name = name
        self.skip = 1 if self.jinja_pass_arg is not None else 0
        check = _FILTER_CHECKS.get(name)
        # the common check, inline below: a value that is not a string is sized before it becomes text
        self.text_check = check is _pre_text
        self.check: Any = None if self.text_check else check
        self.what = f"result of |{name}"
        self.timed = name not in _UNTIMED_FILTERS
        self.consumes = name in _CONSUMING_FILTERS
        self.listing = name in _LISTING_FILTERS
        self.cuts = name in _CUTTING_FILTERS
        self.pairs = name in _PAIRING_FILTERS
        self.keeps = name in _KEEPING_FILTERS
        costs = _FILTER_COSTS.get(name, _UNKNOWN_COST)
        self.char_fuel: int = costs[0]
        self.char_scratch: int = costs[1]
        self.item_fuel: int = costs[2]
        self.item_scratch: int = costs[3]
        # filters that turn a value that is not a string into text first: charged for the text
        self.by_text = costs[2] == 0 or name in _TEXT_COST_FILTERS
        self.call_what = f"|{name}"

    def __repr__(self) -> str:
        return f"<metered filter {self.name}>"

    def charge(self, meter: Meter, value: Any) -> None:
        """The filter's cost on ``value`` (``_FILTER_COSTS``), charged before it runs: per character of
        a string (or of the text of anything else, for the filters that turn it into text), per item
        of a container."""
        kind = type(value)
        chars: int = 0
        items: int = 0
        if kind is str:
            chars = len(value)
            if chars * self.char_fuel < _WORK_PER_STEP:  # (the common case: a short string)
                return
        elif kind in _SCALARS or kind is _Undefined:
            return
        else:
            # the text of a container (not of the caller's own: its text is the caller's data, as
            # ``Meter.text_of`` has it), for the filters that go through it
            if (self.by_text or kind is bytes) and id(value) >> 4 not in (meter.input_ids or meter.make_input_ids()):
                chars = int(min(text_size(value, meter.string_cap), meter.string_cap + 1))
            if kind in _PLAIN_SEQUENCES or isinstance(value, (Mapping, list, tuple, str, bytes)):
                items = len(value)
        work = chars * self.char_fuel + items * self.item_fuel
        if work >= _WORK_PER_STEP:
            meter.charge_call(work, chars * self.char_scratch + items * self.item_scratch, self.call_what)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        meter = _active_meter()
        if meter is None:
            return self.func(*args, **kwargs)
        return self.metered(meter, args, kwargs)

    def metered(self, meter: Meter, args: Any, kwargs: Any) -> Any:
        # (no fuel here: the filter site was charged with the code around it, see ``_fuel``)
        # a filter can take a while on big data: look at the clock (meter.check_time(), inline), except
        # for the ones that are O(1) or one C-speed pass over a string (clocked below when it is big)
        skip = self.skip
        if self.timed and _monotonic() > meter.deadline:
            meter.check_time()
        if self.keeps and len(args) >= meter.big:  # ``|map('f', *iterable)``: the generator keeps its arguments
            meter.add_built(_getsizeof(args) + _ARG_BYTES * len(args), "tuple of filter arguments")
        if self.check is not None:  # the filter's own size check (before the value is looked at below)
            self.check(meter, args[skip:], kwargs)
        if len(args) > skip:
            value = args[skip]
            self.charge(meter, value)
            kind = type(value)
            if kind is str:
                if len(value) >= meter.big:
                    if self.cuts:  # a list of the string's characters (each a new string, for most of them)
                        meter.add_pieces(value, len(value), f"|{self.name} of a string")
                    if not self.timed:
                        meter.check_time()
            elif self.consumes and (kind is _Generator or (self.listing and (kind is range or kind is _DictItems))):
                args = args[:skip] + (meter.materializing(value, f"|{self.name} of a {kind.__name__}"),) + args[skip + 1 :]
            elif self.keeps and kind is _Generator:  # a later filter of a chain (``|map(...)|select(...)``)
                args = args[:skip] + (meter.charged_items(value, self.item_fuel, self.call_what),) + args[skip + 1 :]
            elif self.text_check:
                meter.text_of(value, "filtered value")
        result = self.func(*args, **kwargs)
        kind = type(result)
        if kind is str:
            if len(result) >= meter.big:
                meter.big_string(result, self.what)
            return result
        if self.pairs and kind is list:
            # a new (key, value) pair or group per item, whatever the length
            meter.add_built(_getsizeof(result) + _PAIR_BYTES * len(result), self.what)
        if kind is list or kind is dict or kind is tuple:
            if len(result) < meter.big:
                return result
        elif kind in _UNSIZED_RESULTS:
            return result
        return meter.sized(result, self.what)


class MeteredTextFilter:
    """One of the ``_SCALED_TEXT_FILTERS`` (none takes a context): a short string passes unmetered."""

    def __init__(self, inner: MeteredFilter) -> None:
        self.inner = inner
        self.func = inner.func
        self.jinja_pass_arg: Any = None
        self.chatjinja_metered = True

    def __repr__(self) -> str:
        return repr(self.inner)

    def __call__(self, __value: Any, *args: Any, **kwargs: Any) -> Any:
        meter = _active_meter()
        if meter is None or (type(__value) is str and len(__value) * _TEXT_GROWTH < meter.big):
            return self.func(__value, *args, **kwargs)
        return self.inner.metered(meter, (__value, *args), kwargs)


class MeteredJoinFilter:
    """``|join`` (it takes the eval context): a list or tuple (the common case; ``MeteredFilter`` does
    the same for it) gets the clock, the size of the joined string before it is built, the result's size after."""

    def __init__(self, inner: MeteredFilter) -> None:
        self.inner = inner
        self.func = inner.func
        self.jinja_pass_arg: Any = inner.jinja_pass_arg
        self.chatjinja_metered = True

    def __repr__(self) -> str:
        return repr(self.inner)

    def __call__(self, __eval_ctx: Any, __value: Any, *args: Any, **kwargs: Any) -> Any:
        meter = _active_meter()
        if meter is None:
            return self.func(__eval_ctx, __value, *args, **kwargs)
        kind = type(__value)
        if not (kind is list or kind is tuple):
            return self.inner.metered(meter, (__eval_ctx, __value, *args), kwargs)
        if _monotonic() > meter.deadline:
            meter.check_time()
        if (args[1] if len(args) > 1 else kwargs.get("attribute")) is None:
            _check_join(meter, args[0] if args else kwargs.get("d", ""), __value)
        else:
            _charge_attribute(meter, __value, "|join(attribute=...)")
        if len(__value) >= meter.big:
            self.inner.charge(meter, __value)
        result = self.func(__eval_ctx, __value, *args, **kwargs)
        if len(result) >= meter.big:
            meter.big_string(result, self.inner.what)
        return result


def metered_filter(name: str, func: Any) -> Any:
    """``func``, the filter ``name``, wrapped to charge the meter (or as it is: nothing to meter)."""
    if getattr(func, "chatjinja_metered", False) or name in _UNMETERED_FILTERS:
        return func
    inner = MeteredFilter(name, func)
    # (the short forms name the value argument: they assume the signature jinja2 3.1 gives these filters)
    if name in _SCALED_TEXT_FILTERS and not inner.skip:
        return MeteredTextFilter(inner)
    if name == "join" and inner.skip == 1:
        return MeteredJoinFilter(inner)
    return inner
