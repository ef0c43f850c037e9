"""The completeness rule (``Verdict``): an answer whose every choice finished, with no error and a
clean end of its bytes, is complete even without ``[DONE]`` (Cerebras behind the Hugging Face
router, Anthropic-compatible servers); a cut transfer never is. Held here for ChatStream,
ChatAggregator + Decoder, and create_stream against a raw server on 127.0.0.1."""

from __future__ import annotations

import socket
import struct
import sys
import time
from types import SimpleNamespace
from typing import Any

import fastsse
from test_transport_faults import RawServer, call, chunk, timed

FINISHED = (
    chunk({"role": "assistant", "content": "Hel"})
    + chunk({"content": "lo"})
    + chunk({}, "stop")
    + b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\n\n'
)


def test_chat_stream_without_done(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream()
    stream.write(FINISHED)
    assert stream.verdict.complete is False  # more may come: the bytes have not ended
    stream.close()
    verdict = stream.verdict
    assert (verdict.complete, verdict.done, verdict.usage, verdict.truncated) == (True, False, True, False)
    assert stream.result()["verdict"]["complete"] is True


def test_chat_stream_cut_by_the_transport(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream()
    stream.write(FINISHED)
    stream.close(truncated=True)
    assert (stream.verdict.complete, stream.verdict.truncated) == (False, True)


def test_chat_stream_ending_inside_an_event(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream()
    stream.write(FINISHED + b'data: {"id":"x","choi')
    stream.close()
    assert (stream.verdict.complete, stream.verdict.truncated) == (False, True)


def test_a_cut_after_done_leaves_the_answer_complete(backend: SimpleNamespace) -> None:
    """[DONE] is the answer's own end: bytes cut after it are reported, the answer stays whole."""
    stream = backend.ChatStream()
    stream.write(FINISHED + b"data: [DONE]\n\n" + b'data: {"id":"x"')
    stream.close()
    verdict = stream.verdict
    assert (verdict.complete, verdict.done, verdict.truncated) == (True, True, True)
    stream = backend.ChatStream()
    stream.write(FINISHED + b"data: [DONE]\n\n")
    stream.close(truncated=True)
    assert (stream.verdict.complete, stream.verdict.truncated) == (True, True)


def test_unfinished_choice_is_never_complete(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream()
    stream.write(chunk({"role": "assistant", "content": "Hel"}) + b"data: [DONE]\n\n")
    stream.close()
    assert (stream.verdict.complete, stream.verdict.done) == (False, True)


def test_aggregator_with_decoder(backend: SimpleNamespace) -> None:
    for tail, truncated in ((b"", False), (b"data: {", True)):
        decoder = backend.Decoder()
        agg = backend.ChatAggregator()
        for event in decoder.feed(FINISHED + tail):
            agg.feed_event(event)
        assert agg.verdict.complete is False
        decoder.close()
        agg.close(truncated=decoder.truncated)
        assert agg.verdict.complete is not truncated
        assert agg.verdict.truncated is truncated
        agg.close()  # a later clean close does not heal a cut
        assert agg.verdict.complete is not truncated


def test_error_payload_is_never_complete_even_when_closed(backend: SimpleNamespace) -> None:
    stream = backend.ChatStream()
    stream.write(FINISHED + b'data: {"error":{"message":"late"}}\n\n')
    stream.close()
    assert (stream.verdict.complete, stream.verdict.error) == (False, True)


def _close_without_done(conn: socket.socket) -> None:
    # No chunked encoding and no length: the end of the body is the end of the connection.
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + FINISHED
    )


def _chunked_then_reset(conn: socket.socket) -> None:
    body = FINISHED
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n" % len(body)
        + body
        + b"\r\n"
    )
    time.sleep(0.05)
    linger = struct.pack("HH", 1, 0) if sys.platform == "win32" else struct.pack("ii", 1, 0)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)  # close() sends RST: no last chunk


def test_create_stream_clean_end_without_done(stream_backend: Any) -> None:
    with RawServer(_close_without_done) as raw:
        result = call(raw.base_url, timeout=5)
    verdict = result["verdict"]
    assert result["choices"][0]["message"]["content"] == "Hello"
    assert (verdict["complete"], verdict["done"], verdict["truncated"]) == (True, False, False)


def test_create_stream_cut_after_the_finish_is_not_complete(stream_backend: Any) -> None:
    """Every event arrived whole and the choice finished, but the chunked body never ended: curl
    reports the transfer broken, so the answer cannot be known whole."""
    with RawServer(_chunked_then_reset) as raw:
        _, exc, _ = timed(lambda: call(raw.base_url, timeout=5))
    assert isinstance(exc, fastsse.TransportError), exc
    verdict = exc.result["verdict"]
    assert exc.result["choices"][0]["message"]["content"] == "Hello"
    assert verdict["finish_reasons"] == ["stop"]
    assert (verdict["complete"], verdict["truncated"]) == (False, True)
