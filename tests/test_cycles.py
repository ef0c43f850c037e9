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
