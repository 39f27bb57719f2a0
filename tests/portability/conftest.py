"""The engines the portability tests run: each installed on first use, skipped with the reason it cannot run.

``CHATJINJA_REQUIRE_ENGINES=minijinja,hfjs,llamacpp`` (set by ``.ci/run``) makes an engine that cannot
run a failure instead: CI installs and builds all three.
"""

from __future__ import annotations

import os

import pytest

from chatjinja.portability import ENGINE_NAMES, EngineUnavailable, engine


def engine_or_skip(name: str):
    try:
        return engine(name)
    except EngineUnavailable as missing:
        if name in os.environ.get("CHATJINJA_REQUIRE_ENGINES", "").split(","):
            pytest.fail(f"{name} unavailable but required by CHATJINJA_REQUIRE_ENGINES: {missing.reason}")
        pytest.skip(f"{name} unavailable: {missing.reason}")


@pytest.fixture(scope="session", params=ENGINE_NAMES)
def any_engine(request):
    return engine_or_skip(request.param)
