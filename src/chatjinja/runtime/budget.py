"""Resource budgets for rendering untrusted templates: the limits, the render guard, and the checks of
the input and the source.

A render runs inside :func:`guarded_render`, which puts a :class:`Meter` in a context variable; the
environment's sandbox hooks (binary operators, calls, filters, loops, output concatenation) charge
it and raise :class:`BudgetExceeded` the moment a limit would be crossed, *before* the expensive
operation runs. The meter and the hooks are in ``_hooks.py`` (compiled when the package is built;
``_implementation.py`` says which build runs), re-exported here. Nothing kills a process: the caller gets a clean exception. A render that stays
within every budget produces exactly the text it would produce without budgets.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import itertools
import math
import sys
import time

_monotonic = time.monotonic
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Iterator

import jinja2
import jinja2.exceptions
import jinja2.runtime
import jinja2.utils

from ..limits import BLOCK_OPENERS, MAX_SOURCE_CHARS, MAX_SOURCE_NESTING
from ._implementation import hooks as _impl
from .exceptions import BudgetExceeded

# the per-render meter and what the hooks share with this module: compiled or pure Python (``_implementation``)
Meter = _impl.Meter
_meter = _impl._meter
_strict = _impl._strict
text_size = _impl.text_size
check_percent_format = _impl.check_percent_format
check_brace_format = _impl.check_brace_format
#: fuel charged when a body or loop starts looks at the clock each time the steps pass a multiple of this
CLOCK_STEPS = _impl.CLOCK_STEPS
#: a built string or sequence at least this long counts towards ``max_built_bytes``
BIG_VALUE = _impl.BIG_VALUE
#: what a limit that is off is in a meter (an int no count reaches)
NO_LIMIT = _impl.NO_LIMIT

__all__ = [
    "BudgetExceeded",
    "Budgets",
    "DEFAULT_BUDGETS",
    "Meter",
    "active_meter",
    "Spending",
    "check_input_depth",
    "is_plain_checked",
    "check_source",
    "guarded_render",
    "strict_mode",
    "resolve_budgets",
    "source_nesting",
    "tree_depth",
]


@dataclass(frozen=True)
class Budgets:
    """Limits for one render. ``None`` turns a single budget off; ``Budgets.off()`` turns all off. Any
    other limit is a finite number >= 0 (``check_limit``: else a ``ValueError`` naming it).

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
    max_source_chars: int | None = MAX_SOURCE_CHARS
    #: nested brackets + blocks in the source (jinja2's parser recurses); the parsed tree may be 4x deeper
    max_source_nesting: int | None = MAX_SOURCE_NESTING

    def __post_init__(self) -> None:
        # every way of making budgets (``Budgets(...)``, ``replace``, a dict, the CLI) comes through here
        for name in self.names():
            check_limit(name, getattr(self, name))

    @classmethod
    def off(cls) -> "Budgets":
        """Every budget off: jinja2's sandbox alone, as in transformers."""
        return cls(**{f.name: None for f in dataclasses.fields(cls)})

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def replace(self, **changes: Any) -> "Budgets":
        return dataclasses.replace(self, **changes)

    def __reduce__(self) -> Any:  # the limits only, not the cached properties (``meter_limits``)
        return (Budgets, tuple(getattr(self, name) for name in self.names()))

    @functools.cached_property
    def is_off(self) -> bool:
        return all(getattr(self, name) is None for name in self.names())

    @functools.cached_property
    def meter_limits(self) -> tuple:
        """What a :class:`Meter` for these budgets starts from, made once per ``Budgets``: the limits
        the hooks read, as ints (``NO_LIMIT`` when off; a limit given as a float bounds whole counts,
        so its floor; in the order ``Meter.__init__`` unpacks them), where a new meter's fuel ``room``
        ends (the first multiple of ``CLOCK_STEPS``, or the step budget), and the timeout."""
        def cap(limit: Any) -> int:
            return NO_LIMIT if limit is None or limit >= NO_LIMIT else math.floor(limit)

        string_cap, items_cap = cap(self.max_string_chars), cap(self.max_sequence_items)
        step_cap = cap(self.max_steps)
        return (
            self.max_string_chars, self.max_sequence_items, cap(self.max_output_chars), string_cap, items_cap,
            cap(self.max_built_bytes), min(BIG_VALUE, string_cap + 1, items_cap + 1),
            cap(self.max_loop_iterations), step_cap, cap(self.max_recursion_depth), min(CLOCK_STEPS, step_cap + 1),
            self.timeout,
        )


def check_limit(name: str, value: Any) -> None:
    """A limit is ``None`` (off) or a finite number >= 0 (not a bool): else one ``ValueError`` line naming it."""
    if value is None:
        return
    if type(value) is bool or not isinstance(value, (int, float)) or not (0 <= value < _INF):
        raise ValueError(f"budget {name!r} must be a finite number >= 0 or None (off), got {value!r}")


_INF = float("inf")
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


class Spending:
    """What several renders spent together: the fuel (``steps``) and the output characters of every
    guarded render run while it is entered (``with spending:``), added up when each render ends, ended
    by an error or not. A caller that makes many renders for one answer (``add_generation_tags``)
    gives them one budget with it."""

    __slots__ = ("steps", "output", "_token")

    def __init__(self) -> None:
        self.steps = 0
        self.output = 0

    def __enter__(self) -> "Spending":
        self._token = _spending.set(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _spending.reset(self._token)


_spending: ContextVar[Spending | None] = ContextVar("chatjinja_spending", default=None)


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
        self.meter = None if budgets is None else Meter(budgets, strict, inputs, extra)

    def __enter__(self) -> Meter | None:
        self._token = _meter.set(self.meter)
        self._strict_token = _strict.set(self.strict) if (self.strict or _strict.get()) else None
        return self.meter

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        _meter.reset(self._token)
        meter = self.meter
        if meter is not None:
            spending = _spending.get()
            if spending is not None:
                spending.steps += meter.steps
                spending.output += meter.output
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


_ATOMS = _impl._ATOMS  # (the JSON atoms: str, int, float, bool, None)


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
_SHARED = _impl.SHARED


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

_BLOCK_OPENERS = BLOCK_OPENERS


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


