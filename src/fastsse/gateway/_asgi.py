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

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]

SSE_HEADERS: Final = (
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx and friends in front: do not buffer the stream
)
JSON_TYPE: Final = (b"content-type", b"application/json")


class CallerGone(Exception):
    """The caller disconnected before its request was read."""


class TooLarge(Exception):
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

    ``started`` says whether the status went out (after that a failure can only cut the
    response); ``gone`` whether the server's send failed or the caller left (``leave()``), and
    ``dropped`` whether some piece did not reach the server because of it. ``finish()`` sends the
    end of the body once every piece is out; ``flush()`` only waits for the pieces, for a
    response that is to be cut (returned from without its end, which the ASGI servers answer by
    closing the connection without the chunked terminator: the caller's HTTP client raises
    instead of taking a partial answer for a whole one).
    """

    __slots__ = (
        "_batch",
        "_flushed",
        "_held",
        "_loop",
        "_queued",
        "_room",
        "_sending",
        "dropped",
        "first_ns",
        "gaps",
        "gone",
        "headers",
        "last_ns",
        "relayed",
        "send",
        "started",
    )

    def __init__(
        self,
        send: Send,
        headers: list[tuple[bytes, bytes]],
        batch: Batch | None = None,
    ):
        self.send = send
        self.headers = headers
        self.started = False
        self.gone = False
        self.dropped = False
        self.relayed = 0  # bytes handed to the server
        self.first_ns = 0  # monotonic ns of the first piece
        self.last_ns = 0
        # the gaps between pieces by their bit length in ns (gaps[b]: 2**(b-1) <= gap < 2**b); their
        # sum is last_ns - first_ns. One list increment per piece; Gateway merges it at the end.
        self.gaps = [0] * 64
        self._sending = False  # a send is waiting for room: pieces are held, the upstream too
        self._queued = False  # a flush is due at the end of this turn of the loop
        self._held: list[bytes] = []
        self._room: asyncio.Future[None] | None = None
        self._flushed: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()
        self._batch = batch

    def piece(self, data: bytes) -> Any:
        """The transfer's ``on_chunk``: keep ``data`` for this turn's send. It returns None (go on),
        a future that is not done (hold the upstream until it is) or False (the caller is gone:
        stop the transfer)."""
        if self.gone:
            self.dropped = True
            return False  # stop the transfer: nobody to send to
        now = monotonic_ns()
        if self.last_ns:
            self.gaps[(now - self.last_ns).bit_length()] += 1
        else:
            self.first_ns = now
        self.last_ns = now
        self._held.append(data)
        if self._sending:
            room = self._room
            if room is None:
                room = self._room = self._loop.create_future()
            return room
        if not self._queued:
            self._queued = True
            if self._batch is not None:
                self._batch.add(self)
            else:
                self._loop.call_soon(self._flush)
        return None

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

    def _send(self, data: bytes) -> None:
        self.relayed += len(data)
        try:
            if not start(
                self.send({"type": "http.response.body", "body": data, "more_body": True}), self._sent
            ):
                self._sending = True
        except Exception:
            self._lost()

    def _lost(self) -> None:
        self.dropped = True  # the failed send's bytes, and what was held
        self.leave()

    def leave(self) -> None:
        """The caller left: nothing more goes out, a held upstream is let go, and its next piece
        stops the transfer. What the server already took counts as sent."""
        self.gone = True
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

    def _settle(self) -> None:
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)  # the engine reads the upstream again
        flushed, self._flushed = self._flushed, None
        if flushed is not None and not flushed.done():
            flushed.set_result(None)

    async def flush(self) -> None:
        """Wait until every piece went to the server."""
        if self._queued:
            self._flush()  # the pieces of this turn go now, not after the end is decided
        if self._sending:
            self._flushed = self._loop.create_future()
            await self._flushed

    async def finish(self) -> None:
        """Send the end of the body once every piece is out (a whole answer)."""
        await self.flush()
        if not self.gone:
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})
