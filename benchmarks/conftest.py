"""Fixtures for the benchmark suite; it needs nothing from ``tests/``.

The corpora are built once per session from a fixed seed (``fastsse.bench``). With
``--benchmark-disable`` the suite is a plain test run: every contender runs once on corpora at
``QUICK_SCALE`` of their size and its output is checked, so the benchmarks cannot rot. With
benchmarks enabled the corpora are full size. ``FASTSSE_BENCH_SCALE`` overrides either.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

import pytest

import fastsse
from fastsse import bench as _contenders
from fastsse import bench as _corpora

QUICK_SCALE = 0.05
_LOAD_AT_START = pytest.StashKey[tuple[float, float, float]]()
PEERS = {"openai": "openai", "httpx-sse": "httpx-sse", "sseclient-py": "sseclient-py", "orjson": "orjson"}


def _disabled(config: pytest.Config) -> bool:
    return bool(config.getoption("benchmark_disable")) and not config.getoption("benchmark_enable")


def _scale(config: pytest.Config) -> float:
    env = os.environ.get("FASTSSE_BENCH_SCALE")
    if env:
        return float(env)
    return QUICK_SCALE if _disabled(config) else 1.0


def pytest_report_header(config: pytest.Config) -> list[str]:
    versions = ", ".join(f"{dist} {_contenders.version(dist)}" for dist in PEERS.values())
    mode = "plain tests (benchmarks disabled)" if _disabled(config) else "benchmarks"
    return [
        f"fastsse {fastsse.__version__} (BACKEND={fastsse.BACKEND}); peers: {versions}",
        f"{mode}; corpus scale {_scale(config)}; load average {os.getloadavg()[0]:.2f}",
    ]


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_LOAD_AT_START] = os.getloadavg()


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    machine_info["fastsse"] = {"version": fastsse.__version__, "backend": fastsse.BACKEND}
    machine_info["peers"] = {dist: _contenders.version(dist) for dist in PEERS.values()}
    # The 1-minute load average before the run and when the JSON is written (after it): on a
    # 2-core machine a value near 1 is the benchmark alone; above that, something else ran.
    machine_info["loadavg_start"] = config.stash.get(_LOAD_AT_START, None)
    machine_info["loadavg_end"] = os.getloadavg()
    machine_info["cpu_count"] = os.cpu_count()
    machine_info["corpus_scale"] = _scale(config)
    machine_info["python_build"] = f"{platform.python_implementation()} {sys.version}"


class Corpora:
    """Builds each corpus on first use and keeps it (and its chunkings) for the session."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self._built: dict[str, _corpora.Corpus] = {}

    def __getitem__(self, name: str) -> _corpora.Corpus:
        if name not in self._built:
            self._built[name] = _corpora.build(name, self.scale)
        return self._built[name]


@pytest.fixture(scope="session")
def corpora(pytestconfig: pytest.Config) -> Corpora:
    return Corpora(_scale(pytestconfig))


@pytest.fixture(scope="session")
def quick(pytestconfig: pytest.Config) -> bool:
    """True when the suite runs as plain tests (``--benchmark-disable``)."""
    return _disabled(pytestconfig)
