"""The error tree (``_errors.py``): one root, and whose fault it was in the type. Every error is
made to happen for real (a refused port, a timeout, a cut, bad bytes, an oversized event, a closed
client, an untranslatable body) and caught the way a user would."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

import pytest

import fastsse
from _raw_server import RawServer
from fastsse import translate

REQUEST = {"model": "plain", "messages": [{"role": "user", "content": "Hi"}]}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _silent(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
    conn.settimeout(5)
    with contextlib.suppress(OSError):
        conn.recv(1)  # nothing more: hold the connection until the client hangs up (or 5 s)


def _cut(conn: socket.socket) -> None:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 500\r\n\r\n"
        b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    )


def _raised(call: Any) -> BaseException:
    try:
        call()
    except BaseException as exc:
        return exc
    raise AssertionError("nothing was raised")


def _cases(stream_backend: Any) -> dict[str, BaseException]:
    cases: dict[str, BaseException] = {}
    cases["refused"] = _raised(
        lambda: fastsse.create_stream(REQUEST, base_url=f"http://127.0.0.1:{_free_port()}/v1", api_key="x")
    )
    with RawServer(_silent) as raw:
        cases["timeout"] = _raised(
            lambda: fastsse.create_stream(REQUEST, base_url=raw.base_url, api_key="x", timeout=0.3)
        )
    with RawServer(_cut) as raw:
        cases["cut"] = _raised(lambda: fastsse.create_stream(REQUEST, base_url=raw.base_url, api_key="x"))
    cases["bad bytes"] = _raised(
        lambda: stream_backend.Decoder().feed("text, not bytes")
    )  # TypeError: caller
    cases["oversized"] = _raised(
        lambda: stream_backend.Decoder(max_event_bytes=8).feed(b"data: 0123456789\n\n")
    )
    client = fastsse.Client()
    client.close()
    cases["closed"] = _raised(lambda: client.create_stream(REQUEST, base_url="http://127.0.0.1:9/v1"))
    cases["untranslatable"] = _raised(
        lambda: translate.request({"model": "m", "input": [{"type": "web_search_call"}]}, "responses", "chat")
    )
    cases["bad option"] = _raised(lambda: fastsse.create_stream(REQUEST, base_url="ftp://h/v1"))
    return cases


def test_every_error_is_under_the_root_and_only_data_errors_are_value_errors(stream_backend: Any) -> None:
    cases = _cases(stream_backend)
    kinds = {name: type(exc) for name, exc in cases.items()}
    assert kinds == {
        "refused": fastsse.TransportError,
        "timeout": fastsse.TransportError,
        "cut": fastsse.TransportError,
        "bad bytes": TypeError,
        "oversized": fastsse.EventTooLarge,
        "closed": fastsse.ClientClosed,
        "untranslatable": fastsse.Untranslatable,
        "bad option": fastsse.InvalidRequest,
    }
    for name, exc in cases.items():
        if name == "bad bytes":  # a wrong argument type is Python's TypeError, as everywhere
            continue
        assert isinstance(exc, fastsse.FastSSEError), name
    value_errors = {name for name, exc in cases.items() if isinstance(exc, ValueError)}
    # the data and the caller's input; never the network or the client's state
    assert value_errors == {"oversized", "untranslatable", "bad option"}
    assert cases["refused"].code == 7 and cases["timeout"].code == 28  # type: ignore[attr-defined]
    assert cases["cut"].result["choices"][0]["message"]["content"] == "Hi"  # type: ignore[attr-defined]


def test_the_tree() -> None:
    root = fastsse.FastSSEError
    assert root.__bases__ == (Exception,)
    assert issubclass(fastsse.SSEError, ValueError) and issubclass(fastsse.EventTooLarge, fastsse.SSEError)
    for cls in (fastsse.TransportError, fastsse.HTTPStatusError, fastsse.ClientClosed, fastsse.UsageError):
        assert issubclass(cls, root) and not issubclass(cls, ValueError), cls
    assert issubclass(fastsse.UsageError, RuntimeError) and issubclass(fastsse.ClientClosed, RuntimeError)
    assert issubclass(fastsse.Untranslatable, ValueError) and not issubclass(
        fastsse.Untranslatable, fastsse.SSEError
    )
    assert fastsse.client.ClientClosed is fastsse.ClientClosed
    assert translate.Untranslatable is fastsse.Untranslatable


def test_an_async_client_closed_in_flight_raises_client_closed() -> None:
    async def main() -> BaseException:
        with RawServer(_silent) as raw:
            client = fastsse.AsyncClient(base_url=raw.base_url, api_key="x")
            task = asyncio.ensure_future(client.create_stream(REQUEST))
            await asyncio.sleep(0.2)
            await client.close()
            try:
                await task
            except BaseException as exc:
                return exc
        raise AssertionError("the request ended")

    exc = asyncio.run(main())
    assert isinstance(exc, fastsse.ClientClosed) and isinstance(exc, fastsse.FastSSEError)


def test_misuse_is_a_usage_error(server: Any) -> None:
    with fastsse.Client(base_url=server.base_url) as client:

        def nested(chunk: Any) -> None:
            client.create_stream(REQUEST)

        with pytest.raises(fastsse.UsageError, match="inside its own on_chunk"):
            client.create_stream(REQUEST, nested)
