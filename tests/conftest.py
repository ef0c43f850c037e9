"""The ``backend`` fixture: every behavioural test runs once per backend.

Without ``--no-c-extensions`` a compiled backend that fails to import is a test error, not a skip:
a wheel that silently lost its extensions must not pass.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

# The failures most tests provoke (a refused port, a 503, a cut) are about one attempt: the
# suite runs with retries off by default. The retry rules are tested with the library's own
# default (tests/test_retry.py, test_resume.py and test_readme.py remove this variable), and so
# are the modules marked default_retries (the clients' everyday paths: the default_retries
# fixture below), so the default code path is not the less tested one.
os.environ.setdefault("FASTSSE_MAX_RETRIES", "0")

import fastsse
import fastsse._backend


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--no-c-extensions",
        action="store_true",
        default=os.environ.get("FASTSSE_NO_EXTENSIONS", "").strip().lower()
        in ("1", "true", "yes", "on", "y"),
        help="run only the pure-Python backend (default when FASTSSE_NO_EXTENSIONS is set)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    return f"fastsse {fastsse.__version__}: BACKEND={fastsse.BACKEND}, GIL {'on' if gil else 'off'}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--no-c-extensions"):
        return
    keep = [item for item in items if "c_extension" not in item.keywords]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if "c_extension" in i.keywords])
        items[:] = keep


@pytest.fixture(
    scope="session",
    params=[pytest.param("cython", marks=pytest.mark.c_extension), "python"],
)
def backend(request: pytest.FixtureRequest) -> SimpleNamespace:
    """The namespace of one backend (``Decoder``, ``Event``, ``ChatAggregator``, ``ChatStream``)."""
    return fastsse.get_backend(request.param)


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    """The loopback OpenAI-compatible server on 127.0.0.1, one per test module."""
    from fastsse.testing.server import serve_in_thread

    with serve_in_thread(port=0) as srv:
        yield srv


@pytest.fixture
def stream_backend(backend: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Point every transport (create_stream, Client, AsyncClient, the iterators) and ``translator()``
    at one backend: each stream format (chat, responses, messages, relay, to-*) is built from
    ``fastsse._backend.current``, so replacing that one name switches all of them."""
    monkeypatch.setattr(fastsse._backend, "current", backend)
    return backend


@pytest.fixture(params=[pytest.param("compiled", marks=pytest.mark.c_extension), "pycurl"])
def driver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The engine's driver for this test (``FASTSSE_DRIVER``): the engine tests run on both. A
    compiled driver that is built but does not load is an error, as a broken backend is; where it
    is not built (not Linux, the pure build) its runs skip, saying so."""
    from fastsse.client import engine

    if request.param == "compiled":
        module = engine.compiled_driver()
        if isinstance(module, str):
            not_linux = module.startswith("not built here") and not sys.platform.startswith("linux")
            if not_linux or module.startswith("pycurl is not installed"):
                pytest.skip(f"the compiled driver: {module}")
            raise RuntimeError(f"the compiled driver does not load: {module}")
    monkeypatch.setenv("FASTSSE_DRIVER", request.param)
    return str(request.param)


@pytest.fixture
def library_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """The library's own default ``max_retries`` (2), not the suite's (0)."""
    monkeypatch.delenv("FASTSSE_MAX_RETRIES", raising=False)


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """Ctrl-C as a terminal delivers it, however the suite was started. ``nohup pytest &`` starts it
    with SIGINT ignored, and an ignored signal stays ignored in every child it spawns: a Ctrl-C
    test would then wait for an interrupt that never comes. Python's own handler here for the
    test's length: this process raises KeyboardInterrupt, and a child starts with the default."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(autouse=True)
def default_retries(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test marked ``default_retries``: no ``$FASTSSE_MAX_RETRIES``, so every client it makes
    has the library's default ``max_retries`` (the variable is read when a client is made)."""
    if request.node.get_closest_marker("default_retries") is not None:
        monkeypatch.delenv("FASTSSE_MAX_RETRIES", raising=False)
