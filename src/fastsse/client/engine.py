"""Many streams on one thread: the libcurl multi-handle engine that ``Client`` (``sync.py``) and
``AsyncClient`` (``aio.py``) drive.

libcurl tells us which sockets to watch (``M_SOCKETFUNCTION``) and when to wake it
(``M_TIMERFUNCTION``); ``AsyncClient`` hands both to the running event loop (``add_reader`` /
``add_writer`` / ``call_later``), ``Client`` to its own poll loop (epoll, else ``selectors``).
Either way a read costs
one Python callback (curl's write callback, which passes the bytes straight to the compiled
stream) and no thread, task or object per chunk. Each request gets its stream through one
table (``_streams.new_stream``), its options through one request setup (``RequestOptions``, then
``_request.prepare``), and its result through the same classification ``create_stream`` uses.
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import importlib
import math
import os
import select
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._errors import ClientClosed, HTTPStatusError, InvalidRequest, TransportError, UsageError
from .._timing import anchor_pair
from . import _retry, _streams
from ._curlopts import apply, apply_body, import_pycurl, release, reset
from ._options import BY_NAME, CALL_NAMES, RequestOptions, check_options
from ._plain import PLAIN, BodyStream, OnBody, body_limit, finish_plain, plain_spec
from ._request import Preparer, RequestSpec, redact
from ._response import Response
from ._resume import MAX_RESUMES, Resumable

OnChunk = Callable[[dict[str, Any]], "bool | None"]

DEFAULT_MAX_CONNECTIONS: int = BY_NAME["max_connections"].default  # the table's row

# How long one wait may block: Ctrl-C is acted on when the wait returns (at once where signals
# interrupt the wait, as on POSIX; within this bound where they do not), and how late an
# idle_timeout may be noticed.
_WAIT_SLICE = 0.05

IN_CALLBACK = (
    "a client cannot be used from inside its own on_chunk (or another callback it runs): "
    "finish the callback first, or use another client"
)


# The drivers: "compiled" (``_curl_c``: libcurl driven from C, each read of a compiled ChatStream
# fed from C) where it is built and loads, else "pycurl". FASTSSE_DRIVER=pycurl picks pycurl.
DRIVERS = ("compiled", "pycurl")
_compiled: Any = None  # the loaded _curl_c module, or the reason it is not available (a str)


def compiled_driver() -> Any:
    """The compiled driver's module, loaded once; a str saying why not where it is not available."""
    global _compiled
    if _compiled is None:
        try:
            module = importlib.import_module("fastsse.client._curl_c")  # no stubs: dynamic
            module.load()
            _compiled = module
        except ImportError as exc:
            _compiled = f"not built here ({exc})"
        except OSError as exc:
            _compiled = str(exc)
    return _compiled


def choose_driver(driver: str | None) -> tuple[Any, str]:
    """``(module, name)``: the module whose ``Curl`` / ``CurlMulti`` an engine drives. ``None``
    takes ``$FASTSSE_DRIVER``, else the compiled driver where it loads; ``"compiled"`` raises
    RuntimeError where it does not, saying why."""
    if driver is None:
        driver = os.environ.get("FASTSSE_DRIVER") or None
    if driver not in (None, *DRIVERS):
        raise InvalidRequest(f"driver must be 'compiled' or 'pycurl', not {driver!r}")
    if driver != "pycurl":
        module = compiled_driver()
        if not isinstance(module, str):
            return module, "compiled"
        if driver == "compiled":
            raise UsageError(f"the compiled driver is not available: {module}")
    return import_pycurl(), "pycurl"


def left(job: _Job) -> dict[str, Any] | None:
    """The answer so far of a job its reader left (a ``break`` out of ``stream()``), as an answer
    its ``on_chunk`` stopped ends: what arrived, folded, with ``http`` and a verdict that says
    ``aborted``; None when the job had not started a transfer."""
    stream, response = job.stream, job.response
    if stream is None or response is None:
        return None
    with contextlib.suppress(Exception):  # a stream a cut left half-closed still has its fold
        stream.close()
    out: dict[str, Any] = dict(stream.result())
    verdict = out.get("verdict")
    if isinstance(verdict, dict):
        verdict.update(complete=False, aborted=True, why="aborted by the caller")
    http = out["http"] = response.http()
    if job.bases:
        http["upstream"] = job.bases[job.upstream]
    return out


