"""Many streams on one thread: the libcurl multi-handle engine and ``Client``, its blocking driver.

libcurl tells us which sockets to watch (``M_SOCKETFUNCTION``) and when to wake it
(``M_TIMERFUNCTION``); ``AsyncClient`` hands both to the running event loop (``add_reader`` /
``add_writer`` / ``call_later``), ``Client`` to its own poll loop (epoll, else ``selectors``).
Either way a read costs
one Python callback (curl's write callback, which passes the bytes straight to the compiled
stream) and no thread, task or object per chunk. Each request gets its stream through one
factory (``_FORMATS``), its options through one request setup, and its result through the same
classification ``create_stream`` uses.
"""

from __future__ import annotations

import collections
import contextlib
import select
import selectors
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .. import _backend
from .._errors import TransportError
from .._formats import api_format
from .._timing import anchor_pair
from . import stream as _stream_mod
from ._request import RequestSpec, Response, apply, import_pycurl, prepare, reset

OnChunk = Callable[[dict[str, Any]], "bool | None"]

DEFAULT_MAX_CONNECTIONS = 100

# How long one wait may block: Ctrl-C is acted on when the wait returns (at once where signals
# interrupt the wait, as on POSIX; within this bound where they do not), and how late an
# idle_timeout may be noticed.
_WAIT_SLICE = 0.05


def _chat_stream() -> Any:
    # Looked up on every request: the tests point fastsse.client.stream.ChatStream at one backend.
    return _stream_mod.__dict__["ChatStream"]


def _relay_stream() -> Any:
    from ._relay_stream import RelayStream

    return RelayStream


def _translate_stream(target: str) -> Callable[[], Any]:
    def factory() -> Any:
        from ._relay_stream import TranslateStream

        return lambda on_bytes, **options: TranslateStream(on_bytes, target=target, **options)

    return factory


# One entry per stream format: the stream class that scans, parses and folds it. Another format
# (Responses, Messages) is one more entry here.
def _api_stream(api: str) -> Callable[[], Any]:
    return lambda: getattr(_backend, api_format(api).stream_name)


_FORMATS: dict[str, Callable[[], Any]] = {
    "chat": _chat_stream,
    "responses": _api_stream("responses"),
    "messages": _api_stream("messages"),
    "relay": _relay_stream,  # on_chunk gets the compliant bytes to send on (a gateway): _relay_stream
    # on_chunk gets the request's API translated into another one, as bytes (a gateway)
    "to-chat": _translate_stream("chat"),
    "to-responses": _translate_stream("responses"),
    "to-messages": _translate_stream("messages"),
}


class _Job:
    """One request in the engine: its handle, stream, transfer state and timing stamps."""

    __slots__ = (
        "anchor",
        "done",
        "end",
        "error",
        "handle",
        "index",
        "on_chunk",
        "options",
        "own_handle",
        "queued",
        "response",
        "result",
        "spec",
        "started",
        "stream",
        "waiter",
    )

    def __init__(self, spec: RequestSpec, options: dict[str, Any], index: int = 0) -> None:
        self.spec = spec
        self.options = options  # curl, format, on_chunk
        self.index = index
        self.anchor = anchor_pair()
        self.queued = self.anchor[0]
        self.started: int | None = None
        self.end: int | None = None
        self.handle: Any = None
        self.own_handle = False  # the caller's curl= handle: never pooled or closed
        self.stream: Any = None
        self.response: Response | None = None
        self.done = False
        self.result: Any = None  # the result dict, or the exception to raise
        self.error = False
        self.waiter: Any = None  # AsyncClient: the future the caller awaits


