"""Plain requests through the engine (``client/_plain.py``): ``Client.get`` / ``Client.post`` and
``AsyncClient``'s, with the client's key, headers, timeouts and proxy, every status returned as a
``Reply``, and the body bound raised as ``BodyTooLarge``, never a cut body."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

pycurl = pytest.importorskip("pycurl")

import fastsse  # noqa: E402
from _raw_server import RawServer, clear_proxies  # noqa: E402

LIST = b'{"object":"list","data":[{"id":"m1","object":"model","created":0,"owned_by":"x"}]}'


@pytest.fixture(autouse=True)
def no_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_proxies(monkeypatch)


def answer(status: int, body: bytes, *, chunked: bool = False, kind: bytes = b"application/json") -> Any:
    def script(conn: socket.socket) -> None:
        head = b"HTTP/1.1 %d X\r\ncontent-type: %s\r\nconnection: close\r\n" % (status, kind)
        if chunked:
            pieces = [body[i : i + 1000] for i in range(0, len(body), 1000)]
            framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
            conn.sendall(head + b"transfer-encoding: chunked\r\n\r\n" + framed)
        else:
            conn.sendall(head + b"content-length: %d\r\n\r\n%s" % (len(body), body))

    return script


def served(script: Callable[[socket.socket], None]) -> RawServer:
    return RawServer(script)


def test_get_sends_the_clients_key_and_headers_and_returns_the_reply(driver: str) -> None:
    with (
        served(answer(200, LIST)) as raw,
        fastsse.Client(base_url=raw.base_url, api_key="sk-up", headers={"X-Team": "a"}) as client,
    ):
        reply = client.get("/models", headers={"Accept": "application/json"})
    assert isinstance(reply, fastsse.Reply)
    assert (reply.status, reply.body) == (200, LIST)
    assert reply.headers["content-type"] == "application/json"
    assert reply.url == raw.base_url + "/models"
    assert raw.requests[0].startswith(b"GET /v1/models HTTP/1.1\r\n")
    sent = dict(raw.headers())
    assert sent["authorization"] == "Bearer sk-up" and sent["x-team"] == "a"
    assert sent["accept"] == "application/json" and "content-type" not in sent


def test_messages_key_goes_as_x_api_key(driver: str) -> None:
    with (
        served(answer(200, LIST)) as raw,
        fastsse.Client(api="messages", base_url=raw.base_url, api_key="sk-ant") as client,
    ):
        assert client.get("/models").status == 200
    sent = dict(raw.headers())
    assert sent["x-api-key"] == "sk-ant" and sent["anthropic-version"] and "authorization" not in sent
    assert sent.get("accept") != "text/event-stream"


@pytest.mark.parametrize("status", [404, 500])
def test_an_error_status_is_a_reply_or_with_raise_for_status_an_error(driver: str, status: int) -> None:
    body = b'{"error":{"message":"nope","type":"x"}}'
    with RawServer(answer(status, body)) as raw:
        with fastsse.Client(base_url=raw.base_url, api_key="k") as client:
            reply = client.get("/models")
        with (
            fastsse.Client(base_url=raw.base_url, api_key="k", raise_for_status=True) as client,
            pytest.raises(fastsse.HTTPStatusError) as info,
        ):
            client.get("/models")
    assert (reply.status, reply.body) == (status, body)
    assert info.value.status == status and info.value.body == body
    assert info.value.error == {"message": "nope", "type": "x"}


@pytest.mark.parametrize("chunked", [False, True])
def test_the_body_bound_raises_and_never_cuts(driver: str, chunked: bool) -> None:
    body = b"x" * 50_000
    with (
        RawServer(answer(200, body, chunked=chunked)) as raw,
        fastsse.Client(base_url=raw.base_url, api_key="k") as client,
    ):
        whole = client.get("/models", max_body_bytes=len(body))
        with pytest.raises(fastsse.BodyTooLarge) as info:
            client.get("/models", max_body_bytes=len(body) - 1)
        unbounded = client.get("/models", max_body_bytes=None)
    assert whole.body == body and unbounded.body == body
    error = info.value
    assert isinstance(error, fastsse.TransportError) and error.code == 63 and error.limit == len(body) - 1
    assert "max_body_bytes=49999" in str(error) and error.result["http"]["status"] == 200


def test_an_error_body_is_bounded_too(driver: str) -> None:
    with (
        RawServer(answer(503, b"e" * 5000)) as raw,
        fastsse.Client(base_url=raw.base_url, api_key="k") as client,
        pytest.raises(fastsse.BodyTooLarge) as info,
    ):
        client.get("/models", max_body_bytes=4096)
    assert info.value.result["http"]["status"] == 503


def test_the_clients_proxy_is_used(driver: str) -> None:
    with (
        RawServer(answer(200, LIST)) as proxy,
        fastsse.Client(
            base_url="http://upstream.invalid/v1", api_key="k", proxy=f"http://127.0.0.1:{proxy.port}"
        ) as client,
    ):
        reply = client.get("/models")
    assert reply.body == LIST
    assert proxy.requests[0].startswith(b"GET http://upstream.invalid/v1/models HTTP/1.1\r\n")


def test_post_hands_a_good_body_to_on_body_and_keeps_an_error_body(driver: str) -> None:
    stream = b"data: 1\n\n" * 300
    pieces: list[bytes] = []
    with (
        RawServer(answer(200, stream, chunked=True, kind=b"text/event-stream")) as raw,
        fastsse.Client(base_url=raw.base_url, api_key="k") as client,
    ):
        reply = client.post(
            "/chat/completions",
            b'{"a":1}',
            headers={"Content-Type": "application/json"},
            on_body=pieces.append,
        )
    assert reply.status == 200 and reply.body == b"" and b"".join(pieces) == stream
    assert raw.requests[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert raw.requests[0].endswith(b'\r\n\r\n{"a":1}')
    assert dict(raw.headers())["content-type"] == "application/json"
    taken: list[bytes] = []
    with (
        RawServer(answer(401, b'{"error":"bad key"}')) as raw,
        fastsse.Client(base_url=raw.base_url, api_key="k") as client,
    ):
        reply = client.post("/chat/completions", b"{}", on_body=taken.append)
    assert (reply.status, reply.body, taken) == (401, b'{"error":"bad key"}', [])


def test_on_body_returning_false_stops_the_transfer(driver: str) -> None:
    with (
        RawServer(answer(200, b"y" * 200_000, chunked=True)) as raw,
        fastsse.Client(base_url=raw.base_url, api_key="k") as client,
    ):
        pieces: list[bytes] = []
        reply = client.get("/models", on_body=lambda piece: pieces.append(piece) or False)
    assert reply.status == 200 and len(pieces) == 1


def test_the_clients_first_byte_timeout_and_the_calls_timeout(driver: str) -> None:
    def silent(conn: socket.socket) -> None:
        time.sleep(3)

    with RawServer(silent, threaded=True) as raw:
        with fastsse.Client(base_url=raw.base_url, api_key="k", first_byte_timeout=0.3) as client:
            start = time.monotonic()
            with pytest.raises(fastsse.TransportError) as first_byte:
                client.get("/models")
            took = time.monotonic() - start
        with (
            fastsse.Client(base_url=raw.base_url, api_key="k") as client,
            pytest.raises(fastsse.TransportError) as whole,
        ):
            client.get("/models", timeout=0.3)
    assert first_byte.value.code == pycurl.E_OPERATION_TIMEDOUT and "first_byte_timeout" in str(
        first_byte.value
    )
    assert took < 2.5, took
    assert whole.value.code == pycurl.E_OPERATION_TIMEDOUT


def test_a_cut_answer_is_a_transport_error_with_its_headers(driver: str) -> None:
    def cut(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{")

    with (
        RawServer(cut) as raw,
        fastsse.Client(base_url=raw.base_url, api_key="k") as client,
        pytest.raises(fastsse.TransportError) as info,
    ):
        client.get("/models")
    assert not isinstance(info.value, fastsse.BodyTooLarge)
    assert info.value.result["headers"]["content-type"] == "application/json"
    assert info.value.result["http"]["status"] == 200


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        ({"path": 1}, TypeError, "path must be a str"),
        ({"path": "/a b"}, fastsse.InvalidRequest, "path must be a str without spaces"),
        ({"headers": {"X": "a\r\nb: c"}}, fastsse.InvalidRequest, "header injection"),
        ({"timeout": 0}, fastsse.InvalidRequest, "timeout must be a finite number"),
        ({"max_body_bytes": 0}, fastsse.InvalidRequest, "max_body_bytes must be at least 1"),
        ({"max_body_bytes": "1"}, TypeError, "max_body_bytes must be an int"),
    ],
)
def test_bad_arguments_are_refused_before_sending(call: dict[str, Any], error: type, words: str) -> None:
    with (
        RawServer(answer(200, LIST)) as raw,
        fastsse.Client(base_url=raw.base_url, api_key="k") as client,
    ):
        path = call.pop("path", "/models")
        with pytest.raises(error, match=words):
            client.get(path, **call)
        with pytest.raises(TypeError, match="body must be bytes"):
            client.post("/x", "text")  # type: ignore[arg-type]
    assert raw.connections == 0


def test_the_async_client_mirrors_get_and_post(driver: str) -> None:
    async def run(base_url: str) -> tuple[fastsse.Reply, fastsse.Reply]:
        async with fastsse.AsyncClient(base_url=base_url, api_key="k") as client:
            return await client.get("/models"), await client.post("/models", b"{}")

    with RawServer(answer(200, LIST)) as raw:
        got, posted = asyncio.run(run(raw.base_url))
    assert got.body == LIST and posted.body == LIST
    assert [r.split(b" ", 1)[0] for r in raw.requests] == [b"GET", b"POST"]


def test_the_clients_ca_bundle_and_certificate_are_used(tmp_path: Any, driver: str) -> None:
    from _pki import make_pki, tls_server

    pki = make_pki(tmp_path)
    with tls_server(pki, answer(200, LIST)) as raw:
        url = f"https://127.0.0.1:{raw.port}/v1"
        trusted = {"ca_bundle": str(pki["ca.pem"]), "client_cert": str(pki["client-both.pem"])}
        with fastsse.Client(base_url=url, api_key="k", **trusted) as client:  # type: ignore[arg-type]
            assert client.get("/models").body == LIST
        with (
            fastsse.Client(base_url=url, api_key="k", client_cert=trusted["client_cert"]) as client,
            pytest.raises(fastsse.TransportError) as untrusted,
        ):
            client.get("/models")
    assert untrusted.value.code == pycurl.E_PEER_FAILED_VERIFICATION
    assert raw.peer_certs[:1] == [{"CN": "client"}]