def open_stream(job: _Job, *, direct: bool) -> tuple[Any, Response]:
    """The stream and the ``Response`` of one attempt of ``job``, whatever drives its transfer
    (curl, or the gateway's upstream leg on the event loop): a new gate per attempt (what a failed
    attempt held is dropped), the job's format's stream (``direct``: a byte-out format is the
    compiled ``BytesStream`` a driver feeds from C), a resumed fold going on, a plain body. A
    byte-out stream's holds reach the ``Response`` (``holder``)."""
    options, spec = job.options, job.spec
    on_chunk = options["on_chunk"]
    if options.get("gate"):
        job.gate = _retry.Gate(on_chunk, _retry.gate_test(options["format"], spec.api))
        on_chunk = job.gate
    stream: Any
    if spec.api == PLAIN:
        stream = BodyStream(on_chunk, limit=options["limit"])
    elif job.resume is not None:  # a resume: the same fold goes on with the next bytes
        stream = job.resume
        stream.restart()
    else:
        stream = _streams.new_stream(
            options["format"],
            on_chunk,
            api=spec.api,
            max_event_bytes=spec.max_event_bytes,
            timing=job.timing,
            decoder=options.get("decoder"),
            direct=direct and not options.get("resumable"),
            keep_text=options.get("keep_text", True),
        )
        if options.get("resumable"):
            stream = Resumable(stream)
    response = Response(spec, stream)
    if spec.api == PLAIN:  # every body byte is the answer's, whatever its status or type
        response.mode = "sse"
        stream.holder = response
    else:
        inner = stream.inner if isinstance(stream, Resumable) else stream
        if isinstance(inner, _streams.BYTES_STREAMS):
            inner.holder = response
    return stream, response


