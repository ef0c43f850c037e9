"""An answer's parts are freed as its last reference goes, not by the cyclic collector: a stream
that lived through a few collections sits in the oldest generation, which is collected rarely,
so parts kept alive by a cycle (the fold's buffers, the response, the route) would pile up in a
gateway holding many streams. Each check counts what ``gc.collect()`` finds unreachable after
answers read with the collector off, on the loopback server, for both backends, through libcurl
(``AsyncClient``) and through the event loop's upstream leg (``LoopLeg``), and for the gateway's
``Downstream``."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from fastsse.client import LoopLeg
from fastsse.client.aio import AsyncClient

ANSWERS = 20
REQUEST = {"model": "long-5", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _options(server: Any) -> dict[str, Any]:
    return {"base_url": server.base_url, "api_key": "k", "max_retries": 0, "timing": True, "keep_text": False}


@pytest.mark.parametrize("fmt", ["relay", "chat"])
@pytest.mark.parametrize("leg", ["curl", "loop"])
def test_an_answer_leaves_no_cycle(
    server: Any, stream_backend: Any, leg: str, fmt: str, collector_off: None
) -> None:
    async def main() -> int:
        client: Any = LoopLeg(**_options(server)) if leg == "loop" else AsyncClient(**_options(server))
        on_chunk = (lambda piece: None) if fmt == "relay" else None
        for _ in range(3):  # the client's own one-off objects first
            await client.create_stream(REQUEST, on_chunk, format=fmt)
        gc.collect()
        for _ in range(ANSWERS):
            result = await client.create_stream(REQUEST, on_chunk, format=fmt)
            assert result["verdict"]["complete"]
        found = gc.collect()
        if leg == "loop":
            assert client.taken == ANSWERS + 3
        await client.close()
        return found

    found = asyncio.run(main())
    # before the parts were unhooked at the end: ~40 objects an answer (the fold, its buffers...)
    assert found < ANSWERS, f"{found} objects in cycles after {ANSWERS} answers"


def test_a_closed_downstream_leaves_no_cycle(stream_backend: Any, collector_off: None) -> None:
    from fastsse.gateway import Downstream

    async def main() -> int:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        for _ in range(ANSWERS):
            down = Downstream(send, [(b"content-type", b"text/event-stream")])
            down.piece(b"data: {}\n\n")
            await down.flush()
            await down.finish()
            down.close()
            assert down.piece(b"data: late\n\n") is False  # a piece after close stops its transfer
        return gc.collect()

    found = asyncio.run(main())
    assert found < ANSWERS, f"{found} objects in cycles after {ANSWERS} answers"


def test_a_closed_connection_of_the_commands_server_leaves_no_cycle(collector_off: None) -> None:
    # HttpServer's connection, its parser (which holds the connection's callbacks), its transport
    # and its requests point at each other until the connection is lost; then they are cut.
    # Counted by type: asyncio's own transports keep cycles of their own.
    import socket

    from fastsse.gateway import HttpServer
    from fastsse.gateway._http import Connection, Exchange

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x", "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def main() -> list[str]:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        server = HttpServer(app)
        await server.start(sock)
        port = sock.getsockname()[1]

        async def one(pipelined: int) -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n" * pipelined)
            await reader.readuntil(b"0\r\n\r\n")  # the first answer; the others are left unread
            writer.close()
            await writer.wait_closed()

        await one(1)
        await asyncio.sleep(0.05)
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for n in range(ANSWERS):
                await one(1 + n % 3)
            await asyncio.sleep(0.2)
            gc.collect()
            ours = (Connection, Exchange)
            found = [type(o).__name__ for o in gc.garbage if isinstance(o, ours)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        server.close()
        return found

    assert asyncio.run(main()) == []
