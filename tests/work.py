"""Work measured deterministically: the Python lines a call executes (never its time)."""

from __future__ import annotations

import sys
from typing import Any, Callable

__all__ = ["executed_lines"]


def executed_lines(call: Callable[[], Any], expected: tuple[type[BaseException], ...] = ()) -> int:
    """Python lines executed by ``call()`` (loops in comprehensions too); an ``expected`` exception ends it quietly."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        count += event == "line"
        return trace

    sys.settrace(trace)
    try:
        call()
    except expected:
        pass
    finally:
        sys.settrace(None)
    return count
