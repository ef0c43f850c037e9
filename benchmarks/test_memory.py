"""Memory stays flat however long the stream: after a warm-up, feeding 10^7 more events must not
grow the process's resident set (a leak of even one byte per event would show as ~10 MB).

The 10^7-event cases are marked slow (``-m slow``); a 10^5-event version of each runs with the
rest of the suite so the test itself cannot rot."""

from __future__ import annotations

import os
import sys

import pytest

import fastsse

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc/self/statm")

GROWTH_LIMIT = 2 << 20  # bytes of RSS growth allowed over the whole run (allocator slack)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def _block() -> list[bytes]:
    # 1,000 chat-sized events (one in ten with a non-ASCII word) cut into 1 KiB reads.
    one = b'data: {"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}\n\n'
    raw = b"".join(one % (b"caf\xc3\xa9 " if i % 10 == 0 else b"token ") for i in range(1000))
    return [raw[i : i + 1024] for i in range(0, len(raw), 1024)]


def _run(write, blocks: int, chunks: list[bytes]) -> None:
    for _ in range(blocks):
        for chunk in chunks:
            write(chunk)


def _measure(make_sink, events: int) -> tuple[int, int]:
    chunks = _block()
    blocks = events // 1000
    sink, count = make_sink()
    _run(sink, max(1, blocks // 100), chunks)  # warm up: buffers, free lists, arenas
    before = _rss()
    _run(sink, blocks, chunks)
    return _rss() - before, count()


SIZES = [
    pytest.param(10**5, id="1e5"),
    pytest.param(10**7, id="1e7", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("events", SIZES)
@pytest.mark.parametrize("name", ["cython", "python"])
def test_decoder_memory_flat(name, events):
    try:
        Decoder = fastsse.get_backend(name).Decoder
    except ImportError as exc:
        pytest.skip(f"fastsse's {name} backend is not built ({exc})")

    def make_sink():
        feed = Decoder().feed
        seen = [0]

        def write(chunk):
            seen[0] += len(feed(chunk))

        return write, lambda: seen[0]

    growth, seen = _measure(make_sink, events)
    print(f"{name} Decoder: {seen:,} events, RSS growth {growth:,} bytes", file=sys.stderr)
    assert seen >= events
    assert growth < GROWTH_LIMIT


@pytest.mark.parametrize("events", SIZES)
@pytest.mark.parametrize("name", ["cython", "python"])
def test_chat_stream_memory_flat(name, events):
    # ChatStream keeps the answer it folds, so these events carry no content: only the scan,
    # the parse and the fold's per-chunk work are left to leak.
    try:
        ChatStream = fastsse.get_backend(name).ChatStream
    except ImportError as exc:
        pytest.skip(f"fastsse's {name} backend is not built ({exc})")
    if not callable(getattr(ChatStream, "write", None)):
        pytest.skip("ChatStream.write is not on this branch")
    one = b'data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":null}]}\n\n'
    raw = one * 1000
    chunks = [raw[i : i + 1024] for i in range(0, len(raw), 1024)]
    stream = ChatStream()
    _run(stream.write, max(1, events // 1000 // 100), chunks)
    before = _rss()
    _run(stream.write, events // 1000, chunks)
    growth = _rss() - before
    print(f"{name} ChatStream: {events:,} events, RSS growth {growth:,} bytes", file=sys.stderr)
    assert growth < GROWTH_LIMIT
