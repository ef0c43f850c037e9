"""What libcurl does with HTTP_TRANSFER_DECODING=0, the ground a compiled de-chunker stands on
(issue 36, build item 3): libcurl still parses the chunks, so it still finds the end of a
chunked body on a kept-alive connection and still fails bad chunking with the same code and
message as with decoding on; only the bytes handed to the write callback are the raw ones."""

from __future__ import annotations

import io
import socket
import time

import pytest
from tests._raw_server import RawServer

pycurl = pytest.importorskip("pycurl")

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _run(body: bytes, *, decoding: int, hold: float) -> tuple[int, str, bytes, float]:
    def script(conn: socket.socket) -> None:
        conn.sendall(HEAD + body)
        time.sleep(hold)  # the connection stays open: only the chunk parser can end the body

    with RawServer(script) as server:
        out = io.BytesIO()
        curl = pycurl.Curl()
        curl.setopt(pycurl.URL, server.base_url)
        curl.setopt(pycurl.WRITEFUNCTION, out.write)
        curl.setopt(pycurl.HTTP_TRANSFER_DECODING, decoding)
        curl.setopt(pycurl.TIMEOUT_MS, 10_000)
        start = time.monotonic()
        try:
            curl.perform()
            code, message = 0, ""
        except pycurl.error as exc:
            code, message = exc.args
        finally:
            curl.close()
        return code, message, out.getvalue(), time.monotonic() - start


GOOD = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"


def test_decoding_off_still_finds_the_end_and_hands_raw_bytes() -> None:
    code, _, raw, took = _run(GOOD, decoding=0, hold=3.0)
    assert code == 0
    assert raw == GOOD  # size lines, extensions, trailers: all handed on as they came
    assert took < 2.5  # ended by the last chunk, not by the server closing


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"zz\r\nhello\r\n", id="non-hex"),
        pytest.param(b"1ffffffffffffffff\r\nhello\r\n", id="overflow-64-bits"),
        pytest.param(b"-5\r\nhello\r\n", id="negative"),
        pytest.param(b"5\r\nhelloXX6\r\n world\r\n0\r\n\r\n", id="missing-crlf"),
    ],
)
def test_decoding_off_fails_bad_chunking_as_decoding_on(body: bytes) -> None:
    on = _run(body, decoding=1, hold=0.2)
    off = _run(body, decoding=0, hold=0.2)
    assert on[0] == off[0] == 56  # CURLE_RECV_ERROR
    assert on[1] == off[1]


def test_decoding_off_is_one_callback_per_read_not_per_chunk() -> None:
    event = b'data: {"x":1}\n\n'
    body = b"".join(b"%x\r\n%s\r\n" % (len(event), event) for _ in range(10)) + b"0\r\n\r\n"

    def script(conn: socket.socket) -> None:
        conn.sendall(HEAD)
        time.sleep(0.1)
        conn.sendall(body)  # ten chunks in one server write
        time.sleep(0.5)

    counts: dict[int, int] = {}
    for decoding in (1, 0):
        calls: list[bytes] = []
        with RawServer(script) as server:
            curl = pycurl.Curl()
            curl.setopt(pycurl.URL, server.base_url)
            curl.setopt(pycurl.WRITEFUNCTION, calls.append)
            curl.setopt(pycurl.HTTP_TRANSFER_DECODING, decoding)
            curl.setopt(pycurl.TIMEOUT_MS, 10_000)
            curl.perform()
            curl.close()
        counts[decoding] = len(calls)
        assert sum(map(len, calls)) == (len(event) * 10 if decoding else len(body))
    assert counts[1] == 10  # decoding on: one callback per HTTP chunk
    assert counts[0] < counts[1]  # off: per socket read (one here, unless the kernel splits it)
