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