class _Job:
    """One request in the engine: its handle, stream, transfer state and timing stamps."""

    __slots__ = (
        "anchor",
        "attempts",
        "bases",
        "deadline",
        "done",
        "end",
        "error",
        "gate",
        "handle",
        "index",
        "on_chunk",
        "options",
        "own_handle",
        "queued",
        "response",
        "result",
        "resume",
        "retries",
        "round",
        "since",
        "sink",
        "spec",
        "specs",
        "started",
        "stream",
        "timing",
        "upstream",
        "waited",
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
        self.sink: Any = None  # Client: the ready list of the call that runs this job
        self.deadline: float | None = None  # set by submit: when ``timeout`` runs out
        self.timing = True  # the result carries the timing record
        # retries (client/_retry.py): the specs of the upstreams in order (the first is ``spec``),
        # their base URLs as shown, which one this attempt speaks to, the rounds of backoff taken
        self.specs: tuple[RequestSpec, ...] = (spec,)
        self.bases: tuple[str, ...] = ()
        self.upstream = 0
        self.round = 0
        self.retries = 0  # max_retries
        self.attempts = 1
        self.waited = 0  # ns spent waiting between attempts
        self.gate: _retry.Gate | None = None  # first_chunk_gate: this attempt's
        self.since = 0.0  # when the wait before the next attempt began (monotonic s)
        self.resume: Resumable | None = None  # a background Responses stream kept across a cut


def settle(job: _Job, outcome: Any, sent: int | None) -> None:
    """``job`` ended with ``outcome`` (its result dict, or the exception to raise): kept in
    ``job.result`` with the base URL that answered and, with ``timing``, the timing record
    (``sent``: when the request was out, ``time.monotonic_ns()``, None if unknown). A gate's
    held chunks go to the caller on the last attempt."""
    job.done = True
    job.result = outcome
    job.end = time.monotonic_ns()
    gate = job.gate
    if gate is not None and not gate.opened and not isinstance(outcome, BaseException):
        with contextlib.suppress(Exception):  # the last attempt: the caller sees what it held
            gate.release()
    target = outcome.result if isinstance(outcome, (TransportError, HTTPStatusError)) else outcome
    if job.bases and isinstance(target, dict) and isinstance(target.get("http"), dict):
        target["http"]["upstream"] = job.bases[job.upstream]
    if job.timing and job.stream is not None:
        timing = job.stream.timing()
        timing["queued"] = job.queued
        timing["started"] = job.started
        timing["end"] = job.end
        timing["anchor"] = job.anchor
        if sent is not None:
            timing["sent"] = sent
        timing["attempts"] = job.attempts
        timing["retry_wait"] = job.waited
        if isinstance(target, dict):
            target["timing"] = timing
    unhook(job)


def unhook(job: _Job) -> None:
    """Cut the links an attempt's parts keep to each other once it ended (the stream's ``holder``,
    the response's ``on_release`` and ``direct``), so that its stream, fold and response are freed
    as the last reference goes, not by the cyclic collector: an answer that lived through a few
    collections sits in the oldest generation, which is collected rarely, with its buffers."""
    response, stream = job.response, job.stream
    if response is not None:
        response.on_release = None
        response.direct = None
    while stream is not None:
        if hasattr(stream, "holder"):
            stream.holder = None
        stream = getattr(stream, "inner", None)


def new_job(
    defaults: RequestOptions,
    prepare: Preparer,
    drives: str,
    request: Mapping[str, Any],
    on_chunk: Any,
    options: Mapping[str, Any],
    index: int = 0,
) -> _Job:
    """One request of a client whose options are ``defaults`` (``prepare`` its ``Preparer``,
    ``drives`` its driver) with its own ``options`` (per-call keywords, ``DEFAULT`` where not
    given), checked now, before anything is queued: TypeError / InvalidRequest as
    ``create_stream``."""
    given = check_options(options, CALL_NAMES, "create_stream()") if options else {}
    own = {"on_chunk": on_chunk, "format": given.pop("format", None), "curl": given.pop("curl", None)}
    driver = given.pop("driver", None)
    if driver is not None and driver != drives:
        raise InvalidRequest(
            f"driver={driver!r}: this client drives {drives!r}; the driver is the client's "
            f"(make a Client(driver={driver!r}))"
        )
    merged = prepare.merged(defaults, given) if given else defaults
    spec = prepare(request, merged)
    own["format"] = _streams.format_for(spec.api, own["format"])
    if own["curl"] is not None and drives != "pycurl":
        raise TypeError(
            "curl= (a pycurl handle of your own) needs the pycurl driver: make the client with "
            "driver='pycurl' (fastsse.create_stream(curl=...) does)"
        )
    if own["curl"] is not None and merged.client_cert is not None:
        # pycurl cannot unset a certificate, so it would outlive the request on the caller's handle
        raise InvalidRequest("client_cert cannot be used with curl=: set SSLCERT / SSLKEY on your own handle")
    job = _Job(spec, own, index)
    job.timing = merged.timing
    job.retries = merged.max_retries
    own["gate"] = merged.first_chunk_gate
    own["keep_text"] = merged.keep_text
    own["resumable"] = (
        merged.resume
        and spec.api == "responses"
        and own["format"] in ("responses", "to-chat")
        and request.get("background") is True
    )
    if merged.fallbacks:
        specs = [spec]
        for base, key in merged.fallbacks:
            other = merged.replace({"base_url": base, "fallbacks": None, **({"api_key": key} if key else {})})
            specs.append(prepare(request, other))
        job.specs = tuple(specs)
    # result["http"]["upstream"]: the base URL that answered (the first, or a fallback)
    bases = [merged.base_url or spec.display_url] + [base for base, _ in merged.fallbacks or ()]
    job.bases = tuple(redact(base) for base in bases)
    return job


def queue_timeout(spec: RequestSpec, max_connections: int) -> TransportError:
    """The failure of a request whose ``timeout`` ran out while it waited for a free connection."""
    return TransportError(
        f"{spec.display_url}: timed out after {spec.timeout_ms / 1000:g} s waiting for a free "
        f"connection (timeout; max_connections={max_connections}) (curl error 28)",
        code=28,
    )


class _Engine:
    """The multi handle, its pool of easy handles, the queue of requests waiting for a slot."""

    def __init__(
        self,
        options: RequestOptions,
        /,
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        driver: str | None = None,
    ) -> None:
        self.pycurl = pycurl = import_pycurl()
        self.defaults = options
        # Validated now, so a bad client option fails at construction rather than per request;
        # the environment's base URL and key are read now too.
        self.prepare = Preparer(options)
        self.max_connections = max_connections
        self.curl, self.driver = choose_driver(driver)  # pycurl's constants either way
        self.multi = self.curl.CurlMulti()
        self.multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        self.multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        self.multi.setopt(pycurl.M_MAX_TOTAL_CONNECTIONS, max_connections)
        self.multi.setopt(pycurl.M_MAXCONNECTS, max_connections)
        self.multi.setopt(pycurl.M_PIPELINING, pycurl.PIPE_MULTIPLEX)
        self.pool: list[Any] = []
        self.waiting: collections.deque[_Job] = collections.deque()
        self.active: dict[int, _Job] = {}  # id(handle) -> job
        self.running = 0
        # Transfers in the multi handle that curl has not reported done: while socket_action's
        # running count equals it, nothing finished and there is nothing to read (info_read).
        self.alive = 0
        # id(pooled handle) -> the transport (RequestSpec.transport) set on it by its last request
        self.applied: dict[int, tuple[Any, ...]] = {}
        self.callback_exc: BaseException | None = None  # raised in a socket/timer callback
        self.idle_jobs: set[_Job] = set()  # active jobs with an idle_timeout, checked by the driver
        # jobs waiting to be tried again: (when, tie-break, job); a cancelled one is skipped
        self.delayed: list[tuple[float, int, _Job]] = []
        self.closed = False
        self.acting = False  # inside curl (socket_action): callbacks run, the multi is busy

    # the driver's two duties, set by AsyncClient / Client

    def _on_socket(self, what: int, fd: int, multi: Any, data: Any) -> None:
        raise NotImplementedError

    def _on_timer(self, timeout_ms: int) -> None:
        raise NotImplementedError

    def _finished(self, job: _Job) -> None:
        """Called once per job when its result (or exception) is ready."""

    # requests

    def make_job(
        self, request: Mapping[str, Any], on_chunk: Any, options: Mapping[str, Any], index: int = 0
    ) -> _Job:
        """Check one request and its own ``options`` (per-call keywords, ``DEFAULT`` where not
        given) now, before anything is queued: TypeError / InvalidRequest as ``create_stream``."""
        return new_job(self.defaults, self.prepare, self.driver, request, on_chunk, options, index)

    def source_job(self, spec: RequestSpec, on_event: Any, decoder: Any) -> _Job:
        """A job for one connection of an event source: ``spec`` from ``prepare_get``, read with
        the ``events`` format through ``decoder``, with no retries and no timing record (what
        comes after the connection is the source's to decide)."""
        job = _Job(spec, {"on_chunk": on_event, "format": "events", "curl": None, "decoder": decoder})
        job.timing = False
        return job

    def plain_job(
        self,
        method: str,
        path: str,
        body: bytes,
        /,
        *,
        headers: Any,
        timeout: Any,
        max_body_bytes: Any,
        on_body: OnBody | None,
    ) -> _Job:
        """A job for a plain request (``Client.get`` / ``post``): ``method`` of ``path`` under the
        client's base URL, prepared from the client's options (``timeout`` the call's own when
        given), read into a ``BodyStream``; no retries, no fallbacks, no timing record. It raises
        TypeError / InvalidRequest as ``create_stream`` does for a bad path, header or timeout,
        and for a bad ``max_body_bytes``."""
        what = f"{method.lower()}()"
        if not isinstance(path, str):
            raise TypeError(f"{what}: path must be a str, not {type(path).__name__}")
        if on_body is not None and not callable(on_body):
            raise TypeError(f"{what}: on_body must be callable or None")
        given = check_options({"timeout": timeout}, ("timeout",), what)
        merged = self.defaults.replace({**given, "path": path})
        spec = plain_spec(self.prepare({}, merged), method, body, headers)
        job = _Job(
            spec, {"on_chunk": on_body, "format": PLAIN, "curl": None, "limit": body_limit(max_body_bytes)}
        )
        job.timing = False
        return job

    def submit(self, job: _Job) -> None:
        if self.closed:
            raise ClientClosed("the client is closed")
        if self.acting:
            raise UsageError(IN_CALLBACK)
        # ``timeout`` bounds the request from here, the wait for a free connection included
        # (not the wait of a request as_completed holds back for its ``concurrency``).
        timeout = job.spec.timeout_ms
        job.deadline = time.monotonic() + timeout / 1000 if timeout else None
        if len(self.active) < self.max_connections:
            self._start(job)
        else:
            self.waiting.append(job)

    def _start(self, job: _Job) -> None:
        pycurl = self.pycurl
        options = job.options
        left = None if job.deadline is None else job.deadline - time.monotonic()
        if left is not None and left <= 0:
            self._settle(job, self._queue_timeout(job))
            return
        curl = options.get("curl")
        if curl is not None:
            handle, job.own_handle = curl, True
            _keep_connections(self.pycurl, handle)
        else:
            handle = self.pool.pop() if self.pool else self.curl.Curl()
        spec = job.spec
        job.handle = handle
        try:
            stream, response = open_stream(job, direct=self.driver == "compiled")
            # reads of a compiled fold or byte-out stream go to it from C; an events or plain
            # stream's take the write callback (each Event needs Python; a body is kept)
            if self.driver == "compiled" and spec.api != PLAIN and options["format"] != "events":
                response.direct = handle.direct
            transport = None if job.own_handle else spec.transport
            if transport is not None and self.applied.get(id(handle)) == transport:
                apply_body(handle, spec, response)  # a pooled handle that holds the rest already
            else:
                apply(handle, spec, response)
                if not job.own_handle:  # a caller's curl= handle keeps its own HTTP version
                    self._http_version(handle, spec.http2 and spec.url[:5].lower() == "http:", spec.http2)
            self.applied.pop(id(handle), None)
            if left is not None:  # what the queue left of the call's timeout
                handle.setopt(pycurl.TIMEOUT_MS, max(1, math.ceil(left * 1000)))
            response.on_release = lambda job=job: self._released(job)
        except BaseException:
            self._recycle(job, handle)
            self.applied.pop(id(handle), None)  # set in part, maybe: the next request sets it all
            raise
        job.stream, job.response = stream, response
        job.started = time.monotonic_ns()
        self.active[id(handle)] = job
        if spec.idle_timeout is not None or spec.first_byte_timeout is not None:
            self.idle_jobs.add(job)
        self.multi.add_handle(handle)
        self.alive += 1

    def _http_version(self, handle: Any, plain: bool, http2: bool) -> None:
        # h2c by prior knowledge on http:// (no upgrade round trip), ALPN on https://; PIPEWAIT: a
        # request waits for a connection being opened to multiplex on it rather than opening its
        # own. Without http2 curl's defaults hold (set back: the handle may be a pooled one).
        pycurl = self.pycurl
        if not http2:
            version = pycurl.CURL_HTTP_VERSION_NONE
        else:
            version = pycurl.CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE if plain else pycurl.CURL_HTTP_VERSION_2TLS
        handle.setopt(pycurl.HTTP_VERSION, version)
        handle.setopt(pycurl.PIPEWAIT, 1 if http2 else 0)

    def _recycle(self, job: _Job, handle: Any) -> None:
        self.idle_jobs.discard(job)
        unhook(job)
        spec = job.spec
        if job.own_handle:
            reset(handle, spec)  # the key, the body and the callbacks never outlive the request
            return
        if self.closed or len(self.pool) >= self.max_connections:
            handle.close()
            return
        if spec.client_cert is not None or spec.client_key is not None:
            reset(handle, spec)  # only a full reset forgets a certificate
        else:
            # The body and the callbacks (which hold the stream) go; the transport stays for the
            # client's next request (the key inside is the client's own, and leaves with close()).
            release(handle)
            self.applied[id(handle)] = spec.transport
        self.pool.append(handle)

    def _queue_timeout(self, job: _Job) -> TransportError:
        return queue_timeout(job.spec, self.max_connections)

    def expire_waiting(self) -> None:
        """Fail the queued requests whose ``timeout`` passed before a connection was free."""
        if not self.waiting:
            return
        now = time.monotonic()
        late = [job for job in self.waiting if job.deadline is not None and job.deadline <= now]
        for job in late:
            with contextlib.suppress(ValueError):
                self.waiting.remove(job)
            self._settle(job, self._queue_timeout(job))

    # backpressure: a consumer holds a transfer (Response.hold); curl keeps the unread bytes

    def _released(self, job: _Job) -> None:
        """The hold on ``job`` ended: the driver resumes the transfer (``resume``)."""
        raise NotImplementedError

    def resume(self, job: _Job) -> None:
        """Let curl read a transfer its consumer had held, if it is still running."""
        response = job.response
        if job.done or response is None or not response.paused or job.handle is None:
            return
        if self.acting:  # not from inside curl: the driver comes back for it
            raise UsageError(IN_CALLBACK)
        response.paused = False
        response.last_activity = time.monotonic()  # a held transfer was not idle
        self.acting = True
        try:
            job.handle.pause(self.pycurl.PAUSE_CONT)  # may deliver the held bytes at once
        finally:
            self.acting = False
        if self.callback_exc is not None:
            self._raise_callback_exc()
        self._collect()

    def _admit(self) -> None:
        while self.waiting and len(self.active) < self.max_connections and not self.closed:
            job = self.waiting.popleft()
            try:
                self._start(job)
            except BaseException as exc:
                self._settle(job, exc)

    def _settle(self, job: _Job, outcome: Any) -> None:
        sent = None
        if job.handle is not None and job.started is not None:
            try:
                pretransfer = job.handle.getinfo(self.pycurl.PRETRANSFER_TIME_T)
            except Exception:  # a handle curl never started
                pretransfer = 0
            if pretransfer > 0:
                sent = job.started + pretransfer * 1000
        settle(job, outcome, sent)
        self._finished(job)

    def _complete(self, handle: Any, code: int, message: str) -> None:
        job = self.active.pop(id(handle), None)
        if job is None:
            return
        self.multi.remove_handle(handle)
        self.alive -= 1
        outcome: Any
        assert job.response is not None
        if (job.resume is not None or isinstance(job.stream, Resumable)) and self._resumed(job, handle, code):
            return
        try:
            if job.spec.api == PLAIN:
                outcome = finish_plain(job.response, code, message)
            else:
                outcome = job.response.finish(code, message)
        except BaseException as exc:
            outcome = exc
        if job.retries or len(job.specs) > 1:
            wait = self._next_attempt(job, outcome)
            if wait is not None:
                self._recycle(job, handle)
                self._retry_later(job, wait)
                return
        self._settle(job, outcome)
        self._recycle(job, handle)
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            raise outcome  # Ctrl-C caught inside a callback stops the driver, not one request

    # resuming a background Responses stream (client/_resume.py)

    def _resumed(self, job: _Job, handle: Any, code: int) -> bool:
        """Ask for the rest of a cut background Responses stream, if it can be had: the answer
        named its response, did not end, and broke in a way worth another connection (or ended
        without its terminal event). The fold goes on; it returns False to settle as usual."""
        response, stream = job.response, job.stream
        assert response is not None and isinstance(stream, Resumable)
        if response.exc is not None or response.stopped or response.status != 200 or response.mode != "sse":
            return False
        if stream.response_id is None or stream.terminal or stream.resumes >= MAX_RESUMES:
            return False
        if code and code not in _retry.RETRY_CODES:
            return False
        if job.deadline is not None and time.monotonic() >= job.deadline:
            return False
        self._recycle(job, handle)
        job.spec = job.spec.resumed(stream.response_id, stream.last_sequence)
        job.resume = stream
        job.attempts += 1
        job.handle = job.response = None
        job.since = time.monotonic()
        heapq.heappush(self.delayed, (job.since, id(job), job))
        self._wake_in(0.0)
        return True

    # retries (the rules are in _retry.py)

    def _next_attempt(self, job: _Job, outcome: Any) -> float | None:
        """Seconds to wait before trying ``job`` again (0: at once, on the next upstream), or None
        when its ``outcome`` stands: something reached the caller, the failure is not one to retry,
        the retries are spent, or the wait would pass the call's ``timeout``."""
        response = job.response
        assert response is not None
        if isinstance(outcome, BaseException) and not isinstance(outcome, (TransportError, HTTPStatusError)):
            return None  # on_chunk's own exception, EventTooLarge, Ctrl-C: the caller's
        gate = job.gate
        if (gate.opened if gate is not None else response.fed) or (response.stopped and gate is None):
            return None  # part of the answer reached the caller: retrying would repeat it
        judged = outcome.result if isinstance(outcome, HTTPStatusError) else outcome
        if not _retry.retryable(judged, response.headers):
            return None
        if gate is None and isinstance(judged, dict) and _retry.no_stream(judged) is None:
            return None  # an in-band error is the gate's to retry
        if job.upstream + 1 < len(job.specs):
            wait: float | None = 0.0  # the next upstream has not failed: no reason to wait
        elif job.round < job.retries:
            http = _retry.no_stream(judged) if isinstance(judged, dict) else None
            retry_after = http["retry_after"] if http is not None else None
            wait = _retry.wait_for(job.round, retry_after)
        else:
            return None
        if wait is None:
            return None
        if job.deadline is not None and time.monotonic() + wait >= job.deadline:
            return None  # ``timeout`` bounds every attempt and every wait together
        return wait

    def _retry_later(self, job: _Job, wait: float) -> None:
        if job.upstream + 1 < len(job.specs):
            job.upstream += 1
        else:
            job.upstream = 0
            job.round += 1
        job.spec = job.specs[job.upstream]
        job.attempts += 1
        job.handle = job.stream = job.response = job.gate = None
        job.since = time.monotonic()
        heapq.heappush(self.delayed, (job.since + wait, id(job), job))
        self._wake_in(wait)

    def _wake_in(self, wait: float) -> None:
        """The driver comes back in ``wait`` seconds to start what is due (``run_due``)."""

    def run_due(self) -> None:
        """Start the jobs whose wait between attempts is over (or queue them for a connection)."""
        delayed = self.delayed
        now = time.monotonic()
        while delayed and delayed[0][0] <= now and not self.closed:
            _, _, job = heapq.heappop(delayed)
            if job.done:  # cancelled during its wait
                continue
            job.waited += int((now - job.since) * 1e9)
            if len(self.active) < self.max_connections:
                try:
                    self._start(job)
                except BaseException as exc:
                    self._settle(job, exc)
            else:
                self.waiting.append(job)

    def _silent(self) -> list[_Job]:
        now = time.monotonic()
        out = []
        for job in self.idle_jobs:
            response = job.response
            if response is None or response.paused:  # held by its consumer: not idle
                continue
            limit = _silence_limit(job.spec, response)[0]
            if limit is None:
                continue
            last = response.last_activity
            if response.directed:  # the compiled driver feeds its reads from C and keeps their time
                last = max(last, job.handle.last_read)
            if now - last >= limit:
                out.append(job)
        return out

    def check_idle(self) -> None:
        """End the transfers that have been silent for their ``idle_timeout``, and the queued
        requests whose ``timeout`` ran out."""
        self.expire_waiting()
        if not self.idle_jobs:
            self._admit()
            return
        silent = self._silent()
        if silent:
            # The loop may have been busy (a slow on_chunk): bytes that arrived meanwhile are read
            # first, and a stream is judged idle only on what is left unread after that.
            self._read_pending(silent)
            silent = self._silent()
        for job in silent:
            assert job.response is not None
            limit, name = _silence_limit(job.spec, job.response)
            what = "no answer" if name == "first_byte_timeout" else "no data"
            self._complete(job.handle, self.pycurl.E_OPERATION_TIMEDOUT, f"{what} for {limit:g} s ({name})")
        self._admit()

    def _read_pending(self, jobs: list[_Job]) -> None:
        fds = set()
        for job in jobs:
            with contextlib.suppress(Exception):  # a handle without a socket yet
                fd = job.handle.getinfo(self.pycurl.ACTIVESOCKET)
                if fd >= 0:
                    fds.add(fd)
        if not fds:
            return
        if hasattr(select, "poll"):
            poller = select.poll()
            for fd in fds:
                poller.register(fd, select.POLLIN | select.POLLPRI)
            ready = [fd for fd, _ in poller.poll(0)]
        else:  # pragma: no cover - Windows
            ready = select.select(list(fds), [], [], 0)[0]
        for fd in ready:
            self.action(fd, self.pycurl.CSELECT_IN)

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
        if self.acting:
            raise UsageError(IN_CALLBACK)
        job.done = True
        job.end = time.monotonic_ns()
        if job.handle is not None and self.active.pop(id(job.handle), None) is not None:
            self.multi.remove_handle(job.handle)
            self.alive -= 1
            self._recycle(job, job.handle)
        else:
            with contextlib.suppress(ValueError):
                self.waiting.remove(job)
        self._admit()

    def action(self, fd: int, mask: int) -> None:
        if self.closed:  # a readiness callback queued in the same loop turn as close()
            return
        if self.acting:
            raise UsageError(IN_CALLBACK)
        self.acting = True
        try:
            _, running = self.multi.socket_action(fd, mask)
        finally:
            self.acting = False
        self._acted(running)

    def _acted(self, running: int) -> None:
        """After curl ran (``running``: its count of transfers, -1 if it did not run): raise what a
        callback kept, and collect what finished. Compared with ``alive``, not with the last
        count: a transfer added since the last action and one finished in this one leave the count
        unchanged, and a finished result must never wait for another's end."""
        if self.callback_exc is not None:
            self._raise_callback_exc()
        if running >= 0:
            self.running = running
            if running < self.alive:
                self._collect()

    def drain(self, sockets: EpollSet, timeout: float = 0.0) -> None:
        """Wait up to ``timeout`` seconds for ``sockets``, then hand every ready socket to curl and
        collect what finished: with the compiled driver one call per wake-up, the wait and the
        socket actions in C (the GIL released while it waits); with pycurl one ``action`` each."""
        if self.closed:
            return
        if self.driver != "compiled":
            for fd, mask in sockets.ready(timeout):
                self.action(fd, mask)
            return
        if self.acting:
            raise UsageError(IN_CALLBACK)
        self.acting = True
        try:
            running = self.multi.drain(sockets.fileno(), math.ceil(timeout * 1000) if timeout > 0 else 0)
        finally:
            self.acting = False
        self._acted(running)

    def _raise_callback_exc(self) -> None:
        # pycurl only prints what a socket or timer callback raises: the callbacks keep it (a
        # Ctrl-C landing in one) and it is raised here, once curl has returned.
        exc, self.callback_exc = self.callback_exc, None
        if exc is not None:
            raise exc

    def close(self) -> None:
        if self.closed:
            return
        if self.acting:
            raise UsageError(IN_CALLBACK)
        self.closed = True
        for job in list(self.active.values()):
            self.cancel(job)
        self.waiting.clear()
        self.delayed.clear()
        for handle in self.pool:
            handle.close()
        self.pool.clear()
        self.applied.clear()
        self.multi.close()


def _silence_limit(spec: RequestSpec, response: Response) -> tuple[float | None, str]:
    """How long ``response`` may stay silent, and the option that says so: ``first_byte_timeout``
    until the status line arrived (when it is set), ``idle_timeout`` after it (and before it
    otherwise)."""
    if response.status == 0 and spec.first_byte_timeout is not None:
        return spec.first_byte_timeout, "first_byte_timeout"
    return spec.idle_timeout, "idle_timeout"


# Error and hang-up wake curl as a read would: it reads, and learns what happened.
EPOLL_IN = (
    (select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP | select.EPOLLRDHUP)
    if hasattr(select, "epoll")
    else 0
)
EPOLL_OUT = select.EPOLLOUT if hasattr(select, "epoll") else 0


class EpollSet:
    """curl's sockets in one epoll set (where there is epoll): ``watch`` follows curl's socket
    callback, ``ready(timeout)`` waits and returns ``(fd, CSELECT mask)`` pairs for
    ``socket_action``. ``Client`` waits on it; ``AsyncClient``'s loop watches its one fd, so a
    wake-up is one loop callback however many sockets are ready, and a new connection costs an
    ``epoll_ctl`` rather than a loop registration."""

    __slots__ = ("cselect_in", "cselect_out", "epoll", "poll_in", "poll_out", "poll_remove", "registered")

    def __init__(self, pycurl: Any) -> None:
        self.epoll = select.epoll()
        self.registered: dict[int, int] = {}  # fd -> the epoll events it is registered for
        self.poll_in, self.poll_out, self.poll_remove = pycurl.POLL_IN, pycurl.POLL_OUT, pycurl.POLL_REMOVE
        self.cselect_in, self.cselect_out = pycurl.CSELECT_IN, pycurl.CSELECT_OUT

    def fileno(self) -> int:
        return self.epoll.fileno()

    def watch(self, what: int, fd: int) -> None:
        """Watch ``fd`` for what curl's socket callback asked (``POLL_*``), or stop."""
        flags = 0
        if what != self.poll_remove:
            flags = (EPOLL_IN if what & self.poll_in else 0) | (EPOLL_OUT if what & self.poll_out else 0)
        old = self.registered.get(fd)
        if old == flags or (old is None and not flags):
            return
        epoll = self.epoll
        if not flags:
            with contextlib.suppress(OSError):  # curl may have closed it already
                epoll.unregister(fd)
            del self.registered[fd]
            return
        if old is None:
            try:
                epoll.register(fd, flags)
            except FileExistsError:  # a new socket under a number we never heard removed
                epoll.modify(fd, flags)
        else:
            try:
                epoll.modify(fd, flags)
            except FileNotFoundError:  # the old socket closed; this is a new one
                epoll.register(fd, flags)
        self.registered[fd] = flags

    def ready(self, timeout: float) -> list[tuple[int, int]]:
        """Wait up to ``timeout`` seconds (0: do not wait); the ready sockets as ``(fd, mask)``."""
        cin, cout = self.cselect_in, self.cselect_out
        return [
            (fd, (cin if ev & EPOLL_IN else 0) | (cout if ev & EPOLL_OUT else 0))
            for fd, ev in self.epoll.poll(timeout)
        ]

    def close(self) -> None:
        self.epoll.close()
        self.registered.clear()


def _keep_connections(pycurl: Any, handle: Any) -> None:
    # A transfer on a multi handle leaves its connection in the multi's cache, which dies with the
    # client (create_stream's lives for one call). A share holding the connection cache, kept on the
    # caller's handle, keeps the connection for the handle's next request, as perform() did.
    if getattr(handle, "_fastsse_share", None) is None:
        share = pycurl.CurlShare()
        share.setopt(pycurl.SH_SHARE, pycurl.LOCK_DATA_CONNECT)
        handle.setopt(pycurl.SHARE, share)
        handle._fastsse_share = share
