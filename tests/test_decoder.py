"""Decoder API behaviour on both backends: input types, max_event_bytes, close, Event, linear cost."""

from __future__ import annotations

import contextlib
import time
import tracemalloc
from typing import Any

import pytest

import fastsse
from _sse_helpers import as_tuple, decode


@pytest.mark.parametrize("bad", ["data: x\n\n", 5, None, ["data: x\n\n"], 1.5], ids=repr)
def test_feed_rejects_non_bytes_and_stays_usable(backend: Any, bad: object) -> None:
    decoder = backend.Decoder()
    decoder.feed(b"data: a\n")
    with pytest.raises(TypeError, match=type(bad).__name__):
        decoder.feed(bad)
    assert [as_tuple(e) for e in decoder.feed(b"\n")] == [("message", "a", "", None)]


@pytest.mark.parametrize("limit", [0, -1])
def test_max_event_bytes_must_be_positive(backend: Any, limit: int) -> None:
    with pytest.raises(ValueError, match="max_event_bytes"):
        backend.Decoder(max_event_bytes=limit)


def test_cr_at_chunk_end_and_lf_at_next_start(backend: Any) -> None:
    events, _ = decode(backend.Decoder(), [b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"])
    assert events == [("message", "a\nb", "", None)]


def test_empty_chunk_between_cr_and_lf(backend: Any) -> None:
    # found by the differential test: an empty feed must not drop the pending CR
    events, _ = decode(backend.Decoder(), [b"data: a\r", b"", b"\n\n"])
    assert events == [("message", "a", "", None)]


def test_lone_cr_at_chunk_end_then_text(backend: Any) -> None:
    events, _ = decode(backend.Decoder(), [b"data: a\r", b"data: b\r", b"\r"])
    assert events == [("message", "a\nb", "", None)]


def test_noncontiguous_memoryview(backend: Any) -> None:
    data = b"d_a_t_a_:_ _x_\n_\n_"
    view = memoryview(data)[::2]
    assert [as_tuple(e) for e in backend.Decoder().feed(view)] == [("message", "x", "", None)]


def test_empty_feed_is_harmless(backend: Any) -> None:
    decoder = backend.Decoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\xef\xbb") == []
    assert decoder.feed(b"") == []
    assert [e.data for e in decoder.feed(b"\xbfdata: 1\n\n")] == ["1"]


class TestMaxEventBytes:
    def test_exact_limit_passes(self, backend: Any) -> None:
        decoder = backend.Decoder(max_event_bytes=10)
        # the line "data:12345" is 10 bytes, the data 5; two lines make 11 bytes of data
        assert [e.data for e in decoder.feed(b"data:12345\ndata:1234\n\n")] == ["12345\n1234"]

    def test_long_line_dropped_others_kept(self, backend: Any) -> None:
        decoder = backend.Decoder(max_event_bytes=16)
        stream = b"data: 1\n\ndata: " + b"x" * 40 + b"\ndata: more\n\ndata: 2\n\n"
        with pytest.raises(fastsse.EventTooLarge, match="max_event_bytes=16") as info:
            decoder.feed(stream)
        assert [e.data for e in info.value.events] == ["1", "2"]
        assert info.value.limit == 16
        assert isinstance(info.value, fastsse.SSEError) and isinstance(info.value, ValueError)
        assert [e.data for e in decoder.feed(b"data: 3\n\n")] == ["3"]

    def test_data_over_limit_across_lines(self, backend: Any) -> None:
        decoder = backend.Decoder(max_event_bytes=8)
        with pytest.raises(fastsse.EventTooLarge) as info:
            decoder.feed(b"data: 1234\ndata: 5678\ndata: 9\n\ndata: ok\n\n")
        assert [e.data for e in info.value.events] == ["ok"]

    def test_partial_line_over_limit_in_small_chunks(self, backend: Any) -> None:
        decoder = backend.Decoder(max_event_bytes=100)
        got = []
        raised = 0
        for _ in range(50):
            try:
                got += decoder.feed(b"y" * 7)
            except fastsse.EventTooLarge as exc:
                raised += 1
                got += exc.events
        assert raised == 1  # once per oversized event, not once per chunk
        got += decoder.feed(b"\n\ndata: after\n\n")
        assert [e.data for e in got] == ["after"]

    def test_comment_line_counts(self, backend: Any) -> None:
        decoder = backend.Decoder(max_event_bytes=10)
        with pytest.raises(fastsse.EventTooLarge):
            decoder.feed(b": " + b"c" * 20 + b"\n")

    def test_memory_bounded_by_the_cap(self, backend: Any) -> None:
        decoder = backend.Decoder(max_event_bytes=1 << 20)
        block = b"z" * (64 << 10)
        tracemalloc.start()
        try:
            for _ in range(512):  # 32 MiB, no newline
                with contextlib.suppress(fastsse.EventTooLarge):
                    decoder.feed(block)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 4 << 20

    def test_no_limit_by_default(self, backend: Any) -> None:
        big = b"q" * (9 << 20)
        events = backend.Decoder().feed(b"data: " + big + b"\n\n")
        assert len(events[0].data) == len(big)


class TestClose:
    def test_close_discards_and_reports(self, backend: Any) -> None:
        decoder = backend.Decoder()
        assert decoder.feed(b"id: 4\nretry: 9\ndata: a\n\ndata: partial") != []
        assert decoder.close() == []
        assert decoder.truncated is True
        assert (decoder.last_event_id, decoder.retry) == ("4", 9)

    def test_close_starts_a_new_stream(self, backend: Any) -> None:
        decoder = backend.Decoder()
        decoder.feed(b"\xef\xbb\xbfdata: a\n\ndata: b")
        decoder.close()
        events = decoder.feed(b"\xef\xbb\xbfdata: c\n\n")  # a BOM opens the new stream too
        assert [e.data for e in events] == ["c"]
        decoder.close()
        assert decoder.truncated is False


class TestEvent:
    def test_defaults_and_repr(self, backend: Any) -> None:
        ev = backend.Event()
        assert (ev.event, ev.data, ev.id, ev.retry) == ("message", "", "", None)
        assert repr(backend.Event("x", "e", "1", 5)) == "Event(data='x', event='e', id='1', retry=5)"

    def test_equality_across_backends(self, backend: Any) -> None:
        other = fastsse.get_backend("python").Event
        assert backend.Event("x", "e", "1", 5) == other("x", "e", "1", 5)
        assert backend.Event("x") != other("y")
        assert backend.Event("x") != ("message", "x", "", None)

    def test_unhashable(self, backend: Any) -> None:
        with pytest.raises(TypeError):
            hash(backend.Event())


def _feed_line(backend: Any, size: int, chunk_size: int) -> float:
    decoder = backend.Decoder()
    body = b"x" * size
    chunks = [body[i : i + chunk_size] for i in range(0, size, chunk_size)]
    start = time.perf_counter()
    decoder.feed(b"data: ")
    for chunk in chunks:
        decoder.feed(chunk)
    (event,) = decoder.feed(b"\n\n")
    elapsed = time.perf_counter() - start
    assert len(event.data) == size
    return elapsed


def test_single_line_cost_is_linear(backend: Any) -> None:
    # A 32 MiB line in 1 KiB chunks against the same line in one chunk: a decoder that rescans
    # its held bytes on every chunk does ~16 GiB of work (~1000x); a linear one pays only the
    # per-call overhead. The bound sits far from both so machine noise cannot flip it.
    size = 32 << 20
    whole = min(_feed_line(backend, size, size) for _ in range(2))
    chunked = min(_feed_line(backend, size, 1024) for _ in range(2))
    assert chunked / whole < 40
