"""End to end: one streamed chat completion of 20,000 chunks over HTTP from the loopback server
(``python -m fastsse serve``, in its own process), folded into the final answer by
``fastsse.create_stream`` (pycurl + ChatStream) and by the openai SDK client
(``chat.completions.create(stream=True)``, iterated, and also folded by ChatCompletionStreamState).

Group ``e2e:<write mode>``: ``event`` is one HTTP chunk per event (how LLM servers flush), ``bulk``
64 KiB writes. The wall time includes the server; the client's own CPU time per chunk
(``time.process_time``, the median round) is in ``extra_info["client_cpu_ns_per_chunk"]``."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fastsse import bench as _contenders

E2E = ("fastsse", "openai-iterate", "openai-fold")
WRITES = ("event", "bulk")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The base URL of a loopback server running in a child process (so its CPU is not ours)."""
    try:
        import fastsse.testing.server  # noqa: F401
    except ImportError:
        pytest.skip("fastsse.testing.server (the loopback server) is not on this branch")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastsse", "serve", "--port", "0", "--quiet"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if "http://" not in line:
            pytest.fail(f"the loopback server did not start: {line!r}")
        yield line[line.index("http://") :].split()[0].rstrip("/")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def _fastsse(base_url: str) -> Callable[[dict[str, Any]], Any]:
    try:
        import pycurl

        from fastsse import create_stream
    except ImportError as exc:
        pytest.skip(f"create_stream needs pycurl and fastsse.client.sync: {exc}")
    from fastsse import ChatStream

    if not callable(getattr(ChatStream, "write", None)):
        pytest.skip("ChatStream.write is not on this branch; create_stream cannot run")
    handle = pycurl.Curl()  # reused, as the openai client reuses its connection pool

    def run(request: dict[str, Any]) -> Any:
        return create_stream(request, base_url=base_url, api_key="x", curl=handle)

    return run


def _openai(base_url: str, fold: bool) -> Callable[[dict[str, Any]], Any]:
    try:
        from openai import OpenAI
        from openai.lib.streaming.chat import ChatCompletionStreamState
    except ImportError:
        pytest.skip("openai is not installed (pip install 'fastsse-cython[bench]')")
    client = OpenAI(base_url=base_url, api_key="x", max_retries=0)

    def run(request: dict[str, Any]) -> Any:
        stream = client.chat.completions.create(**request, stream=True)
        if not fold:
            n = 0
            for _ in stream:
                n += 1
            return n
        state = ChatCompletionStreamState()
        for chunk in stream:
            state.handle_chunk(chunk)
        return state.get_final_completion()

    return run


@pytest.mark.parametrize("name", E2E)
@pytest.mark.parametrize("write", WRITES)
def test_e2e(benchmark, server, quick, write, name):
    from fastsse.testing.server import expected_completion

    nchunks = 1_000 if quick else 20_000
    request = {
        "model": f"long-{nchunks}:{write}",
        "messages": [{"role": "user", "content": "Write a long answer."}],
        "stream_options": {"include_usage": True},
    }
    target = _fastsse(server) if name == "fastsse" else _openai(server, fold=name == "openai-fold")
    cpu: list[float] = []

    def timed() -> Any:
        start = time.process_time()
        result = target(request)
        cpu.append(time.process_time() - start)
        return result

    benchmark.group = f"e2e:{write}"
    benchmark.extra_info.update(contender=name, write=write, chunks=nchunks, events=nchunks)
    if name == "openai-fold" and benchmark.enabled:
        result = benchmark.pedantic(timed, rounds=3, iterations=1)
    else:
        result = benchmark(timed)
    benchmark.extra_info["client_cpu_ns_per_chunk"] = statistics.median(cpu) * 1e9 / nchunks
    if name == "openai-iterate":
        assert result >= nchunks
    else:
        expected = _contenders.summary(expected_completion({**request, "stream": True}))
        assert _contenders.summary(result) == expected
