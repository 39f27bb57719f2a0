"""Fast attribute and item access for jinja2's sandbox: the same safety decisions, made once per (type, name).

jinja2's ``SandboxedEnvironment.getattr`` asks ``is_safe_attribute`` (``is_internal_attribute``
plus, in the immutable sandbox, ``modifies_known_mutable`` with its four ABC ``isinstance``
checks) on every attribute access of every render. For the types a chat template touches the
answer depends only on the exact type of the object and the attribute name, so
:class:`FastAttributeMixin` asks the environment's own ``is_safe_attribute`` the first time it
sees a (type, name) pair and remembers the answer. Everything else is jinja2's code path, step
for step: the ``getattr`` / item fallbacks, ``wrap_str_format`` for ``str.format``, and
``unsafe_undefined`` / ``undefined`` results. ``tests/runtime/test_sandbox_equivalence.py``
checks the remembered answers against ``ImmutableSandboxedEnvironment`` for every pair the corpus
renders touch and every attribute of those types.
"""

from __future__ import annotations

import types
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

import jinja2.runtime
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

__all__ = ["FastAttributeMixin", "FAST_TYPES", "MUTATING_METHODS", "mutable_containers", "mutation_allowed"]

# Exact types whose safety decisions are cached. For each of them jinja2's decision is a function
# of (type, name) only: no ``__class__`` tricks, no per-instance ``unsafe_callable``. Subclasses
# are not in here (``type(obj) is``), so a caller's str subclass still takes jinja2's slow path.
FAST_TYPES: frozenset[type] = frozenset(
    {
        dict,
        list,
        tuple,
        str,
        int,
        float,
        bool,
        type(None),
        jinja2.runtime.LoopContext,
        jinja2.utils.Namespace,
    }
)

# ``getattr(instance, name)`` for these types finds exactly the names their classes define (they
# have no instance ``__dict__``), so a name outside this set raises AttributeError without trying.
_CLASS_ONLY_TYPES = (dict, list, tuple, str, int, float, bool, type(None))
_CLASS_ATTRIBUTES: dict[type, frozenset[str]] = {
    tp: frozenset(name for klass in tp.__mro__ for name in vars(klass)) for tp in _CLASS_ONLY_TYPES
}

# Namespace.__getattribute__ answers these two itself; every other name comes from its attribute dict
_NAMESPACE_OWN = frozenset({"_Namespace__attrs", "__class__"})

# ``wrap_str_format`` can only return a wrapper for a bound method (these two types cannot be
# subclassed, so ``type(v) in`` is the same test as jinja2's ``isinstance``).
_METHOD_TYPES = (types.MethodType, types.BuiltinMethodType)

# Callables whose type has no ``__dict__`` and no ``unsafe_callable``/``alters_data`` attribute:
# ``is_safe_callable`` is always True for them (bound methods of str, dict, list, ...).
_ALWAYS_SAFE_CALLABLE_TYPES = frozenset({types.BuiltinFunctionType, types.MethodWrapperType})

# Attribute names can come from data (``"{0.name}".format(x)`` with a format string from a message),
# so the decision table is bounded; past this size new pairs are decided but not remembered.
_MAX_DECISIONS = 4096


