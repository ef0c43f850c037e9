"""The chat fold against its floor, bare ``orjson.loads`` of the same payloads.

A deterministic 20,000-chunk answer in OpenAI's chunk shape: a role chunk, content deltas of 1-8
characters (some non-ASCII), a stop chunk and a usage chunk. ``feed_data`` is timed payload by
payload; ``ChatStream.write`` gets the same events as SSE bytes in 16 KiB writes (what curl hands
a write callback), chunked in setup. Run: ``pytest benchmarks --benchmark-enable``; as tests they
run once with ``--benchmark-disable``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest

import fastsse

CHUNKS = 20_000
WRITE_SIZE = 16 * 1024
BACKENDS = [pytest.param("cython", marks=pytest.mark.c_extension), "python"]


def chat_payloads(n: int = CHUNKS, seed: int = 3) -> list[bytes]:
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz     ,.ABCDEéüñ日本語🌊"
    head = {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_eb9dce56a8",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return orjson.dumps({**head, "choices": [choice]})

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    for _ in range(n - 3):
        out.append(chunk({"content": "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))}))
    out.append(chunk({}, "stop"))
    out.append(orjson.dumps({**head, "choices": [], "usage": {"prompt_tokens": 19, "completion_tokens": n}}))
    return out


PAYLOADS = chat_payloads()
SSE = b"".join(b"data: " + p + b"\n\n" for p in PAYLOADS) + b"data: [DONE]\n\n"
WRITES = [SSE[i : i + WRITE_SIZE] for i in range(0, len(SSE), WRITE_SIZE)]


def _info(benchmark: Any, impl: str) -> None:
    benchmark.extra_info.update(impl=impl, chunks=len(PAYLOADS), bytes=len(SSE), write_size=WRITE_SIZE)


def _check(result: dict[str, Any]) -> None:
    assert result["choices"][0]["finish_reason"] == "stop"
    assert result["usage"]["completion_tokens"] == CHUNKS


@pytest.mark.benchmark(group="chat fold: 20k chunks, per payload")
def test_orjson_loads_floor(benchmark: Any) -> None:
    loads = orjson.loads

    def run() -> None:
        for payload in PAYLOADS:
            loads(payload)

    _info(benchmark, "orjson.loads")
    benchmark(run)


@pytest.mark.benchmark(group="chat fold: 20k chunks, per payload")
@pytest.mark.parametrize("name", BACKENDS)
def test_feed_data(benchmark: Any, name: str) -> None:
    cls = fastsse.get_backend(name).ChatAggregator

    def run() -> Any:
        agg = cls()
        feed = agg.feed_data
        for payload in PAYLOADS:
            feed(payload)
        feed(b"[DONE]")
        return agg

    _info(benchmark, f"{name} ChatAggregator.feed_data")
    agg = benchmark(run)
    _check(agg.result())
    assert agg.verdict.complete


def _stream_run(cls: Callable[..., Any]) -> Callable[[], Any]:
    def run() -> Any:
        stream = cls(None)
        write = stream.write
        for data in WRITES:
            write(data)
        stream.close()
        return stream

    return run


@pytest.mark.benchmark(group="chat fold: 20k chunks, SSE bytes in 16 KiB writes")
def test_stream_orjson_floor(benchmark: Any) -> None:
    loads = orjson.loads

    def run() -> None:
        for payload in PAYLOADS:
            loads(payload)

    _info(benchmark, "orjson.loads")
    benchmark(run)


@pytest.mark.benchmark(group="chat fold: 20k chunks, SSE bytes in 16 KiB writes")
@pytest.mark.parametrize("name", BACKENDS)
def test_chat_stream_write(benchmark: Any, name: str) -> None:
    _info(benchmark, f"{name} ChatStream.write")
    stream = benchmark(_stream_run(fastsse.get_backend(name).ChatStream))
    _check(stream.result())
    assert stream.verdict.complete


@pytest.mark.benchmark(group="chat fold: 20k chunks, SSE bytes in 16 KiB writes")
@pytest.mark.parametrize("name", BACKENDS)
def test_decoder_then_feed_data(benchmark: Any, name: str) -> None:
    """The unfused pipeline, for scale: Event objects, then str payloads into the aggregator."""
    backend = fastsse.get_backend(name)

    def run() -> Any:
        decoder = backend.Decoder()
        agg = backend.ChatAggregator()
        for data in WRITES:
            for event in decoder.feed(data):
                agg.feed_event(event)
        return agg

    _info(benchmark, f"{name} Decoder.feed + ChatAggregator.feed_event")
    agg = benchmark(run)
    _check(agg.result())
