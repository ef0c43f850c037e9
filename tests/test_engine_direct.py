"""Every stream format the compiled driver drives is fed from C (issue 36): the fold formats
(chat, Responses, Messages) and the byte formats (relay, the translators, passthrough) give the
same result, on_chunk output and verdict on both drivers, and on the compiled one their reads do
not come through ``Response.write`` once the answer is typed. Holds, stops, a raising on_chunk and
an oversized event behave alike on both."""

from __future__ import annotations

import concurrent.futures
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import fastsse
from _formats_helpers import frame, load_vectors
from fastsse.client import _response
from fastsse.translate import _rules

pytest.importorskip("pycurl")

CHAT = [
    {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
     "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
    *[
        {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
         "choices": [{"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}]}
        for i in range(8)
    ],
    {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    "[DONE]",
]  # fmt: skip
STREAMS = {
    "chat": frame(CHAT, named=False),
    "responses": frame(
        {v["name"]: v for v in load_vectors("responses")}["reasoning_summary_and_refusal"]["events"],
        named=True,
    ),
    "messages": frame(
        {v["name"]: v for v in load_vectors("messages")}["thinking_then_tool_use"]["events"], named=True
    ),
}
INPUTS = {
    "chat": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "responses": {"model": "m", "input": "hi"},
    "messages": {"model": "m", "max_tokens": 64, "messages": []},
}
CASES = [
    ("chat", None),
    ("responses", None),
    ("messages", None),
    ("chat", "relay"),
    ("chat", "to-responses"),
    ("chat", "to-messages"),
    ("responses", "to-chat"),
    ("messages", "to-chat"),
    ("chat", "passthrough"),
    ("messages", "passthrough"),
]


def _pieces(body: bytes, parts: int) -> list[bytes]:
    # cut at event boundaries and inside events alike: each piece its own read
    step = max(1, len(body) // parts)
    return [body[i : i + step] for i in range(0, len(body), step)]


class Replay(ThreadingHTTPServer):
    daemon_threads = True
    pieces: list[bytes]


class Handler(BaseHTTPRequestHandler):
    server: Replay

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        pieces = self.server.pieces
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(sum(map(len, pieces))))
        self.end_headers()
        for piece in pieces:
            self.wfile.write(piece)
            self.wfile.flush()
            time.sleep(0.01)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def replay() -> Iterator[Replay]:
    server = Replay(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _drivers() -> list[str]:
    from fastsse.client import engine

    if fastsse._backend.NO_EXTENSIONS or not sys.platform.startswith("linux"):
        pytest.skip("the compiled driver and backend are not both here")
    module = engine.compiled_driver()
    if isinstance(module, str) and module.startswith("pycurl is not installed"):
        pytest.skip(f"the compiled driver: {module}")
    # where both are built they must load: a skip here would hide a wheel that lost them
    assert not isinstance(module, str) and fastsse._backend.BACKEND == "cython", module
    return ["pycurl", "compiled"]


def _run(
    replay: Replay,
    driver: str,
    api: str,
    fmt: str | None,
    on_chunk: Callable[[Any], Any],
    monkeypatch: pytest.MonkeyPatch,
    **options: Any,
) -> tuple[Any, list[Any]]:
    # the outcome (the result without timing, or the exception's type and text) and the Python
    # calls the write callback took
    calls: list[Any] = []
    write = _response.Response.write

    def counted(self: Any, data: bytes) -> Any:
        answer = write(self, data)
        calls.append(answer)
        return answer

    monkeypatch.setattr(_response.Response, "write", counted)
    # a translation to chat stamps "created" with the clock when the source has none: one second
    # for every run, or two drivers' runs that straddle a second's turn differ by it
    monkeypatch.setattr(_rules, "time", types.SimpleNamespace(time=lambda: 1_700_000_000.0))
    base = f"http://127.0.0.1:{replay.server_address[1]}/v1"
    try:
        with fastsse.Client(driver=driver) as client:
            result = client.create_stream(
                INPUTS[api], on_chunk, api=api, format=fmt, base_url=base, api_key="k", timeout=10, **options
            )
        result.pop("timing", None)
        outcome: Any = result
    except Exception as exc:
        outcome = (type(exc), str(exc))
    finally:
        monkeypatch.setattr(_response.Response, "write", write)
    return outcome, calls


@pytest.mark.parametrize(("api", "fmt"), CASES)
def test_each_format_is_fed_from_c_with_the_same_outcome(
    replay: Replay, monkeypatch: pytest.MonkeyPatch, api: str, fmt: str | None
) -> None:
    replay.pieces = _pieces(STREAMS[api], 6)
    seen: dict[str, list[Any]] = {}
    outcomes = {}
    for driver in _drivers():
        got = seen[driver] = []
        outcomes[driver] = _run(replay, driver, api, fmt, got.append, monkeypatch)
    (pycurl, slow_calls), (compiled, fast_calls) = outcomes["pycurl"], outcomes["compiled"]
    assert compiled == pycurl and isinstance(compiled, dict)
    assert seen["compiled"] == seen["pycurl"] and seen["pycurl"]
    assert compiled["verdict"]["complete"] is True
    assert len(slow_calls) >= 5  # the pieces came as reads of their own
    assert len(fast_calls) <= 2  # the first reads type the answer; the rest went from C


@pytest.mark.parametrize(
    ("api", "fmt"), [("chat", "relay"), ("chat", "to-messages"), ("messages", "to-chat")]
)
def test_a_pending_future_holds_a_byte_format_on_the_direct_path(
    replay: Replay, monkeypatch: pytest.MonkeyPatch, api: str, fmt: str
) -> None:
    replay.pieces = _pieces(STREAMS[api], 6)
    outcomes = {}
    for driver in _drivers():
        pieces: list[bytes] = []

        def on_bytes(piece: bytes, pieces: list[bytes] = pieces) -> Any:
            pieces.append(piece)
            if len(pieces) == 1:
                future: concurrent.futures.Future[None] = concurrent.futures.Future()
                threading.Timer(0.2, future.set_result, (None,)).start()
                return future
            return None

        outcome, calls = _run(replay, driver, api, fmt, on_bytes, monkeypatch)
        outcomes[driver] = outcome, b"".join(pieces)  # a resumed read may join what two were
        assert _response.WRITEFUNC_PAUSE in calls, (driver, calls)  # the read after the hold was refused
    assert outcomes["compiled"] == outcomes["pycurl"]
    assert outcomes["compiled"][0]["verdict"]["complete"] is True


def _stopper(after: int) -> Callable[[Any], Any]:
    count = [0]

    def on_chunk(chunk: Any) -> Any:
        count[0] += 1
        return count[0] < after

    return on_chunk


def _raiser(after: int) -> Callable[[Any], Any]:
    count = [0]

    def on_chunk(chunk: Any) -> Any:
        count[0] += 1
        if count[0] >= after:
            raise LookupError("on_chunk gave up")
        return None

    return on_chunk


@pytest.mark.parametrize(("api", "fmt"), CASES)
@pytest.mark.parametrize("make", [_stopper, _raiser], ids=["stop", "raise"])
def test_a_stop_and_a_raise_end_alike_on_both_drivers(
    replay: Replay, monkeypatch: pytest.MonkeyPatch, api: str, fmt: str | None, make: Any
) -> None:
    replay.pieces = _pieces(STREAMS[api], 6)
    outcomes = {}
    for driver in _drivers():
        seen: list[Any] = []
        on_chunk = make(3)

        def record(chunk: Any, seen: list[Any] = seen, on_chunk: Any = on_chunk) -> Any:
            seen.append(chunk)
            return on_chunk(chunk)

        outcomes[driver] = _run(replay, driver, api, fmt, record, monkeypatch)[0], seen
    assert outcomes["compiled"] == outcomes["pycurl"]
    outcome = outcomes["compiled"][0]
    if make is _raiser:
        assert outcome == (LookupError, "on_chunk gave up")
    elif fmt is None:  # a byte format's verdict is its upstream's; the stop shows as fewer pieces
        assert outcome["verdict"]["aborted"] is True


@pytest.mark.parametrize(("api", "fmt"), CASES)
def test_an_oversized_event_mid_stream_ends_alike_on_both_drivers(
    replay: Replay, monkeypatch: pytest.MonkeyPatch, api: str, fmt: str | None
) -> None:
    body = STREAMS[api]
    cut = body.index(b"\n\n", len(body) // 3) + 2
    huge = b"data: " + b"x" * 5000 + b"\n\n"
    replay.pieces = [*_pieces(body[:cut], 3), huge[:2000], huge[2000:], body[cut:]]
    outcomes = {}
    for driver in _drivers():
        seen: list[Any] = []
        outcomes[driver] = (
            _run(replay, driver, api, fmt, seen.append, monkeypatch, max_event_bytes=4096)[0],
            seen,
        )
    assert outcomes["compiled"] == outcomes["pycurl"]
    assert outcomes["compiled"][0][0] is fastsse.EventTooLarge
