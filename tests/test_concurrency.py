"""Many threads, each with its own Decoder / ChatStream, give exactly the single-threaded results.

The contract (README, "Guarantees"): instances are not shared between threads; distinct instances
share no mutable state (no module-level buffers), so they can run on as many threads as you like.
The switch interval is shortened so the threads interleave as often as the interpreter allows.
On a free-threaded build (``python3.13t``) the same tests run with true parallelism; none is
installed on the machine these tests were written on (pyenv has 3.10-3.13 with the GIL only).
"""

from __future__ import annotations

import json
import random
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import fastsse
from _sse_helpers import mixed_stream

# every test here runs on both engine drivers (the compiled libcurl driver and pycurl)
pytestmark = pytest.mark.usefixtures("driver")

THREADS = 8
ROUNDS = 3


@pytest.fixture(autouse=True)
def _fast_switching() -> Iterator[None]:
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def _chunked(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    i = 0
    while i < len(data):
        n = rng.choice([1, 2, 7, 64, 1000, 4096, 65536])
        out.append(data[i : i + n])
        i += n
    return out


def _decode(backend: Any, chunks: list[bytes], limit: int | None) -> tuple[Any, ...]:
    decoder = backend.Decoder(max_event_bytes=limit)
    events = []
    overflows = 0
    for chunk in chunks:
        try:
            got = decoder.feed(chunk)
        except fastsse.EventTooLarge as exc:
            overflows += 1
            got = exc.events
        events.extend((e.event, e.data, e.id, e.retry) for e in got)
    decoder.close()
    return events, overflows, decoder.last_event_id, decoder.retry, decoder.truncated


def _run_threads(work: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * THREADS
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def target(t: int) -> None:
        try:
            barrier.wait()
            results[t] = [work(t * ROUNDS + r) for r in range(ROUNDS)]
        except BaseException as exc:  # reported below, with the thread's result missing
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert not errors, errors
    return results


SSE = b"\xef\xbb\xbf" + mixed_stream(3000, oversized=True)  # a BOM, and events over the cap used below


@pytest.mark.parametrize("limit", [None, 4096])
def test_decoders_on_many_threads_match_one_thread(backend: Any, limit: int | None) -> None:
    reference = _decode(backend, [SSE], limit)
    # Events do not depend on the chunking, and every overflow of a 5000-byte line shows up, so one
    # single-threaded reference covers every thread's chunking (overflow counts aside).
    results = _run_threads(lambda seed: _decode(backend, _chunked(SSE, seed), limit))
    for per_thread in results:
        for events, overflows, *state in per_thread:
            assert events == reference[0]
            assert tuple(state) == reference[2:]
            assert (overflows > 0) is (limit is not None)


def _chat_stream() -> bytes:
    def event(payload: Any) -> bytes:
        return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"

    head = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    parts = [event({**head, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})]
    for i in range(400):
        parts.append(event({**head, "choices": [{"index": i % 2, "delta": {"content": f"w{i} é "}}]}))
    for i in range(20):
        call = {"index": i % 3, "function": {"arguments": f'{{"k{i}":'}}
        if i < 3:
            call.update(id=f"call_{i}", type="function", function={"name": f"f{i}", "arguments": ""})
        parts.append(event({**head, "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}))
    parts.append(event({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    parts.append(event({**head, "choices": [{"index": 1, "delta": {}, "finish_reason": "stop"}]}))
    parts.append(event({**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 420}}))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


CHAT = _chat_stream()


def _fold(backend: Any, chunks: list[bytes]) -> tuple[Any, ...]:
    seen: list[Any] = []
    stream = backend.ChatStream(seen.append)
    for chunk in chunks:
        assert stream.write(chunk) is None
    stream.close()
    return stream.result(), seen


def test_chat_streams_on_many_threads_match_one_thread(backend: Any) -> None:
    reference = _fold(backend, [CHAT])
    assert len(reference[1]) == 424  # role, 400 content, 20 tool-call, 2 finish, usage
    results = _run_threads(lambda seed: _fold(backend, _chunked(CHAT, seed)))
    for per_thread in results:
        for result, seen in per_thread:
            assert result == reference[0]
            assert seen == reference[1]


def test_backends_agree_while_threads_run(backend: Any) -> None:
    # Both backends at once on interleaved threads (even seeds one, odd the other): any hidden
    # shared state between the compiled and the Python modules would show as a mismatch.
    other = fastsse.get_backend("python")
    reference = _decode(backend, [SSE], 4096)[0]
    results = _run_threads(lambda seed: _decode(backend if seed % 2 else other, _chunked(SSE, seed), 4096)[0])
    assert all(events == reference for per_thread in results for events in per_thread)
