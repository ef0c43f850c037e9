"""ChatStream on both backends: the chat vectors as SSE bytes in every chunking, the write-callback
protocol (abort, error payloads, exceptions, oversized events, close), and input types."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

import fastsse
from _chat_helpers import CHAT_VECTORS, bare, load_chat_vector, sse, verdict_subset
from _sse_helpers import chunkings

CONTENT = [
    b'{"id":"s","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
    b'{"id":"s","choices":[{"index":0,"delta":{"content":"Wa"}}]}',
    b'{"id":"s","choices":[{"index":0,"delta":{"content":"ves \xc3\xa9"}}]}',
    b'{"id":"s","choices":[{"index":0,"delta":{"content":" \xf0\x9f\x8c\x8a"}}]}',
    b'{"id":"s","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
]
STREAM = b"".join(b"data: " + p + b"\n\n" for p in CONTENT) + b"data: [DONE]\n\n"


def _expected_deliveries(vector: dict[str, Any]) -> list[Any]:
    """The chunks on_chunk must see: parsed JSON objects, in order, up to [DONE] or an error."""
    seen = []
    for text in vector["texts"]:
        if text.strip(" ") == "[DONE]":
            break
        try:
            chunk = json.loads(text)
        except ValueError:
            continue
        if isinstance(chunk, dict):
            seen.append(chunk)
            if chunk.get("error") is not None:
                break
    return seen


def _run(stream: Any, pieces: list[bytes]) -> list[int | None]:
    answers = [stream.write(p) for p in pieces]
    stream.close()
    return answers


@pytest.mark.parametrize("path", CHAT_VECTORS, ids=lambda p: p.stem)
def test_vector_as_sse(backend: SimpleNamespace, path: Path) -> None:
    vector = load_chat_vector(path)
    seen: list[Any] = []
    stream = backend.ChatStream(seen.append)
    answer = stream.write(sse(vector["texts"]))
    stream.close()
    result = stream.result()
    verdict = result.pop("verdict")
    expected = dict(vector["verdict"])
    if "complete_once_closed" in vector:  # no [DONE]: the clean close() above completes it
        expected["complete"] = vector["complete_once_closed"]
    stopped = vector["result"].get("error") is not None
    if stopped and "ignored" in expected:
        expected["ignored"] = 0  # the stream stops reading at the error: nothing after it is parsed
    assert result == vector["result"]
    assert {k: verdict[k] for k in expected} == expected
    assert verdict_subset(stream.verdict, expected) == expected
    assert seen == _expected_deliveries(vector)
    assert answer == (0 if stopped else None)
    assert stream.write(b"data: {}\n\n") == 0  # closed (or stopped): nothing more


@pytest.mark.parametrize(
    "name", ["plain_content", "parallel_tool_calls_interleaved", "n2_choice1_first", "midstream_error"]
)
def test_every_chunking_gives_the_same_result(backend: SimpleNamespace, name: str) -> None:
    vector = load_chat_vector(Path(__file__).parent / "vectors" / "chat" / f"{name}.json")
    data = sse(vector["texts"])
    whole = backend.ChatStream()
    _run(whole, [data])
    expected = whole.result()
    for label, pieces in chunkings(data, randoms=6):
        seen: list[Any] = []
        stream = backend.ChatStream(seen.append)
        answers = _run(stream, pieces)
        assert stream.result() == expected, label
        assert seen == _expected_deliveries(vector), label
        assert all(a in (None, 0) for a in answers)


def test_crlf_cr_bom_comments_and_multiline_data(backend: SimpleNamespace) -> None:
    """Framing variations the decoder handles change nothing in the fold."""
    baseline = backend.ChatStream()
    _run(baseline, [STREAM])
    framed = b"\xef\xbb\xbf: hello\r\n\r\n"
    for i, payload in enumerate(CONTENT):
        eol = (b"\r\n", b"\r", b"\n")[i % 3]
        half = payload.index(b",") + 1
        # one payload split over two data lines: the decoder joins them with LF, still valid JSON
        framed += (
            b"event: message" + eol + b"data:" + payload[:half] + eol + b"data:" + payload[half:] + eol + eol
        )
        framed += b": keep-alive" + eol
    framed += b"data: [DONE]\r\n\r\n"
    stream = backend.ChatStream()
    for cut in range(0, len(framed), 7):
        assert stream.write(framed[cut : cut + 7]) is None
    stream.close()
    assert stream.result() == baseline.result()
    assert stream.verdict.complete


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_input_types(backend: SimpleNamespace, kind: type) -> None:
    stream = backend.ChatStream()
    for cut in range(0, len(STREAM), 10):
        stream.write(kind(STREAM[cut : cut + 10]))
    stream.close()
    assert stream.result()["choices"][0]["message"]["content"] == "Waves é 🌊"


def test_non_contiguous_memoryview(backend: SimpleNamespace) -> None:
    doubled = bytes(b for byte in STREAM for b in (byte, 0))
    stream = backend.ChatStream()
    assert stream.write(memoryview(doubled)[::2]) is None
    assert stream.result()["choices"][0]["message"]["content"] == "Waves é 🌊"


@pytest.mark.parametrize("bad", ["data: x\n\n", 5, None, [b"x"]], ids=repr)
def test_write_rejects_other_types_and_stays_usable(backend: SimpleNamespace, bad: object) -> None:
    stream = backend.ChatStream()
    stream.write(STREAM[:40])
    with pytest.raises(TypeError, match=type(bad).__name__):
        stream.write(bad)
    assert stream.write(STREAM[40:]) is None
    assert stream.verdict.complete


# Aborting from on_chunk


@pytest.mark.parametrize("k", range(1, len(CONTENT) + 1))
@pytest.mark.parametrize("split", ["one write", "bytewise"])
@pytest.mark.parametrize("falsy", [False, 0])
def test_abort_after_k_chunks(backend: SimpleNamespace, k: int, split: str, falsy: object) -> None:
    seen: list[Any] = []

    def on_chunk(chunk: dict[str, Any]) -> object:
        seen.append(chunk)
        return falsy if len(seen) == k else True

    stream = backend.ChatStream(on_chunk)
    pieces = [STREAM] if split == "one write" else [STREAM[i : i + 1] for i in range(len(STREAM))]
    answers = [stream.write(p) for p in pieces]
    assert len(seen) == k  # nothing after the one answered False, even from the same write
    assert answers.count(0) >= 1
    first_zero = answers.index(0)
    assert all(a is None for a in answers[:first_zero])
    assert all(a == 0 for a in answers[first_zero:])
    reference = backend.ChatAggregator()
    for payload in CONTENT[:k]:
        reference.feed_data(payload)
    result = stream.result()
    verdict = result.pop("verdict")
    assert result == bare(reference.result())  # the chunk answered False is folded too
    assert verdict["aborted"] and not verdict["complete"]
    stream.close()
    assert not stream.verdict.truncated  # bytes we refused to read do not count as truncation


def test_on_chunk_true_or_none_goes_on(backend: SimpleNamespace) -> None:
    answers = iter([True, None, 1, "yes", None])
    stream = backend.ChatStream(lambda chunk: next(answers))
    assert stream.write(STREAM) is None
    stream.close()
    assert stream.verdict.complete


def test_error_payload_is_forwarded_then_stops(backend: SimpleNamespace) -> None:
    error = {"message": "overloaded", "type": "server_error"}
    data = (
        b"data: " + CONTENT[1] + b"\n\n"
        b"data: " + orjson.dumps({"error": error}) + b"\n\n"
        b"data: " + CONTENT[2] + b"\n\n"
        b"data: [DONE]\n\n"
    )
    seen: list[Any] = []
    stream = backend.ChatStream(seen.append)
    assert stream.write(data) == 0
    assert seen == [orjson.loads(CONTENT[1]), {"error": error}]
    assert stream.write(b"data: " + CONTENT[3] + b"\n\n") == 0
    result = stream.result()
    assert result["error"] == error
    assert result["choices"][0]["message"]["content"] == "Wa"
    assert result["verdict"]["error"] and not result["verdict"]["complete"]
    assert stream.aggregator.error == error


def test_error_event_type(backend: SimpleNamespace) -> None:
    seen: list[Any] = []
    stream = backend.ChatStream(seen.append)
    data = (
        b"data: "
        + CONTENT[1]
        + b"\n\nevent: error\ndata: upstream timed out\n\ndata: "
        + CONTENT[2]
        + b"\n\n"
    )
    assert stream.write(data) == 0
    assert seen[-1] == {"error": "upstream timed out"}
    assert len(seen) == 2
    assert stream.result()["error"] == "upstream timed out"


def test_on_chunk_exception_propagates_and_stops(backend: SimpleNamespace) -> None:
    class Boom(Exception):
        pass

    boom = Boom("from the callback")
    seen: list[Any] = []

    def on_chunk(chunk: dict[str, Any]) -> None:
        seen.append(chunk)
        if len(seen) == 2:
            raise boom

    stream = backend.ChatStream(on_chunk)
    with pytest.raises(Boom) as info:
        stream.write(STREAM)
    assert info.value is boom
    assert len(seen) == 2
    assert stream.write(STREAM) == 0
    result = stream.result()
    assert result["choices"][0]["message"]["content"] == "Wa"  # the chunk it raised on is folded
    assert result["verdict"]["aborted"]


def test_base_exception_propagates(backend: SimpleNamespace) -> None:
    def on_chunk(chunk: dict[str, Any]) -> None:
        raise KeyboardInterrupt

    stream = backend.ChatStream(on_chunk)
    with pytest.raises(KeyboardInterrupt):
        stream.write(STREAM)
    assert stream.write(STREAM) == 0


def test_truthiness_that_raises_counts_as_on_chunk_raising(backend: SimpleNamespace) -> None:
    class Odd:
        def __bool__(self) -> bool:
            raise ValueError("no truth")

    stream = backend.ChatStream(lambda chunk: Odd())
    with pytest.raises(ValueError, match="no truth"):
        stream.write(STREAM)
    assert stream.write(STREAM) == 0


def test_write_from_inside_on_chunk_is_refused(backend: SimpleNamespace) -> None:
    holder: list[Any] = []

    def on_chunk(chunk: dict[str, Any]) -> None:
        holder[0].write(b"data: {}\n\n")

    stream = backend.ChatStream(on_chunk)
    holder.append(stream)
    with pytest.raises(RuntimeError, match="inside on_chunk"):
        stream.write(STREAM)
    assert stream.write(STREAM) == 0


# max_event_bytes, close, result


def test_event_too_large_stops_the_stream(backend: SimpleNamespace) -> None:
    big = b'{"choices":[{"index":0,"delta":{"content":"' + b"x" * 500 + b'"}}]}'
    data = b"data: " + CONTENT[1] + b"\n\ndata: " + big + b"\n\ndata: " + CONTENT[2] + b"\n\n"
    seen: list[Any] = []
    stream = backend.ChatStream(seen.append, max_event_bytes=200)
    with pytest.raises(fastsse.EventTooLarge) as info:
        stream.write(data)
    assert isinstance(info.value, fastsse.SSEError)
    assert info.value.limit == 200
    assert seen == [orjson.loads(CONTENT[1])]  # the chunk after the oversized one is not delivered
    assert stream.write(b"data: " + CONTENT[3] + b"\n\n") == 0
    verdict = stream.verdict
    assert verdict.too_large and not verdict.complete
    assert stream.result()["choices"][0]["message"]["content"] == "Wa"


def test_event_too_large_across_writes(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream(max_event_bytes=100)
    assert stream.write(b"data: " + CONTENT[1] + b"\n\ndata: ") is None
    with pytest.raises(fastsse.EventTooLarge):
        for _ in range(10):
            stream.write(b"y" * 20)
    assert stream.write(b"\n\n") == 0


def test_max_event_bytes_validation(backend: SimpleNamespace) -> None:
    with pytest.raises(ValueError, match="max_event_bytes"):
        backend.ChatStream(max_event_bytes=0)


def test_close_marks_truncation(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream()
    stream.write(STREAM[: len(STREAM) // 2])
    assert stream.close() == []
    verdict = stream.verdict
    assert verdict.truncated and not verdict.done and not verdict.complete
    assert stream.write(STREAM) == 0
    stream.close()
    assert stream.verdict.truncated


def test_close_after_complete_stream(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream()
    stream.write(STREAM)
    stream.close()
    verdict = stream.verdict
    assert verdict.complete and not verdict.truncated
    assert stream.result()["verdict"]["finish_reasons"] == ["stop"]


def test_feed_is_write_and_returns_nothing(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream()
    assert stream.feed(STREAM) == []
    assert stream.verdict.complete


def test_result_is_json_data(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream()
    stream.write(STREAM)
    result = stream.result()
    assert json.loads(json.dumps(result)) == result
    assert orjson.loads(orjson.dumps(result)) == result
    assert result["verdict"] == {
        "complete": True,
        "why": None,
        "usage": False,
        "error": False,
        "aborted": False,
        "too_large": False,
        "truncated": False,
        "skipped": 0,
        "ignored": 0,
        "malformed": 0,
        "stop_reason": "stop",
        "done": True,
        "finish_reasons": ["stop"],
        "unknown_parts": 0,
    }


def test_chunks_after_done_are_not_delivered(backend: SimpleNamespace) -> None:
    seen: list[Any] = []
    stream = backend.ChatStream(seen.append)
    assert stream.write(STREAM + b"data: " + CONTENT[1] + b"\n\ndata: junk\n\n") is None
    assert len(seen) == len(CONTENT)
    assert stream.aggregator.ignored == 2
    assert stream.result()["choices"][0]["message"]["content"] == "Waves é 🌊"


def test_no_callback(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream(None)
    assert stream.write(STREAM) is None
    assert stream.verdict.complete


@pytest.mark.c_extension
def test_chat_stream_docs_match() -> None:
    import inspect

    c_cls = fastsse.get_backend("cython").ChatStream
    py_cls = fastsse.get_backend("python").ChatStream
    assert inspect.getdoc(c_cls) == inspect.getdoc(py_cls)
    assert inspect.signature(c_cls).parameters.keys() == inspect.signature(py_cls).parameters.keys()
    for name in ("write", "close", "feed", "result", "verdict", "aggregator"):
        assert inspect.getdoc(getattr(c_cls, name)) == inspect.getdoc(getattr(py_cls, name)), name
