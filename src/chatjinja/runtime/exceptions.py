"""``BudgetExceeded``, in a module of its own: the render hooks (``_hooks.py``) raise it and
``budget.py`` imports them, so it cannot live in either. Its public home is ``chatjinja.runtime.budget``
(and ``chatjinja.BudgetExceeded``)."""

from __future__ import annotations

from typing import Any

import jinja2.exceptions


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


BudgetExceeded.__module__ = "chatjinja.runtime.budget"  # where it is documented and pickled from