class FastAttributeMixin:
    """Put first in the bases of a ``SandboxedEnvironment`` subclass: ``getattr``, ``getitem`` and
    ``is_safe_callable`` answer from a per-environment table of decisions.

    The table is filled by the environment's own ``is_safe_attribute``, so an override of it is
    respected; it is only used when that override is a function of (exact type, name), which is
    declared by ``static_attribute_decisions`` (default: True exactly when ``is_safe_attribute`` is
    jinja2's ``ImmutableSandboxedEnvironment``/``SandboxedEnvironment`` one).
    """

    static_attribute_decisions: bool | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        static = self.static_attribute_decisions
        if static is None:
            static = type(self).is_safe_attribute in (  # type: ignore[attr-defined]
                ImmutableSandboxedEnvironment.is_safe_attribute,
                SandboxedEnvironment.is_safe_attribute,
            )
        self._static_decisions = bool(static)
        self._fast_types: set[type] = set(FAST_TYPES) if static else set()
        # types whose attribute lookup is exactly Namespace.__getattribute__ (a dict lookup, done inline)
        self._namespace_types: set[type] = {jinja2.utils.Namespace} if static else set()
        self._attribute_safety: dict[tuple[type, str], bool] = {}
        self._default_wrap_str_format = type(self).wrap_str_format is SandboxedEnvironment.wrap_str_format  # type: ignore[attr-defined]

    def _decides_by_type(self, tp: type) -> bool:
        """Whether jinja2's decision for instances of ``tp`` is a function of (tp, name) (checked once per type)."""
        if tp in self._fast_types:
            return True
        # the namespace global is a Namespace subclass; it stays static while it keeps Namespace's
        # attribute lookup (and so cannot lie about ``__class__`` to the ``isinstance`` checks)
        if (
            self._static_decisions
            and isinstance(tp, type)
            and issubclass(tp, jinja2.utils.Namespace)
            and type(tp) is type
            and tp.__getattribute__ is jinja2.utils.Namespace.__getattribute__
            and len(self._fast_types) < len(FAST_TYPES) + 16
        ):
            self._fast_types.add(tp)
            self._namespace_types.add(tp)
            return True
        return False

    def _remember(self, tp: type, attribute: str, safe: bool) -> None:
        if type(attribute) is str and len(self._attribute_safety) < _MAX_DECISIONS:
            self._attribute_safety[(tp, attribute)] = safe

    def _checked_value(self, obj: Any, attribute: str, value: Any) -> Any:
        """jinja2's ``else`` branch of ``getattr``/``getitem``: format wrapper, then the safety decision."""
        tp = type(obj)
        if type(value) in _METHOD_TYPES or not self._default_wrap_str_format:
            fmt = self.wrap_str_format(value)  # type: ignore[attr-defined]
            if fmt is not None:
                return fmt
        safe = self._attribute_safety.get((tp, attribute)) if type(attribute) is str else None
        if safe is None:
            safe = bool(self.is_safe_attribute(obj, attribute, value))  # type: ignore[attr-defined]
            if self._decides_by_type(tp):
                self._remember(tp, attribute, safe)
        if safe:
            return value
        return self.unsafe_undefined(obj, attribute)  # type: ignore[attr-defined]

    def getattr(self, obj: Any, attribute: str) -> Any:
        """jinja2's ``SandboxedEnvironment.getattr``: the attribute if it exists and is safe, else the item."""
        tp = type(obj)
        names = _CLASS_ATTRIBUTES.get(tp)
        if names is not None:
            if type(attribute) is str and attribute not in names:
                # getattr(obj, attribute) would raise AttributeError: go straight to jinja2's fallback
                try:
                    return obj[attribute]
                except (TypeError, LookupError):
                    return self.undefined(obj=obj, name=attribute)  # type: ignore[attr-defined]
        elif tp in self._namespace_types and type(attribute) is str and attribute not in _NAMESPACE_OWN:
            # what Namespace.__getattribute__ would return, without its two Python-level calls
            attrs = object.__getattribute__(obj, "_Namespace__attrs")
            if attribute in attrs:
                return self._checked_value(obj, attribute, attrs[attribute])
        try:
            value = getattr(obj, attribute)
        except AttributeError:
            try:
                return obj[attribute]
            except (TypeError, LookupError):
                pass
        else:
            return self._checked_value(obj, attribute, value)
        return self.undefined(obj=obj, name=attribute)  # type: ignore[attr-defined]

    def getitem(self, obj: Any, argument: Any) -> Any:
        """jinja2's ``SandboxedEnvironment.getitem``: the item if there is one, else a safe attribute."""
        try:
            return obj[argument]
        except (TypeError, LookupError):
            if isinstance(argument, str):
                try:
                    attr = str(argument)
                except Exception:
                    pass
                else:
                    names = _CLASS_ATTRIBUTES.get(type(obj))
                    if names is None or attr in names:
                        try:
                            value = getattr(obj, attr)
                        except AttributeError:
                            pass
                        else:
                            # jinja2 checks safety under the original ``argument``
                            return self._checked_value(obj, argument, value)
        return self.undefined(obj=obj, name=argument)  # type: ignore[attr-defined]

    def is_safe_callable(self, obj: Any) -> bool:
        """jinja2's answer (no ``unsafe_callable``/``alters_data`` flag), without the lookups for builtin methods."""
        if type(obj) in _ALWAYS_SAFE_CALLABLE_TYPES:
            return True
        return super().is_safe_callable(obj)  # type: ignore[misc]


# Renders that only learn a reply format (``chatjinja.observation``) may let a template call a list's or a
# dict's own mutating methods, as llama.cpp's template engine does (Kimi K2 appends its call ids to a
# namespace list, which transformers' immutable sandbox refuses). Off by default, on only inside
# :func:`mutable_containers`: never for a render whose text a caller gets.
MUTATING_METHODS: dict[type, frozenset[str]] = {
    list: frozenset({"append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort"}),
    dict: frozenset({"update", "setdefault", "pop", "popitem", "clear"}),
}
_mutable: ContextVar[bool] = ContextVar("chatjinja_mutable_containers", default=False)


@contextmanager
def mutable_containers() -> Iterator[None]:
    """Within: a template may call a list's or dict's own mutating methods (``append``, ``pop``, ``update``...)."""
    token = _mutable.set(True)
    try:
        yield
    finally:
        _mutable.reset(token)


def mutation_allowed(obj: Any, attribute: Any) -> bool:
    """Whether the render running here may call ``obj.attribute`` though the immutable sandbox blocks it."""
    return _mutable.get() and attribute in MUTATING_METHODS.get(type(obj), ())
