"""End to end through the example gateway (``examples/gateway.py``): the latency it adds per chunk.

The scripted server (``fastsse.testing.scripted``, its own process) stamps every chunk with its
send time (``fastsse_sent_ns``, ``time.monotonic_ns()``, a clock all processes on the machine
share); the relay forwards the stamp untouched, as it forwards every field. A fastsse
``AsyncClient`` downstream runs ``STREAMS`` streams at once, first straight to the server, then
through the gateway (uvicorn in its own process); each chunk's lag is its receive time minus its
stamp. The added latency is the gateway's lag percentile minus the direct one. Not a timed
pytest-benchmark: the figures go to ``extra_info`` and the terminal (``-s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pycurl")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import fastsse
from fastsse.testing.scripted import spawn_scripted_server

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


@contextlib.contextmanager
def _gateway(upstream: str) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, FASTSSE_UPSTREAM=upstream)
    src = str(pathlib.Path(fastsse.__file__).resolve().parents[1])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    argv = [sys.executable, "-m", "uvicorn", "--factory", "gateway:create_app", "--app-dir", str(EXAMPLES)]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--loop", "asyncio", "--log-level", "warning"]
    proc = subprocess.Popen(argv, env=env)
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            assert proc.poll() is None, "the gateway exited"
            assert time.monotonic() < deadline, "the gateway did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _lags(base_url: str, streams: int, chunks: int) -> tuple[list[int], list[dict[str, Any]]]:
    lags: list[int] = []

    def on_chunk(chunk: dict[str, Any]) -> None:
        sent = chunk.get("fastsse_sent_ns")
        if isinstance(sent, int):
            lags.append(time.monotonic_ns() - sent)

    request = {"model": f"chunks={chunks}", "messages": [{"role": "user", "content": "x"}], "stream": True}
    async with fastsse.AsyncClient(base_url=base_url, max_connections=streams, timing=False) as client:
        results = await asyncio.gather(*(client.create_stream(request, on_chunk) for _ in range(streams)))
    return lags, results


def _pct(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000  # µs


def test_gateway_added_latency(benchmark: Any, quick: bool) -> None:
    streams, chunks = (8, 10) if quick else (128, 100)
    with spawn_scripted_server(ttft_ms=20, itl_ms=20) as upstream, _gateway(upstream.base_url) as gateway:
        direct, _ = asyncio.run(_lags(upstream.base_url, streams, chunks))
        relayed, results = asyncio.run(_lags(gateway, streams, chunks))
    assert all(r["verdict"]["complete"] for r in results)
    assert len(relayed) >= streams * chunks
    figures = {
        "streams": streams,
        "chunks": chunks,
        "direct_p50_us": _pct(direct, 0.50),
        "direct_p99_us": _pct(direct, 0.99),
        "gateway_p50_us": _pct(relayed, 0.50),
        "gateway_p99_us": _pct(relayed, 0.99),
    }
    figures["added_p50_us"] = figures["gateway_p50_us"] - figures["direct_p50_us"]
    figures["added_p99_us"] = figures["gateway_p99_us"] - figures["direct_p99_us"]
    benchmark.group = "gateway:latency"
    benchmark.extra_info.update(figures)
    print("\ngateway latency per chunk (µs):", figures)
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
