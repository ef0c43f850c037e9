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

RETRY = 123456789  # an int object of its own (not a cached small int), held by the decoder


def _mixed_block(n: int = 1000) -> bytes:
    """n events touching every decoder path: ids, types, CR/CRLF, comments, retry, invalid UTF-8,
    multi-line data, field-only lines, lines of many lengths."""
    parts = []
    for i in range(n):
        k = i % 5
        if k == 0:
            parts.append(b'id: %d\ndata: {"i": %d}\n\n' % (i, i))
        elif k == 1:
            parts.append(b"event: e%d\r\ndata: caf\xc3\xa9 %d\r\ndata: two\r\n\r\n" % (i % 7, i))
        elif k == 2:
            parts.append(b": comment\rretry: %d\rdata: \xff\xfe bad\r\r" % RETRY)
        elif k == 3:
            parts.append(b"data:" + b"x" * (i % 300) + b"\n\n")
        else:
            parts.append(b"foo: bar\ndata\n\n")
    return b"".join(parts)


BLOCK = _mixed_block()
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
    return rss() - base, samples


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
