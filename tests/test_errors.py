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


# Each misuse the library can meet outside a request, on the backend under test: whose fault it was
# is in the type. The vectors are the calls the API documents as wrong (DESIGN.md, the docstrings).
def _misuse(stream_backend: Any) -> dict[str, BaseException]:
    from fastsse import check, gateway, load

    def nested(kind: str) -> Any:
        holder: dict[str, Any] = {}

        def again(_item: Any) -> None:
            holder["s"].write(b"data: {}\n\n")

        holder["s"] = (
            stream_backend.Relay(on_chunk=again) if kind == "relay" else getattr(stream_backend, kind)(again)
        )
        return holder["s"]

    relay = stream_backend.Relay()
    relay.close()
    linter = fastsse.StreamChecker()
    linter.close()
    chunk = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
    return {
        "event id with NUL": _raised(lambda: fastsse.encode_event("x", id="a\x00b")),
        "messages before start": _raised(lambda: fastsse.MessagesEncoder(id="msg_1", model="m").text("x")),
        "responses before start": _raised(lambda: fastsse.ResponsesEncoder(id="resp_1", model="m").text("x")),
        "relay after close": _raised(lambda: relay.write(chunk)),
        "checker after close": _raised(lambda: linter.feed(chunk)),
        "chat stream re-entered": _raised(lambda: nested("ChatStream").write(chunk)),
        "relay re-entered": _raised(lambda: nested("relay").write(chunk)),
        "responses stream re-entered": _raised(
            lambda: nested("ResponsesStream").write(
                b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
                b'"output_index":0,"content_index":0,"delta":"x"}\n\n'
            )
        ),
        "unknown translator": _raised(lambda: translate.translator("chat", "nope")),
        "unknown checker": _raised(lambda: check.checker("nope")),
        "bad error status": _raised(lambda: translate.error(200, {}, "chat")),
        "event limit below 1": _raised(lambda: stream_backend.Decoder(max_event_bytes=0)),
        "unknown backend": _raised(lambda: fastsse.get_backend("rust")),
        "bad script": _raised(lambda: load.Script(chunks=-1)),
        "bad load rows": _raised(lambda: load.merge([{"schema": "other"}])),
        "caller gone": gateway.CallerGone(),
        "too large": gateway.TooLarge(),
    }


def _raised(call: Any) -> BaseException:
    try:
        call()
    except BaseException as exc:
        return exc
    raise AssertionError("no error was raised")


def test_every_misuse_raises_its_own_type_under_the_root(stream_backend: Any) -> None:
    cases = _misuse(stream_backend)
    kinds = {name: type(exc).__name__ for name, exc in cases.items()}
    assert kinds == {
        "event id with NUL": "EncodeError",
        "messages before start": "EncodeError",
        "responses before start": "EncodeError",
        "relay after close": "UsageError",
        "checker after close": "UsageError",
        "chat stream re-entered": "UsageError",
        "relay re-entered": "UsageError",
        "responses stream re-entered": "UsageError",
        "unknown translator": "InvalidRequest",
        "unknown checker": "InvalidRequest",
        "bad error status": "InvalidRequest",
        "event limit below 1": "InvalidRequest",
        "unknown backend": "InvalidRequest",
        "bad script": "InvalidRequest",
        "bad load rows": "InvalidRequest",
        "caller gone": "CallerGone",
        "too large": "TooLarge",
    }
    for name, exc in cases.items():
        assert isinstance(exc, fastsse.FastSSEError), name
    # an encoder's or a caller's bad value stays a ValueError, as it was; a misused object is not
    assert {n for n, e in cases.items() if isinstance(e, ValueError)} == {
        n for n, k in kinds.items() if k in ("EncodeError", "InvalidRequest")
    }


def test_the_new_branches_of_the_tree() -> None:
    from fastsse import load

    assert issubclass(fastsse.EncodeError, fastsse.FastSSEError) and issubclass(
        fastsse.EncodeError, ValueError
    )
    assert issubclass(load.LoadError, fastsse.FastSSEError) and issubclass(load.LoadError, RuntimeError)
    assert not issubclass(load.LoadError, ValueError)


# What a bare builtin raise may still be: the kinds Python itself uses for that case. Everything
# else fastsse raises is a FastSSEError, so ``except fastsse.FastSSEError`` catches it.
ALLOWED_BUILTINS = {
    "TypeError": "an argument of the wrong type, as everywhere in Python",
    "NotImplementedError": "an abstract method",
    "StopIteration": "the iterator protocol",
    "StopAsyncIteration": "the async iterator protocol",
    "AttributeError": "__getattr__ and a removed method's hint",
    "MemoryError": "an allocation that failed",
    "ImportError": "an optional dependency that is not installed",
    "OSError": "the operating system refused (loading libcurl, epoll)",
}


def _bare_raises() -> list[str]:
    import ast
    import builtins
    import re
    from pathlib import Path

    src = Path(fastsse.__file__).parent
    kinds = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)}
    kinds = {n for n in kinds if issubclass(getattr(builtins, n), BaseException)}
    found = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                name = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(name, ast.Name) and name.id in kinds and name.id not in ALLOWED_BUILTINS:
                    found.append(f"{path.relative_to(src)}:{node.lineno}: raise {name.id}")
    pattern = re.compile(r"^\s*raise\s+([A-Za-z_]\w*)\b")
    for path in sorted(src.rglob("*.pyx")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = pattern.match(line)
            if match and match.group(1) in kinds and match.group(1) not in ALLOWED_BUILTINS:
                found.append(f"{path.relative_to(src)}:{number}: raise {match.group(1)}")
    return found


def test_no_bare_builtin_raise_outside_the_allow_list() -> None:
    assert _bare_raises() == []


def test_the_bare_raise_check_finds_one(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # the check itself can fail: a package holding a bare ValueError (in .py and .pyx) is reported
    pkg = tmp_path / "fastsse"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def f():\n    raise ValueError('x')\n")
    (pkg / "_m.pyx").write_text("cdef f():\n    raise RuntimeError('y')\n    raise TypeError('ok')\n")
    monkeypatch.setattr(fastsse, "__file__", str(pkg / "__init__.py"))
    assert _bare_raises() == ["__init__.py:2: raise ValueError", "_m.pyx:2: raise RuntimeError"]
