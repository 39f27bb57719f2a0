"""The globals and the ``{% generation %}`` extension transformers gives chat templates (``raise_exception``,
``strftime_now``, ``dict``, ``namespace``), as transformers 5.25.0 defines them; ``tojson`` is in
``environment.py``. A module of their own: the render hooks (``_hooks.py``) recognise them, and
``environment.py`` imports the hooks.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, Iterator

import jinja2
import jinja2.exceptions
import jinja2.nodes
import jinja2.parser
import jinja2.runtime
import jinja2.utils
from jinja2.ext import Extension


class AssistantTracker(Extension):
    """``{% generation %}...{% endgeneration %}``: renders its body and, while tracking, records its span."""

    tags = {"generation"}

    def __init__(self, environment: jinja2.Environment):
        super().__init__(environment)
        self._tracking: ContextVar[tuple[list[str], list[tuple[int, int]]] | None] = ContextVar(
            "chatjinja_assistant_tracker", default=None
        )
        environment.extend(activate_tracker=self.activate_tracker)

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.CallBlock:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context: jinja2.nodes.EvalContext, caller: jinja2.runtime.Macro) -> str:
        rv = caller()
        tracking = self._tracking.get()
        if tracking is not None:
            rendered_blocks, generation_indices = tracking
            start_index = len("".join(rendered_blocks))
            generation_indices.append((start_index, start_index + len(rv)))
        return rv

    def is_active(self) -> bool:
        return self._tracking.get() is not None

    @contextmanager
    def activate_tracker(self, rendered_blocks: list[str], generation_indices: list[tuple[int, int]]) -> Iterator[None]:
        if self.is_active():
            raise ValueError("AssistantTracker should not be reused before closed")
        token = self._tracking.set((rendered_blocks, generation_indices))
        try:
            yield
        finally:
            self._tracking.reset(token)


def raise_exception(message: Any) -> None:
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


# transformers defines these three inside the function that compiles a template, and Python names a
# function by its qualified name when a call has the wrong arguments: the same name here gives the
# same message (``_cached_compile_jinja_template.<locals>.raise_exception() missing 1 required
# positional argument: 'message'``). Only the message changes: tracebacks name the code, not this.
for _function in (raise_exception, strftime_now):
    _function.__qualname__ = f"_cached_compile_jinja_template.<locals>.{_function.__name__}"
del _function


class TemplateDict:
    """The ``dict`` global: callable and ``fromkeys`` only, so templates cannot reach ``dict``'s type."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


def _namespace_attrs(namespace: jinja2.utils.Namespace) -> dict:
    return object.__getattribute__(namespace, "_Namespace__attrs")


class TemplateNamespace(jinja2.utils.Namespace):
    """The ``namespace`` global: jinja2's Namespace that refuses underscore-prefixed names."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 - jinja2's signature trick
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        if type(name) is not str or name[:1] == "_":
            TemplateNamespace._check_name(name)
        # jinja2's Namespace.__setitem__, without its own __getattribute__ round trip
        _namespace_attrs(self)[name] = value

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                "Please rename the attribute."
            )


#: the function a ``{% generation %}`` block calls (the hooks do not meter it)
GENERATION_SUPPORT = AssistantTracker._generation_support
