"""The Hugging Face chat-template environment, reproduced from transformers 5.24.0, without compile-time folding.

transformers builds it in ``transformers/utils/chat_template_utils.py``
(``_cached_compile_jinja_template``). Everything a template can see here is the same: an
``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`` with
``jinja2.ext.loopcontrols`` and a ``{% generation %}`` tag, the ``tojson`` override and the
``raise_exception``, ``strftime_now``, ``dict`` and ``namespace`` globals.

The one deliberate difference: compiling a template never runs template code. jinja2 folds
constant expressions while compiling (its optimizer, and ``Output`` children it can evaluate), so
``{% if false %}{{ 7 ** 30000000 }}{% endif %}`` hangs ``from_string`` in transformers. Here the
optimizer is off and only literal text and literal constants are folded; everything else is
evaluated when (and if) the render reaches it, which gives the same output.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, Iterator

import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.nodes
import jinja2.runtime
import jinja2.utils
from jinja2.compiler import CodeGenerator
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .sandbox import FastAttributeMixin

__all__ = ["ChatTemplateEnvironment", "compile_template", "generation_tracking", "clear_compile_cache"]


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


def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False) -> str:
    # transformers overrides jinja2's tojson, which HTML-escapes and returns Markup
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


class TemplateDict:
    """The ``dict`` global: callable and ``fromkeys`` only, so templates cannot reach ``dict``'s type."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


class TemplateNamespace(jinja2.utils.Namespace):
    """The ``namespace`` global: jinja2's Namespace that refuses underscore-prefixed names."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 - jinja2's signature trick
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                "Please rename the attribute."
            )


class NoFoldCodeGenerator(CodeGenerator):
    """jinja2's code generator, except that only literal text and literal constants are folded."""

    def _output_child_to_const(self, node: jinja2.nodes.Expr, frame: Any, finalize: Any) -> str:
        if not isinstance(node, (jinja2.nodes.TemplateData, jinja2.nodes.Const)):
            raise jinja2.nodes.Impossible()
        return super()._output_child_to_const(node, frame, finalize)


class ChatTemplateEnvironment(FastAttributeMixin, ImmutableSandboxedEnvironment):
    """transformers' chat-template environment (see the module docstring) with folding off."""

    code_generator_class = NoFoldCodeGenerator

    def __init__(self, **options: Any) -> None:
        options.setdefault("trim_blocks", True)
        options.setdefault("lstrip_blocks", True)
        options.setdefault("extensions", [AssistantTracker, jinja2.ext.loopcontrols])
        options.setdefault("optimized", False)
        super().__init__(**options)
        self.filters["tojson"] = tojson
        self.globals["raise_exception"] = raise_exception
        self.globals["strftime_now"] = strftime_now
        self.globals["dict"] = TemplateDict()
        self.globals["namespace"] = TemplateNamespace


_environment: ChatTemplateEnvironment | None = None
_environment_lock = threading.Lock()


def default_environment() -> ChatTemplateEnvironment:
    """The process-wide environment (built on first use)."""
    global _environment
    if _environment is None:
        with _environment_lock:
            if _environment is None:
                _environment = ChatTemplateEnvironment()
    return _environment


_CACHE_SIZE = 256
_compiled: "OrderedDict[str, jinja2.Template]" = OrderedDict()
_compiled_lock = threading.Lock()


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def compile_template(source: str) -> jinja2.Template:
    """Compile a chat template in the default environment, cached by the hash of its source."""
    key = source_hash(source)
    with _compiled_lock:
        template = _compiled.get(key)
        if template is not None:
            _compiled.move_to_end(key)
            return template
    template = default_environment().from_string(source)
    with _compiled_lock:
        _compiled[key] = template
        while len(_compiled) > _CACHE_SIZE:
            _compiled.popitem(last=False)
    return template


def clear_compile_cache() -> None:
    with _compiled_lock:
        _compiled.clear()


@contextmanager
def generation_tracking(template: jinja2.Template, rendered_blocks: list[str], spans: list[tuple[int, int]]) -> Iterator[None]:
    """Record the character spans of ``{% generation %}`` bodies while rendering ``template``."""
    with template.environment.activate_tracker(rendered_blocks, spans):  # type: ignore[attr-defined]
        yield
