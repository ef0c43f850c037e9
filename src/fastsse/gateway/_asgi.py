"""The ASGI side of one answer: running a server's ``send`` / ``receive`` without a task, reading a
bounded body, and the backpressured link from an upstream transfer to the caller (``Downstream``).

Framework-neutral: only the ASGI callables are used (uvicorn, hypercorn, granian; a Starlette or
FastAPI route reaches them as ``request.receive`` and the ``send`` of a raw endpoint).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from time import monotonic_ns
from types import CoroutineType
from typing import Any, Final

import orjson

from .. import translate
from .._errors import FastSSEError
from ..client import new_sink

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]

SSE_HEADERS: Final = (
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx and friends in front: do not buffer the stream
)
JSON_TYPE: Final = (b"content-type", b"application/json")
KEEPALIVE: Final = b": keepalive\n\n"  # an SSE comment: every event-stream reader skips it
_SLACK_NS: Final = 2_000_000  # a keep-alive tick this close to its due time is due (timers fire early)


class CallerGone(FastSSEError):
    """The caller disconnected before its request was read."""


class TooLarge(FastSSEError):
    """The request body passed ``max_body_bytes`` (announced or while read)."""


class _Driven:
    """An awaitable run from future callbacks instead of a task; ``done(exc)`` at its end."""

    __slots__ = ("done", "loop", "resume")

    def __init__(
        self,
        resume: Callable[[], Any],
        loop: asyncio.AbstractEventLoop,
        done: Callable[[BaseException | None], Any],
    ):
        self.resume = resume
        self.loop = loop
        self.done = done

    def wait(self, yielded: Any) -> None:
        if yielded is None:  # a bare yield (asyncio.sleep(0)): come back on the next turn
            self.loop.call_soon(self.step)
        else:  # an asyncio future, as every asyncio server's awaitables yield
            yielded._asyncio_future_blocking = False
            yielded.add_done_callback(self.step)

    def step(self, _: object = None) -> None:
        try:
            yielded = self.resume()
        except StopIteration:
            self.done(None)
        except BaseException as exc:  # the server's send raised (a closed connection...)
            self.done(exc)
        else:
            self.wait(yielded)


def start(awaitable: Awaitable[Any], done: Callable[[BaseException | None], Any]) -> bool:
    """Run ``awaitable`` now, on this stack, up to its first suspension: True if it finished there
    (``done`` is not called), False if it goes on from future callbacks and calls ``done(exc)``
    (None when it returned) at its end. A server's ``send`` that has room writes at once and
    finishes here: one message costs no task switch. It raises what the awaitable raised before
    its first suspension."""
    if type(awaitable) is CoroutineType:
        try:
            yielded = awaitable.send(None)
        except StopIteration:
            return True
        resume = _sender(awaitable)
    else:  # a server's own awaitable (granian's is an iterator with no send): next() it
        it = awaitable.__await__()
        resume = _sender(it) if hasattr(it, "send") else it.__next__
        try:
            yielded = resume()
        except StopIteration:
            return True
    _Driven(resume, asyncio.get_running_loop(), done).wait(yielded)
    return False


def _sender(it: Any) -> Callable[[], Any]:
    send = it.send

    def resume() -> Any:
        return send(None)

    return resume


def watch_disconnect(receive: Receive, on_gone: Callable[[], Any]) -> None:
    """Call ``on_gone()`` when the caller disconnects, with no task: ``receive()`` after the body
    returns ``http.disconnect`` once the connection is lost (or once the response is complete,
    which ``on_gone`` tells apart by its own state)."""
    future = receive()

    def ended(exc: BaseException | None) -> None:
        on_gone()

    try:
        if start(future, ended):
            on_gone()
    except Exception:
        on_gone()


async def read_body(scope: dict[str, Any], receive: Receive, limit: int) -> bytes:
    """The request body, at most ``limit`` bytes. It raises TooLarge for a Content-Length past the
    limit before reading any of it, or as soon as what arrived passes it, and CallerGone if the
    caller disconnects first."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                announced = int(value)
            except ValueError:
                announced = 0
            if announced > limit:
                raise TooLarge(announced)
    parts = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise CallerGone
        body = message.get("body", b"")
        if body:
            size += len(body)
            if size > limit:
                raise TooLarge(size)
            parts.append(body)
        if not message.get("more_body", False):
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def send_whole(
    send: Send,
    status: int,
    body: bytes,
    headers: Iterable[tuple[bytes, bytes]] = (),
    *,
    content_type: tuple[bytes, bytes] = JSON_TYPE,
) -> None:
    """A whole response: ``status``, ``headers`` (Content-Type and Content-Length added), ``body``."""
    out = [content_type, (b"content-length", b"%d" % len(body)), *headers]
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})