class _Engine:
    """The multi handle, its pool of easy handles, the queue of requests waiting for a slot."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        headers: Mapping[str, str] | Sequence[str] | None,
        path: str | None,
        api: str,
        max_connections: int,
        timeout: float | None,
        connect_timeout: float | None,
        idle_timeout: float | None,
        proxy: str | None,
        ca_bundle: str | None,
        client_cert: str | tuple[str, str] | None,
        max_event_bytes: int | None,
        timing: bool,
        http2: bool = False,
    ) -> None:
        if isinstance(max_connections, bool) or not isinstance(max_connections, int):
            raise TypeError(f"max_connections must be an int, not {type(max_connections).__name__}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        self.pycurl = pycurl = import_pycurl()
        self.defaults: dict[str, Any] = {
            "base_url": base_url,
            "api_key": api_key,
            "headers": headers,
            "path": path,
            "api": api,
            "timeout": timeout,
            "connect_timeout": connect_timeout,
            "idle_timeout": idle_timeout,
            "proxy": proxy,
            "ca_bundle": ca_bundle,
            "client_cert": client_cert,
            "max_event_bytes": max_event_bytes,
        }
        # Validated now, so a bad client option fails at construction rather than per request.
        prepare({}, **self.defaults)
        self.timing = bool(timing)
        self.http2 = bool(http2)
        self.max_connections = max_connections
        self.multi = pycurl.CurlMulti()
        self.multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        self.multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        self.multi.setopt(pycurl.M_MAX_TOTAL_CONNECTIONS, max_connections)
        self.multi.setopt(pycurl.M_MAXCONNECTS, max_connections)
        self.multi.setopt(pycurl.M_PIPELINING, pycurl.PIPE_MULTIPLEX)
        self.pool: list[Any] = []
        self.waiting: collections.deque[_Job] = collections.deque()
        self.active: dict[int, _Job] = {}  # id(handle) -> job
        self.running = 0
        self.callback_exc: BaseException | None = None  # raised in a socket/timer callback
        self.idle_jobs: set[_Job] = set()  # active jobs with an idle_timeout, checked by the driver
        self.closed = False

    # the driver's two duties, set by AsyncClient / Client

    def _on_socket(self, what: int, fd: int, multi: Any, data: Any) -> None:
        raise NotImplementedError

    def _on_timer(self, timeout_ms: int) -> None:
        raise NotImplementedError

    def _finished(self, job: _Job) -> None:
        """Called once per job when its result (or exception) is ready."""

    # requests

    def make_job(self, request: Mapping[str, Any], options: Mapping[str, Any], index: int = 0) -> _Job:
        """Validate one request (ValueError / TypeError now, before anything is queued)."""
        merged = dict(self.defaults)
        own: dict[str, Any] = {}
        for key, value in options.items():
            if key in ("curl", "format", "on_chunk"):
                own[key] = value
            elif key in merged:
                merged[key] = value
            else:
                raise TypeError(f"unknown request option {key!r}")
        if own.get("format", "chat") not in _FORMATS:
            raise ValueError(f"unknown format {own['format']!r}; known: {sorted(_FORMATS)}")
        spec = prepare(request, **merged)
        if "format" not in own:
            own["format"] = spec.api  # the stream that reads this API's answer
        elif own["format"] == f"to-{spec.api}":
            raise ValueError(f"format {own['format']!r}: the request's API is {spec.api!r} already")
        if own.get("curl") is not None and merged["client_cert"] is not None:
            # pycurl cannot unset a certificate, so it would outlive the request on the caller's handle
            raise ValueError("client_cert cannot be used with curl=: set SSLCERT / SSLKEY on your own handle")
        return _Job(spec, own, index)

    def submit(self, job: _Job) -> None:
        if self.closed:
            raise RuntimeError("the client is closed")
        if len(self.active) < self.max_connections:
            self._start(job)
        else:
            self.waiting.append(job)

    def _start(self, job: _Job) -> None:
        pycurl = self.pycurl
        options = job.options
        curl = options.get("curl")
        if curl is not None:
            handle, job.own_handle = curl, True
            _keep_connections(self.pycurl, handle)
        else:
            handle = self.pool.pop() if self.pool else pycurl.Curl()
        name = options.get("format") or "chat"
        factory = _FORMATS[name]
        spec = job.spec
        job.handle = handle
        try:
            extra = {"source": spec.api} if name.startswith("to-") else {}
            stream = factory()(
                options.get("on_chunk"), max_event_bytes=spec.max_event_bytes, timing=self.timing, **extra
            )
            response = Response(spec, stream)
            apply(handle, spec, response)
            if self.http2 and not job.own_handle:
                # h2c by prior knowledge on http:// (no upgrade round trip), ALPN on https://;
                # PIPEWAIT: a request waits for a connection being opened to multiplex on it
                # rather than opening its own.
                plain = spec.url[:5].lower() == "http:"
                version = (
                    pycurl.CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE if plain else pycurl.CURL_HTTP_VERSION_2TLS
                )
                handle.setopt(pycurl.HTTP_VERSION, version)
                handle.setopt(pycurl.PIPEWAIT, 1)
        except BaseException:
            self._recycle(job, handle)
            raise
        job.stream, job.response = stream, response
        job.started = time.monotonic_ns()
        self.active[id(handle)] = job
        if spec.idle_timeout is not None:
            self.idle_jobs.add(job)
        self.multi.add_handle(handle)

    def _recycle(self, job: _Job, handle: Any) -> None:
        self.idle_jobs.discard(job)
        reset(handle, job.spec)  # the key, the body and the callbacks never outlive the request
        if job.own_handle:
            return
        if self.closed or len(self.pool) >= self.max_connections:
            handle.close()
        else:
            self.pool.append(handle)

    def _admit(self) -> None:
        while self.waiting and len(self.active) < self.max_connections and not self.closed:
            job = self.waiting.popleft()
            try:
                self._start(job)
            except BaseException as exc:
                self._settle(job, exc)

    def _settle(self, job: _Job, outcome: Any) -> None:
        job.done = True
        job.result = outcome
        job.end = time.monotonic_ns()
        if self.timing and job.stream is not None:
            timing = job.stream.timing()
            timing["queued"] = job.queued
            timing["started"] = job.started
            timing["end"] = job.end
            timing["anchor"] = job.anchor
            if job.handle is not None and job.started is not None:
                try:
                    pretransfer = job.handle.getinfo(self.pycurl.PRETRANSFER_TIME_T)
                except Exception:  # a handle curl never started
                    pretransfer = 0
                if pretransfer > 0:
                    timing["sent"] = job.started + pretransfer * 1000
            target = outcome.result if isinstance(outcome, TransportError) else outcome
            if isinstance(target, dict):
                target["timing"] = timing
        self._finished(job)

    def _complete(self, handle: Any, code: int, message: str) -> None:
        job = self.active.pop(id(handle), None)
        if job is None:
            return
        self.multi.remove_handle(handle)
        outcome: Any
        assert job.response is not None
        try:
            outcome = job.response.finish(code, message)
        except BaseException as exc:
            outcome = exc
        self._settle(job, outcome)
        self._recycle(job, handle)
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            raise outcome  # Ctrl-C caught inside a callback stops the driver, not one request

    def check_idle(self) -> None:
        """End the transfers that have been silent for their ``idle_timeout``."""
        if not self.idle_jobs:
            return
        now = time.monotonic()
        for job in list(self.idle_jobs):
            response = job.response
            idle = job.spec.idle_timeout
            if response is not None and idle is not None and now - response.last_activity >= idle:
                self._complete(
                    job.handle, self.pycurl.E_OPERATION_TIMEDOUT, f"no data for {idle:g} s (idle_timeout)"
                )
        self._admit()

    def _collect(self) -> None:
        """Settle every transfer curl reports finished, then admit waiting requests."""
        stop: BaseException | None = None  # a Ctrl-C met on the way: raised once all are settled
        while True:
            queued, ok, failed = self.multi.info_read()
            done = [(handle, 0, "") for handle in ok] + list(failed)
            for handle, code, message in done:
                try:
                    self._complete(handle, code, message)
                except BaseException as exc:
                    stop = exc
            if not queued:
                break
        if stop is not None:
            raise stop
        self._admit()

    def cancel(self, job: _Job) -> None:
        """Stop a job now: its transfer leaves the multi handle and its handle is recycled."""
        if job.done:
            return
        job.done = True
        job.end = time.monotonic_ns()
        if job.handle is not None and self.active.pop(id(job.handle), None) is not None:
            self.multi.remove_handle(job.handle)
            self._recycle(job, job.handle)
        else:
            with contextlib.suppress(ValueError):
                self.waiting.remove(job)
        self._admit()

    def action(self, fd: int, mask: int) -> None:
        if self.closed:  # a readiness callback queued in the same loop turn as close()
            return
        _, running = self.multi.socket_action(fd, mask)
        if self.callback_exc is not None:
            self._raise_callback_exc()
        if running < self.running or self.waiting or running == 0:
            self.running = running
            self._collect()
        self.running = running

    def _raise_callback_exc(self) -> None:
        # pycurl only prints what a socket or timer callback raises: the callbacks keep it (a
        # Ctrl-C landing in one) and it is raised here, once curl has returned.
        exc, self.callback_exc = self.callback_exc, None
        if exc is not None:
            raise exc

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for job in list(self.active.values()):
            self.cancel(job)
        self.waiting.clear()
        for handle in self.pool:
            handle.close()
        self.pool.clear()
        self.multi.close()


_CLIENT_DOC = """
    Options (keyword-only; each is also accepted per request): ``base_url`` and ``api_key``
    (default ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, then the OpenAI endpoint), ``headers``
    (a mapping or ``"Name: value"`` lines, sent with every request), ``path``
    (``"/chat/completions"``), ``timeout`` / ``connect_timeout`` / ``idle_timeout`` (seconds),
    ``proxy``, ``ca_bundle``, ``client_cert`` and ``max_event_bytes``, all as in ``create_stream``
    and checked by the same rules (ValueError / TypeError at construction, or when a request with
    its own options is made). Per request only: ``curl`` (a ``pycurl.Curl`` of your own, used for
    that transfer and left open, its connection kept). Client-only: ``max_connections`` (transfers at once;
    more requests wait in a queue, and ``timing["started"] - timing["queued"]`` is that wait;
    default 100) and ``timing`` (default True: every result carries ``result["timing"]``, a
    ``fastsse.Timing``; False drops the record and its cost), ``http2`` (default False: HTTP/2
    for every request of the client, by prior knowledge on ``http://`` and ALPN on ``https://``,
    requests multiplexed on shared connections, waiting for one being opened rather than opening
    their own; ``max_connections`` still bounds the transfers in flight; a ``curl=`` handle keeps
    its own settings. Without it curl's defaults hold: HTTP/1.1 on ``http://``, HTTP/2 when the
    server offers it on ``https://``).
"""


def _keep_connections(pycurl: Any, handle: Any) -> None:
    # A transfer on a multi handle leaves its connection in the multi's cache, which dies with the
    # client (create_stream's lives for one call). A share holding the connection cache, kept on the
    # caller's handle, keeps the connection for the handle's next request, as perform() did.
    if getattr(handle, "_fastsse_share", None) is None:
        share = pycurl.CurlShare()
        share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_CONNECT)
        handle.setopt(pycurl.SHARE, share)
        handle._fastsse_share = share


class Client:
    (
        """``Client(*, base_url=None, api_key=None, headers=None, path="/chat/completions",
    max_connections=100, timeout=None, connect_timeout=None, idle_timeout=None, proxy=None,
    ca_bundle=None, client_cert=None, max_event_bytes=None, timing=True, http2=False)``

    The same engine, driven on the calling thread by its own poll loop (epoll where there is
    one, else the platform's ``selectors``: kqueue, select): ``create_stream`` for one request, ``run`` for many at once, ``as_completed`` to take
    them as they end. Ctrl-C (KeyboardInterrupt) stops a call within about 0.1 s, cancelling
    every transfer it had started. ``with Client(...) as client:`` closes the connections at the
    end; so does ``close()``.

    One thread at a time: a client keeps no lock, so give each thread its own (they share
    nothing). ``on_chunk`` runs on the calling thread.
    """
        + _CLIENT_DOC
    )

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
    ) -> None:
        self._engine = _SyncEngine(
            base_url=base_url,
            api_key=api_key,
            headers=headers,
            path=path,
            api=api,
            max_connections=max_connections,
            timeout=timeout,
            connect_timeout=connect_timeout,
            idle_timeout=idle_timeout,
            proxy=proxy,
            ca_bundle=ca_bundle,
            client_cert=client_cert,
            max_event_bytes=max_event_bytes,
            timing=timing,
            http2=http2,
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


def _indexed(on_chunk: Callable[[int, dict[str, Any]], Any], index: int) -> OnChunk:
    def call(chunk: dict[str, Any]) -> Any:
        return on_chunk(index, chunk)

    return call


class _SyncEngine(_Engine):
    """The engine on its own poll loop, run by the calling thread: epoll where there is one (its
    ``poll`` hands back bare ``(fd, events)`` pairs), the platform's ``selectors`` elsewhere."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.epoll = select.epoll() if hasattr(select, "epoll") else None
        self.selector = None if self.epoll is not None else selectors.DefaultSelector()
        self.registered: dict[int, int] = {}  # fd -> the events it is registered for
        self.deadline: float | None = None  # when curl wants its timeout action (monotonic s)
        self.ready: collections.deque[_Job] = collections.deque()

    def _on_socket(self, what: int, fd: int, multi: Any, data: Any) -> None:
        try:
            self._watch(what, fd)
        except BaseException as exc:
            self.callback_exc = exc

    def _watch(self, what: int, fd: int) -> None:
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
        epoll = self.epoll
        if epoll is not None:
            flags = (_EPOLL_IN if events & _READ else 0) | (select.EPOLLOUT if events & _WRITE else 0)
            if not events:
                with contextlib.suppress(OSError):  # curl may have closed it already
                    epoll.unregister(fd)
            elif old is None:
                try:
                    epoll.register(fd, flags)
                except FileExistsError:  # a new socket under a number we never heard removed
                    epoll.modify(fd, flags)
            else:
                try:
                    epoll.modify(fd, flags)
                except FileNotFoundError:  # the old socket closed; this is a new one
                    epoll.register(fd, flags)
        else:
            assert self.selector is not None
            if old is not None:
                with contextlib.suppress(KeyError, ValueError, OSError):
                    self.selector.unregister(fd)
            if events:
                self.selector.register(fd, events)
        if events:
            self.registered[fd] = events
        else:
            self.registered.pop(fd, None)

    def _on_timer(self, timeout_ms: int) -> None:
        try:
            self.deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        except BaseException as exc:
            self.callback_exc = exc

    def _finished(self, job: _Job) -> None:
        self.ready.append(job)

    def _wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for socket events and hand them to curl."""
        action = self.action
        cselect_in, cselect_out = self.pycurl.CSELECT_IN, self.pycurl.CSELECT_OUT
        if self.epoll is not None:
            for fd, ev in self.epoll.poll(timeout):
                action(
                    fd, (cselect_in if ev & _EPOLL_IN else 0) | (cselect_out if ev & select.EPOLLOUT else 0)
                )
            return
        assert self.selector is not None
        if not self.registered:  # select() on nothing fails on Windows
            time.sleep(timeout)
            return
        for key, mask in self.selector.select(timeout):
            action(key.fd, (cselect_in if mask & _READ else 0) | (cselect_out if mask & _WRITE else 0))

    def drive(self, jobs: list[_Job], concurrency: int) -> Iterator[_Job]:
        """Run ``jobs`` with at most ``concurrency`` in flight; yield each as it settles."""
        if self.closed:
            raise RuntimeError("the client is closed")
        pending = collections.deque(jobs)
        mine: set[int] = set()
        in_flight = 0
        pycurl = self.pycurl
        try:
            while pending or in_flight:
                while pending and in_flight < concurrency:
                    job = pending.popleft()
                    mine.add(id(job))
                    in_flight += 1
                    try:
                        self.submit(job)
                    except BaseException as exc:
                        self._settle(job, exc)
                while self.ready:
                    job = self.ready.popleft()
                    if id(job) in mine:
                        mine.discard(id(job))
                        in_flight -= 1
                        yield job
                if not in_flight:
                    continue
                wait = _WAIT_SLICE
                if self.deadline is not None:
                    wait = min(wait, max(0.0, self.deadline - time.monotonic()))
                self._wait(wait)
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    self.deadline = None
                    self.action(pycurl.SOCKET_TIMEOUT, 0)
                if self.idle_jobs:
                    self.check_idle()
                if self.callback_exc is not None:
                    self._raise_callback_exc()
        finally:
            if mine:  # Ctrl-C, an exception, or the caller closed the generator: stop the rest
                for job in jobs:
                    if id(job) in mine and not job.done:
                        self.cancel(job)
                self.ready = collections.deque(job for job in self.ready if id(job) not in mine)

    def close(self) -> None:
        if self.closed:
            return
        super().close()
        if self.epoll is not None:
            self.epoll.close()
        if self.selector is not None:
            self.selector.close()
        self.registered.clear()


_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
# Error and hang-up wake curl as a read would: it reads, and learns what happened.
_EPOLL_IN = (
    (select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP | select.EPOLLRDHUP)
    if hasattr(select, "epoll")
    else 0
)
