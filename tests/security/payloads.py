"""The attack payload files and their machine-readable headers.

Each ``payloads/*.jinja`` starts with ``{# attack: <what it tries>; expect: <outcome>[; key: value]... #}``:

* ``expect: inert`` renders text, identical to transformers (unless ``reference: skip``);
* ``expect: <ExceptionClass>`` (``SecurityError``, ``TypeError``, ...) raises that class, as transformers does;
* ``expect: BudgetExceeded:<budget>[|<budget>]`` raises ``chatjinja.BudgetExceeded`` for that budget (or either
  of two, when which comes first depends on machine speed); never run in transformers;
* ``mode: strict`` renders with ``strict=True``; ``input: <name>`` uses a conversation from ``hostile_inputs``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PAYLOAD_DIR = Path(__file__).parent / "payloads"
_HEADER = re.compile(r"\A\{# (?P<body>.*?) #\}\n", re.DOTALL)


@dataclass(frozen=True)
class Payload:
    name: str
    source: str
    attack: str
    expect: str
    mode: str = "default"
    input: str | None = None
    reference: str = "run"

    @property
    def budgets(self) -> tuple[str, ...]:
        """The budgets that may stop this payload (``BudgetExceeded:max_steps|timeout``: whichever comes first)."""
        return tuple(self.expect.split(":", 1)[1].split("|")) if self.expect.startswith("BudgetExceeded:") else ()

    @property
    def budget(self) -> str | None:
        return self.budgets[0] if self.budgets else None

    @property
    def is_dos(self) -> bool:
        return self.budget is not None


def parse_header(name: str, source: str) -> Payload:
    match = _HEADER.match(source)
    if match is None:
        raise ValueError(f"{name}: no '{{# attack: ...; expect: ... #}}' header")
    fields = {}
    for part in match.group("body").split("; "):
        key, _, value = part.partition(": ")
        fields[key.strip()] = value.strip()
    if "attack" not in fields or "expect" not in fields:
        raise ValueError(f"{name}: header needs attack and expect")
    return Payload(name=name, source=source, **fields)


def load_payloads() -> list[Payload]:
    return [parse_header(path.stem, path.read_text(encoding="utf-8")) for path in sorted(PAYLOAD_DIR.glob("*.jinja"))]