async def send_json(
    send: Send, status: int, payload: Any, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    await send_whole(send, status, orjson.dumps(payload), headers)


# Bytes of the upstream's pieces held for a flush that is due before the upstream is held too
HELD_BYTES: Final = 256 << 10


class Batch:
    """The answers that got pieces in this turn of the event loop, flushed once at its end: one
    loop callback per turn for every stream, not one per stream (``Gateway`` shares one)."""

    __slots__ = ("_due", "_scheduled")

    def __init__(self) -> None:
        self._due: list[Downstream] = []
        self._scheduled = False

    def add(self, down: Downstream) -> None:
        """Flush ``down`` at the end of this turn of the loop (with every other one added)."""
        self._due.append(down)
        if not self._scheduled:
            self._scheduled = True
            down._loop.call_soon(self._run)

    def _run(self) -> None:
        self._scheduled = False
        due, self._due = self._due, []
        for down in due:
            down._flush()


class Downstream:
    """The caller's side of one streamed answer, fed by the upstream transfer's ``on_chunk``.

    ``piece(data)`` (the transfer's ``on_chunk``) keeps each piece and, once per turn of the
    event loop (through ``batch``, a ``Batch`` shared by many answers, else a loop callback of its
    own), sends every piece that arrived in that turn as one message (the response's start,
    200 and an event stream, goes with the first): one write to the caller per upstream read
    however many events and chunked-encoding chunks the read held, and no task per piece. While
    the server takes a message without waiting nothing is queued. When its send must wait (the
    caller reads slower than the upstream writes: its transport's buffer is full), ``piece``
    returns a future that is not done: the engine stops reading the upstream (which meets TCP
    backpressure) until the send went out and every piece that arrived meanwhile (one more
    upstream read at most) went with the next send. So what waits for a slow caller is the
    server's write buffer and one read, whatever the answer's length.

    On a connection of the gateway's own server (``wire``: its protocol and the request's cycle,
    the scope's ``fastsse.wire`` extension), once the start went out and nothing waits, pieces
    do not come here at all: the sink (``WireSink``, ``on_chunk``; C with the compiled backend,
    called by the compiled byte stream with no Python frame) frames each one as an HTTP/1.1 chunk
    and writes it to the caller's transport at once. The protocol tells ``paused()`` /
    ``resumed()`` when that transport passes its high-water mark and drains: direct writes stop,
    the next piece takes the ASGI path, whose send waits for room (the server's own flow
    control), so the pieces after it hold the upstream as above; direct writes resume once
    nothing of that path waits, so the bytes keep their order. When the cycle has a ``begin``
    (``HttpServer``'s), the first piece goes out at once with the start, in one write, rather
    than at the end of the turn through two sends.
    The stamps (``first_ns``, ``last_ns``, ``gaps``) and ``relayed`` live in the sink.

    ``started`` says whether the status went out (after that a failure can only cut the
    response); ``gone`` whether the server's send failed or the caller left (``leave()``), and
    ``dropped`` whether some piece did not reach the server because of it. ``finish()`` sends the
    end of the body once every piece is out; ``flush()`` only waits for the pieces, for a
    response that is to be cut (returned from without its end, which the ASGI servers answer by
    closing the connection without the chunked terminator: the caller's HTTP client raises
    instead of taking a partial answer for a whole one). ``fail(data)`` sends an in-stream error
    event (``stream_error``) after the pieces, then the end of the body.

    With ``keepalive`` seconds (0: off), an answer that sent nothing for that long (before the
    upstream's first byte too) sends the SSE comment ``KEEPALIVE``, so an idle timer between the
    caller and the gateway (a load balancer's) does not close a slow answer. The first one commits
    the response's start: ``started`` is then True with no piece relayed (``first_ns`` still 0),
    and a later failure can only be told in the stream (``fail``). One loop timer per answer,
    every ``keepalive`` seconds, compares the time of the last piece or comment: a piece costs
    nothing more. No comment is sent while a send waits (a caller that does not read gets none
    piled up) or while pieces wait for this turn's flush. Comments count in ``pings`` only:
    ``relayed``, ``first_ns``, ``last_ns`` and ``gaps`` are about the upstream's pieces. They stop
    at ``flush()``, ``finish()``, ``fail()``, ``leave()`` and ``close()`` (which the owner calls
    however the answer ends).
    """

    __slots__ = (
        "_batch",
        "_begin",
        "_ended",
        "_flushed",
        "_held",
        "_keepalive",
        "_loop",
        "_pending",
        "_ping_ns",
        "_queued",
        "_room",
        "_sending",
        "_timer",
        "_wire",
        "_wire_paused",
        "dropped",
        "gone",
        "headers",
        "pings",
        "send",
        "sink",
        "started",
    )

    def __init__(
        self,
        send: Send,
        headers: list[tuple[bytes, bytes]],
        batch: Batch | None = None,
        *,
        keepalive: float = 0.0,
        wire: Any = None,
    ):
        self.send = send
        self.headers = headers
        self.started = False
        self.gone = False
        self.dropped = False
        # the stamps and the bytes handed on live in the sink (C with the compiled backend)
        self.sink = new_sink(self._piece)
        self.sink.lost = self._lost_direct
        self._wire: Any = None  # the server's connection (its protocol) when it takes direct writes
        self._wire_paused = False  # the caller's transport is past its high-water mark
        # the command's own server (HttpServer): the start and the first piece in one write
        self._begin: Callable[[int, Any, bytes, bool], bool] | None = None
        if wire is not None:
            protocol, cycle = wire
            if getattr(protocol, "fastsse_down", False) is None and cycle.scope.get("method") != "HEAD":
                self._wire = wire
                protocol.fastsse_down = self
                self.sink.write = protocol.transport.write
                self._begin = getattr(cycle, "begin", None)
                if self._begin is not None and getattr(cycle, "end_written", None) is not None:
                    # the command's own server: the sink may write the body's end with the last
                    # piece (uvicorn writes its own)
                    self.sink.ends = self._end_written
        self._ended = False  # the body's end went out (end_now)
        self._sending = False  # a send is waiting for room: pieces are held, the upstream too
        self._queued = False  # a flush is due at the end of this turn of the loop
        self._held: list[bytes] = []
        self._pending = 0  # bytes held for the flush that is due
        self._room: asyncio.Future[None] | None = None
        self._flushed: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()
        self._batch = batch
        self.pings = 0  # keep-alive comments sent
        self._keepalive = keepalive if keepalive > 0 else 0.0
        self._ping_ns = monotonic_ns()  # the last comment's time; the answer's start before one
        self._timer: asyncio.TimerHandle | None = None
        if self._keepalive:
            self._timer = self._loop.call_later(self._keepalive, self._tick)

    @property
    def ended(self) -> bool:
        """The body's end went out with a whole answer (``end_now``, or the sink's write of the
        last piece): nothing the upstream does after can change what the caller got."""
        return self._ended

    @property
    def relayed(self) -> int:
        """Bytes handed to the server (or written to the caller's socket)."""
        return int(self.sink.relayed)

    @property
    def first_ns(self) -> int:
        """The monotonic ns of the first piece (0 before)."""
        return int(self.sink.first_ns)

    @property
    def last_ns(self) -> int:
        """The monotonic ns of the latest piece (0 before)."""
        return int(self.sink.last_ns)

    @property
    def gaps(self) -> list[int]:
        """The gaps between pieces by their bit length in ns (``gaps[b]``: ``2**(b-1) <= gap <
        2**b``); their sum is ``last_ns - first_ns``. Gateway merges them at the answer's end."""
        return list(self.sink.gaps)

    @property
    def on_chunk(self) -> Any:
        """What the transfer's ``on_chunk`` should be: the sink, which the compiled byte stream
        calls without a Python frame (``piece`` is the same, called from Python)."""
        return self.sink

    def piece(self, data: bytes) -> Any:
        """The transfer's ``on_chunk``: keep ``data`` for this turn's send. It returns None (go on),
        a future that is not done (hold the upstream until it is) or False (the caller is gone:
        stop the transfer)."""
        return self.sink(data)

    def _piece(self, data: bytes, end: bool = False) -> Any:
        # the sink's slow path: the piece is stamped already (unless the caller is gone); ``end``:
        # the answer's last piece, whose end may go in the same write
        if self.gone:
            self.dropped = True
            return False  # stop the transfer: nobody to send to
        if not self.started and self._begin is not None and not (self._held or self._sending):
            try:
                begun = self._begin(200, self.headers, data, end)  # False: it would wait, take the ASGI path
            except Exception:
                self._lost()
                return False
            if begun:
                self.started = True
                self.sink.relayed += len(data)
                if end:  # begin wrote the end and completed the exchange
                    self.close()
                    self._ended = True
                else:
                    self._direct()
                return None
        self._held.append(data)
        if not self._sending:
            if not self._queued:
                self._queued = True
                self._pending = 0
                if self._batch is not None:
                    self._batch.add(self)
                else:
                    self._loop.call_soon(self._flush)
            self._pending += len(data)
            if self._pending <= HELD_BYTES:
                return None
            # a driver that reads many times in one turn of the loop (libuv reads a socket up to
            # 32 times per wake-up): the upstream waits for the flush rather than piling up here
        room = self._room
        if room is None:
            room = self._room = self._loop.create_future()
        return room

    def _direct(self) -> None:
        """Let the sink write to the caller's socket itself while nothing of ours waits."""
        wire = self._wire
        self.sink.direct = bool(
            wire is not None
            and self.started
            and not (self._sending or self._queued or self._held or self.gone or self._wire_paused)
            and wire[1].chunked_encoding is True
            and not wire[1].response_complete
        )

    def paused(self) -> None:
        """The server's transport is past its high-water mark (its protocol's ``pause_writing``):
        direct writes stop. The next piece takes the ASGI path, whose send waits for room (the
        server's own flow control), and the pieces after it hold the upstream, as above."""
        self._wire_paused = True
        self.sink.direct = False

    def resumed(self) -> None:
        """The transport drained below its low-water mark: direct writes resume once nothing of
        the ASGI path waits."""
        self._wire_paused = False
        self._direct()

    def _lost_direct(self) -> Any:
        self._lost()
        return False

    def _flush(self) -> None:
        """Send what arrived in this turn of the loop, as one message."""
        self._queued = False
        if self._sending or self.gone or not self._held:
            return
        held = self._held
        data = held[0] if len(held) == 1 else b"".join(held)
        held.clear()
        if not self.started:
            self.started = True
            message = {"type": "http.response.start", "status": 200, "headers": self.headers}
            try:
                if not start(self.send(message), self._sent_start):
                    self._sending = True
                    held.append(data)
                    return
            except Exception:
                self._lost()
                return
        self._send(data)
        self._direct()
        if not self._sending:
            self._settle()  # a hold taken while the flush was due ends with it

    def _send(self, data: bytes) -> None:
        self.sink.relayed += len(data)
        try:
            if not start(
                self.send({"type": "http.response.body", "body": data, "more_body": True}), self._sent
            ):
                self._sending = True
                self.sink.direct = False
        except Exception:
            self._lost()

    def _lost(self) -> None:
        self.dropped = True  # the failed send's bytes, and what was held
        self.leave()

    def leave(self) -> None:
        """The caller left: nothing more goes out, a held upstream is let go, and its next piece
        stops the transfer. What the server already took counts as sent."""
        self.gone = True
        self.sink.gone = True
        self.close()  # lets the connection go: no direct write after this
        if self._held:
            self.dropped = True
            self._held.clear()
        self._settle()

    def _sent_start(self, exc: BaseException | None) -> None:
        if exc is not None:
            self._lost()
            return
        self._sending = False
        self._flush()
        if not self._sending:
            self._settle()

    def _release(self) -> None:
        """The connection is no longer this answer's to write to directly."""
        wire, self._wire = self._wire, None
        self._begin = None
        self.sink.direct = False
        self.sink.ends = None
        if wire is not None and getattr(wire[0], "fastsse_down", None) is self:
            wire[0].fastsse_down = None

    def _sent(self, exc: BaseException | None) -> None:
        """A send that had to wait went out: send what arrived meanwhile, as one message."""
        if exc is not None:
            self._lost()
            return
        self._sending = False
        if self._held:
            held = self._held
            data = held[0] if len(held) == 1 else b"".join(held)
            held.clear()
            self._send(data)
            if self._sending:
                return  # still waiting: the hold stays
        self._settle()
        self._direct()

    def _settle(self) -> None:
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)  # the engine reads the upstream again
        flushed, self._flushed = self._flushed, None
        if flushed is not None and not flushed.done():
            flushed.set_result(None)

    async def flush(self) -> None:
        """Wait until every piece went to the server. It ends the keep-alive: call it once the
        upstream's transfer is over (the answer is then finished, failed or cut)."""
        self.close()
        if self._queued:
            self._flush()  # the pieces of this turn go now, not after the end is decided
        if self._sending:
            self._flushed = self._loop.create_future()
            await self._flushed

    async def finish(self) -> None:
        """Send the end of the body once every piece is out (a whole answer)."""
        await self.flush()
        if not self.gone and not self._ended:
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    def end_now(self) -> bool:
        """``finish()`` now, on this stack, where it would not wait: on a connection that takes
        direct writes (the command's own server's, or uvicorn's) whose transport is not paused,
        with every piece out (the direct path's state) and the start sent. True once the end went
        out, now or already (the sink's ``ends``): ``finish()`` then sends nothing more; False,
        with nothing done, otherwise. The owner calls it from the loop callback that saw the
        upstream's whole answer end, so the caller's response ends there, not once the answer's
        coroutines have resumed."""
        if self._ended:
            return True
        wire = self._wire
        if (
            wire is None
            or not self.started
            or self.gone
            or self._sending
            or self._queued
            or self._held
            or self._wire_paused  # the protocol's pause_writing, as the direct path reads it
            or wire[1].response_complete
        ):
            return False
        self.close()
        try:
            done = start(
                self.send({"type": "http.response.body", "body": b"", "more_body": False}), self._sent
            )
        except Exception:
            self._lost()
            return False
        self._ended = True
        if not done:  # pragma: no cover - the transport took writes above: the send did not wait
            self._sending = True  # as a body send that waits: _sent ends it, flush() waits for it
        return True

    def _end_written(self) -> None:
        # the sink wrote the body's end with the answer's last piece (the command's own server):
        # what end_now does once its send went out
        wire = self._wire
        self.close()
        self._ended = True
        if wire is not None:
            wire[1].end_written()

    async def fail(self, data: bytes) -> None:
        """Send ``data`` (the caller API's in-stream error event: ``stream_error``) once every
        piece is out, and end the body with it, so the caller's client raises its API error
        rather than a cut. The response's start goes first if nothing did (a 200: use it for
        an answer whose start a keep-alive committed; before that, an HTTP error says more).
        ``data`` does not count in ``relayed``. Nothing is sent once the caller is gone; it
        raises what the server's send raises."""
        await self.flush()
        if self.gone:
            return
        if not self.started:
            self.started = True
            await self.send({"type": "http.response.start", "status": 200, "headers": self.headers})
        await self.send({"type": "http.response.body", "body": data, "more_body": False})

    def close(self) -> None:
        """Stop the keep-alive (its timer is cancelled) and direct writes (the connection is let
        go); idempotent. Nothing else changes: call it however the answer ends."""
        self._release()
        self._keepalive = 0.0
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        # the sink points back here (its slow path, its lost and first callbacks): cut, so the
        # answer's parts go when it does rather than at the next full collection; a piece that
        # still comes stops its transfer
        sink = self.sink
        sink.slow, sink.lost, sink.first = _stop, None, None

    def _tick(self) -> None:
        """The keep-alive timer: a comment if nothing went out for ``keepalive`` seconds."""
        self._timer = None
        period = self._keepalive
        if not period or self.gone:
            return
        now = monotonic_ns()
        wait = round(period * 1e9) - (now - max(self.last_ns, self._ping_ns))
        if wait > _SLACK_NS:  # a piece came since: due later
            self._timer = self._loop.call_later(wait / 1e9, self._tick)
            return
        if not (self._sending or self._queued or self._held):
            self._ping(now)
        if self._keepalive and not self.gone:
            self._timer = self._loop.call_later(period, self._tick)

    def _ping(self, now: int) -> None:
        """Send a keep-alive comment, after the response's start if it did not go yet."""
        self._ping_ns = now
        if not self.started:
            self.started = True
            message = {"type": "http.response.start", "status": 200, "headers": self.headers}
            try:
                if not start(self.send(message), self._pinged_start):
                    self._sending = True  # the start waits: no comment behind it
                    self.sink.direct = False
                    return
            except Exception:
                self.leave()
                return
        try:
            if not start(
                self.send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True}),
                self._pinged,
            ):
                self._sending = True
                self.sink.direct = False
        except Exception:
            self.leave()
        else:
            self.pings += 1

    def _pinged_start(self, exc: BaseException | None) -> None:
        if exc is not None:
            self.leave()  # a lost comment drops nothing of the answer: only held pieces count
        else:
            self._sent_start(None)

    def _pinged(self, exc: BaseException | None) -> None:
        if exc is not None:
            self.leave()
        else:
            self._sent(None)


