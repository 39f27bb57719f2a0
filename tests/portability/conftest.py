"""The engines the portability tests run: each installed on first use, skipped with the reason it cannot run."""

from __future__ import annotations

import pytest

from chatjinja.portability import ENGINE_NAMES, EngineUnavailable, engine


def engine_or_skip(name: str):
    try:
        return engine(name)
    except EngineUnavailable as missing:
        pytest.skip(f"{name} unavailable: {missing.reason}")


@pytest.fixture(scope="session", params=ENGINE_NAMES)
def any_engine(request):
    return engine_or_skip(request.param)
