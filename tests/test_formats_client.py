"""``create_stream(..., api="responses" | "messages")`` over real pycurl against a tiny loopback
server of this module's own that records each request and replays a hand-written vector."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

import fastsse
from _formats_helpers import frame, load_vectors

# every test here runs on both engine drivers (the compiled libcurl driver and pycurl)
# the clients' everyday paths, with the library's default retries (conftest.default_retries)
pytestmark = [pytest.mark.usefixtures("driver"), pytest.mark.default_retries]

pytest.importorskip("pycurl")

VECTORS = {api: {v["name"]: v for v in load_vectors(api)} for api in ("responses", "messages")}


class Replay(ThreadingHTTPServer):
    daemon_threads = True
    body = b""
    requests: list[dict[str, Any]]


class Handler(BaseHTTPRequestHandler):
    server: Replay

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.server.requests.append(
            {
                "path": self.path,
                "headers": dict(self.headers.items()),
                "body": orjson.loads(self.rfile.read(length)),
            }
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def replay() -> Iterator[Replay]:
    server = Replay(("127.0.0.1", 0), Handler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def formats_backend(stream_backend: SimpleNamespace) -> SimpleNamespace:
    # the transports build every stream from fastsse._backend.current: stream_backend replaces it
    return stream_backend


def base(server: Replay) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def test_messages_request_and_fold(
    formats_backend: SimpleNamespace, replay: Replay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    vector = VECTORS["messages"]["thinking_then_tool_use"]
    replay.body = frame(vector["events"], named=True)
    seen: list[str] = []
    result = fastsse.create_stream(
        {"model": "claude-x", "max_tokens": 64, "messages": []},
        lambda event: seen.append(event["type"]),
        api="messages",
        base_url=base(replay),
        timeout=10,
    )
    verdict = result.pop("verdict")
    assert result.pop("http")["status"] == 200
    assert result == vector["result"]
    assert verdict["complete"] is True and verdict["terminal"] == "message_stop"
    assert seen == [e["type"] for e in vector["events"]]
    (request,) = replay.requests
    assert request["path"] == "/v1/messages"
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["x-api-key"] == "sk-ant"
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert request["body"] == {"model": "claude-x", "max_tokens": 64, "messages": [], "stream": True}


def test_responses_request_and_fold(formats_backend: SimpleNamespace, replay: Replay) -> None:
    vector = VECTORS["responses"]["reasoning_summary_and_refusal"]
    replay.body = frame(vector["events"], named=False)
    result = fastsse.create_stream(
        {"model": "gpt-x", "input": "hi"}, api="responses", base_url=base(replay), api_key="k"
    )
    verdict = result.pop("verdict")
    assert result.pop("http")["status"] == 200
    assert result == vector["result"]
    assert verdict["complete"] is True
    (request,) = replay.requests
    assert request["path"] == "/v1/responses"
    assert {k.lower(): v for k, v in request["headers"].items()}["authorization"] == "Bearer k"
    assert request["body"]["stream"] is True


def test_abort_and_unknown_api(formats_backend: SimpleNamespace, replay: Replay) -> None:
    vector = VECTORS["responses"]["text_basic"]
    replay.body = frame(vector["events"], named=True)
    result = fastsse.create_stream(
        {}, lambda event: False, api="responses", base_url=base(replay), api_key="k"
    )
    assert result["verdict"]["aborted"] is True
    assert result["verdict"]["why"] == "aborted by the caller"
    with pytest.raises(ValueError):
        fastsse.create_stream({}, api="completions", base_url=base(replay))


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_passthrough_hands_on_whole_events_unchanged(
    backend: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, replay: Replay, api: str
) -> None:
    # format="passthrough": the API's own bytes go on unchanged, cut only after a whole event (at
    # any split of the reads), with the API's fold beside them; the gateway's same-API path
    from fastsse.client._streams import PassThrough

    monkeypatch.setattr(fastsse._backend, "current", backend)
    vector = next(iter(VECTORS[api].values()))
    body = frame(vector["events"], named=True)
    for split in range(1, len(body), max(1, len(body) // 40)):
        writer = PassThrough(api)
        out = writer.write(body[:split]) + writer.write(body[split:]) + writer.close()
        assert out == body
        assert writer.result()["verdict"]["complete"] is True
    replay.body = body
    pieces: list[bytes] = []
    request = (
        {"model": "m", "input": "hi"}
        if api == "responses"
        else {"model": "m", "max_tokens": 5, "messages": []}
    )
    result = fastsse.create_stream(
        request, pieces.append, api=api, base_url=base(replay), api_key="k", format="passthrough"
    )
    assert b"".join(pieces) == body and all(p.endswith(b"\n\n") for p in pieces)
    result.pop("verdict")
    assert result.pop("http")["error"] is None
    assert result == vector["result"]
    cut = PassThrough(api)
    half = body[: len(body) // 2 + 3]
    sent = cut.write(half) + cut.close(truncated=True)
    assert half.startswith(sent) and sent.endswith(b"\n\n") and len(sent) < len(half)  # no half event
    assert cut.result()["verdict"]["complete"] is False
