"""A typed user of the public API, checked by ``mypy --strict`` (nox -s typing) and run by pytest.

Every annotation below states what a user may rely on; if a public signature loses or changes its
types, mypy fails here first. The compiled backend is typed through its pure-Python twin (each
package's ``__init__`` imports the ``_py`` module under TYPE_CHECKING), so no ``.pyi`` is needed.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fastsse

CHAT = [
    b'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n',
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n',
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}\n\n',
    b'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]
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
    # BACKEND names the backend whose classes fastsse exports, and get_backend(BACKEND) is that one
    backend: str = fastsse.BACKEND
    suffix = {"cython": "_c", "python": "_py"}[backend]
    assert fastsse.Decoder.__module__ == f"fastsse.sse._decoder{suffix}"
    selected = fastsse.get_backend(backend)
    assert (selected.name, selected.Decoder, selected.ChatStream) == (
        backend,
        fastsse.Decoder,
        fastsse.ChatStream,
    )
    python = fastsse.get_backend("python")
    assert python.Decoder().feed(STREAM) == fastsse.Decoder().feed(STREAM)


def test_version() -> None:
    # a release string, and the one the installed distribution reports when this is that install
    version: str = fastsse.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?", version), version
    try:
        dist = importlib.metadata.distribution("fastsse-cython")
    except importlib.metadata.PackageNotFoundError:
        return
    if Path(str(dist.locate_file("fastsse/__init__.py"))).resolve() == Path(fastsse.__file__).resolve():
        assert dist.version == version


def test_chat_aggregator_types() -> None:
    aggregator = fastsse.ChatAggregator()
    folded: list[bool] = []
    for event in fastsse.iter_events(iter(CHAT)):
        if aggregator.feed_event(event):
            folded.append(True)
    result: dict[str, Any] = aggregator.result()
    done: bool = aggregator.done
    complete: bool = aggregator.verdict.complete
    assert (len(folded), done, complete) == (4, True, True)
    assert result["object"] == "chat.completion"
    assert result["choices"][0]["message"]["content"] == "Hello"


def test_chat_stream_write_protocol() -> None:
    seen: list[dict[str, Any]] = []

    def on_chunk(chunk: dict[str, Any]) -> bool:
        seen.append(chunk)
        return True

    stream = fastsse.ChatStream(on_chunk, max_event_bytes=1 << 16)
    for piece in CHAT:
        answer: int | None = stream.write(piece)  # pycurl WRITEFUNCTION: None goes on, 0 aborts
        assert answer is None
    stream.close()
    result: dict[str, Any] = stream.result()
    verdict: fastsse.Verdict = stream.verdict
    assert (len(seen), verdict.complete) == (4, True)
    assert result["choices"][0]["message"]["content"] == "Hello"


def test_server_side_round_trip() -> None:
    encoder = fastsse.ChatChunkEncoder(id="c1", model="m", created=0)
    wire: bytes = b"".join([encoder.role(), encoder.content("Hi"), encoder.finish("stop"), encoder.done()])
    findings: list[fastsse.Finding] = fastsse.check_stream(wire)
    assert [f.code for f in findings if f.severity == "error"] == []
    folded = fastsse.ChatAggregator()
    for event in fastsse.iter_events([wire]):
        folded.feed_event(event)
    assert folded.result()["choices"][0]["message"]["content"] == "Hi"
    single: bytes = fastsse.encode_event("x", event="note", id="1")
    assert fastsse.Decoder().feed(single) == [fastsse.Event(data="x", event="note", id="1")]


MESSAGES = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}\n\n'
    b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n'
    b'data: {"type":"content_block_stop","index":0}\n\n'
    b'data: {"type":"message_stop"}\n\n'
)


def test_format_fold_types() -> None:
    stream = fastsse.MessagesStream(None, max_event_bytes=1 << 16)
    going: int | None = stream.write(MESSAGES)
    assert going is None
    stream.close()
    result: dict[str, Any] = stream.result()
    verdict: fastsse.FormatVerdict = stream.verdict
    complete: bool = verdict.complete
    why: str | None = verdict.why
    departures: tuple[str, ...] = verdict.departures
    assert complete and why is None and departures == ()
    assert result["content"] == [{"type": "text", "text": "Hi"}]
    agg: fastsse.ResponsesAggregator = fastsse.ResponsesAggregator()
    folded: bool = agg.feed_data(b'{"type":"response.completed","response":{"status":"completed"}}')
    terminal: str | None = agg.terminal
    assert folded and terminal == "response.completed"
    responses: fastsse.ResponsesStream = fastsse.ResponsesStream(lambda event: None)
    assert responses.write(b"") is None


def test_relay_types() -> None:
    relay = fastsse.Relay(max_event_bytes=1 << 16, usage="end", model="gw", drop_fields=("x_provider",))
    sent: bytes = b"".join(relay.write(chunk) for chunk in CHAT) + relay.close()
    verdict: fastsse.Verdict = relay.verdict
    result: dict[str, Any] = relay.result()
    text: str = relay.text(0)
    assert verdict.complete and result["model"] == "gw" and text == "Hello"
    assert sent.endswith(b"data: [DONE]\n\n")
