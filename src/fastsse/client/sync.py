"""The blocking side: ``Client`` (the many-streams engine on the calling thread's own poll loop) and
``create_stream``, one request on a one-connection ``Client``.

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .._errors import event_limit
from ._options import OPTIONS_DOC, RequestOptions
from .engine import _WAIT_SLICE, DEFAULT_MAX_CONNECTIONS, IN_CALLBACK, EpollSet, OnChunk, _Engine, _Job

__all__ = ["Client", "create_stream", "curl_failure"]


def create_stream(
    input: Mapping[str, Any],
    on_chunk: OnChunk | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    api: str = "chat",
    path: str | None = None,
    headers: Mapping[str, str] | Sequence[str] | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
    idle_timeout: float | None = None,
    proxy: str | None = None,
    ca_bundle: str | None = None,
    client_cert: str | tuple[str, str] | None = None,
    curl: Any = None,
    max_event_bytes: int | None = None,
) -> dict[str, Any]:
    """POST a chat request with ``"stream": true`` and return the folded ``chat.completion``.

    ``api="responses"`` or ``api="messages"`` speaks the OpenAI Responses or the Anthropic Messages
    API instead: the default ``path`` becomes ``/responses`` or ``/messages``, Messages sends the key
    as ``x-api-key`` with ``anthropic-version`` (``api_key`` defaulting to ``ANTHROPIC_API_KEY``,
    ``base_url`` to ``https://api.anthropic.com/v1``), ``on_chunk`` receives each parsed event, and
    the result is the folded response or message (``ResponsesStream`` / ``MessagesStream``) with its
    ``FormatVerdict`` as ``"verdict"``. It raises ValueError for another ``api``.

    ``on_chunk(chunk)`` is called on this thread for every parsed chunk as it arrives (never for
    ``[DONE]``); returning ``False`` cancels the transfer and the partial result is returned without
    an error. ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (then
    the OpenAI endpoint), like the openai SDK; only http:// and https:// URLs are accepted, and
    redirects are not followed. ``api_key`` is sent as ``Authorization: Bearer``; an
    ``Authorization`` in ``headers`` replaces the environment's key (giving it and ``api_key=`` both
    is an error). ``headers`` is a mapping or a list of ``"Name: value"`` lines.

    ``timeout`` bounds the whole transfer and ``connect_timeout`` the connection, in seconds (None:
    no bound; fractions of a millisecond round up). ``idle_timeout`` gives up once that many seconds
    pass without a byte from the server (``: ping`` keep-alives count), which suits long answers a
    total ``timeout`` would cut; it is checked every 0.1 s. The wait is interruptible: Ctrl-C
    (KeyboardInterrupt) is acted on within about 0.1 s even while the server is silent.

    ``proxy`` is a proxy URL, or ``""`` for none; with None, curl follows ``http_proxy``,
    ``https_proxy``, ``ALL_PROXY`` and ``NO_PROXY`` from the environment (the key travels to an
    ``https://`` URL through the proxy's tunnel, but to an ``http://`` URL in clear through an http
    proxy). ``ca_bundle`` is a PEM file of CAs to trust, ``client_cert`` a PEM certificate file (or a
    ``(cert, key)`` pair of files). ``Accept-Encoding: identity`` is sent, and a body compressed
    anyway (gzip, deflate, br) is decoded. Pass a ``pycurl.Curl`` as ``curl`` to reuse its
    connection across calls: what this call set on it (headers with the key, body, callbacks, proxy
    and CA file) is cleared afterwards (back to libcurl's defaults, also for the timeouts, protocols
    and headers this call set), and the options it does not set are kept (``client_cert`` is
    refused with it: pycurl cannot unset a certificate, so set your own on your handle).

    The call is one request on a ``fastsse.Client`` of its own, made and closed by it (without the
    timing record): use a ``Client`` or ``AsyncClient`` to run many at once or keep connections open.

    The result carries ``"verdict"`` (whether ``[DONE]``, a finish reason and usage arrived). Answers
    that are no stream come back as ``{"error": ..., "status": code}``: an HTTP status >= 400 (the
    server's error object or body), a 3xx (with ``"location"``: redirects are not followed, so a
    wrong ``base_url`` shows here), a 204, a 200 body that is neither an event stream nor JSON (one
    without a Content-Type is judged by its first byte: ``<`` is a page, ``{`` a JSON answer), a 200
    JSON body holding ``"error"``. A ``Retry-After`` header adds ``"retry_after"`` (seconds). A 200
    JSON answer (a server that ignored ``stream``) is returned as it came; with ``max_event_bytes``
    it may be at most that large (EventTooLarge otherwise).

    It raises ValueError before sending anything if the URL is not http(s), a header name or value
    (``api_key`` included) holds CR, LF or NUL or is malformed, a timeout is ``<= 0``, or
    ``client_cert`` comes with ``curl``;
    TransportError (with ``.result``, the partial aggregate, and ``.code``, curl's error) if the
    connection is refused, times out, goes idle, breaks mid-stream or comes with a content encoding
    curl cannot decode (code 61); whatever ``on_chunk`` raises, unchanged, after the transfer is
    stopped; EventTooLarge if an event passes ``max_event_bytes``; ImportError without pycurl.
    """
    event_limit(max_event_bytes, "create_stream")

    with Client(max_connections=1, timing=False, driver="pycurl" if curl is not None else None) as client:
        return client.create_stream(
            input,
            on_chunk,
            api=api,
            base_url=base_url,
            api_key=api_key,
            path=path,
            headers=headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            idle_timeout=idle_timeout,
            proxy=proxy,
            ca_bundle=ca_bundle,
            client_cert=client_cert,
            max_event_bytes=max_event_bytes,
            curl=curl,
        )


def curl_failure(url: str, err: BaseException) -> tuple[str, int | None]:
    """The one wording of a failed transfer, ``URL: curl's message (curl error N)``, and curl's code."""
    args: tuple[Any, ...] = err.args
    code = args[0] if args and isinstance(args[0], int) else None
    message = args[1] if len(args) > 1 else str(err)
    return (f"{url}: {message} (curl error {code})" if code is not None else f"{url}: {message}"), code


class Client:
    """``Client(*, base_url=None, api_key=None, headers=None, path="/chat/completions",
    max_connections=100, timeout=None, connect_timeout=None, idle_timeout=None, proxy=None,
    ca_bundle=None, client_cert=None, max_event_bytes=None, timing=True, http2=False)``

    The same engine, driven on the calling thread by its own poll loop (epoll where there is
    one, else the platform's ``selectors``: kqueue, select): ``create_stream`` for one request, ``run`` for many at once, ``as_completed`` to take
    them as they end. Ctrl-C (KeyboardInterrupt) stops a call within about 0.1 s, cancelling
    every transfer it had started. ``with Client(...) as client:`` closes the connections at the
    end; so does ``close()``.

    One thread at a time: a call from a second thread while one runs raises RuntimeError (give
    each thread its own client; they share nothing). ``on_chunk`` runs on the calling thread and
    cannot call the client (RuntimeError); the body of an ``as_completed`` loop can (a follow-up
    ``create_stream``, another ``as_completed``), and two ``as_completed`` iterators may be taken
    in turn: each gets its own requests' outcomes. With ``format="relay"`` or ``"to-*"``,
    ``on_chunk`` may return a ``concurrent.futures.Future`` that another thread completes: the
    transfer is held (curl stops reading it) until then, and resumes within about 0.05 s after.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | Sequence[str] | None = None,
        path: str | None = None,
        api: str = "chat",
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        idle_timeout: float | None = None,
        proxy: str | None = None,
        ca_bundle: str | None = None,
        client_cert: str | tuple[str, str] | None = None,
        max_event_bytes: int | None = None,
        timing: bool = True,
        http2: bool = False,
        driver: str | None = None,
    ) -> None:
        self._engine = _SyncEngine(
            RequestOptions(
                api=api,
                base_url=base_url,
                api_key=api_key,
                path=path,
                headers=headers,
                timeout=timeout,
                connect_timeout=connect_timeout,
                idle_timeout=idle_timeout,
                proxy=proxy,
                ca_bundle=ca_bundle,
                client_cert=client_cert,
                max_event_bytes=max_event_bytes,
            ),
            max_connections=max_connections,
            timing=timing,
            http2=http2,
            driver=driver,
        )

    def create_stream(
        self, request: Mapping[str, Any], /, on_chunk: OnChunk | None = None, **options: Any
    ) -> dict[str, Any]:
        """``client.create_stream(request, on_chunk=None, **options) -> dict``

        One request, as ``fastsse.create_stream`` makes it, on this client's connections; the
        result carries ``"timing"``. Options override the client's for this request (``curl=``, a
        ``pycurl.Curl`` of your own, is used for the transfer and left open).

        It raises what ``create_stream`` raises, TypeError for an unknown option and
        KeyboardInterrupt on Ctrl-C (the transfer is cancelled first).
        """
        engine = self._engine
        job = engine.make_job(request, {**options, "on_chunk": on_chunk})
        for _ in engine.drive([job], 1):
            pass
        outcome = job.result
        if isinstance(outcome, BaseException):
            raise outcome
        assert isinstance(outcome, dict)
        return outcome

    def as_completed(
        self,
        requests: Iterable[Mapping[str, Any]],
        /,
        on_chunk: Callable[[int, dict[str, Any]], Any] | None = None,
        *,
        concurrency: int | None = None,
    ) -> Iterator[tuple[int, dict[str, Any] | BaseException]]:
        """``client.as_completed(requests, on_chunk=None, *, concurrency=None)`` yields
        ``(index, outcome)`` for each request as it ends, at most ``concurrency`` (default
        ``max_connections``) in flight. An outcome is the result dict, or the exception
        ``create_stream`` would have raised (a TransportError carries ``.result`` with its timing).
        ``on_chunk(index, chunk)`` sees every chunk with its request's index.

        It raises TypeError for a request that is not a mapping and KeyboardInterrupt on Ctrl-C
        (every transfer in flight is cancelled first). Closing the iterator early cancels the rest.
        """
        engine = self._engine
        jobs = []
        for index, request in enumerate(requests):
            chunk_cb = None if on_chunk is None else _indexed(on_chunk, index)
            jobs.append(engine.make_job(request, {"on_chunk": chunk_cb}, index))
        limit = engine.max_connections if concurrency is None else concurrency
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"concurrency must be a positive int, not {concurrency!r}")
        for job in engine.drive(jobs, limit):
            yield job.index, job.result

    def run(
        self,
        requests: Iterable[Mapping[str, Any]],
        /,
        on_chunk: Callable[[int, dict[str, Any]], Any] | None = None,
        *,
        concurrency: int | None = None,
    ) -> list[dict[str, Any] | BaseException]:
        """``client.run(requests, on_chunk=None, *, concurrency=None) -> list``: every request's
        outcome, in request order (a result dict, or the exception for that request, as in
        ``as_completed``). A failure of one request never stops the others.

        It raises what ``as_completed`` raises.
        """
        items = list(requests)
        out: list[dict[str, Any] | BaseException] = [{}] * len(items)
        for index, outcome in self.as_completed(items, on_chunk, concurrency=concurrency):
            out[index] = outcome
        return out

    def close(self) -> None:
        """Close every connection and the multi handle."""
        self._engine.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Client.__doc__ = (Client.__doc__ or "") + OPTIONS_DOC


def _indexed(on_chunk: Callable[[int, dict[str, Any]], Any], index: int) -> OnChunk:
    def call(chunk: dict[str, Any]) -> Any:
        return on_chunk(index, chunk)

    return call


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
        """Take the engine for this thread; RuntimeError if a callback or another thread has it."""
        if not self.lock.acquire(blocking=False):
            if self.owner == threading.get_ident():
                raise RuntimeError(IN_CALLBACK)
            raise RuntimeError(
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

    def drive(self, jobs: list[_Job], concurrency: int) -> Iterator[_Job]:
        """Run ``jobs`` with at most ``concurrency`` in flight; yield each as it settles.

        The engine is held by this thread while the call runs and let go at each yield, so the
        caller's loop body may use the client (its own calls settle this call's jobs into
        ``ready``, this call's list)."""
        if self.closed:
            raise RuntimeError("the client is closed")
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
                        raise RuntimeError("the client was closed while this call was running")
                if not in_flight:
                    continue
                while self.released:
                    self.resume(self.released.popleft())
                if ready:
                    continue
                wait = _WAIT_SLICE
                if self.deadline is not None:
                    wait = min(wait, max(0.0, self.deadline - time.monotonic()))
                self._wait(wait)
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    self.deadline = None
                    self.action(pycurl.SOCKET_TIMEOUT, 0)
                if self.idle_jobs or self.waiting:
                    self.check_idle()
                if self.callback_exc is not None:
                    self._raise_callback_exc()
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
