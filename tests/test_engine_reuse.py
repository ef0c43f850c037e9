"""A client prepares its own options once and keeps them set on its pooled handles (issue 28):
each request must still go out with exactly its own body, key, headers and timeout. Every check
reads what a raw server on 127.0.0.1 received."""

from __future__ import annotations

import socket
from typing import Any

import orjson
import pytest

import fastsse
from _raw_server import RawServer
from test_transport_faults import SSE_HEAD, chunk, request

# every test here runs on both engine drivers (the compiled libcurl driver and pycurl)
pytestmark = pytest.mark.usefixtures("driver")

BODY = chunk({"role": "assistant", "content": "ok"}) + chunk({}, "stop") + b"data: [DONE]\n\n"


def _answer(conn: socket.socket) -> None:
    conn.sendall(SSE_HEAD + b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)


def _sent(raw: RawServer, i: int) -> tuple[dict[str, str], dict[str, Any]]:
    head, _, body = raw.requests[i].partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")[1:]
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        assert name.lower() not in headers, f"{name} sent twice"
        headers[name.lower()] = value.strip()
    return headers, orjson.loads(body)


@pytest.fixture
def raw() -> Any:
    with RawServer(_answer) as server:
        yield server


def test_each_request_carries_its_own_key_headers_and_body(raw: RawServer, stream_backend: Any) -> None:
    with fastsse.Client(base_url=raw.base_url, api_key="k1", max_connections=1, timeout=10) as client:
        results = [
            client.create_stream(request("a")),
            client.create_stream(request("b"), api_key="k2", headers={"X-Trace": "t"}),
            client.create_stream(request("c")),
            client.create_stream(request("d"), timeout=5),
            client.create_stream(request("e")),
        ]
    assert all(r["verdict"]["complete"] for r in results)
    sent = [_sent(raw, i) for i in range(5)]
    assert [body["model"] for _, body in sent] == ["a", "b", "c", "d", "e"]
    assert [h["authorization"] for h, _ in sent] == [
        "Bearer k1",
        "Bearer k2",
        "Bearer k1",
        "Bearer k1",
        "Bearer k1",
    ]
    assert [h.get("x-trace") for h, _ in sent] == [None, "t", None, None, None]
    assert all(body["stream"] is True for _, body in sent)


def test_a_client_reads_the_environment_when_it_is_made(
    raw: RawServer, stream_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "e1")
    with fastsse.Client(base_url=raw.base_url, max_connections=1, timeout=10) as client:
        monkeypatch.setenv("OPENAI_API_KEY", "e2")
        client.create_stream(request("a"))
        client.create_stream(request("b"), timeout=5)  # a request's own options: the same key
    with fastsse.Client(base_url=raw.base_url, max_connections=1, timeout=10) as client:
        client.create_stream(request("c"))
        monkeypatch.delenv("OPENAI_API_KEY")
        fastsse.create_stream(request("d"), base_url=raw.base_url)  # one call: read at the call
    keys = [_sent(raw, i)[0].get("authorization") for i in range(4)]
    assert keys == ["Bearer e1", "Bearer e1", "Bearer e2", None]


def test_a_bad_body_fails_alone(raw: RawServer, stream_backend: Any) -> None:
    with fastsse.Client(base_url=raw.base_url, api_key="k1", max_connections=1, timeout=10) as client:
        with pytest.raises(TypeError, match="input must be a mapping"):
            client.create_stream(["not", "a", "body"])  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            client.create_stream({"model": "m", "x": object()})
        assert client.create_stream(request("a"))["verdict"]["complete"]
    headers, body = _sent(raw, 0)
    assert body["model"] == "a" and headers["authorization"] == "Bearer k1"
    assert len(raw.requests) == 1


async def _async_requests(base_url: str) -> list[dict[str, Any]]:
    async with fastsse.AsyncClient(base_url=base_url, api_key="k1", max_connections=1, timeout=10) as client:
        return [
            await client.create_stream(request("a")),
            await client.create_stream(request("b"), api_key="k2"),
            await client.create_stream(request("c")),
        ]


def test_async_client_reuses_handles_the_same_way(raw: RawServer, stream_backend: Any) -> None:
    import asyncio

    results = asyncio.run(_async_requests(raw.base_url))
    assert all(r["verdict"]["complete"] for r in results)
    sent = [_sent(raw, i) for i in range(3)]
    assert [(h["authorization"], b["model"]) for h, b in sent] == [
        ("Bearer k1", "a"),
        ("Bearer k2", "b"),
        ("Bearer k1", "c"),
    ]
