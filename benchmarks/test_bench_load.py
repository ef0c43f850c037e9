"""Client lag under load (``load_lag.py``): each client through ``python -m fastsse load`` against the
scripted server, server and client pinned to different cores when there are two.

As a plain test (``--benchmark-disable``) it runs 16 streams of 10 chunks per client and checks that
every stream completed and every chunk was timed. The full table (16 / 128 / 1024 streams) comes from
``python benchmarks/load_lag.py``; the lag and CPU figures go to ``extra_info`` either way.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import load_lag
from fastsse.testing import spawn_scripted_server

CLIENTS = ("fastsse", "aiohttp-vllm", "openai")


@pytest.mark.parametrize("client", CLIENTS)
def test_load_lag(benchmark: Any, client: str) -> None:
    pytest.importorskip("aiohttp")
    streams, chunks = (16, 10) if benchmark.disabled else (128, 100)
    pin = (os.cpu_count() or 1) > 1
    benchmark.group = f"load-lag:{streams}"
    with spawn_scripted_server(cpu=0 if pin else None, ttft_ms=100, itl_ms=20, chunks=chunks) as server:
        doc = benchmark.pedantic(
            load_lag.run_one,
            args=(server.base_url, client, streams),
            kwargs={"cpu": 1 if pin else None},
            rounds=1,
        )
        late = server.stats()["late_us"]
    row = load_lag.row(doc, late)
    benchmark.extra_info.update(row)
    assert row["complete"] == streams
    assert doc["summary"]["lag_ms"]["n"] == streams * chunks
