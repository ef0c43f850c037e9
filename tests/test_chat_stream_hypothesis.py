"""Properties of ChatStream: any chunking of a stream gives the aggregator's result, both backends
agree on arbitrary bytes, and an abort at any chunk keeps exactly the chunks delivered."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastsse
from _chat_helpers import bare
from test_aggregator_hypothesis import CHUNKS, well_formed_stream

BACKENDS = [pytest.param("cython", marks=pytest.mark.c_extension), "python"]


def _frame(chunks: list[Any], done: bool) -> bytes:
    out = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return out + (b"data: [DONE]\n\n" if done else b"")


@st.composite
def split(draw: st.DrawFn, data: bytes) -> list[bytes]:
    cuts = sorted(draw(st.sets(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize("name", BACKENDS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=well_formed_stream(), done=st.booleans(), data=st.data())
def test_any_chunking_equals_the_aggregator(name: str, chunks: list[Any], done: bool, data: Any) -> None:
    backend = fastsse.get_backend(name)
    raw = _frame(chunks, done)
    seen: list[Any] = []
    stream = backend.ChatStream(seen.append)
    for piece in data.draw(split(raw)):
        assert stream.write(piece) is None
    stream.close()
    agg = backend.ChatAggregator()
    for chunk in chunks:
        agg.feed(chunk)
    if done:
        agg.feed_data("[DONE]")
    result = stream.result()
    verdict = result.pop("verdict")
    assert result == bare(agg.result())
    assert seen == chunks
    assert verdict["done"] is done
    assert not verdict["truncated"]


@pytest.mark.parametrize("name", BACKENDS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=well_formed_stream().filter(bool), data=st.data())
def test_abort_at_any_chunk(name: str, chunks: list[Any], data: Any) -> None:
    backend = fastsse.get_backend(name)
    k = data.draw(st.integers(1, len(chunks)))
    seen: list[Any] = []

    def on_chunk(chunk: dict[str, Any]) -> bool:
        seen.append(chunk)
        return len(seen) < k

    stream = backend.ChatStream(on_chunk)
    answers = [stream.write(p) for p in data.draw(split(_frame(chunks, True)))]
    assert 0 in answers
    assert seen == chunks[:k]
    agg = backend.ChatAggregator()
    for chunk in chunks[:k]:
        agg.feed(chunk)
    result = stream.result()
    assert result.pop("verdict")["aborted"]
    assert result == bare(agg.result())


EVENT_BYTES = st.lists(
    st.sampled_from(
        [b"data: ", b"data:", b"event: error", b"\n", b"\r\n", b"\r", b": c", b"id: 1", b"[DONE]"]
    )
    | st.binary(max_size=12)
    | CHUNKS.map(lambda cs: b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in cs)),
    max_size=12,
).map(b"".join)


@pytest.mark.c_extension
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=EVENT_BYTES, data=st.data(), limit=st.sampled_from([None, 40, 400]))
def test_backends_agree_on_any_bytes(raw: bytes, data: Any, limit: int | None) -> None:
    pieces = data.draw(split(raw))
    outcomes = []
    for name in ("cython", "python"):
        seen: list[Any] = []
        stream = fastsse.get_backend(name).ChatStream(seen.append, max_event_bytes=limit)
        answers: list[Any] = []
        for piece in pieces:
            try:
                answers.append(stream.write(piece))
            except fastsse.EventTooLarge:
                answers.append("too large")
        stream.close()
        outcomes.append((answers, seen, stream.result()))
    assert outcomes[0] == outcomes[1]
