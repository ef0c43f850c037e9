"""The hand-written gateways the gateway benchmark sets beside ``python -m fastsse gateway``: byte
passthroughs with no parsing (the least a gateway can do), each one file's worth of what a team
writes first.

    python benchmarks/_gateway_peers.py httpx UPSTREAM PORT     # Starlette + one httpx.AsyncClient, uvicorn
    python benchmarks/_gateway_peers.py aiohttp UPSTREAM PORT   # aiohttp.web + one ClientSession
    python benchmarks/_gateway_peers.py loop UPSTREAM PORT      # the upstream leg on the loop (a prototype)
    python benchmarks/_gateway_peers.py loop-raw UPSTREAM PORT  # the same with bytes passed through
    python benchmarks/_gateway_peers.py loop-c UPSTREAM PORT    # loop with each body relayed in C

``UPSTREAM`` is the upstream's base URL (``.../v1``); each serves ``POST /v1/chat/completions``
and passes the upstream's status and bytes through unchanged, except ``loop``, a prototype of the
gateway's next data plane (benchmarks/README.md, "A prototype of the upstream leg on the loop"),
which relays the body through a compiled ``fastsse.Relay``, and ``loop-c``, its body phase in C
(benchmarks/README.md, "Where this design stops").
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any


def httpx_app(upstream: str) -> Any:
    import contextlib

    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    client: httpx.AsyncClient | None = None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        nonlocal client
        limits = httpx.Limits(max_connections=2048, max_keepalive_connections=2048)
        client = httpx.AsyncClient(base_url=upstream, timeout=600, limits=limits)
        yield
        await client.aclose()

    async def chat(request: Request) -> StreamingResponse:
        assert client is not None
        sent = client.build_request(
            "POST",
            "/chat/completions",
            content=await request.body(),
            headers={"content-type": "application/json"},
        )
        answer = await client.send(sent, stream=True)

        async def body() -> Any:
            try:
                async for piece in answer.aiter_raw():
                    yield piece
            finally:
                await answer.aclose()

        kind = answer.headers.get("content-type", "text/event-stream")
        return StreamingResponse(body(), status_code=answer.status_code, media_type=kind)

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])], lifespan=lifespan)


def aiohttp_main(upstream: str, port: int) -> None:
    import aiohttp
    from aiohttp import web

    async def start(app: web.Application) -> None:
        app["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def stop(app: web.Application) -> None:
        await app["session"].close()

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        session: aiohttp.ClientSession = request.app["session"]
        async with session.post(
            upstream + "/chat/completions", data=body, headers={"content-type": "application/json"}
        ) as answer:
            response = web.StreamResponse(
                status=answer.status, headers={"content-type": answer.headers.get("content-type", "")}
            )
            await response.prepare(request)
            async for piece in answer.content.iter_any():
                await response.write(piece)
            await response.write_eof()
            return response

    app = web.Application()
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, backlog=4096)


def loop_main(upstream: str, port: int, *, relay: bool = True, pump: bool = False) -> None:
    """The upstream leg on the event loop, a prototype of the gateway's next data plane (not
    product code: no timeouts, retries, TLS, routes, keys, translation, log line or metrics).

    uvloop; the caller's request parsed by ``httptools.HttpRequestParser``; per upstream a pool of
    kept-alive HTTP/1.1 connections whose answers ``httptools.HttpResponseParser`` (llhttp) parses.
    Once an answer's head is in, its connection's ``data_received`` is that answer's parser's
    ``feed_data`` and the parser's ``on_body`` the compiled ``BytesStream.write`` (a compiled
    ``Relay`` whose output goes to a compiled ``WireSink``: framed as one HTTP/1.1 chunk and handed
    to the caller's ``transport.write``). Per readiness: uvloop's recv, llhttp's cut of the chunked
    body, the relay's pass and the caller's write, with no Python frame. Python runs once per
    answer: the request, the head, the end. A non-2xx answer's body goes to the ``WireSink``
    directly (framed, not relayed). The caller's transport full pauses the upstream's reading.
    ``relay=False`` (``loop-raw``) sends every answer's body that way: the design's floor, a byte
    relay with no understanding of the stream, as nginx is.

    ``pump=True`` (``loop-c``) is the next design's body phase: once a chunked 2xx answer's head is
    out, its two sockets go to the compiled ``Pump`` of ``reference/body_pump.pyx`` (one epoll set
    of its own, one reader of the loop's: a recv, the de-chunking, the relay's pass and a send per
    readiness in C, no bytes object per read but the relay's own in and out), and come back to
    the loop at the answer's end."""
    import asyncio
    import http
    import urllib.parse

    import httptools
    import uvloop

    import fastsse
    from fastsse import _backend

    if not _backend.COMPILED:
        raise SystemExit("the loop peer needs the compiled backend")
    from fastsse.client import _streams_c

    parts = urllib.parse.urlsplit(upstream)
    host, up_port = parts.hostname or "127.0.0.1", parts.port or 80
    ask = (
        b"POST " + (parts.path.rstrip("/") + "/chat/completions").encode() + b" HTTP/1.1\r\n"
        b"host: " + f"{host}:{up_port}".encode() + b"\r\n"
        b"content-type: application/json\r\naccept: text/event-stream\r\ncontent-length: "
    )
    reasons = {s.value: s.phrase.encode() for s in http.HTTPStatus}
    idle: list[Up] = []  # the kept-alive upstream connections not in use
    pumps: Any = None
    if pump:
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
        from _reference import build_module

        pumps = build_module("body_pump").Pump()

    class Up(asyncio.Protocol):
        """One upstream connection. Idle: any byte or the end closes it. During an answer its
        ``data_received`` (an instance attribute, re-read by uvloop through ``set_protocol``) is
        the answer's ``first``, then its parser's ``feed_data``."""

        def __init__(self) -> None:
            self.transport: Any = None
            self.exchange: Exchange | None = None

        def connection_made(self, transport: Any) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.transport.close()  # unasked bytes on an idle connection

        def connection_lost(self, exc: BaseException | None) -> None:
            if self in idle:
                idle.remove(self)
            exchange, self.exchange = self.exchange, None
            if exchange is not None:
                exchange.cut()

        def listen(self, data_received: Any) -> None:
            if data_received is None:
                self.__dict__.pop("data_received", None)
            else:
                self.data_received = data_received  # type: ignore[method-assign]
            self.transport.set_protocol(self)  # uvloop keeps the bound method it finds here

    class Exchange:
        """One answer: the caller's side (``front``), the upstream connection (``up``)."""

        def __init__(self, front: Front, up: Up, body: bytes) -> None:
            self.front, self.up = front, up
            self.head = b""
            self.kind = b"text/event-stream"
            self.sent = False
            self.stream: Any = None
            self.parser: Any = None
            self.on_body: Any = None
            self.chunked = False
            self.body: Any = None  # the pump's, in loop-c
            sink = _streams_c.WireSink(self.slow)
            sink.write = front.transport.write
            self.sink = sink
            front.exchange, up.exchange = self, self
            up.listen(self.first)
            up.transport.write(ask + str(len(body)).encode() + b"\r\n\r\n" + body)

        def first(self, data: bytes) -> None:
            # the answer's first reads, up to its head: the status picks the body's path
            head = self.head + data if self.head else data
            if head.find(b"\r\n\r\n") < 0:
                self.head = head
                return
            self.head = b""
            status = int(head[9:12]) if head[9:12].isdigit() else 502
            if relay and 200 <= status < 300:
                self.stream = _streams_c.BytesStream(
                    fastsse.Relay(keep_text=False), self.sink, False, relay=True
                )
                self.on_body = self.stream.write
            else:
                self.on_body = self.sink  # framed as it comes, no relay
            self.parser = httptools.HttpResponseParser(self)
            self.up.listen(self.parser.feed_data)
            if pumps is not None and self.stream is not None:
                cut = head.find(b"\r\n\r\n") + 4
                self.parser.feed_data(head[:cut])  # the head alone: the caller's head goes out
                front = self.front.transport
                if self.chunked and not front.get_write_buffer_size():
                    self.up.transport.pause_reading()
                    up_fd = self.up.transport.get_extra_info("socket").fileno()
                    down_fd = front.get_extra_info("socket").fileno()
                    self.body = pumps.add(up_fd, down_fd, self.stream.relay, head[cut:], self.pumped)
                    return
                head = head[cut:]
            self.parser.feed_data(head)

        def pumped(self, whole: bool) -> None:
            # the pump ended the body: the two connections are the loop's again
            self.body = None
            if whole:
                self.end(self.parser.should_keep_alive())
                self.front.done()
            else:
                self.up.exchange = self.front.exchange = None
                self.up.transport.close()
                self.front.transport.close()

        def on_header(self, name: bytes, value: bytes) -> None:
            lower = name.lower()
            if lower == b"content-type":
                self.kind = value
            elif lower == b"transfer-encoding" and b"chunked" in value.lower():
                self.chunked = True

        def on_headers_complete(self) -> None:
            status = self.parser.get_status_code()
            self.front.transport.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncache-control: no-cache\r\n"
                b"transfer-encoding: chunked\r\n%s\r\n"
                % (
                    status,
                    reasons.get(status, b"Unknown"),
                    self.kind,
                    b"" if self.front.keep else b"connection: close\r\n",
                )
            )
            self.sent = True
            self.sink.direct = True

        def slow(self, piece: bytes) -> bool:
            return False  # the caller is gone: stop the stream

        def on_message_complete(self) -> None:
            if self.stream is not None:
                self.stream.close()  # the relay's tail, through the sink
            self.front.transport.write(b"0\r\n\r\n")
            keep = self.parser.should_keep_alive()
            self.end(keep)
            self.front.done()

        def end(self, keep: bool) -> None:
            up, front = self.up, self.front
            up.exchange, front.exchange = None, None
            if keep and not up.transport.is_closing():
                up.listen(None)
                up.transport.resume_reading()
                idle.append(up)
            else:
                up.transport.close()

        def cut(self) -> None:
            # the upstream went away mid-answer: the caller's answer ends cut (no last chunk)
            self.front.exchange = None
            if not self.sent:
                self.front.transport.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                self.front.done()
            else:
                self.front.transport.close()

        def gone(self) -> None:
            # the caller went away mid-answer: stop relaying, drop the upstream connection
            self.sink.direct = False
            self.up.exchange = None
            if self.body is not None:
                self.body.cancel()
            self.up.transport.close()

    class Front(asyncio.Protocol):
        """One caller connection; its requests parsed by llhttp (``data_received`` is the parser's
        ``feed_data``), one answer at a time."""

        def __init__(self) -> None:
            self.transport: Any = None
            self.exchange: Exchange | None = None
            self.url = b""
            self.body: list[bytes] = []
            self.keep = True
            self.parser = httptools.HttpRequestParser(self)
            self.data_received = self.parser.feed_data

        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            transport.set_write_buffer_limits(high=64 * 1024)

        def connection_lost(self, exc: BaseException | None) -> None:
            exchange, self.exchange = self.exchange, None
            if exchange is not None:
                exchange.gone()

        def pause_writing(self) -> None:
            if self.exchange is not None:
                self.exchange.up.transport.pause_reading()

        def resume_writing(self) -> None:
            if self.exchange is not None:
                self.exchange.up.transport.resume_reading()

        def on_message_begin(self) -> None:
            self.url, self.body = b"", []

        def on_url(self, url: bytes) -> None:
            self.url += url

        def on_headers_complete(self) -> None:
            self.keep = self.parser.should_keep_alive()
            if self.parser.should_upgrade():
                self.keep = False

        def on_body(self, data: bytes) -> None:
            self.body.append(data)

        def on_message_complete(self) -> None:
            if self.parser.get_method() != b"POST" or not self.url.endswith(b"/chat/completions"):
                self.transport.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                self.done()
                return
            body = b"".join(self.body)
            self.body = []
            if idle:
                Exchange(self, idle.pop(), body)
            else:
                asyncio.get_running_loop().create_task(self.connect(body))

        async def connect(self, body: bytes) -> None:
            try:
                _, up = await asyncio.get_running_loop().create_connection(Up, host, up_port)
            except OSError:
                self.transport.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                self.done()
                return
            if self.transport.is_closing():
                idle.append(up)
                return
            Exchange(self, up, body)

        def done(self) -> None:
            if not self.keep:
                self.transport.close()

    async def serve() -> None:
        if pumps is not None:
            asyncio.get_running_loop().add_reader(pumps.fileno(), pumps.drain)
        server = await asyncio.get_running_loop().create_server(Front, "127.0.0.1", port, backlog=4096)
        async with server:
            await server.serve_forever()

    uvloop.run(serve())


def main(argv: list[str]) -> None:
    kind, upstream, port = argv[0], argv[1].rstrip("/"), int(argv[2])
    if kind == "aiohttp":
        aiohttp_main(upstream, port)
        return
    if kind in ("loop", "loop-raw", "loop-c"):
        loop_main(upstream, port, relay=kind != "loop-raw", pump=kind == "loop-c")
        return
    import uvicorn

    uvicorn.run(
        httpx_app(upstream), host="127.0.0.1", port=port, log_level="warning", access_log=False, backlog=4096
    )


if __name__ == "__main__":
    main(sys.argv[1:])
