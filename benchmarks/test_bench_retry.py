"""The price of resilience on a healthy stream: one ``Client`` runs 64 short chat streams from the
loopback server (its own process) with ``max_retries=0``, with the default ``max_retries=2`` (the
retry-free path: the retry rules are only read when an attempt fails) and with
``first_chunk_gate=True`` (the gate sees each chunk until the first content arrives).

Group ``retry:per-stream``; ``extra_info["client_cpu_us_per_stream"]`` is the client's CPU time
(``time.process_time``) per stream, the median round. The figures are in benchmarks/README.md."""

from __future__ import annotations

import statistics
import time
from typing import Any

import pytest

import fastsse
from test_bench_e2e import server  # noqa: F401 - the loopback server in its own process

STREAMS = 64
CASES = {
    "max_retries=0": {"max_retries": 0},
    "default (max_retries=2)": {},
    "first_chunk_gate": {"first_chunk_gate": True},
}


@pytest.mark.parametrize("case", list(CASES))
def test_retry_overhead(benchmark: Any, server: str, case: str) -> None:  # noqa: F811
    pytest.importorskip("pycurl")
    requests = [{"model": "plain:event", "messages": [{"role": "user", "content": "Hi"}]}] * STREAMS
    cpu: list[float] = []
    with fastsse.Client(base_url=server, api_key="x", timing=False, **CASES[case]) as client:
        client.run(requests[:4])  # connections open before the first round

        def run() -> list[Any]:
            start = time.process_time()
            out = client.run(requests)
            cpu.append(time.process_time() - start)
            return out

        benchmark.group = "retry:per-stream"
        outcomes = benchmark.pedantic(run, rounds=15, iterations=1, warmup_rounds=1)
    assert all(isinstance(o, dict) and o["verdict"]["complete"] for o in outcomes)
    benchmark.extra_info["client_cpu_us_per_stream"] = round(statistics.median(cpu) / STREAMS * 1e6, 1)
    benchmark.extra_info["streams"] = STREAMS
