"""Leaks: RSS stays flat over millions of events and chunks, reference counts of reused objects do
not drift, buffers are released, tracemalloc finds nothing left behind.

The long runs are marked slow. The compiled Decoder takes 10^7 events (~1 s); the Python twin 2x10^6
(~6 s): it manages no memory by hand (every allocation is a refcounted Python object), so what could
leak there is a growing container or a cycle, which 2x10^6 events show as plainly as 10^7 would, and
10^7 would spend 30 s of the CI budget. ChatAggregator and ChatStream take 10^6 chunks on both backends.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

import fastsse
from _memory import rss
from _sse_helpers import mixed_stream

RETRY = 123456789  # an int object of its own (not a cached small int), held by the decoder


BLOCK = mixed_stream(1000, retry=RETRY)  # every decoder path, 1000 events
EVENTS_PER_BLOCK = 1000
# 4093 bytes: a prime, so chunk edges fall on every kind of byte (mid-line, between CR and LF, ...).
CHUNKS = [BLOCK[i : i + 4093] for i in range(0, len(BLOCK), 4093)]


def flat_rss(step: Callable[[], None], rounds: int, *, warmup: int) -> tuple[int, list[int]]:
    """Run ``step`` ``rounds`` times; return the RSS growth after the warm-up rounds and the samples."""
    samples = []
    base = 0
    for r in range(rounds):
        step()
        if r + 1 == warmup:
            gc.collect()
            base = rss()
        if (r + 1) % max(rounds // 10, 1) == 0:
            samples.append(rss())
    gc.collect()
    end = rss()
    # Shown with ``pytest -s``: the figures quoted in the hardening note.
    print(
        f"\nRSS after warm-up {base >> 10} KiB, at the end {end >> 10} KiB, samples {[x >> 10 for x in samples]}"
    )
    return end - base, samples


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "events"),
    [pytest.param("cython", 10**7, marks=pytest.mark.c_extension), pytest.param("python", 2 * 10**6)],
)
def test_decoder_rss_flat_over_millions_of_events(name: str, events: int) -> None:
    decoder = fastsse.get_backend(name).Decoder()
    count = 0

    def step() -> None:
        nonlocal count
        for chunk in CHUNKS:
            count += len(decoder.feed(chunk))

    rounds = events // EVENTS_PER_BLOCK
    grown, samples = flat_rss(step, rounds, warmup=rounds // 10)
    assert count == events
    # A leak of one byte per event would add ~9 MB (compiled) or ~1.8 MB (twin) after the warm-up.
    assert grown < (1 << 20), (grown, samples)


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param("cython", marks=pytest.mark.c_extension), "python"])
def test_decoder_rss_flat_over_overflows_and_closes(name: str) -> None:
    # 10^5 EventTooLarge raised (each carrying events), decoders made and dropped, closes mid-event.
    backend = fastsse.get_backend(name)
    chunk = b"data: a\n\ndata: " + b"z" * 200 + b"\n\ndata: b\n\ndata: partial"

    def step() -> None:
        for _ in range(100):
            decoder = backend.Decoder(max_event_bytes=64)
            with pytest.raises(fastsse.EventTooLarge) as info:
                decoder.feed(chunk)
            assert len(info.value.events) == 2
            decoder.close()
            assert decoder.truncated

    grown, samples = flat_rss(step, 1000, warmup=100)
    assert grown < (1 << 20), (grown, samples)


def test_reused_objects_keep_their_refcounts(backend: Any) -> None:
    decoder = backend.Decoder()
    decoder.feed(b"retry: %d\nid: last\n\n" % RETRY)
    retry, last_id = decoder.retry, decoder.last_event_id
    chunk = b"data: a\r\n\r\ndata: b\n\n"
    probes = {
        "chunk": chunk,
        "retry": retry,
        "last_event_id": last_id,
        "decoder": decoder,
        "Event": backend.Event,
    }  # not "message": interned and shared by the whole process, its count moves on its own
    for _ in range(100):  # warm caches (freelists, interned strings)
        decoder.feed(chunk)
    gc.collect()
    before = {k: sys.getrefcount(v) for k, v in probes.items()}
    for _ in range(10_000):
        events = decoder.feed(chunk)
        assert events[0].retry is retry and events[1].id is last_id
    del events
    gc.collect()
    after = {k: sys.getrefcount(v) for k, v in probes.items()}
    assert after == before


def test_error_paths_keep_refcounts(backend: Any) -> None:
    decoder = backend.Decoder(max_event_bytes=8)
    chunk = b"data: ok\n\ndata: far too long\n\n"
    bad = "not bytes"
    gc.collect()
    before = (sys.getrefcount(chunk), sys.getrefcount(bad), sys.getrefcount(decoder))
    for _ in range(5_000):
        try:
            decoder.feed(chunk)
        except fastsse.EventTooLarge as exc:
            assert [e.data for e in exc.events] == ["ok"]
        with contextlib.suppress(TypeError):
            decoder.feed(bad)  # type: ignore[arg-type]
    gc.collect()
    assert (sys.getrefcount(chunk), sys.getrefcount(bad), sys.getrefcount(decoder)) == before


@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "sliced-memoryview", "strided-memoryview"])
def test_buffers_are_released(backend: Any, kind: str) -> None:
    # A buffer export left open would make the bytearray refuse to resize (BufferError).
    decoder = backend.Decoder(max_event_bytes=64)
    store = bytearray(b"data: a\n\ndata: partial line")
    for _ in range(1000):
        if kind == "bytearray":
            arg: Any = store
        elif kind == "memoryview":
            arg = memoryview(store)
        elif kind == "sliced-memoryview":
            arg = memoryview(store)[0:12]
        else:
            arg = memoryview(store)[::2]  # not contiguous: copied first
        with contextlib.suppress(fastsse.EventTooLarge):
            decoder.feed(arg)
        if isinstance(arg, memoryview):
            arg.release()
        store.extend(b"x")  # raises BufferError if feed kept an export
        del store[-1]
        decoder.close()


def test_tracemalloc_finds_nothing_left(backend: Any) -> None:
    decoder = backend.Decoder(max_event_bytes=1 << 16)
    for chunk in CHUNKS:  # warm-up: buffers reach their working size, freelists fill
        decoder.feed(chunk)
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(20):
            for chunk in CHUNKS:
                decoder.feed(chunk)
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 20,000 events went through; what stays is at most the decoder's reused buffers.
    assert end - start < 16 << 10, end - start


# ChatAggregator and ChatStream: 10^6 chunks each, as 1000 streams of 1000 chunks (a fold keeps what
# it folds, so one endless stream would grow by design; one stream of chunks that replace rather
# than append is checked separately).


def _chat_block(n: int = 1000) -> list[bytes]:
    head = b'"id":"c","object":"chat.completion.chunk","created":1,"model":"m"'
    out = [b"{" + head + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}']
    for i in range(1, n - 3):
        k = i % 6
        if k == 0:
            out.append(b"{" + head + b',"choices":[{"index":0,"delta":{"content":"w%d \xc3\xa9"}}]}' % i)
        elif k == 1:
            out.append(b"{" + head + b',"choices":[{"index":1,"delta":{"reasoning_content":"r%d"}}]}' % i)
        elif k == 2:
            out.append(
                b"{" + head + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"call_%d",'
                b'"function":{"name":"f","arguments":"{\\"a\\":"}}]}}]}' % (i % 4, i % 4)
            )
        elif k == 3:
            out.append(
                b"{" + head + b',"choices":[{"index":0,"delta":{"content":"x"},"logprobs":{"content":'
                b'[{"token":"x","logprob":-0.5,"bytes":[120],"top_logprobs":[]}]}}]}'
            )
        elif k == 4:
            out.append(b'{"choices": 5, "delta": [], "usage": {"total_tokens": %d}}' % i)  # malformed
        else:
            out.append(b"not json %d" % i)  # skipped
    out.append(b"{" + head + b',"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}')
    out.append(b"{" + head + b',"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}')
    out.append(b"[DONE]")
    return out


CHAT_PAYLOADS = _chat_block()
CHAT_SSE = b"".join(b"data: " + p + b"\n\n" for p in CHAT_PAYLOADS)
CHAT_CHUNKS = [CHAT_SSE[i : i + 4093] for i in range(0, len(CHAT_SSE), 4093)]


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param("cython", marks=pytest.mark.c_extension), "python"])
def test_chat_aggregator_rss_flat_over_a_million_chunks(name: str) -> None:
    backend = fastsse.get_backend(name)

    def step() -> None:
        agg = backend.ChatAggregator()
        for payload in CHAT_PAYLOADS:
            agg.feed_data(payload)
        assert agg.done and agg.result()["choices"][0]["finish_reason"] == "stop"

    grown, samples = flat_rss(step, 1000, warmup=100)
    assert grown < (1 << 20), (grown, samples)


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param("cython", marks=pytest.mark.c_extension), "python"])
def test_chat_stream_rss_flat_over_a_million_chunks(name: str) -> None:
    backend = fastsse.get_backend(name)
    count = 0

    def on_chunk(chunk: Any) -> None:
        nonlocal count
        count += 1

    def step() -> None:
        stream = backend.ChatStream(on_chunk)
        for chunk in CHAT_CHUNKS:
            assert stream.write(chunk) is None
        stream.close()
        assert stream.result()["verdict"]["done"] is True

    grown, samples = flat_rss(step, 1000, warmup=100)
    assert grown < (1 << 20), (grown, samples)
    assert count > 800_000


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param("cython", marks=pytest.mark.c_extension), "python"])
def test_one_chat_stream_of_replacing_chunks_stays_flat(name: str) -> None:
    # Chunks that only replace state (role, finish_reason, usage, provider fields): no growth.
    backend = fastsse.get_backend(name)
    event = (
        b'data: {"id":"c","model":"m","usage":{"total_tokens":7},"x_provider":{"k":[1,2]},'
        b'"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":"stop"}]}\n\n'
    ) * 1000
    stream = backend.ChatStream()
    grown, samples = flat_rss(lambda: stream.write(event), 500, warmup=50)
    assert grown < (1 << 20), (grown, samples)


@pytest.mark.parametrize("name", [pytest.param("cython", marks=pytest.mark.c_extension), "python"])
def test_chat_refcounts_and_tracemalloc(name: str) -> None:
    backend = fastsse.get_backend(name)
    payload = CHAT_PAYLOADS[3]
    callback_calls = []

    def on_chunk(chunk: Any) -> bool:
        callback_calls.append(1)
        return len(callback_calls) % 97 != 0  # abort now and then

    def run_once() -> None:
        agg = backend.ChatAggregator()
        for p in CHAT_PAYLOADS:
            agg.feed_data(p)
        agg.result()
        stream = backend.ChatStream(on_chunk, max_event_bytes=1 << 16)
        for chunk in CHAT_CHUNKS:
            if stream.write(chunk) == 0:
                break
        stream.result()

    for _ in range(3):
        run_once()
    gc.collect()
    before = (sys.getrefcount(payload), sys.getrefcount(on_chunk), sys.getrefcount(CHAT_CHUNKS[0]))
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(20):
            run_once()
        callback_calls.clear()
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (sys.getrefcount(payload), sys.getrefcount(on_chunk), sys.getrefcount(CHAT_CHUNKS[0])) == before
    assert end - start < 16 << 10, end - start


@pytest.mark.parametrize("name", [pytest.param("cython", marks=pytest.mark.c_extension), "python"])
def test_chat_stream_error_paths_do_not_leak(name: str) -> None:
    # on_chunk raising, EventTooLarge, writes after the stop: refcounts of the exception's pieces
    # and of the inputs come back.
    backend = fastsse.get_backend(name)

    class Boom(Exception):
        pass

    def explode(chunk: Any) -> None:
        raise Boom

    big = b"data: " + b"z" * 5000 + b"\n\n"
    gc.collect()
    before = (sys.getrefcount(explode), sys.getrefcount(big), sys.getrefcount(Boom))
    for _ in range(2000):
        stream = backend.ChatStream(explode)
        with pytest.raises(Boom):
            stream.write(CHAT_CHUNKS[0])
        assert stream.write(CHAT_CHUNKS[1]) == 0
        stream = backend.ChatStream(max_event_bytes=1024)
        with pytest.raises(fastsse.EventTooLarge):
            stream.write(big)
        assert stream.write(big) == 0
    del stream
    gc.collect()
    assert (sys.getrefcount(explode), sys.getrefcount(big), sys.getrefcount(Boom)) == before


def _translation_upstreams(backend: Any) -> dict[tuple[str, str], list[bytes]]:
    # One chat stream with every hot path (text with escapes and non-ASCII, reasoning, parallel
    # tool-call arguments, usage, [DONE]) and its Messages and Responses translations, read in
    # 97-byte pieces so events are split across reads.
    enc = fastsse.ChatChunkEncoder(id="c", model="m", created=1)
    parts = [enc.role()]
    for i in range(60):
        parts.append(enc.reasoning(f"think {i} ") if i < 20 else enc.content(f'w{i} "\u00e9\n\U0001f600 '))
    parts.append(enc.tool_call(0, id="call_a", name="f", arguments=""))
    parts.append(enc.tool_call(1, id="call_b", name="g", arguments=""))
    for i in range(40):
        parts.append(enc.tool_call(i % 2, arguments=f'{{"k{i}":"\\u00e9{i}"'))
    parts += [enc.finish("tool_calls"), enc.usage({"prompt_tokens": 5, "completion_tokens": 80}), enc.done()]
    chat = b"".join(parts)
    out = {}
    for target in ("messages", "responses"):
        t = getattr(backend, "ChatToMessages" if target == "messages" else "ChatToResponses")()
        out[(target, "chat")] = t.write(chat) + t.close()
        out[("chat", target)] = chat
    return {key: [body[i : i + 97] for i in range(0, len(body), 97)] for key, body in out.items()}


@pytest.mark.parametrize("name", [pytest.param("cython", marks=pytest.mark.c_extension), "python"])
def test_translators_leave_nothing_behind(name: str) -> None:
    # Every direction, whole and cut at an oversized event: what a translation allocates (frames,
    # output buffers, the cores' state) goes with the translator, and the inputs' refcounts come back.
    backend = fastsse.get_backend(name)
    classes = {
        ("chat", "messages"): backend.ChatToMessages,
        ("chat", "responses"): backend.ChatToResponses,
        ("messages", "chat"): backend.MessagesToChat,
        ("responses", "chat"): backend.ResponsesToChat,
    }
    upstreams = _translation_upstreams(backend)

    def run_once() -> None:
        for key, cls in classes.items():
            reads = upstreams[key]
            t = cls()
            written = sum(len(t.write(r)) for r in reads) + len(t.close())
            assert written and t.result()["verdict"]["complete"] is True
            small = cls(max_event_bytes=64)
            with contextlib.suppress(fastsse.EventTooLarge):
                for r in reads:
                    small.write(r)
            small.close()

    for _ in range(3):
        run_once()
    gc.collect()
    first = next(iter(upstreams.values()))[1]
    before = sys.getrefcount(first)
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(20):
            run_once()
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sys.getrefcount(first) == before
    assert end - start < 16 << 10, end - start
