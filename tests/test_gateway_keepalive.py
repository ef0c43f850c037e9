"""The gateway's keep-alive (``[server] keepalive_seconds``) and the in-stream error that follows a
200 it committed.

``Downstream(..., keepalive=...)`` is driven with a fake ASGI send (which can hold its sends as a
full transport does): comments while the answer is silent, none while pieces flow or behind a
send that waits, the first one commits the 200, the upstream's timing left alone, and every way
the answer ends stops them. ``stream_error``'s bytes, after comments, are read by the real openai
and anthropic SDKs from uvicorn on 127.0.0.1: each raises its API error, not a parse or
connection error and not a silent end.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from fastsse import check_stream
from fastsse.gateway._asgi import KEEPALIVE, SSE_HEADERS, Downstream, stream_error

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
uvicorn = pytest.importorskip("uvicorn")

Runner = Callable[[Callable[[], Awaitable[None]]], None]
PERIOD = 0.05  # keep-alive seconds of the unit tests
SLACK = 0.003  # a loop timer may fire this early (the loop's clock resolution)


class FakeSend:
    """An ASGI send that records each message with its time. While ``held``, a send takes its
    message and then waits (a full transport's write buffer) until ``release()``."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.waiting = 0  # sends taken but not yet returned
        self._gate: asyncio.Future[None] | None = None
        self.fail = False

    def hold(self) -> None:
        self._gate = asyncio.get_running_loop().create_future()

    def release(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.set_result(None)

    async def __call__(self, message: dict[str, Any]) -> None:
        if self.fail:
            raise OSError("the connection is closed")
        self.messages.append(message)
        self.times.append(time.monotonic())
        if self._gate is not None:
            self.waiting += 1
            try:
                await self._gate
            finally:
                self.waiting -= 1

    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.messages if m["type"] == "http.response.body"]

    def pings(self) -> list[float]:
        """The times of the keep-alive comments."""
        return [
            t
            for m, t in zip(self.messages, self.times, strict=True)
            if m["type"] == "http.response.body" and m["body"] == KEEPALIVE
        ]

    def starts(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["type"] == "http.response.start"]


LOOPS = ["asyncio", *(["uvloop"] if importlib.util.find_spec("uvloop") else [])]


@pytest.fixture(params=LOOPS)
def run(request: pytest.FixtureRequest) -> Callable[[Callable[[], Awaitable[None]]], None]:
    """Run a test's coroutine on asyncio's loop, then on uvloop's (the gateway command's, whose
    timers have a millisecond clock)."""

    def run(test: Callable[[], Awaitable[None]]) -> None:
        if request.param == "uvloop":
            import uvloop

            uvloop.run(test())
        else:
            asyncio.run(test())

    return run


async def settle() -> None:
    """Let the loop run the callbacks of this turn and the next (a flush, a send's end)."""
    for _ in range(3):
        await asyncio.sleep(0)


def test_comments_every_period_while_silent_and_the_first_commits_the_200(run: Runner) -> None:
    async def body() -> None:
        send = FakeSend()
        began = time.monotonic()
        down = Downstream(send, list(SSE_HEADERS), keepalive=PERIOD)
        assert not down.started and send.messages == []
        await asyncio.sleep(0.6)
        down.close()
        starts = send.starts()
        assert len(starts) == 1 and send.messages[0] is starts[0]
        assert starts[0]["status"] == 200 and starts[0]["headers"] == list(SSE_HEADERS)
        assert down.started
        pings = send.pings()
        assert send.bodies() == [KEEPALIVE] * len(pings)
        assert all(m.get("more_body") for m in send.messages[1:])
        # about 12; a loaded machine delays timers (fewer), never brings them earlier
        assert 3 <= len(pings) <= 0.6 / (PERIOD - SLACK) + 1
        assert down.pings == len(pings)
        assert pings[0] - began >= PERIOD - SLACK
        assert all(b - a >= PERIOD - SLACK for a, b in itertools.pairwise(pings))
        # comments are not content: the upstream's timing and byte count stay empty
        assert down.first_ns == 0 and down.last_ns == 0 and down.relayed == 0
        assert sum(down.gaps) == 0

    run(body)


def test_no_comment_while_pieces_flow_faster_than_the_period(run: Runner) -> None:
    async def body() -> None:
        send = FakeSend()
        period = 0.3  # pieces every 10 ms: a 290 ms stall of a loaded loop is needed to see one
        down = Downstream(send, list(SSE_HEADERS), keepalive=period)
        pieces = [b'data: {"n": %d}\n\n' % i for i in range(80)]
        for data in pieces:  # 0.8 s of pieces, more than two periods
            assert down.piece(data) is None
            await asyncio.sleep(0.01)
        await settle()
        assert send.pings() == []
        assert b"".join(send.bodies()) == b"".join(pieces)
        assert down.relayed == sum(map(len, pieces)) and down.pings == 0
        gaps, first, last = list(down.gaps), down.first_ns, down.last_ns
        assert sum(gaps) == len(pieces) - 1

        # then the upstream goes silent: the comments resume a period after the last piece
        silent = time.monotonic()
        await asyncio.sleep(period * 2.5)
        down.close()
        pings = send.pings()
        assert 1 <= len(pings) <= 3
        assert pings[0] - silent >= period - 0.02  # the last piece came just before `silent`
        assert (down.gaps, down.first_ns, down.last_ns, down.relayed) == (
            gaps,
            first,
            last,
            sum(map(len, pieces)),
        )
        assert len(send.starts()) == 1  # the first piece's flush sent the start, once

    run(body)


def test_pieces_after_comments_go_out_once_without_a_second_start(run: Runner) -> None:
    async def body() -> None:
        send = FakeSend()
        down = Downstream(send, list(SSE_HEADERS), keepalive=PERIOD)
        await asyncio.sleep(PERIOD * 3.5)
        assert down.started and down.first_ns == 0 and down.pings >= 1
        before = time.monotonic_ns()
        assert down.piece(b"data: 1\n\n") is None
        await settle()
        assert down.first_ns >= before and down.relayed == len(b"data: 1\n\n")
        await down.finish()
        assert len(send.starts()) == 1
        assert send.bodies()[-2:] == [b"data: 1\n\n", b""]
        assert send.messages[-1]["more_body"] is False
        count = len(send.messages)
        await asyncio.sleep(PERIOD * 3)
        assert len(send.messages) == count  # finish() stopped them

    run(body)


def test_no_comments_pile_up_behind_a_send_that_waits(run: Runner) -> None:
    async def body() -> None:
        send = FakeSend()
        down = Downstream(send, list(SSE_HEADERS), keepalive=PERIOD)
        assert down.piece(b"data: 1\n\n") is None
        await settle()
        send.hold()  # the caller stops reading: the next send fills its buffer and waits
        assert down.piece(b"data: 2\n\n") is None
        await settle()
        assert send.waiting == 1
        room = down.piece(b"data: 3\n\n")
        assert isinstance(room, asyncio.Future) and not room.done()  # the upstream is held
        taken = len(send.messages)
        await asyncio.sleep(PERIOD * 10)  # ten periods with the send waiting
        assert len(send.messages) == taken and send.pings() == [] and down.pings == 0
        send.release()
        await settle()
        assert room.done()  # the held piece went with the next send
        assert b"".join(send.bodies()) == b"data: 1\n\ndata: 2\n\ndata: 3\n\n"
        await asyncio.sleep(PERIOD * 3)  # read again and silent: the comments resume
        down.close()
        assert 1 <= down.pings == len(send.pings()) <= 4

    run(body)


def test_a_start_that_waits_gets_no_comment_behind_it(run: Runner) -> None:
    async def body() -> None:
        send = FakeSend()
        send.hold()  # the very first send (the start a comment commits) waits
        down = Downstream(send, list(SSE_HEADERS), keepalive=PERIOD)
        await asyncio.sleep(PERIOD * 8)
        assert [m["type"] for m in send.messages] == ["http.response.start"]
        assert down.pings == 0
        room = down.piece(b"data: 1\n\n")
        assert isinstance(room, asyncio.Future)  # a piece behind the waiting start holds the upstream
        send.release()
        await settle()
        assert room.done() and send.bodies() == [b"data: 1\n\n"]
        await down.finish()
        assert len(send.starts()) == 1

    run(body)


@pytest.mark.parametrize("end", ["close", "leave", "flush", "fail"])
def test_every_end_stops_the_comments(run: Runner, end: str) -> None:
    async def body() -> None:
        send = FakeSend()
        down = Downstream(send, list(SSE_HEADERS), keepalive=PERIOD)
        await asyncio.sleep(PERIOD * 2.5)
        assert down.pings >= 1
        if end == "close":
            down.close()
            down.close()  # idempotent
        elif end == "leave":
            down.leave()
            down.close()
        elif end == "flush":
            await down.flush()  # the response is then cut: nothing more is sent
        else:
            await down.fail(b"data: x\n\n")
            assert send.messages[-1] == {
                "type": "http.response.body",
                "body": b"data: x\n\n",
                "more_body": False,
            }
            down.close()
        count = len(send.messages)
        await asyncio.sleep(PERIOD * 4)
        assert len(send.messages) == count
        assert not down.dropped

    run(body)


def test_off_by_default_and_at_zero(run: Runner) -> None:
    async def body() -> None:
        for keepalive in ({}, {"keepalive": 0.0}):
            send = FakeSend()
            down = Downstream(send, list(SSE_HEADERS), **keepalive)
            await asyncio.sleep(PERIOD * 3)
            assert send.messages == [] and not down.started
            down.close()

    run(body)


def test_a_comment_the_server_refuses_means_the_caller_left_and_dropped_nothing(run: Runner) -> None:
    async def body() -> None:
        send = FakeSend()
        down = Downstream(send, list(SSE_HEADERS), keepalive=PERIOD)
        await asyncio.sleep(PERIOD * 1.5)
        assert down.pings == 1
        send.fail = True  # the connection closed: the next comment's send raises
        await asyncio.sleep(PERIOD * 1.5)
        assert down.gone and not down.dropped  # a lost comment is not a lost piece
        assert down.piece(b"data: 1\n\n") is False  # the transfer stops
        send.fail = False
        await asyncio.sleep(PERIOD * 3)
        assert down.pings == 1 and send.pings() == [send.times[1]]
        await down.fail(b"event: error\n\n")  # the caller is gone: nothing goes
        assert len(send.messages) == 2

    run(body)


def test_fail_before_anything_went_out_sends_the_start_and_the_error(run: Runner) -> None:
    async def body() -> None:
        send = FakeSend()
        down = Downstream(send, list(SSE_HEADERS))
        data = stream_error("chat", 502, "upstream a failed: timed out")
        await down.fail(data)
        assert [m["type"] for m in send.messages] == ["http.response.start", "http.response.body"]
        assert send.messages[1] == {"type": "http.response.body", "body": data, "more_body": False}
        assert down.relayed == 0

    run(body)


ERROR = {"error": {"message": "upstream went away", "type": "server_error", "param": None, "code": None}}


@pytest.mark.parametrize("caller", ["chat", "responses", "messages"])
def test_the_error_event_is_the_apis_own_and_nothing_else(caller: str) -> None:
    data = KEEPALIVE + stream_error(caller, 503, ERROR)
    codes = [f.code for f in check_stream(data, api=caller)]
    assert "error-object" in codes
    if caller != "responses":  # a Responses error has no response.created / terminal around it
        assert codes == ["error-object"]


def test_the_error_event_maps_the_upstream_body() -> None:
    anthropic_body = b'{"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}'
    chat = stream_error("chat", 429, anthropic_body)
    assert chat.startswith(b'data: {"error":{"message":"slow down","type":"rate_limit_error"')
    assert chat.endswith(b"\n\ndata: [DONE]\n\n")
    messages = stream_error("messages", 503, ERROR)
    assert messages == (
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        b'"message":"upstream went away"}}\n\n'
    )
    responses = stream_error("responses", 500, "plain text")
    assert responses.startswith(
        b'event: error\ndata: {"type":"error","code":"server_error","message":"plain text"'
    )
    with pytest.raises(ValueError, match="unknown API"):
        stream_error("completions", 500, ERROR)


# -- the SDKs read it --------------------------------------------------------------------------

SILENCE = 0.4  # the upstream's silence before it fails: several comments go out first


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An answer whose upstream stays silent, then fails: what the gateway sends with keep-alive on."""
    assert scope["type"] == "http"
    while (await receive()).get("more_body"):
        pass
    caller = {"/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/messages": "messages"}
    down = Downstream(send, list(SSE_HEADERS), keepalive=0.05)
    try:
        await asyncio.sleep(SILENCE)
        assert down.started and down.pings >= 1
        await down.fail(stream_error(caller[scope["path"]], 503, ERROR))
    finally:
        down.close()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # as python -m fastsse gateway serves: uvloop and httptools where installed
    loop = "uvloop" if "uvloop" in LOOPS else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    config = uvicorn.Config(app, lifespan="off", log_level="warning", loop=loop, http=http)
    serving = uvicorn.Server(config)
    thread = threading.Thread(target=serving.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not serving.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        serving.should_exit = True
        thread.join(10)
        sock.close()


def test_the_openai_sdk_raises_its_api_error_from_a_chat_stream(server: str) -> None:
    with openai.OpenAI(base_url=server + "/v1", api_key="x", max_retries=0, timeout=10) as client:
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with pytest.raises(openai.APIError) as caught:
            list(stream)
    assert type(caught.value) is openai.APIError  # not a connection error (a cut) nor a parse error
    assert caught.value.message == "upstream went away" and caught.value.type == "server_error"


def test_the_openai_sdk_raises_its_api_error_from_a_responses_stream(server: str) -> None:
    with openai.OpenAI(base_url=server + "/v1", api_key="x", max_retries=0, timeout=10) as client:
        stream = client.responses.create(model="m", input="hi", stream=True)
        with pytest.raises(openai.APIError) as caught:
            list(stream)
        assert type(caught.value) is openai.APIError
        assert caught.value.message == "upstream went away" and caught.value.type == "server_error"
        with (  # the helper that folds the stream raises the same
            pytest.raises(openai.APIError, match="upstream went away") as helper,
            client.responses.stream(model="m", input="hi") as events,
        ):
            list(events)
        assert type(helper.value) is openai.APIError


def test_the_anthropic_sdk_raises_its_api_error_from_a_messages_stream(server: str) -> None:
    with anthropic.Anthropic(base_url=server, api_key="x", max_retries=0, timeout=10) as client:
        request: dict[str, Any] = {
            "model": "m",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        }
        stream = client.messages.create(**request, stream=True)
        with pytest.raises(anthropic.APIStatusError) as caught:
            list(stream)
        assert caught.value.body == {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "upstream went away"},
        }
        assert "upstream went away" in str(caught.value)
        with (
            pytest.raises(anthropic.APIStatusError, match="upstream went away"),
            client.messages.stream(**request) as events,
        ):
            list(events)


# -- through the gateway: python -m fastsse gateway with keepalive_seconds --------------------

UPSTREAM_SILENCE = 1.5  # seconds the upstreams below say nothing: several keep-alive periods
OVERLOADED = b'{"error": {"message": "the model is overloaded", "type": "server_error"}}'
CHUNKS = (
    b"".join(
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[%s]}\n\n'
        % choice
        for choice in (
            b'{"index":0,"delta":{"role":"assistant","content":"late"},"finish_reason":null}',
            b'{"index":0,"delta":{},"finish_reason":"stop"}',
        )
    )
    + b"data: [DONE]\n\n"
)


def _fails_late(conn: socket.socket) -> None:
    time.sleep(UPSTREAM_SILENCE)
    conn.sendall(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(OVERLOADED), OVERLOADED)
    )


def _answers_late(conn: socket.socket) -> None:
    time.sleep(UPSTREAM_SILENCE)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + CHUNKS)


@pytest.fixture(scope="module")
def gateway() -> Iterator[Any]:
    pytest.importorskip("pycurl")
    from _gateway_process import GatewayProcess
    from _raw_server import RawServer

    with RawServer(_fails_late, threaded=True) as failing, RawServer(_answers_late, threaded=True) as slow:
        upstreams = [
            {"name": "failing", "base_url": failing.base_url, "eject_after": 0},
            {"name": "slow", "base_url": slow.base_url},
        ]
        routes = [{"model": "fails", "upstreams": ["failing"]}, {"model": "late", "upstreams": ["slow"]}]
        with GatewayProcess(upstreams, server={"keepalive_seconds": 0.2}, routes=routes) as gw:
            yield gw


def test_through_the_gateway_comments_commit_the_200_then_the_error_event_ends_it(gateway: Any) -> None:
    import httpx

    before = len(gateway.records())
    request = {"model": "fails", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with (
        httpx.Client(timeout=20) as http,
        http.stream("POST", gateway.url + "/v1/chat/completions", json=request) as r,
    ):
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        body = b"".join(r.iter_raw())  # read to a clean end: a cut would raise here
    pings = body.count(KEEPALIVE)
    assert pings >= 1 and body == KEEPALIVE * pings + stream_error("chat", 503, OVERLOADED)
    entry = gateway.record(before)
    assert (entry["status"], entry["outcome"], entry["upstream"]) == (200, "error", "failing")
    assert entry["bytes"] == 0  # comments and the error event are not the upstream's bytes


def test_through_the_gateway_each_sdk_raises_its_api_error(gateway: Any) -> None:
    messages = [{"role": "user", "content": "hi"}]
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key="x", max_retries=0, timeout=20) as client:
        with pytest.raises(openai.APIError, match="the model is overloaded") as chat:
            list(client.chat.completions.create(model="fails", messages=messages, stream=True))
        with pytest.raises(openai.APIError, match="the model is overloaded") as responses:
            list(client.responses.create(model="fails", input="hi", stream=True))
        # comments before the first byte leave a late answer whole
        chunks = list(client.chat.completions.create(model="late", messages=messages, stream=True))
    assert type(chat.value) is openai.APIError and type(responses.value) is openai.APIError
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "late"
    assert chunks[-1].choices[0].finish_reason == "stop"
    with (
        anthropic.Anthropic(base_url=gateway.url, api_key="x", max_retries=0, timeout=20) as client,
        pytest.raises(anthropic.APIStatusError, match="the model is overloaded") as caught,
    ):
        list(client.messages.create(model="fails", max_tokens=8, messages=messages, stream=True))
    assert caught.value.body["error"]["type"] == "overloaded_error"
