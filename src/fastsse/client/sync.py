"""The blocking side: ``Client`` (the many-streams engine on the calling thread's own poll loop),
``create_stream``, one request on a one-connection ``Client``, and ``EventSource``, the events of
any SSE endpoint, reconnecting.

``Client`` polls curl's sockets itself (epoll where there is one, else ``selectors``), so it works
without asyncio; ``AsyncClient`` (``aio.py``) drives the same engine from an event loop.
"""

from __future__ import annotations

import collections
import contextlib
import select
import selectors
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import ClientClosed, InvalidRequest, UsageError
from ._options import (
    CALL,
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
from .engine import _WAIT_SLICE, IN_CALLBACK, EpollSet, OnChunk, _Engine, _Job, left

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..sse import Event
    from ._options import CallOptions, ClientOptions, SourceOptions

__all__ = ["ChunkStream", "Client", "EventSource", "create_stream"]


def create_stream(
    input: Mapping[str, Any], /, on_chunk: OnChunk | None = None, **options: Unpack[CallOptions]
) -> dict[str, Any]:
    """POST a request with ``"stream": true`` and return the API's whole answer, folded.

    ``create_stream(input, /, on_chunk=None, *, api, base_url, api_key, ...) -> dict``: one
    request on a ``fastsse.Client`` of its own, made and closed by this call; ``Client.create_stream``
    and ``AsyncClient.create_stream`` take the same arguments. The result is a ``chat.completion``
    (``api="responses"``: a ``response``; ``api="messages"``: a ``message``) with ``"verdict"``
    (was the answer whole, and if not ``why``) and ``"http"`` (``status``, ``retry_after``,
    ``location``, ``upstream``, ``error``); with ``timing=True`` also ``"timing"`` (a client's
    results carry it by default). An answer that is no stream (an HTTP error, a redirect, a 204, a
    page) has the same shape, its ``http["error"]`` set and a verdict whose ``why`` says what came;
    with ``raise_for_status=True`` it raises HTTPStatusError instead. A JSON answer (a server that ignored ``stream``) is folded
    as the stream it stands for.

    ``on_chunk(chunk)`` is called on this thread for every parsed chunk (or event) as it arrives,
    never for ``[DONE]``; returning ``False`` cancels the transfer and the partial result is
    returned without an error. With ``format="relay"`` or ``"to-*"`` it receives the bytes to
    send downstream instead. ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` /
    ``OPENAI_API_KEY`` (then the OpenAI endpoint), like the openai SDK; only http:// and https://
    URLs are accepted, and redirects are not followed. ``api_key`` is sent as ``Authorization:
    Bearer`` (Messages: ``x-api-key`` with ``anthropic-version``); an ``Authorization`` in
    ``headers`` replaces the environment's key (giving it and ``api_key=`` both is an error).

    ``timeout`` bounds the whole transfer and ``connect_timeout`` the connection, in seconds (None:
    no bound); ``idle_timeout`` gives up once that many seconds pass without a byte from the
    server (``: ping`` keep-alives count), checked every 0.1 s. Ctrl-C is acted on within about
    0.1 s. ``proxy`` is a proxy URL, ``""`` for none, None to follow the environment;
    ``ca_bundle`` a PEM file of CAs, ``client_cert`` a PEM certificate (or ``(cert, key)``).
    ``Accept-Encoding: identity`` is sent, and a body compressed anyway is decoded. ``curl``, a
    ``pycurl.Curl`` of your own, is used for the transfer and its connection kept; what this call
    set on it is cleared afterwards (``client_cert`` is refused with it).

    It raises InvalidRequest (a ValueError) before sending anything if an option is bad (a URL that
    is not http(s), a header with CR/LF, a timeout ``<= 0``, ``api`` and ``format`` that disagree);
    TypeError for an option of the wrong type or name; TransportError (``.code``, curl's; ``.result``,
    the partial answer) if the connection is refused, times out, goes idle or breaks; HTTPStatusError
    with ``raise_for_status=True``; EventTooLarge past ``max_event_bytes``; whatever ``on_chunk``
    raises, unchanged, after the transfer is stopped; ImportError without pycurl.
    """
    given: dict[str, Any] = dict(options)
    if given.get("timing", DEFAULT) is DEFAULT:
        given["timing"] = False  # the seed's contract: the answer and its verdict, no record
    curl, driver = given.get("curl"), given.pop("driver", DEFAULT)
    if driver is DEFAULT:
        driver = "pycurl" if curl is not None and curl is not DEFAULT else None
    with Client(max_connections=1, driver=driver) as client:
        return client.create_stream(input, on_chunk, **given)


create_stream.__signature__ = call_signature()  # type: ignore[attr-defined]
create_stream.__doc__ = (create_stream.__doc__ or "") + options_doc(CALL)


Outcome = dict[str, Any] | BaseException


class Client:
    """``Client(*, api=DEFAULT, base_url=DEFAULT, ..., max_connections=100)``: many streams on the
    calling thread, with no event loop.

    The engine is driven by the client's own poll loop (epoll where there is one, else the
    platform's ``selectors``). ``create_stream`` makes one request, ``stream`` iterates one
    request's chunks, ``as_completed`` yields many requests' outcomes as they end and ``run``
    returns them in order; ``get`` / ``post`` make a plain request (no stream) on the same
    connections; ``AsyncClient`` has the same methods, awaited. Every option of
    ``create_stream`` is also a client option (the client's default for its requests), except
    ``format`` and ``curl``; ``max_connections`` is the client's alone. Ctrl-C (KeyboardInterrupt)
    stops a call within about 0.1 s, cancelling every transfer it had started. ``with Client(...)
    as client:`` closes the connections at the end; so does ``close()``.

    One thread at a time: a call from a second thread while one runs raises UsageError (give each
    thread its own client; they share nothing). ``on_chunk`` runs on the calling thread and cannot
    call the client (UsageError); the body of an ``as_completed`` loop can, and two
    ``as_completed`` iterators may be taken in turn. With ``format="relay"`` or ``"to-*"``,
    ``on_chunk`` may return a ``concurrent.futures.Future`` that another thread completes: the
    transfer is held (curl stops reading it) until then, and resumes within about 0.05 s after.
    """

    def __init__(self, **options: Unpack[ClientOptions]) -> None:
        defaults, engine = client_options(options, "Client()")
        self._engine = _SyncEngine(defaults, **engine)

    def create_stream(
        self, input: Mapping[str, Any], /, on_chunk: OnChunk | None = None, **options: Unpack[CallOptions]
    ) -> dict[str, Any]:
        """``client.create_stream(input, /, on_chunk=None, **options) -> dict``: one request, as
        ``fastsse.create_stream`` makes it, on this client's connections. Options override the
        client's for this request.

        It raises what ``fastsse.create_stream`` raises, UsageError from a second thread or inside
        ``on_chunk``, ClientClosed on a closed client, and KeyboardInterrupt on Ctrl-C (the
        transfer is cancelled first).
        """
        result: dict[str, Any] = self._one(self._engine.make_job(input, on_chunk, options))
        return result

    def stream(self, input: Mapping[str, Any], /, **options: Unpack[CallOptions]) -> ChunkStream:
        """``client.stream(input, /, **options) -> ChunkStream``: ``with client.stream(request) as
        stream: for chunk in stream: ...`` yields each chunk as it arrives; ``stream.result()``
        is the answer (with ``"verdict"`` and ``"timing"``) once the iteration ended. Leaving the
        ``with`` block early cancels the transfer. Curl reads only while the loop asks for the
        next chunk, so a slow consumer holds at most one wake-up's reads.

        It raises what ``create_stream`` raises: bad options at once, the rest while iterating.
        """
        return ChunkStream(self, input, options)

    def as_completed(
        self,
        requests: Iterable[Mapping[str, Any]],
        /,
        on_chunk: Callable[[int, Any], Any] | None = None,
        *,
        concurrency: int | None = None,
    ) -> Iterator[tuple[int, Outcome]]:
        """``client.as_completed(requests, /, on_chunk=None, *, concurrency=None)`` yields
        ``(index, outcome)`` for each request as it ends, at most ``concurrency`` (default
        ``max_connections``) in flight. An outcome is the result dict, or the exception
        ``create_stream`` would have raised (a TransportError carries ``.result`` with its timing).
        ``on_chunk(index, chunk)`` sees every chunk with its request's index.

        It raises TypeError for a request that is not a mapping, InvalidRequest for a bad
        ``concurrency``, and KeyboardInterrupt on Ctrl-C (every transfer in flight is cancelled
        first). Closing the iterator early cancels the rest.
        """
        engine = self._engine
        jobs = _jobs(engine, requests, on_chunk)
        limit = _concurrency(engine, concurrency)
        for job in engine.drive(jobs, limit):
            if job is not None:
                yield job.index, job.result

    def run(
        self,
        requests: Iterable[Mapping[str, Any]],
        /,
        on_chunk: Callable[[int, Any], Any] | None = None,
        *,
        concurrency: int | None = None,
    ) -> list[Outcome]:
        """``client.run(requests, /, on_chunk=None, *, concurrency=None) -> list``: every request's
        outcome, in request order (a result dict, or the exception for that request, as in
        ``as_completed``). A failure of one request never stops the others.

        It raises what ``as_completed`` raises.
        """
        items = list(requests)
        out: list[Outcome] = [{}] * len(items)
        for index, outcome in self.as_completed(items, on_chunk, concurrency=concurrency):
            out[index] = outcome
        return out

    def get(
        self,
        path: str,
        /,
        *,
        headers: Mapping[str, str] | Sequence[str] | None = None,
        timeout: Any = DEFAULT,
        max_body_bytes: int | None = MAX_BODY_BYTES,
        on_body: OnBody | None = None,
    ) -> Reply:
        """``client.get(path, /, *, headers=None, timeout=DEFAULT, max_body_bytes=16 MiB,
        on_body=None) -> Reply``: a plain GET of ``path`` under the client's ``base_url``
        (``client.get("/models")``), sent as the client sends its streams: its key, its
        ``headers`` (``headers`` here are laid on top, by name), its timeouts (``timeout`` is this
        call's when given), ``proxy``, ``ca_bundle``, ``client_cert`` and ``http2``. It is sent
        once (no retries, no fallbacks). The ``Reply`` has the status, the headers and the body,
        whatever the status; ``on_body(piece)``, when given, receives the body of an answer below
        400 as it arrives instead (``reply.body`` is then ``b""``; returning False stops the
        transfer).

        It raises InvalidRequest / TypeError for a bad path, header, timeout or
        ``max_body_bytes`` before sending; BodyTooLarge (a TransportError) when the body kept
        would pass ``max_body_bytes`` (None: no bound), never a cut body; TransportError when the
        connection is refused, times out or breaks; HTTPStatusError for a status of 400 or more
        when the client has ``raise_for_status=True``; what ``on_body`` raises; ClientClosed,
        UsageError and KeyboardInterrupt as ``create_stream``.
        """
        job = self._engine.plain_job(
            "GET", path, b"", headers=headers, timeout=timeout, max_body_bytes=max_body_bytes, on_body=on_body
        )
        reply: Reply = self._one(job)
        return reply

    def post(
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
        """``client.post(path, body, /, *, headers=None, timeout=DEFAULT, max_body_bytes=16 MiB,
        on_body=None) -> Reply``: ``get`` with a POST of the bytes ``body`` (give its
        ``Content-Type`` in ``headers``). It raises what ``get`` raises, and TypeError for a body
        that is not bytes."""
        job = self._engine.plain_job(
            "POST",
            path,
            body,
            headers=headers,
            timeout=timeout,
            max_body_bytes=max_body_bytes,
            on_body=on_body,
        )
        reply: Reply = self._one(job)
        return reply

    def _one(self, job: _Job) -> Any:
        # one job driven to its end: its outcome (a result dict, a Reply), or its exception raised
        for _ in self._engine.drive([job], 1):
            pass
        return _outcome(job)

    def close(self) -> None:
        """Close every connection and the multi handle."""
        self._engine.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Client.__init__.__signature__ = with_self(client_signature())  # type: ignore[attr-defined]
Client.create_stream.__signature__ = with_self(call_signature())  # type: ignore[attr-defined]
Client.__doc__ = (Client.__doc__ or "") + options_doc(CLIENT)


def _outcome(job: _Job) -> Any:
    """The outcome of a job that ended (a result dict, a ``Reply``); its exception raised."""
    outcome = job.result
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _jobs(engine: _Engine, requests: Iterable[Mapping[str, Any]], on_chunk: Any) -> list[_Job]:
    """One job per request of a batch (``as_completed``, ``run``), each checked now."""
    jobs = []
    for index, request in enumerate(requests):
        chunk_cb = None if on_chunk is None else _indexed(on_chunk, index)
        jobs.append(engine.make_job(request, chunk_cb, {}, index))
    return jobs


def _concurrency(engine: _Engine, concurrency: int | None) -> int:
    limit = engine.max_connections if concurrency is None else concurrency
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidRequest(f"concurrency must be a positive int, not {concurrency!r}")
    return limit


def _indexed(on_chunk: Callable[[int, Any], Any], index: int) -> OnChunk:
    def call(chunk: Any) -> Any:
        return on_chunk(index, chunk)

    return call


class ChunkStream:
    """The chunks of one request as an iterator (made by ``Client.stream``), the twin of
    ``AsyncChunkStream``.

    ``for chunk in stream`` starts the request and yields each chunk (or event) as it arrives; it
    raises at the end what ``create_stream`` would have raised. ``result()`` is the answer once
    the iteration ended. ``close()`` (or leaving ``with stream:``, a ``break`` included) cancels
    the transfer at once and keeps what arrived as ``result()``, its verdict ``aborted``.
    """

    def __init__(self, client: Client, request: Mapping[str, Any], options: Mapping[str, Any]) -> None:
        self._pending: collections.deque[Any] = collections.deque()
        self._job = client._engine.make_job(request, self._pending.append, options)
        self._engine = client._engine
        self._drive: Generator[_Job | None, None, None] | None = None
        self._result: dict[str, Any] | None = None

    def __iter__(self) -> ChunkStream:
        return self

    def __next__(self) -> Any:
        pending = self._pending
        while not pending:
            if self._result is not None or (self._job.done and self._drive is None):
                raise StopIteration
            if self._drive is None:
                self._drive = self._engine.drive([self._job], 1, ticks=True)
            try:
                next(self._drive)
            except StopIteration:
                self._drive = None
                self._result = _outcome(self._job)
                raise
        return pending.popleft()

    def close(self) -> None:
        """Cancel the transfer if it is still running; what arrived stays readable as
        ``result()``, its verdict ``aborted`` (as when ``on_chunk`` returns False)."""
        if self._drive is not None:
            self._drive.close()  # its finally cancels the job
            self._drive = None
            if self._result is None:
                self._result = left(self._job)

    def __enter__(self) -> ChunkStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def result(self) -> dict[str, Any]:
        """The answer with its verdict and timing. It raises UsageError before the end."""
        if self._result is None:
            raise UsageError("the stream has not ended yet: iterate it to the end first")
        return self._result


class EventSource(SourceFace):
    """``EventSource(url, /, *, headers=None, ..., max_reconnects=None, max_retry_delay=30.0)``:
    the events of any SSE endpoint as an iterator, reconnecting as WHATWG's EventSource does.

    ``for event in source`` GETs ``url`` (any http:// or https:// URL) with ``Accept:
    text/event-stream``, ``Cache-Control: no-cache`` and ``headers``, and yields each
    ``fastsse.Event`` as it arrives, on this thread, over pycurl (one libcurl multi handle of the
    source's own). When the stream ends or breaks, it connects again after the server's
    ``retry:`` delay, sending ``Last-Event-ID``, and goes on; an event already delivered is never
    delivered again (``dropped`` counts those a server replays). The rules, in full, are in
    docs/eventsource.md: a 204 ends the iteration; a 429, 408, 409 or 5xx, a refused, reset or
    silent connection (``idle_timeout``) is tried again after its Retry-After or a backoff with
    jitter, at most ``max_retry_delay`` apart; ``max_reconnects`` and ``timeout`` (for the whole
    source) bound it. The properties ``url``, ``last_event_id``, ``retry`` (ms, or None),
    ``reconnects`` and ``dropped`` say where it stands.

    Curl reads only while the loop asks for the next event, so a slow consumer holds at most one
    wake-up's reads. ``close()`` (or leaving ``with source:``) ends the connection, or the wait
    for the next one, at once; from another thread, the reading thread stops within about
    0.05 s and its loop ends. Any exception out of the loop ends the source too.

    It raises InvalidRequest (a ValueError) or TypeError at construction for a bad URL or option;
    while iterating, HTTPStatusError (``.status``, ``.headers``, ``.body``) for an answer that
    ends the source (a 4xx but 408, 409, 429; a 3xx: redirects are not followed; a 200 that is
    not ``text/event-stream``), TransportError for a curl failure another try cannot mend (TLS),
    when ``timeout`` runs out (code 28) or when ``max_reconnects`` is spent on a failure,
    EventTooLarge past ``max_event_bytes`` once every event before it was yielded, UsageError
    for a second reading thread, KeyboardInterrupt on Ctrl-C.
    """

    def __init__(self, url: str, /, **options: Unpack[SourceOptions]) -> None:
        given = check_options(options, SOURCE_NAMES, "EventSource()")
        driver = given.pop("driver", None)
        self._source = Source(url, given)
        self._engine = _SyncEngine(RequestOptions(), max_connections=1, driver=driver)
        self._pending: collections.deque[Event] = collections.deque()
        self._job: _Job | None = None
        self._drive: Generator[_Job | None, None, None] | None = None
        self._wait: float | None = None  # seconds before the next connection; None: connect now
        self._failure: BaseException | None = None  # raised once the events before it are out
        self._ended = False
        self._closed = False
        self._shut = False
        self._lock = threading.Lock()  # guards the reader's ident and the closed flag
        self._reader: int | None = None  # the thread inside __next__
        self._wake = threading.Event()  # set by close(): ends a wait before a reconnection

    def __iter__(self) -> EventSource:
        return self

    def __next__(self) -> Event:
        with self._lock:
            if self._reader is not None:
                raise UsageError("this EventSource is being read by another thread: one reader at a time")
            self._reader = threading.get_ident()
        try:
            return self._next()
        except BaseException:
            self._ended = True
            raise
        finally:
            with self._lock:
                self._reader = None
                stop = self._closed or self._ended
            if stop:
                self._shutdown()

    def _next(self) -> Event:
        pending, source, engine = self._pending, self._source, self._engine
        while True:
            if self._closed:
                raise StopIteration
            if pending:
                return pending.popleft()
            if self._failure is not None:
                failure, self._failure = self._failure, None
                raise failure
            if self._ended:
                raise StopIteration
            if self._drive is None:
                if self._wait is not None:
                    woken = self._wake.wait(self._wait)
                    self._wait = None
                    if woken:
                        continue  # closed
                spec, decoder = source.connect()
                self._job = engine.source_job(spec, self._on_event, decoder)
                self._drive = engine.drive([self._job], 1, ticks=True)
            job = self._job
            assert job is not None and self._drive is not None
            with contextlib.suppress(StopIteration):
                next(self._drive)
            if not job.done:
                continue
            self._drive.close()
            self._drive = self._job = None
            try:
                self._wait = source.settle(job.result)
            except Exception as exc:
                self._failure = exc
                continue
            if self._wait is None:
                self._ended = True

    def _on_event(self, event: Event) -> None:
        admitted = self._source.admit(event)
        if admitted is not None:
            self._pending.append(admitted)

    def close(self) -> None:
        """End the connection, or the wait for the next one, at once; the loop then stops."""
        with self._lock:
            self._closed = True
            self._wake.set()
            reader = self._reader
        if reader is None:  # else the reader shuts down itself, at its next wake-up
            self._shutdown()

    def _shutdown(self) -> None:
        with self._lock:
            if self._shut:
                return
            self._shut = True
        drive, self._drive = self._drive, None
        if drive is not None:
            drive.close()  # its finally cancels the connection
        self._engine.close()

    def __enter__(self) -> EventSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


EventSource.__init__.__signature__ = with_self(source_signature())  # type: ignore[attr-defined]
EventSource.__doc__ = (EventSource.__doc__ or "") + source_doc()


class _SyncEngine(_Engine):
    """The engine on its own poll loop, run by the calling thread: epoll where there is one (its
    ``poll`` hands back bare ``(fd, events)`` pairs), the platform's ``selectors`` elsewhere."""

    def __init__(self, options: RequestOptions, /, **kwargs: Any) -> None:
        super().__init__(options, **kwargs)
        self.epoll = EpollSet(self.pycurl) if hasattr(select, "epoll") else None
        if self.epoll is not None and self.driver == "compiled":
            self.multi.watch(self.epoll.fileno())  # curl's sockets into the set from C
        self.selector = None if self.epoll is not None else selectors.DefaultSelector()
        self.registered: dict[int, int] = {}  # selectors only: fd -> the events it is registered for
        self.deadline: float | None = None  # when curl wants its timeout action (monotonic s)
        self.released: collections.deque[_Job] = collections.deque()  # holds ended (any thread)
        self.lock = threading.Lock()  # held while a call drives the engine, released at each yield
        self.owner: int | None = None  # the thread holding ``lock``

    def _on_socket(self, what: int, fd: int, multi: Any, data: Any) -> None:
        try:
            if self.epoll is not None:
                self.epoll.watch(what, fd)
            else:
                self._watch(what, fd)
        except BaseException as exc:
            self.callback_exc = exc

    def _watch(self, what: int, fd: int) -> None:
        # where there is no epoll: the platform's selectors
        pycurl = self.pycurl
        events = 0
        if what != pycurl.POLL_REMOVE:
            if what & pycurl.POLL_IN:
                events |= _READ
            if what & pycurl.POLL_OUT:
                events |= _WRITE
        old = self.registered.get(fd)
        if old == events:
            return
        assert self.selector is not None
        if old is not None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.selector.unregister(fd)
        if events:
            self.selector.register(fd, events)
            self.registered[fd] = events
        else:
            self.registered.pop(fd, None)

    def _on_timer(self, timeout_ms: int) -> None:
        try:
            self.deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        except BaseException as exc:
            self.callback_exc = exc

    def _finished(self, job: _Job) -> None:
        if job.sink is not None:
            job.sink.append(job)

    def _released(self, job: _Job) -> None:
        self.released.append(job)  # resumed by the driving call: the hold may end on any thread

    def enter(self) -> None:
        """Take the engine for this thread; UsageError if a callback or another thread has it."""
        if not self.lock.acquire(blocking=False):
            if self.owner == threading.get_ident():
                raise UsageError(IN_CALLBACK)
            raise UsageError(
                "this Client is in use by another thread: a Client serves one thread at a time "
                "(give each thread its own)"
            )
        self.owner = threading.get_ident()

    def leave(self) -> None:
        self.owner = None
        self.lock.release()

    def _wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for socket events and hand them to curl."""
        action = self.action
        if self.epoll is not None:
            self.drain(self.epoll, timeout)
            return
        cselect_in, cselect_out = self.pycurl.CSELECT_IN, self.pycurl.CSELECT_OUT
        assert self.selector is not None
        if not self.registered:  # select() on nothing fails on Windows
            time.sleep(timeout)
            return
        for key, mask in self.selector.select(timeout):
            action(key.fd, (cselect_in if mask & _READ else 0) | (cselect_out if mask & _WRITE else 0))

    def drive(
        self, jobs: list[_Job], concurrency: int, *, ticks: bool = False
    ) -> Generator[_Job | None, None, None]:
        """Run ``jobs`` with at most ``concurrency`` in flight; yield each as it settles (and, with
        ``ticks``, None after every wait, so a consumer can take what its callbacks received).

        The engine is held by this thread while the call runs and let go at each yield, so the
        caller's loop body may use the client (its own calls settle this call's jobs into
        ``ready``, this call's list)."""
        if self.closed:
            raise ClientClosed("the client is closed")
        pending = collections.deque(jobs)
        ready: collections.deque[_Job] = collections.deque()
        mine: set[int] = set()
        in_flight = 0
        pycurl = self.pycurl
        self.enter()
        held = True
        try:
            while pending or in_flight:
                while pending and in_flight < concurrency:
                    job = pending.popleft()
                    job.sink = ready
                    mine.add(id(job))
                    in_flight += 1
                    try:
                        self.submit(job)
                    except BaseException as exc:
                        self._settle(job, exc)
                while ready:
                    job = ready.popleft()
                    mine.discard(id(job))
                    in_flight -= 1
                    self.leave()
                    held = False
                    yield job
                    self.enter()
                    held = True
                    if self.closed:
                        raise ClientClosed("the client was closed while this call was running")
                if not in_flight:
                    continue
                while self.released:
                    self.resume(self.released.popleft())
                if ready:
                    continue
                wait = _WAIT_SLICE
                if self.deadline is not None:
                    wait = min(wait, max(0.0, self.deadline - time.monotonic()))
                if self.delayed:  # a request waiting to be tried again
                    wait = min(wait, max(0.0, self.delayed[0][0] - time.monotonic()))
                self._wait(wait)
                if self.delayed:
                    self.run_due()
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    self.deadline = None
                    self.action(pycurl.SOCKET_TIMEOUT, 0)
                if self.idle_jobs or self.waiting:
                    self.check_idle()
                if self.callback_exc is not None:
                    self._raise_callback_exc()
                if ticks and not ready:
                    self.leave()
                    held = False
                    yield None
                    self.enter()
                    held = True
                    if self.closed:
                        raise ClientClosed("the client was closed while this call was running")
        finally:
            try:
                if mine:  # Ctrl-C, an exception, or the caller closed the generator: stop the rest
                    if not held:
                        self.enter()
                        held = True
                    for job in jobs:
                        if id(job) in mine and not job.done:
                            self.cancel(job)
            finally:
                if held:
                    self.leave()

    def close(self) -> None:
        if self.closed:
            return
        self.enter()
        try:
            super().close()
        finally:
            self.leave()
        if self.epoll is not None:
            self.epoll.close()
        if self.selector is not None:
            self.selector.close()
        self.registered.clear()


_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
