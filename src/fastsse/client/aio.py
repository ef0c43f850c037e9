"""``AsyncClient``: the many-streams engine (``engine.py``) driven by the running event loop.

curl's sockets go into one epoll set whose fd the loop watches (``loop.add_reader``), so a
wake-up is one callback that hands every ready socket to ``curl_multi_socket_action``; where
there is no epoll each socket is an ``add_reader`` / ``add_writer`` registration of its own.
curl's timer is a ``call_at``. Kept apart from
``engine.py`` so that ``import fastsse`` and the blocking ``Client`` never import asyncio.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import select
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import ClientClosed, UsageError
from ._options import (
    CLIENT,
    DEFAULT,
    SOURCE_NAMES,
    RequestOptions,
    call_signature,
    check_options,
    client_options,
    client_signature,
    options_doc,
    source_doc,
    source_signature,
    with_self,
)
from ._plain import MAX_BODY_BYTES, OnBody, Reply
from ._source import Source, SourceFace
from .engine import _WAIT_SLICE, EpollSet, OnChunk, _Engine, _Job, left
from .sync import Outcome, _concurrency, _jobs

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..sse import Event
    from ._options import CallOptions, ClientOptions, SourceOptions

# AsyncClient.stream(): chunks parsed but not yet taken before the transfer is held (curl stops
# reading; one more network read, at most 16 KiB of input, may still arrive), and the level the
# consumer must bring the buffer down to for reading to resume.
STREAM_BUFFER = 256
STREAM_RESUME = STREAM_BUFFER // 2


class AsyncClient:
    """``AsyncClient(*, api=DEFAULT, base_url=DEFAULT, ..., max_connections=100)``: many streams
    at once on the running event loop (asyncio's default loop or uvloop).

    One libcurl multi handle whose sockets and timer the loop watches, no thread per stream. It
    mirrors ``Client`` name for name, awaited: ``create_stream``, ``stream`` (an async iterator),
    ``as_completed`` (an async iterator), ``run``, ``get`` / ``post`` (plain requests), ``close``;
    the options are the same.
    ``async with AsyncClient(...) as client:`` closes every transfer and connection at the end;
    so does ``await client.close()``: a request still queued or running then raises
    ``ClientClosed`` in its awaiting task. Use a client from the loop that first used it: another
    loop (another thread's included) gets UsageError.

    ``timeout`` bounds the whole call, the time a request waits for a free connection
    (``max_connections``) included: one that waits past it fails with TransportError (code 28).

    Windows' default proactor loop cannot watch sockets (no ``add_reader``): run the client under
    ``asyncio.WindowsSelectorEventLoopPolicy()`` (or uvloop elsewhere); on a proactor loop the
    first request raises UsageError saying so. ``Client`` works everywhere.
    """

    def __init__(self, **options: Unpack[ClientOptions]) -> None:
        defaults, engine = client_options(options, "AsyncClient()")
        self._engine = _AsyncEngine(defaults, **engine)

    async def create_stream(
        self, input: Mapping[str, Any], /, on_chunk: OnChunk | None = None, **options: Unpack[CallOptions]
    ) -> dict[str, Any]:
        """``await client.create_stream(input, /, on_chunk=None, **options) -> dict``

        One request, as ``fastsse.create_stream`` makes it, with the same arguments and the same
        result. ``on_chunk(chunk)`` runs on the loop's thread for every chunk; returning False
        stops this stream. Cancelling the awaiting task removes the transfer at once (its
        connection is closed, its handle recycled).

        Backpressure, with ``format="relay"`` or ``"to-*"`` (``on_chunk`` gets the bytes to send
        on): ``on_chunk`` may return an ``asyncio.Future`` that is not done yet, meaning "stop
        reading until I catch up". Curl then stops reading this transfer's socket (the server
        meets TCP backpressure) and reading resumes by itself once the future is done (set its
        result; cancelling it resumes too). One more network read (at most 16 KiB) may arrive
        before the hold takes effect; while held, the transfer is not idle for ``idle_timeout``,
        but ``timeout`` still runs.

        It raises what ``fastsse.create_stream`` raises, UsageError on a loop that cannot watch
        sockets or another loop than the client's, ``ClientClosed`` if the client is (or gets)
        closed before the answer ends.
        """
        job = self._engine.make_job(input, on_chunk, options)
        result: dict[str, Any] = await self._run(job)
        return result

    async def _run(self, job: _Job) -> Any:
        # the job's outcome (a result dict, a Reply) once it ended; its exception raised
        engine = self._engine
        loop = engine.bind()
        job.waiter = loop.create_future()
        engine.submit(job)
        try:
            await job.waiter
        except asyncio.CancelledError:
            engine.cancel(job)
            raise
        outcome = job.result
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def stream(self, input: Mapping[str, Any], /, **options: Unpack[CallOptions]) -> AsyncChunkStream:
        """``client.stream(input, /, **options) -> AsyncChunkStream``: ``async with
        client.stream(request) as stream: async for chunk in stream: ...`` yields each chunk as it
        arrives; ``stream.result()`` is the answer (with ``"verdict"`` and ``"timing"``) once the
        iteration ended. Leaving the ``async with`` block early cancels the transfer.

        The buffer is bounded: when 256 chunks wait for the consumer (``STREAM_BUFFER``), the
        transfer is held (curl stops reading; the server meets TCP backpressure) until the consumer
        has taken it down to 128. At most one more network read (16 KiB of input) arrives past the
        bound, so a slow consumer holds a few hundred chunks whatever the answer's size.

        It raises what ``create_stream`` raises: bad options at once, the rest while iterating.
        """
        return AsyncChunkStream(self, input, options)

    async def as_completed(
        self,
        requests: Iterable[Mapping[str, Any]],
        /,
        on_chunk: Callable[[int, Any], Any] | None = None,
        *,
        concurrency: int | None = None,
    ) -> AsyncIterator[tuple[int, Outcome]]:
        """``async for index, outcome in client.as_completed(requests, /, on_chunk=None, *,
        concurrency=None)``: each request's ``(index, outcome)`` as it ends, at most
        ``concurrency`` (default ``max_connections``) in flight; an outcome is the result dict or
        the exception ``create_stream`` would have raised, as in ``Client.as_completed``.

        It raises TypeError for a request that is not a mapping and InvalidRequest for a bad
        ``concurrency`` (before any request is sent). Leaving the loop early (``break``, an
        exception, cancellation) cancels the requests still in flight.
        """
        engine = self._engine
        jobs = _jobs(engine, requests, on_chunk)
        limit = _concurrency(engine, concurrency)
        loop = engine.bind()
        pending = collections.deque(jobs)
        ready: collections.deque[_Job] = collections.deque()
        wake: list[asyncio.Future[None] | None] = [None]
        in_flight: set[int] = set()

        def settled(future: asyncio.Future[None], job: _Job) -> None:
            if future.cancelled():
                return
            if future.exception() is not None and not isinstance(job.result, BaseException):
                job.result = future.exception()  # ClientClosed, set by close()
            ready.append(job)
            waiter = wake[0]
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

        try:
            while pending or in_flight:
                while pending and len(in_flight) < limit:
                    job = pending.popleft()
                    job.waiter = loop.create_future()
                    job.waiter.add_done_callback(lambda future, job=job: settled(future, job))
                    in_flight.add(id(job))
                    try:
                        engine.submit(job)
                    except BaseException as exc:
                        engine._settle(job, exc)
                while not ready:
                    waiter = wake[0] = loop.create_future()
                    try:
                        await waiter
                    finally:
                        wake[0] = None
                job = ready.popleft()
                in_flight.discard(id(job))
                yield job.index, job.result
        finally:
            for job in jobs:
                if id(job) in in_flight and not job.done:
                    engine.cancel(job)

    async def run(
        self,
        requests: Iterable[Mapping[str, Any]],
        /,
        on_chunk: Callable[[int, Any], Any] | None = None,
        *,
        concurrency: int | None = None,
    ) -> list[Outcome]:
        """``await client.run(requests, /, on_chunk=None, *, concurrency=None) -> list``: every
        request's outcome in request order, as ``Client.run``. It raises what ``as_completed``
        raises."""
        items = list(requests)
        out: list[Outcome] = [{}] * len(items)
        async for index, outcome in self.as_completed(items, on_chunk, concurrency=concurrency):
            out[index] = outcome
        return out

    async def get(
        self,
        path: str,
        /,
        *,
        headers: Mapping[str, str] | Sequence[str] | None = None,
        timeout: Any = DEFAULT,
        max_body_bytes: int | None = MAX_BODY_BYTES,
        on_body: OnBody | None = None,
    ) -> Reply:
        """``await client.get(path, /, *, headers=None, timeout=DEFAULT, max_body_bytes=16 MiB,
        on_body=None) -> Reply``: ``Client.get`` on the loop (``on_body`` runs on the loop's
        thread); cancelling the awaiting task removes the transfer at once. It raises what
        ``Client.get`` raises, UsageError on another loop than the client's."""
        job = self._engine.plain_job(
            "GET", path, b"", headers=headers, timeout=timeout, max_body_bytes=max_body_bytes, on_body=on_body
        )
        reply: Reply = await self._run(job)
        return reply

    async def post(
        self,
        path: str,
        body: bytes,
        /,
        *,
        headers: Mapping[str, str] | Sequence[str] | None = None,
        timeout: Any = DEFAULT,
        max_body_bytes: int | None = MAX_BODY_BYTES,
        on_body: OnBody | None = None,
    ) -> Reply:
        """``await client.post(path, body, /, *, ...) -> Reply``: ``Client.post`` on the loop, as
        ``get``."""
        job = self._engine.plain_job(
            "POST",
            path,
            body,
            headers=headers,
            timeout=timeout,
            max_body_bytes=max_body_bytes,
            on_body=on_body,
        )
        reply: Reply = await self._run(job)
        return reply

    async def close(self) -> None:
        """Cancel every transfer, close every connection and the multi handle."""
        self._engine.close()

    def __getattr__(self, name: str) -> Any:
        # ``aclose``, the name before 1.0 (asyncio's convention), kept so that code keeps working
        if name == "aclose":
            return self.close
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


AsyncClient.__init__.__signature__ = with_self(client_signature())  # type: ignore[attr-defined]
AsyncClient.create_stream.__signature__ = with_self(call_signature())  # type: ignore[attr-defined]
AsyncClient.__doc__ = (AsyncClient.__doc__ or "") + options_doc(CLIENT)


class AsyncChunkStream:
    """The chunks of one request as an async iterator (made by ``AsyncClient.stream``).

    ``async for chunk in stream`` starts the request and yields each chunk as it arrives; it
    raises at the end what ``create_stream`` would have raised. ``result()`` is the folded answer
    once the iteration ended. ``aclose()`` (or leaving ``async with stream:``) cancels the transfer
    at once and keeps what arrived as ``result()``, its verdict ``aborted``; a loop left with
    ``break`` outside ``async with`` keeps its transfer running until the stream is closed or the
    client is.
    """

    def __init__(self, client: AsyncClient, request: Mapping[str, Any], options: Mapping[str, Any]) -> None:
        self._client = client
        self._request = request
        self._options = options
        self._result: dict[str, Any] | None = None
        self._pending: collections.deque[dict[str, Any]] = collections.deque()
        self._task: asyncio.Task[dict[str, Any]] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._job: _Job | None = None
        self._room: asyncio.Future[None] | None = None  # set when the buffer is down again

    def _on_chunk(self, chunk: dict[str, Any]) -> None:
        self._pending.append(chunk)
        self._wake()
        if len(self._pending) >= STREAM_BUFFER and self._room is None and self._job is not None:
            response = self._job.response
            if response is not None:
                self._room = asyncio.get_running_loop().create_future()
                response.hold(self._room)

    def _wake(self, _: object = None) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __aiter__(self) -> AsyncChunkStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        if self._task is None:
            client = self._client
            self._job = client._engine.make_job(self._request, self._on_chunk, self._options)
            self._task = loop.create_task(client._run(self._job))
            self._task.add_done_callback(self._wake)
        while True:
            if self._pending:
                chunk = self._pending.popleft()
                room = self._room
                if room is not None and len(self._pending) <= STREAM_RESUME:
                    self._room = None
                    room.set_result(None)
                return chunk
            if self._task.done():
                if self._result is None:
                    self._result = self._task.result()
                raise StopAsyncIteration
            waiter = self._waiter = loop.create_future()
            try:
                await waiter
            except asyncio.CancelledError:
                self._task.cancel()
                raise
            finally:
                self._waiter = None

    async def aclose(self) -> None:
        """Cancel the transfer if it is still running; what arrived stays readable as
        ``result()``, its verdict ``aborted`` (as when ``on_chunk`` returns False)."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if self._result is None and self._job is not None:
                self._result = left(self._job)

    async def __aenter__(self) -> AsyncChunkStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def result(self) -> dict[str, Any]:
        """The folded answer with its verdict and timing. It raises UsageError before the end."""
        if self._result is None:
            raise UsageError("the stream has not ended yet: iterate it to the end first")
        return self._result


class AsyncEventSource(SourceFace):
    """``AsyncEventSource(url, /, *, headers=None, ..., max_reconnects=None, max_retry_delay=30.0)``:
    the events of any SSE endpoint as an async iterator, the twin of ``fastsse.EventSource``
    (the same options, rules and properties), on the running event loop.

    ``async for event in source`` GETs ``url``, yields each ``fastsse.Event`` as it arrives, and
    reconnects as ``EventSource`` does (docs/eventsource.md): after the server's ``retry:`` delay,
    with ``Last-Event-ID``, never delivering an event twice. The buffer is bounded as
    ``AsyncChunkStream``'s: when 256 events wait for the consumer the transfer is held (curl stops
    reading; the server meets TCP backpressure) until the consumer has taken it down to 128.
    ``await source.close()`` (also ``aclose()``, or leaving ``async with source:``) ends the
    connection, or the wait for the next one, at once; so does cancelling the task that awaits
    the next event, which ends the source (nothing is left running, no handle held). A loop left
    with ``break`` outside ``async with`` keeps its connection until the source is closed.

    It raises what ``EventSource`` raises, at the same points; UsageError on a loop that cannot
    watch sockets or another loop than the one that first read it.
    """

    def __init__(self, url: str, /, **options: Unpack[SourceOptions]) -> None:
        given = check_options(options, SOURCE_NAMES, "AsyncEventSource()")
        driver = given.pop("driver", None)
        self._source = Source(url, given)
        self._engine = _AsyncEngine(RequestOptions(), max_connections=1, driver=driver)
        self._pending: collections.deque[Event] = collections.deque()
        self._job: _Job | None = None
        self._wait: float | None = None  # seconds before the next connection; None: connect now
        self._failure: BaseException | None = None  # raised once the events before it are out
        self._ended = False
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None  # the reader's: an event, an end or close()
        self._sleeper: asyncio.Future[None] | None = None  # the wait before a reconnection
        self._room: asyncio.Future[None] | None = None  # set when the buffer is down again

    def __aiter__(self) -> AsyncEventSource:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self._next(asyncio.get_running_loop())
        except BaseException:  # the end, an error, a cancellation: nothing is left running
            self._ended = True
            self._shutdown()
            raise

    async def _next(self, loop: asyncio.AbstractEventLoop) -> Event:
        pending, source, engine = self._pending, self._source, self._engine
        while True:
            if self._closed:
                raise StopAsyncIteration
            if pending:
                event = pending.popleft()
                room = self._room
                if room is not None and len(pending) <= STREAM_RESUME:
                    self._room = None
                    if not room.done():
                        room.set_result(None)
                return event
            if self._failure is not None:
                failure, self._failure = self._failure, None
                raise failure
            if self._ended:
                raise StopAsyncIteration
            job = self._job
            if job is None:
                if self._wait is not None:
                    wait, self._wait = self._wait, None
                    await self._sleep(loop, wait)
                    continue
                spec, decoder = source.connect()
                engine.bind()
                job = self._job = engine.source_job(spec, self._on_event, decoder)
                job.waiter = loop.create_future()
                job.waiter.add_done_callback(self._wake)
                engine.submit(job)
                continue
            if not job.done:
                await self._park(loop)
                continue
            self._job = None
            try:
                self._wait = source.settle(job.result)
            except Exception as exc:
                self._failure = exc
                continue
            if self._wait is None:
                self._ended = True

    async def _park(self, loop: asyncio.AbstractEventLoop) -> None:
        waiter = self._waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    async def _sleep(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        # A future of its own: a wake-up meant for the connection that just ended (its waiter's
        # callback may still be queued) must not cut the wait short; only the timer and close() end it.
        sleeper = self._sleeper = loop.create_future()
        timer = loop.call_later(seconds, _resolve, sleeper)
        try:
            await sleeper
        finally:
            timer.cancel()
            self._sleeper = None

    def _wake(self, _: object = None) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _on_event(self, event: Event) -> None:
        admitted = self._source.admit(event)
        if admitted is None:
            return
        self._pending.append(admitted)
        self._wake()
        job = self._job
        if len(self._pending) >= STREAM_BUFFER and self._room is None and job is not None:
            response = job.response
            if response is not None:
                self._room = asyncio.get_running_loop().create_future()
                response.hold(self._room)

    async def close(self) -> None:
        """End the connection, or the wait for the next one, at once; the loop then stops."""
        self._closed = True
        self._shutdown()
        self._wake()
        if self._sleeper is not None:
            _resolve(self._sleeper)

    async def aclose(self) -> None:
        """``close()``, by the name ``contextlib.aclosing`` calls."""
        await self.close()

    def _shutdown(self) -> None:
        job, self._job = self._job, None
        engine = self._engine
        if job is not None and not job.done and not engine.closed:
            engine.cancel(job)  # before close(): its waiter is then left pending, not failed
        engine.close()
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)

    async def __aenter__(self) -> AsyncEventSource:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


AsyncEventSource.__init__.__signature__ = with_self(source_signature())  # type: ignore[attr-defined]
AsyncEventSource.__doc__ = (AsyncEventSource.__doc__ or "") + source_doc()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _check_loop(loop: asyncio.AbstractEventLoop) -> None:
    # Windows' proactor loop has add_reader but raises NotImplementedError from it; find out here,
    # where the error can reach the caller, rather than inside curl's socket callback.
    a, b = socket.socketpair()
    try:
        loop.add_reader(a.fileno(), _nothing)
        loop.remove_reader(a.fileno())
    except NotImplementedError:
        raise UsageError(
            "this event loop cannot watch sockets (Windows' proactor loop has no add_reader): run "
            "AsyncClient under asyncio.WindowsSelectorEventLoopPolicy(), or use fastsse.Client"
        ) from None
    finally:
        a.close()
        b.close()


def _nothing() -> None:
    return None


class _AsyncEngine(_Engine):
    """The engine on an asyncio event loop: curl's sockets become add_reader / add_writer."""

    def __init__(self, options: RequestOptions, /, **kwargs: Any) -> None:
        super().__init__(options, **kwargs)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.watched: dict[int, int] = {}  # fd -> POLL_* mask being watched
        self.timer: asyncio.TimerHandle | None = None
        self.timer_due = 0.0  # loop time the timer fires at
        self.wanted: float | None = None  # loop time curl last asked to be woken at
        self.idle_timer: asyncio.TimerHandle | None = None
        self.retry_timer: asyncio.TimerHandle | None = None  # the waits between attempts
        self.retry_due = 0.0  # time.monotonic() it fires at
        self.binding = threading.Lock()
        # Where there is epoll, curl's sockets go into one set and the loop watches its one fd:
        # a wake-up is one callback (``drain``) however many sockets are ready. Elsewhere each
        # socket is a loop reader / writer of its own.
        self.sockets = EpollSet(self.pycurl) if hasattr(select, "epoll") else None

    def bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self.loop is loop:
            return loop
        with self.binding:  # two loops (two threads) at once: one binds, the other is refused
            if self.loop is None:
                _check_loop(loop)
                if self.sockets is not None and not self.closed:
                    loop.add_reader(self.sockets.fileno(), self.drain, self.sockets)
                    if self.driver == "compiled":  # curl's sockets into the set from C
                        self.multi.watch(self.sockets.fileno())
                self.loop = loop
            elif self.loop is not loop:
                closed = self.loop.is_closed()
                raise UsageError(
                    "an AsyncClient is bound to the event loop that first used it"
                    + (
                        ", which has closed: each asyncio.run() starts a new loop. Make the client "
                        "inside the coroutine that uses it (async with fastsse.AsyncClient(...) as "
                        "client:), or run all its calls under one asyncio.run()"
                        if closed
                        else "; this is another loop (another thread?): make one client per loop"
                    )
                )
        return loop

    def _released(self, job: _Job) -> None:
        # future callbacks run from the loop, never inside curl; resume at once
        if self.acting and self.loop is not None:
            self.loop.call_soon(self.resume, job)
        else:
            self.resume(job)

    def _on_socket(self, what: int, fd: int, multi: Any, data: Any) -> None:
        try:
            if self.sockets is not None:
                self.sockets.watch(what, fd)
            else:
                self._watch(what, fd)
        except BaseException as exc:
            self.callback_exc = exc

    def _watch(self, what: int, fd: int) -> None:
        loop = self.loop
        assert loop is not None
        pycurl = self.pycurl
        old = self.watched.get(fd, 0)
        new = 0 if what == pycurl.POLL_REMOVE else what
        if old & pycurl.POLL_IN and not new & pycurl.POLL_IN:
            loop.remove_reader(fd)
        if old & pycurl.POLL_OUT and not new & pycurl.POLL_OUT:
            loop.remove_writer(fd)
        try:
            if new & pycurl.POLL_IN and not old & pycurl.POLL_IN:
                loop.add_reader(fd, self.action, fd, pycurl.CSELECT_IN)
            if new & pycurl.POLL_OUT and not old & pycurl.POLL_OUT:
                loop.add_writer(fd, self.action, fd, pycurl.CSELECT_OUT)
        except NotImplementedError:
            raise UsageError(
                "this event loop cannot watch sockets (Windows' proactor loop): use "
                "asyncio.WindowsSelectorEventLoopPolicy(), or fastsse.Client"
            ) from None
        if new:
            self.watched[fd] = new
        else:
            self.watched.pop(fd, None)

    def _on_timer(self, timeout_ms: int) -> None:
        # curl moves its timer on nearly every read; a loop timer is only replaced when curl wants
        # to be woken earlier than it fires. One that fires early checks ``wanted`` and waits on.
        try:
            self._arm(timeout_ms)
        except BaseException as exc:
            self.callback_exc = exc

    def _arm(self, timeout_ms: int) -> None:
        loop = self.loop
        if timeout_ms < 0 or loop is None:
            self.wanted = None
            return
        due = self.wanted = loop.time() + timeout_ms / 1000
        if self.timer is not None:
            if self.timer_due <= due:
                return
            self.timer.cancel()
        self.timer_due = due
        self.timer = loop.call_at(due, self._timeout)

    def _timeout(self) -> None:
        self.timer = None
        wanted = self.wanted
        if self.closed or wanted is None or self.loop is None:
            return
        if wanted > self.loop.time() + 0.0005:
            self.timer_due = wanted
            self.timer = self.loop.call_at(wanted, self._timeout)
            return
        self.wanted = None
        self.action(self.pycurl.SOCKET_TIMEOUT, 0)

    def submit(self, job: _Job) -> None:
        super().submit(job)
        self._tick_soon()

    def _start(self, job: _Job) -> None:
        super()._start(job)
        self._tick_soon()

    def _tick_soon(self) -> None:
        # idle transfers, and queued requests whose timeout may run out, are looked at every slice
        if (self.idle_jobs or self.waiting) and self.idle_timer is None and self.loop is not None:
            self.idle_timer = self.loop.call_later(_WAIT_SLICE, self._idle_tick)

    def _idle_tick(self) -> None:
        self.idle_timer = None
        if self.closed:
            return
        self.check_idle()
        self._tick_soon()

    def _wake_in(self, wait: float) -> None:
        # one timer for every wait between attempts, armed for the earliest
        if self.loop is None:
            return
        due = time.monotonic() + wait
        if self.retry_timer is not None:
            if self.retry_due <= due:
                return
            self.retry_timer.cancel()
        self.retry_due = due
        self.retry_timer = self.loop.call_later(wait, self._due)

    def _due(self) -> None:
        self.retry_timer = None
        if self.closed:
            return
        self.run_due()  # a failure to start settles that job: nothing to raise here
        if self.delayed:  # not due yet (a loop's timer may fire early: uvloop's can): wait on
            self._wake_in(max(0.001, self.delayed[0][0] - time.monotonic()))
        self._tick_soon()

    def _finished(self, job: _Job) -> None:
        waiter = job.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        if self.closed:
            return
        delayed = [job for _, _, job in self.delayed if not job.done]
        for job in list(self.active.values()) + list(self.waiting) + delayed:
            if job.waiter is not None and not job.waiter.done():
                job.waiter.set_exception(
                    ClientClosed(
                        f"{job.spec.display_url}: the AsyncClient was closed before this answer ended"
                    )
                )
        super().close()
        for timer in (self.timer, self.idle_timer, self.retry_timer):
            if timer is not None:
                timer.cancel()
        self.timer = self.idle_timer = self.retry_timer = None
        if self.sockets is not None:
            if self.loop is not None and not self.loop.is_closed():
                self.loop.remove_reader(self.sockets.fileno())
            self.sockets.close()
        if self.loop is not None and not self.loop.is_closed():
            for fd, mask in self.watched.items():
                if mask & self.pycurl.POLL_IN:
                    self.loop.remove_reader(fd)
                if mask & self.pycurl.POLL_OUT:
                    self.loop.remove_writer(fd)
        self.watched.clear()
