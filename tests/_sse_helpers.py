"""Helpers shared by the decoder tests: load the golden vectors, feed a decoder in chunks."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

VECTORS = Path(__file__).parent / "vectors"


def load_sse_vectors(name: str = "sse.json") -> list[dict[str, Any]]:
    with open(VECTORS / name, encoding="utf-8") as f:
        vectors: list[dict[str, Any]] = json.load(f)
    for v in vectors:
        v["bytes"] = v["input"].encode(v["encoding"])
    return vectors


def as_tuple(ev: Any) -> tuple[str, str, str, int | None]:
    return (ev.event, ev.data, ev.id, ev.retry)


def decode(decoder: Any, chunks: Iterable[bytes]) -> tuple[list[tuple[str, str, str, int | None]], bool]:
    """Feed every chunk, close, and return (events as tuples, truncated)."""
    events = []
    for chunk in chunks:
        events.extend(as_tuple(e) for e in decoder.feed(chunk))
    events.extend(as_tuple(e) for e in decoder.close())
    return events, decoder.truncated


def expected_events(vector: dict[str, Any]) -> list[tuple[str, str, str, int | None]]:
    """A vector's hand-written events, in the form ``decode`` returns."""
    return [(e["event"], e["data"], e["id"], e["retry"]) for e in vector["events"]]


def assert_vector(backend: Any, vector: dict[str, Any], cuts: Iterable[tuple[str, list[bytes]]]) -> None:
    """Each chunking of a vector, fed to a fresh Decoder, gives its events and its end state."""
    want = expected_events(vector)
    for name, chunks in cuts:
        decoder = backend.Decoder()
        events, truncated = decode(decoder, chunks)
        assert events == want, name
        assert truncated is vector["truncated"], name
        assert decoder.last_event_id == vector["last_event_id"], name
        assert decoder.retry == vector["retry"], name


def chunkings(data: bytes, *, seed: int = 0, randoms: int = 12) -> Iterator[tuple[str, list[bytes]]]:
    """Whole, byte by byte, every 2-way split, and seeded random chunkings."""
    yield "whole", [data]
    yield "bytewise", [data[i : i + 1] for i in range(len(data))]
    for cut in range(1, len(data)):
        yield f"split@{cut}", [data[:cut], data[cut:]]
    rng = random.Random(seed)
    for r in range(randoms):
        cuts = (
            sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 8))))
            if len(data) > 1
            else []
        )
        bounds = [0, *cuts, len(data)]
        yield f"random{r}", [data[a:b] for a, b in itertools.pairwise(bounds)]


def mixed_stream(n: int, *, retry: int | None = None, oversized: bool = False) -> bytes:
    """n events touching every decoder path, in turn: an id, a typed two-line event with CRLF and
    UTF-8, a CR-ended comment + retry + invalid UTF-8, a data line of 0-299 bytes, with
    ``oversized`` a 5,000-byte data line, and a field-only block. ``retry`` is the retry value
    (default: the event's number)."""
    kinds = 6 if oversized else 5
    parts = []
    for i in range(n):
        k = i % kinds
        if k == 0:
            parts.append(b'id: %d\ndata: {"i": %d}\n\n' % (i, i))
        elif k == 1:
            parts.append(b"event: e%d\r\ndata: caf\xc3\xa9 %d\r\ndata: two\r\n\r\n" % (i % 7, i))
        elif k == 2:
            parts.append(b": comment\rretry: %d\rdata: \xff\xfe bad\r\r" % (i if retry is None else retry))
        elif k == 3:
            parts.append(b"data:" + b"x" * (i % 300) + b"\n\n")
        elif k == 4 and oversized:
            parts.append(b"data: " + b"y" * 5000 + b"\n\n")
        else:
            parts.append(b"foo: bar\ndata\n\n")
    return b"".join(parts)
