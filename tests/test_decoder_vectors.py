"""Golden vectors (tests/vectors/sse.json, written from the WHATWG text and the WPT format cases)
fed whole, byte by byte, at every 2-way split and in seeded random chunkings, on both backends."""

from __future__ import annotations

from typing import Any

import pytest

from _sse_helpers import assert_vector, chunkings, decode, expected_events, load_sse_vectors

VECTORS = load_sse_vectors()


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector_every_chunking(backend: Any, vector: dict[str, Any]) -> None:
    assert_vector(backend, vector, chunkings(vector["bytes"], seed=len(vector["name"])))


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview], ids=["bytes", "bytearray", "memoryview"])
@pytest.mark.parametrize("vector", VECTORS[:8] + VECTORS[-4:], ids=lambda v: v["name"])
def test_vector_input_types(backend: Any, vector: dict[str, Any], kind: type) -> None:
    data = vector["bytes"]
    events, _ = decode(backend.Decoder(), [kind(data[: len(data) // 2]), kind(data[len(data) // 2 :])])
    assert events == expected_events(vector)


def test_vectors_cover_the_spec_cases() -> None:
    # The list of cases; a vector set that lost one of them should fail here.
    names = {v["name"] for v in VECTORS}
    for needed in [
        "cr",
        "lf",
        "crlf",
        "bom",
        "comments",
        "no-colon",
        "no-space",
        "two-spaces",
        "id-nul-ignored",
        "id-persists",
        "id-empty-resets",
        "retry-digits",
        "unknown-and-miscased",
        "field-only-blocks",
        "eof-unterminated",
        "invalid-utf8",
        "unicode",
    ]:
        assert needed in names
