"""The command's connection end to end, now that an answer's chunks go from C to the caller's
socket: what HTTP/1.1 callers do (pipelining, HTTP/1.0, ``Expect: 100-continue``, a chunked
request body, a 1 MiB head) and what slow or greedy ones do (one that reads a few KB at a time,
an upstream writing 64 KiB reads of a thousand events each) all get whole, well-framed answers,
read here byte by byte from a raw socket on 127.0.0.1 and parsed by a strict chunked reader.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pycurl")
pytest.importorskip("uvicorn")

sys.path.insert(0, str(Path(__file__).parent))
import contextlib

from _gateway_process import GatewayProcess
from fastsse.testing.server import LoopbackServer, serve_in_thread


def chat(model: str = "plain") -> bytes:
    return json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    ).encode()


def request(body: bytes, *, version: str = "1.1", extra: bytes = b"", chunked: bool = False) -> bytes:
    head = (
        f"POST /v1/chat/completions HTTP/{version}\r\nHost: gw\r\ncontent-type: application/json\r\n".encode()
    )
    if chunked:
        half = len(body) // 2
        framed = b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in (body[:half], body[half:])) + b"0\r\n\r\n"
        return head + extra + b"transfer-encoding: chunked\r\n\r\n" + framed
    return head + extra + b"content-length: %d\r\n\r\n" % len(body) + body


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackServer]:
    with serve_in_thread(port=0) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(upstream: LoopbackServer) -> Iterator[GatewayProcess]:
    with GatewayProcess([{"name": "loopback", "base_url": upstream.base_url}]) as process:
        yield process


def connect(gw: GatewayProcess, timeout: float = 20) -> socket.socket:
    host, port = gw.url.split("//")[1].split(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


class Reader:
    """Responses off one socket, in order: status, headers, the de-chunked body."""

    def __init__(self, sock: socket.socket, step: int = 65536, pause: float = 0.0) -> None:
        self.sock = sock
        self.buf = b""
        self.step = step
        self.pause = pause

    def _more(self) -> bool:
        if self.pause:
            time.sleep(self.pause)
        data = self.sock.recv(self.step)
        self.buf += data
        return bool(data)

    def response(self) -> tuple[int, dict[bytes, bytes], bytes]:
        while b"\r\n\r\n" not in self.buf:
            assert self._more(), self.buf[:200]
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        if status == 100:
            return self.response()
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
        if b"content-length" in headers:
            size = int(headers[b"content-length"])
            while len(self.buf) < size:
                assert self._more()
            body, self.buf = self.buf[:size], self.buf[size:]
            return status, headers, body
        if headers.get(b"connection") == b"close" and b"transfer-encoding" not in headers:
            while self._more():  # an HTTP/1.0 answer: its end is the connection's
                pass
            body, self.buf = self.buf, b""
            return status, headers, body
        assert headers.get(b"transfer-encoding") == b"chunked", headers
        chunks: list[bytes] = []
        while True:
            end = self.buf.find(b"\r\n")
            if end < 0:
                assert self._more(), "the body ended without its terminator"
                continue
            size = int(self.buf[:end], 16)  # a bad size line fails here
            if size == 0:
                while len(self.buf) < end + 4:
                    assert self._more()
                assert self.buf[end : end + 4] == b"\r\n\r\n"
                self.buf = self.buf[end + 4 :]
                return status, headers, b"".join(chunks)
            while len(self.buf) < end + 2 + size + 2:
                assert self._more(), "the body ended inside a chunk"
            chunks.append(self.buf[end + 2 : end + 2 + size])
            assert self.buf[end + 2 + size : end + 4 + size] == b"\r\n"
            self.buf = self.buf[end + 4 + size :]


def events(body: bytes) -> list[str]:
    return [line[6:].decode() for line in body.split(b"\n") if line.startswith(b"data: ")]


def whole(body: bytes) -> str:
    """The answer's content, checked whole: [DONE] last, every other event JSON."""
    data = events(body)
    assert data[-1] == "[DONE]"
    text = []
    for one in data[:-1]:
        for choice in json.loads(one)["choices"]:
            text.append((choice.get("delta") or {}).get("content") or "")
    return "".join(text)


def test_pipelined_requests_get_their_answers_in_order(gateway: GatewayProcess) -> None:
    with connect(gateway) as sock:
        sock.sendall(request(chat("long-300")) + request(chat("plain")) + request(chat("long-50")))
        reader = Reader(sock)
        bodies = [reader.response() for _ in range(3)]
    assert [status for status, _, _ in bodies] == [200, 200, 200]
    counts = [len(events(body)) for _, _, body in bodies]
    assert counts[0] > 300 and counts[2] > 50 and counts[0] > counts[2]
    for _, _, body in bodies:
        whole(body)


