"""A typed user of the public API, checked by ``mypy --strict`` (nox -s typing) and run by pytest.

Every annotation below states what a user may rely on; if a public signature loses or changes its
types, mypy fails here first. The compiled backend is typed through its pure-Python twin
(``_backend.py`` imports the ``_py`` modules under TYPE_CHECKING), so no ``.pyi`` is needed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import fastsse

STREAM = b'id: 7\nretry: 1500\nevent: note\ndata: {"a": 1}\n\ndata: tail\n\n'


def decode_all(chunks: list[bytes | bytearray | memoryview]) -> list[fastsse.Event]:
    decoder = fastsse.Decoder(max_event_bytes=1 << 16)
    events: list[fastsse.Event] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    events += decoder.close()
    truncated: bool = decoder.truncated
    assert not truncated
    return events


def test_decoder_types() -> None:
    events = decode_all([STREAM[:5], bytearray(STREAM[5:20]), memoryview(STREAM[20:])])
    first = events[0]
    event_type: str = first.event
    data: str = first.data
    last_id: str = first.id
    retry: int | None = first.retry
    assert (event_type, data, last_id, retry) == ("note", '{"a": 1}', "7", 1500)
    assert events[1] == fastsse.Event(data="tail", event="message", id="7", retry=1500)


def test_decoder_state_types() -> None:
    decoder = fastsse.Decoder()
    decoder.feed(STREAM)
    last_event_id: str = decoder.last_event_id
    retry: int | None = decoder.retry
    assert (last_event_id, retry) == ("7", 1500)


def test_iter_events_types() -> None:
    source: Iterator[bytes] = iter([STREAM])
    types = [event.event for event in fastsse.iter_events(source, max_event_bytes=1024)]
    assert types == ["note", "message"]


def test_errors_are_value_errors() -> None:
    with pytest.raises(fastsse.SSEError) as info:
        fastsse.Decoder(max_event_bytes=4).feed(b"data: far too long\n\n")
    error: ValueError = info.value
    assert isinstance(error, fastsse.EventTooLarge)
    limit: int = error.limit
    assert limit == 4


def test_backend_names() -> None:
    backend: str = fastsse.BACKEND
    assert backend in ("cython", "python")
    python = fastsse.get_backend("python")
    assert python.Decoder().feed(STREAM) == fastsse.Decoder().feed(STREAM)
    version: str = fastsse.__version__
    assert version
