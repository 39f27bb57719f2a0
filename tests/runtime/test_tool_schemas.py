"""Callables as tools: chatjinja's ``get_json_schema`` gives what transformers' gives, schema or exception.

Differential: transformers' own ``get_json_schema`` runs at test time on the same callables, so a release
that changes how it reads a callable (as 5.25 did for a bound method whose receiver is annotated) fails here.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from chatjinja.runtime.tools import get_json_schema
from tests.reference import hf_outcome, our_outcome, outcome

pytestmark = pytest.mark.reference


class Forecast:
    """A class whose methods are tools, receivers annotated or not."""

    def plain(self, city: str, days: int = 1) -> str:
        """Forecast for a city.

        Args:
            city: The city.
            days: How many days ahead.
        """
        return city

    def annotated(self: Forecast, city: str) -> str:
        """Forecast for a city, the receiver annotated.

        Args:
            city: The city.
        """
        return city

    def annotated_choices(self: Forecast, unit: str = "celsius") -> str:
        """Units of the forecast.

        Args:
            unit: Celsius or fahrenheit (choices: ["celsius", "fahrenheit"])
        """
        return unit

    @classmethod
    def from_cls(cls, city: str) -> str:
        """Forecast by class.

        Args:
            city: The city.
        """
        return city

    @classmethod
    def from_annotated_cls(cls: type[Forecast], city: str, hours: list[int] | None = None) -> str:
        """Forecast by class, the receiver annotated.

        Args:
            city: The city.
            hours: Hours of the day.
        """
        return city

    @staticmethod
    def static(city: str) -> str:
        """Forecast without a receiver.

        Args:
            city: The city.
        """
        return city

    @staticmethod
    def static_self(self: int) -> int:
        """A static method whose first argument is named self and annotated.

        Args:
            self: A number.
        """
        return self

    def undocumented_receiver_only(self: Forecast) -> str:
        """No arguments but the annotated receiver."""
        return ""


FORECAST = Forecast()

# name -> the callable passed as a tool
CALLABLES: dict[str, Callable] = {
    "bound-plain": FORECAST.plain,
    "bound-annotated-receiver": FORECAST.annotated,
    "bound-annotated-receiver-choices": FORECAST.annotated_choices,
    "bound-receiver-only": FORECAST.undocumented_receiver_only,
    "classmethod": Forecast.from_cls,
    "classmethod-annotated-receiver": Forecast.from_annotated_cls,
    "classmethod-via-instance": FORECAST.from_annotated_cls,
    "staticmethod": Forecast.static,
    "staticmethod-named-self": Forecast.static_self,
    # through the class: a plain function whose first parameter is the receiver
    "unbound-plain": Forecast.plain,
    "unbound-annotated-receiver": Forecast.annotated,
}


def _hf_get_json_schema(func: Callable) -> Any:
    from transformers.utils.chat_template_utils import get_json_schema as hf_get_json_schema

    return hf_get_json_schema(func)


def _said(result: tuple, what: str = "a schema") -> str:
    return what if result[0] == "text" else f"{result[1]}: {result[2]}"


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_schema_equals_transformers(name: str) -> None:
    func = CALLABLES[name]
    ours, theirs = outcome(lambda: get_json_schema(func)), outcome(lambda: _hf_get_json_schema(func))
    assert ours == theirs, f"chatjinja gives {_said(ours)}, transformers {_said(theirs)}"


@pytest.mark.parametrize("name", ["bound-annotated-receiver", "classmethod-annotated-receiver"])
def test_rendered_tools_equal_transformers(name: str) -> None:
    """A bound method passed in ``tools=`` renders the text (or raises the error) transformers does."""
    template = "{{ tools | tojson }}"
    messages = [{"role": "user", "content": "hi"}]
    tools = [CALLABLES[name]]
    ours, theirs = our_outcome(template, messages, tools=tools), hf_outcome(template, messages, tools=tools)
    assert ours == theirs, f"chatjinja renders {_said(ours, 'text')}, transformers {_said(theirs, 'text')}"