def test_http_1_0_gets_its_answer_and_the_connection_closes(gateway: GatewayProcess) -> None:
    """No chunked framing for an HTTP/1.0 caller (RFC 9112 6.1): the close ends the answer."""
    with connect(gateway) as sock:
        sock.sendall(request(chat("long-100"), version="1.0"))
        status, headers, body = Reader(sock).response()
        assert status == 200
        assert b"transfer-encoding" not in headers and headers[b"connection"] == b"close"
        whole(body)
        assert sock.recv(1) == b""  # not kept alive


def test_expect_100_continue(gateway: GatewayProcess) -> None:
    with connect(gateway) as sock:
        body = chat("long-20")
        head = request(body, extra=b"expect: 100-continue\r\n")
        sock.sendall(head[: -len(body)])
        first = sock.recv(64)
        assert first.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body)
        reader = Reader(sock)
        reader.buf = first[len(b"HTTP/1.1 100 Continue\r\n\r\n") :]
        status, _, answer = reader.response()
        assert status == 200
        whole(answer)


def test_a_chunked_request_body(gateway: GatewayProcess) -> None:
    with connect(gateway) as sock:
        sock.sendall(request(chat("long-20"), chunked=True))
        status, _, body = Reader(sock).response()
        assert status == 200
        whole(body)


@pytest.mark.parametrize("where", ["header", "url"])
def test_a_head_of_a_mebibyte_is_a_431_and_the_gateway_goes_on(gateway: GatewayProcess, where: str) -> None:
    with connect(gateway) as sock:
        big = b"a" * (1 << 20)
        if where == "header":
            head = request(chat(), extra=b"x-big: " + big + b"\r\n")
        else:
            head = request(chat()).replace(b"/v1/chat/completions", b"/v1/chat/completions?" + big, 1)
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            sock.sendall(head)
        answer = Reader(sock).response()
        assert answer[0] == 431
        assert answer[1][b"connection"] == b"close"
    with connect(gateway) as sock:
        sock.sendall(request(chat()))
        status, _, body = Reader(sock).response()
        assert status == 200
        whole(body)


def test_a_caller_reading_a_few_kilobytes_at_a_time_gets_it_all(gateway: GatewayProcess) -> None:
    """The caller's socket fills and drains many times: the direct writes stop and resume with
    the held pieces in order (a strict chunked reader over the whole body)."""
    with connect(gateway, timeout=60) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
        sock.sendall(request(chat("long-20000:bulk")))
        status, _, body = Reader(sock, step=8192, pause=0.001).response()
    assert status == 200
    text = whole(body)
    assert len(events(body)) > 20000 and text


def test_an_upstream_writing_64_kib_reads_of_a_thousand_events(gateway: GatewayProcess) -> None:
    with connect(gateway, 60) as sock:
        sock.sendall(request(chat("long-20000:bulk")))
        status, _, body = Reader(sock).response()
    assert status == 200
    whole(body)
    assert len(events(body)) >= 20000


def _rss_kib(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(field)


@pytest.mark.parametrize("pace", ["full speed", "slowly"])
def test_a_50_mb_answer_grows_the_gateway_by_at_most_16_mb(pace: str) -> None:
    """The gateway's fold keeps the answer's facts, not its text, and a slow caller holds the
    upstream: its peak RSS over the answer grows by at most 16 MB (it grew by ~60 MB when the
    fold kept the text)."""
    from fastsse.load import spawn_scripted_server

    model = "ttft_ms=0,itl_ms=0,chunks=14000,tokens_per_chunk=400"  # ~52 MB of events
    with (
        spawn_scripted_server(ttft_ms=0, itl_ms=0) as up,
        GatewayProcess([{"name": "scripted", "base_url": up.base_url}]) as gw,
    ):
        pid = gw.proc.pid  # type: ignore[union-attr]
        with connect(gw) as sock:  # warm: the first answer's one-off allocations are not the answer's
            sock.sendall(request(chat("ttft_ms=0,itl_ms=0,chunks=50")))
            assert Reader(sock).response()[0] == 200
        before = _rss_kib(pid)
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")  # reset VmHWM to the RSS now
        with connect(gw, 120) as sock:
            if pace == "slowly":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            sock.sendall(request(chat(model)))
            reader = Reader(sock, step=65536, pause=0.002 if pace == "slowly" else 0.0)
            status, _, body = reader.response()
        grown = _rss_kib(pid, "VmHWM") - before
    assert status == 200
    assert len(body) > 50_000_000
    assert body.endswith(b"data: [DONE]\n\n")
    assert grown < 16 * 1024, f"{grown} KiB"