def _stop(data: bytes, end: bool = False) -> bool:
    """A closed answer's sink's slow path: stop the transfer."""
    return False


def stream_error(caller: str, status: int, error: object) -> bytes:
    """The SSE bytes of an error event in ``caller``'s API ("chat", "responses", "messages"),
    for a stream whose 200 went out before the upstream failed (a keep-alive committed it):
    ``error`` is the upstream's error body (bytes, text or parsed JSON in any API's shape) and
    ``status`` its HTTP status, mapped by ``translate.error`` to the caller's error type and
    message. What each API's clients raise on:

    - chat: ``data: {"error": {"message", "type", "param", "code"}}`` (the openai SDK raises
      ``APIError``), then ``data: [DONE]`` so a client that waits for it does not hang;
    - responses: ``event: error`` with ``{"type": "error", "code", "message", "param",
      "sequence_number": 0}`` as the API reference documents it, and the same fields nested
      under ``error`` as the live API sends them (what the openai SDK raises ``APIError`` on);
    - messages: ``event: error`` with ``{"type": "error", "error": {"type", "message"}}`` (the
      anthropic SDK raises its ``APIStatusError``).

    It raises ValueError for an unknown ``caller`` or a ``status`` outside 400-599."""
    _, payload = translate.error(status, error, caller)
    if caller == "messages":
        return b"event: error\ndata: " + orjson.dumps(payload) + b"\n\n"
    if caller == "chat":
        return b"data: " + orjson.dumps(payload) + b"\n\ndata: [DONE]\n\n"
    inner = payload["error"]
    event = {
        "type": "error",
        "code": inner["code"] if inner["code"] is not None else inner["type"],
        "message": inner["message"],
        "param": inner["param"],
        "sequence_number": 0,
        "error": inner,
    }
    return b"event: error\ndata: " + orjson.dumps(event) + b"\n\n"
