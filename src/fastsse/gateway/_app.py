"""``Gateway``: the raw ASGI app that serves chat completions, Responses and Messages over the
configured upstreams, with ``/v1/models``, ``/health`` and ``/metrics``.

One answer: the caller's key is checked (constant time), the body read within ``max_body_bytes``,
the request translated into each upstream's API in turn, and the first upstream whose attempt does
not fail before its first byte answers. A stream goes down through ``Downstream`` read by read (the
compiled relay, translators or the same-API passthrough), with the upstream held while the caller
is slow; its end is decided by the upstream's fold: a whole answer ends, an unfinished one is cut.
The status goes out with the first byte, so an upstream's HTTP error keeps its status (and its
Retry-After) in the caller's API's shape. The caller leaving cancels the upstream transfer at once,
before the first byte too. One log record per answer (``fastsse.gateway``), with no answer text.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import logging
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from .. import translate
from .._errors import FastSSEError, HTTPStatusError, TransportError
from ..apis import APIS
from ..client import LoopLeg, should_retry
from ._asgi import (
    SSE_HEADERS,
    Batch,
    CallerGone,
    Downstream,
    Receive,
    Send,
    TooLarge,
    read_body,
    send_json,
    send_whole,
    stream_error,
    watch_disconnect,
)
from ._config import GatewayConfig, Key, Route, Upstream
from ._metrics import Metrics
from ._record import (
    FirstToken,
    failure_words,
    folded,
    span,
    tokens_of,
    tracer,
    unfinished_why,
)
from ._router import Router
from ._state import Store, make_store

ROUTES: Final = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
    "/v1/completions": "completions",  # the legacy API: passed through to chat-API upstreams only
}
LIMIT_FIELD: Final = {name: row.limit_field for name, row in APIS.items()}

# Never forwarded upstream whatever the configuration says: hop-by-hop headers (RFC 9110 7.6.1),
# the caller's credentials (the upstream gets the gateway's key), and what the client sets itself.
NEVER_FORWARDED: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "proxy-authorization",
        "proxy-authenticate",
        "authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "host",
        "content-length",
        "content-type",
        "accept",
        "accept-encoding",
        "expect",
    }
)
# Forwarded by default, each to the upstreams of its own API family.
ANTHROPIC_HEADERS: Final = ("anthropic-beta", "anthropic-version")
OPENAI_HEADERS: Final = ("openai-organization", "openai-project", "openai-beta")
_FORBIDDEN = re.compile(rb"[\r\n\x00]")
_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,64}\Z")
MODELS_TTL: Final = 60.0  # seconds /v1/models answers are kept
MODELS_TIMEOUT: Final = 10.0  # seconds /v1/models may take over every upstream it asks
MODELS_LIMIT: Final = 4 << 20  # bytes of an upstream's model list (or error) taken at most
MODELS_HEADERS: Final = {"Accept": "application/json", "User-Agent": "fastsse-gateway"}
STREAMS_PATH: Final = "/v1/streams/"  # GET /v1/streams/<stream_id>: a resumable stream's rest
# seconds a streamed answer whose caller left may still take to end (its upstream's end can come
# just after the last event, which an SDK leaves at); its next piece stops it sooner
LEAVE_GRACE_S: Final = 0.25

# The logger and tracer are named after the package ("fastsse.gateway"), not this module.
NAME: Final = __name__.rpartition(".")[0]
log = logging.getLogger(NAME)


class _Answer:
    """One request's state between its handler, the disconnect watcher and ``Gateway.settle``."""

    __slots__ = ("completed", "down", "drained", "finished", "gone", "timer", "upstream_done", "wire")

    def __init__(self, wire: Any = None) -> None:
        self.wire = wire  # the serving connection, where it takes direct writes (scope's extension)
        self.finished = False  # nothing the caller could still miss: a disconnect changes nothing
        self.completed = False  # the caller's response ended with the relay's [DONE]
        self.upstream_done = False  # the upstream's transfer ended (its on_end was told)
        self.gone = False  # the caller disconnected before that
        self.drained = False  # cancelled by settle() at the end of the grace period
        self.down: Downstream | None = None
        self.timer: asyncio.TimerHandle | None = None


class _Plane:
    """One configuration's parts (``Gateway.reload`` swaps it for new requests): the router, the
    upstream clients by name, the callers' keys. Answers in flight keep the plane they began on;
    clients only an older plane used are closed once its last answer ended."""

    __slots__ = ("active", "clients", "config", "keys", "retired", "router", "upstreams")

    router: Router

    def __init__(self, config: GatewayConfig, previous: _Plane | None = None) -> None:
        self.config = config
        # a reloaded router goes on counting the answers in flight and the latency averages
        self.router = Router(config, previous=previous.router if previous is not None else None)
        self.upstreams = {up.name: up for up in config.upstreams}
        self.clients: dict[str, Any] = {}
        # every key as (digest, name, Key or None): [[key]] tables, then [server] keys (no name)
        self.keys: list[tuple[bytes, Key | None]] = [
            (hashlib.sha256(k.key.encode()).digest(), k) for k in config.keys
        ] + [(hashlib.sha256(k.encode()).digest(), None) for k in config.server.keys]
        self.active = 0
        self.retired = False


class BadHeader(FastSSEError):
    """A caller's header that cannot be forwarded (CR, LF or NUL in its value)."""


class _AllEjected(Exception):
    """Every upstream a route could use is out of rotation for ``retry_after`` seconds more."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


class _NoRoute(Exception):
    """The route has no upstream that speaks the caller's API (the legacy completions)."""


def _shape(caller: str) -> str:
    """The API whose error shape a caller of ``caller`` reads (the legacy completions: chat's)."""
    return "chat" if caller == "completions" else caller


def _error_payload(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _error_body(status: int, message: str, caller: str, kind: str | None = None) -> tuple[int, bytes]:
    status, payload = translate.error(
        status, {"error": {"message": message, "type": kind, "param": None, "code": None}}, caller
    )
    return status, orjson.dumps(payload)


def _upstream_request(
    body: dict[str, Any], caller: str, upstream_api: str, max_tokens: int
) -> tuple[dict[str, Any], list[str]]:
    """The body to send upstream and what its translation left out."""
    if caller == upstream_api:
        sent, dropped = body, []
    else:
        if upstream_api == "messages" and not any(body.get(k) for k in ("max_tokens", LIMIT_FIELD[caller])):
            body = {**body, LIMIT_FIELD[caller]: max_tokens}
        translated = translate.request(body, caller, upstream_api, lossy=True)
        sent, dropped = dict(translated), translated.dropped
    if upstream_api == "chat" and body.get("stream") is not True:
        # a whole answer is folded from a stream (every request is streamed): ask for usage
        sent = {**sent, "stream_options": {"include_usage": True}}
    return sent, dropped


def _whole(verdict: Mapping[str, Any]) -> bool:
    """Whether an answer with this verdict ends its caller's response (complete, or the
    upstream's own error event), rather than cutting it."""
    return bool(verdict.get("complete") or verdict.get("error"))


def stream_format(caller: str, upstream_api: str) -> str:
    """The byte format that turns an ``upstream_api`` stream into the ``caller``'s: the chat relay,
    the same API's passthrough, or a translator."""
    if caller != upstream_api:
        return f"to-{caller}"
    return "relay" if caller == "chat" else "passthrough"


class Gateway:
    """``Gateway(config, *, on_answer=None)``: the ASGI app (``await gateway(scope, receive, send)``).

    ``config`` is a ``GatewayConfig`` (``load_config``); ``on_answer(record)`` is called with the
    record of every answer (the dict the log line carries). The upstream clients are made at the
    ASGI lifespan's startup (or at the first request under a server without lifespan) and closed at
    its shutdown. ``drain()`` makes new requests answer 503 while the ones in flight finish, and
    ``settle(grace)`` waits for them (the command calls both on SIGTERM); ``reload(config)`` swaps
    the configuration for new requests (SIGHUP). ``metrics`` holds the figures of ``/metrics``,
    rendered through ``share`` (a ``MetricsShare``: every worker's figures) when it is set.
    """

    def __init__(
        self, config: GatewayConfig, *, on_answer: Callable[[dict[str, Any]], Any] | None = None
    ) -> None:
        self.metrics = Metrics()
        self.on_answer = on_answer
        self.draining = False
        self.share: Any = None  # a MetricsShare, set by the command before serving
        self._plane = _Plane(config)
        self._store: Store | None = None
        self._resumer: Any = None
        self._started = False
        self._answers: dict[asyncio.Task[Any], _Answer] = {}
        self._idle: asyncio.Event | None = None
        self._background: set[asyncio.Future[Any]] = set()
        self._failing: set[str] = set()  # upstreams whose last attempt here failed
        self._ids = itertools.count(1)
        self._id_prefix = f"gw-{os.getpid():x}-{int(time.time()) & 0xFFFFFF:x}-"
        self._models: tuple[float, int, bytes, bytes] | None = None
        self._batch = Batch()  # every answer's pieces of one loop turn, flushed in one callback
        self._configure(config)

    def _configure(self, config: GatewayConfig) -> None:
        self.config = config
        self.server = config.server
        self.upstreams = config.upstreams
        forward = (
            frozenset((*ANTHROPIC_HEADERS, *OPENAI_HEADERS, *self.server.forward_headers)) - NEVER_FORWARDED
        )
        self._forward = frozenset(name.encode("latin-1") for name in forward)  # ASGI names: lower-case bytes
        self._tracer = tracer() if self.server.otel else None
        self._models = None

    @property
    def clients(self) -> list[Any]:
        """The current configuration's upstream clients, in the order of its upstreams."""
        plane = self._plane
        return [plane.clients[up.name] for up in plane.config.upstreams if up.name in plane.clients]

    # lifecycle

    async def startup(self) -> None:
        """Make one ``AsyncClient`` per upstream (on the running loop) and open the shared state
        (Redis with ``server.redis_url``)."""
        if self._started:
            return
        self._started = True
        self._open_clients(self._plane, {})
        self._store = make_store(self.server)
        await self._store.start()
        if self.server.resumable and self.server.redis_url:
            import redis.asyncio

            from ._resume import Resumer

            # a client of its own: a resume's blocking XREAD must not hold the limits' connections
            self._resumer = Resumer(
                redis.asyncio.Redis.from_url(self.server.redis_url),
                max_bytes=self.server.resume_max_bytes,
                ttl=self.server.resume_ttl_seconds,
            )
        if self.share is not None:
            await self.share.start(self.metrics)

    def _open_clients(self, plane: _Plane, reuse: Mapping[str, tuple[Upstream, Any]]) -> None:
        from ..client.aio import AsyncClient

        for up in plane.config.upstreams:
            kept = reuse.get(up.name)
            if kept is not None and kept[0] == up:
                plane.clients[up.name] = kept[1]
                continue
            options = dict(
                api=up.api,
                base_url=up.base_url,
                api_key=up.api_key or "",  # "": no key, never one from the environment
                headers=dict(up.headers) or None,
                connect_timeout=up.connect_timeout,
                first_byte_timeout=up.first_byte_timeout,
                idle_timeout=up.idle_timeout,
                timeout=up.timeout,
                max_retries=up.max_retries,
                first_chunk_gate=up.first_chunk_gate,
                http2=up.http2,
                max_event_bytes=plane.config.server.max_event_bytes,
                max_connections=up.max_connections,
                raise_for_status=True,
                # no timing record by default: a streamed answer's sink stamps the first piece
                # and the first content, and the record's one stamp per upstream read would grow
                # with the answer (an option given per call costs a merge of the options)
                timing=False,
                keep_text=False,  # the relay's fold keeps the facts the record needs, not the text
                **up.client,  # the upstream's other client options (proxy, ca_bundle, ...), checked
            )
            # plain http:// streams on the event loop: no libcurl between the two sockets (nor
            # loaded, while no request needs it)
            plane.clients[up.name] = LoopLeg(**options) if up.transport == "auto" else AsyncClient(**options)

    async def shutdown(self) -> None:
        """Close the upstream clients (a transfer still running is cancelled) and the shared state."""
        plane = self._plane
        clients, plane.clients = plane.clients, {}
        for client in clients.values():
            await client.close()
        store, self._store = self._store, None
        if store is not None:
            await store.close()
        resumer, self._resumer = self._resumer, None
        if resumer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(resumer.redis.aclose()), 2)
        if self.share is not None:
            self.share.close(self.metrics)
        self._started = False

    def drain(self) -> None:
        """Answer new requests 503 (``Retry-After: 1``, ``Connection: close``) and ``/health`` 503
        ``draining`` from now on."""
        self.draining = True

    @property
    def in_flight(self) -> int:
        """Answers being served now."""
        return len(self._answers)

    async def settle(self, grace: float) -> None:
        """Return once no answer is in flight, or after ``grace`` seconds: then the answers left are
        cancelled (each logged with outcome ``drained``) and awaited."""
        deadline = time.monotonic() + grace
        while self._answers and time.monotonic() < deadline:
            self._idle = asyncio.Event()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._idle.wait(), max(0.0, deadline - time.monotonic()))
        left = list(self._answers.items())
        for task, state in left:
            state.drained = True
            task.cancel()
        if left:
            await asyncio.wait([task for task, _ in left], timeout=5)
        if self._background:
            await asyncio.wait(list(self._background), timeout=2)

    def reload(self, config: GatewayConfig) -> None:
        """Serve new requests with ``config`` (routes, keys, limits, upstreams); answers in flight
        finish on the configuration they began with. Clients of upstreams that did not change are
        kept; the others are closed once the last answer using them ended. The listening address,
        workers, log format and shared-state URL are the command's, read at start only."""
        old = self._plane
        plane = _Plane(config, old)
        if self._started:
            same = old.config.server.max_event_bytes == config.server.max_event_bytes
            kept = {name: (old.upstreams[name], c) for name, c in old.clients.items()} if same else {}
            self._open_clients(plane, kept)
        self._configure(config)
        self._plane = plane
        old.retired = True
        if old.active == 0:
            self._retire(old)

    def _retire(self, old: _Plane) -> None:
        current = set(map(id, self._plane.clients.values()))
        stale = [c for c in old.clients.values() if id(c) not in current]
        old.clients = {}
        for client in stale:
            self._later(client.close())

    def _later(self, awaitable: Any) -> None:
        """Run ``awaitable`` in the background, kept until it ended (its failure logged)."""
        future = asyncio.ensure_future(awaitable)
        self._background.add(future)

        def done(f: asyncio.Future[Any]) -> None:
            self._background.discard(f)
            if not f.cancelled() and f.exception() is not None:
                log.warning("gateway background work failed: %s", f.exception())

        future.add_done_callback(done)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # routing

    async def _http(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        path = scope["path"]
        caller = ROUTES.get(path) or ROUTES.get(path.rstrip("/"))
        if caller is not None:
            if scope["method"] != "POST":
                status, body = _error_body(405, f"{path} takes POST", _shape(caller))
                await send_whole(send, status, body, [(b"allow", b"POST")])
                return
            await self._answer(scope, receive, send, caller)
            return
        headers = dict(scope["headers"])
        shape = "messages" if b"anthropic-version" in headers or b"x-api-key" in headers else "chat"
        if path == "/health":
            await self._health(send)
        elif path == "/metrics":
            page = await self.share.page(self.metrics) if self.share is not None else self.metrics.render()
            await send_whole(send, 200, page, content_type=(b"content-type", b"text/plain; version=0.0.4"))
        elif path.rstrip("/") == "/v1/models":
            if self._plane.keys and self._key(headers) is None:
                status, body = _error_body(401, "a valid API key is required", shape, "authentication_error")
                await send_whole(send, status, body)
                return
            await self._list_models(send)
        elif path.startswith(STREAMS_PATH) and scope["method"] == "GET" and self._resumer is not None:
            await self._resume(path[len(STREAMS_PATH) :], headers, receive, send)
        else:
            status, body = _error_body(404, f"no route {path}", shape, "not_found_error")
            await send_whole(send, status, body)

    async def _health(self, send: Send) -> None:
        now = time.time()
        ejected = self._store.ejected() if self._store is not None else {}
        upstreams = {
            up.name: {"state": "ejected", "back_in_s": round(max(0.0, ejected[up.name] - now), 3)}
            if up.name in ejected
            else {"state": "up"}
            for up in self._plane.config.upstreams
        }
        status = 503 if self.draining else 200
        await send_json(
            send,
            status,
            {
                "status": "draining" if self.draining else "ok",
                "pid": os.getpid(),
                "in_flight": len(self._answers),
                "upstreams": upstreams,
            },
        )

    def _key(self, headers: Mapping[bytes, bytes]) -> tuple[bytes, Key | None] | None:
        """The caller's key (``Authorization: Bearer``, else ``x-api-key``) when it is one of the
        configured keys, as (its digest, its ``[[key]]`` or None for a ``[server] keys`` one):
        digests compared in constant time, every key every time. None when it is not."""
        presented = headers.get(b"authorization", b"")
        if presented[:7].lower() == b"bearer ":
            presented = presented[7:].strip()
        else:
            presented = headers.get(b"x-api-key", b"").strip()
        if not presented:
            return None
        digest = hashlib.sha256(presented).digest()
        found: tuple[bytes, Key | None] | None = None
        for key_digest, key in self._plane.keys:
            if hmac.compare_digest(digest, key_digest) and found is None:
                found = (digest, key)
        return found

    def _authorized(self, headers: Mapping[bytes, bytes]) -> bool:
        """Whether the caller presented one of the configured keys."""
        return self._key(headers) is not None

    def _forwarded(self, headers: Mapping[bytes, bytes], api: str) -> dict[str, str]:
        """The caller's headers that go to an ``api`` upstream. It raises BadHeader for one with CR,
        LF or NUL in its value."""
        out = {}
        for raw, value in headers.items():
            if raw not in self._forward:
                continue
            name = raw.decode("latin-1")
            if name.startswith("anthropic-") and api != "messages":
                continue
            if name.startswith("openai-") and api == "messages":
                continue
            if _FORBIDDEN.search(value):
                raise BadHeader(name)
            out[name] = value.decode("latin-1")
        return out

    # one answer

    async def _answer(self, scope: dict[str, Any], receive: Receive, send: Send, caller: str) -> None:
        arrived = time.monotonic_ns()
        headers = dict(scope["headers"])
        given_id = headers.get(b"x-request-id")
        rid = (
            given_id.decode()
            if given_id and _REQUEST_ID.match(given_id)
            else f"{self._id_prefix}{next(self._ids)}"
        )
        record: dict[str, Any] = {
            "rid": rid,
            "route": caller,
            "upstream": None,
            "model": None,
            "status": None,
        }
        own = [(b"x-request-id", rid.encode())]
        shape = _shape(caller)

        async def refuse(
            status: int, message: str, kind: str | None = None, extra: list[Any] | None = None
        ) -> None:
            status, body = _error_body(status, message, shape, kind)
            record.update(status=status, outcome="rejected", why=message)
            await send_whole(send, status, body, own + (extra or []))

        if self.draining:
            await refuse(
                503,
                "the gateway is shutting down",
                "overloaded_error",
                [(b"retry-after", b"1"), (b"connection", b"close")],
            )
            return self._done(record, arrived)
        plane = self._plane
        owner = b""
        key: Key | None = None
        if plane.keys:
            found = self._key(headers)
            if found is None:
                await refuse(
                    401,
                    "a valid API key is required (Authorization: Bearer, or x-api-key)",
                    "authentication_error",
                )
                return self._done(record, arrived)
            owner, key = found
            record["key"] = key.name if key is not None else None
        try:
            raw = await read_body(scope, receive, self.server.max_body_bytes)
        except TooLarge:
            limit = self.server.max_body_bytes
            await refuse(
                413,
                f"the request body is larger than {limit} bytes",
                "request_too_large",
                [(b"connection", b"close")],
            )
            return self._done(record, arrived)
        except CallerGone:
            record.update(status=499, outcome="caller_left", why="the caller left before sending its request")
            return self._done(record, arrived)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            await refuse(400, f"the request body is not JSON: {exc}", "invalid_request_error")
            return self._done(record, arrived)
        if not isinstance(body, dict):
            await refuse(400, "the request body is not a JSON object", "invalid_request_error")
            return self._done(record, arrived)
        model = body.get("model")
        record["model"] = model = model if isinstance(model, str) else None
        route = plane.router.route(model)
        if route is None:
            await refuse(404, f"no route for model {model!r}", "not_found_error")
            return self._done(record, arrived)
        if key is not None and model is not None and not key.allows(model):
            await refuse(403, f"this key may not call model {model!r}", "permission_error")
            return self._done(record, arrived)
        if not self._started:
            await self.startup()
        lease: str | None = None
        if key is not None and (key.rpm or key.tpm or key.max_streams):
            assert self._store is not None
            lease = rid + "-" + os.urandom(4).hex()
            refusal = await self._store.admit(
                key.name, rpm=key.rpm, tpm=key.tpm, max_streams=key.max_streams, lease=lease
            )
            if refusal is not None:
                wait = max(1, math.ceil(refusal.retry_after))
                self.metrics.limited.add((("key", key.name), ("limit", refusal.limit)))
                await refuse(
                    429,
                    f"rate limit of key {key.name!r} reached ({refusal.limit}); retry after {wait} s",
                    "rate_limit_error",
                    [(b"retry-after", b"%d" % wait)],
                )
                return self._done(record, arrived)

        task = asyncio.current_task()
        extensions = scope.get("extensions")
        state = _Answer(extensions.get("fastsse.wire") if extensions else None)
        resumable = self._resumer is not None and body.get("stream") is True

        def gone() -> None:
            if state.finished:
                if state.completed and not state.upstream_done and task is not None and state.timer is None:
                    # the response ended with the relay's [DONE] (this is its end, not the
                    # caller's leaving) and the upstream has not ended its answer yet: it gets
                    # the grace of an answer whose caller left at [DONE], then it is cut
                    state.timer = asyncio.get_running_loop().call_later(LEAVE_GRACE_S, task.cancel)
                return
            state.gone = True
            if task is None:
                return
            down = state.down
            if down is not None and (down.first_ns or (resumable and down.started)):
                # the stream went out: its next piece stops the transfer (a resumable one reads
                # on, into Redis). An SDK leaves as soon as it read the last event, which can be
                # before the upstream's own end arrived: that answer is whole, so a stalled
                # upstream alone is cancelled, after a grace
                down.leave()
                if not resumable:
                    state.timer = asyncio.get_running_loop().call_later(LEAVE_GRACE_S, task.cancel)
            else:  # before the first byte (a keep-alive comment alone changes nothing)
                task.cancel()

        watch_disconnect(receive, gone)
        if task is not None:
            self._answers[task] = state
        plane.active += 1
        self.metrics.in_flight += 1
        try:
            if body.get("stream") is True:
                await self._stream(
                    send, headers, body, caller, record, own, arrived, state, plane, route, owner
                )
            else:
                await self._whole(send, headers, body, caller, record, own, arrived, state, plane, route)
        except asyncio.CancelledError:
            if state.drained:
                record.update(
                    status=record.get("status") or 503,
                    outcome="drained",
                    why=f"cut at the end of the {self.server.grace_seconds:g} s grace period",
                )
            elif state.completed:  # the caller had the whole answer: its upstream lingered after it
                record.update(
                    status=200,
                    outcome="complete",
                    why=f"the upstream had not ended its answer {LEAVE_GRACE_S:g} s after it was complete: cut",
                )
            elif not state.gone:
                record.update(status=record.get("status") or 499, outcome="cut", why="the gateway stopped")
                raise
            else:
                record.update(status=499, outcome="caller_left", why="the caller went away")
        except BadHeader as exc:
            await refuse(
                400, f"header {exc}: CR, LF or NUL in its value (header injection)", "invalid_request_error"
            )
        finally:
            state.finished = True
            if state.timer is not None:
                state.timer.cancel()
            if state.down is not None:
                state.down.close()
            if task is not None:
                self._answers.pop(task, None)
                if not self._answers and self._idle is not None:
                    self._idle.set()
            plane.active -= 1
            if plane.retired and plane.active == 0:
                self._retire(plane)
            self.metrics.in_flight -= 1
            if lease is not None and key is not None and self._store is not None:
                spent = (record.get("tokens_in") or 0) + (record.get("tokens_out") or 0)
                self._later(self._store.release(key.name, lease, spent or record.pop("_folded", 0)))
            record.pop("_folded", None)
            self._done(record, arrived)

    async def _attempts(
        self,
        headers: Mapping[bytes, bytes],
        body: dict[str, Any],
        caller: str,
        record: dict[str, Any],
        down: Downstream | None,
        plane: _Plane,
        route: Route,
        on_piece: Callable[[bytes], Any] | None = None,
        on_end: Callable[[Any], None] | None = None,
        on_complete: Callable[[], None] | None = None,
    ) -> tuple[Upstream | None, dict[str, Any] | None, BaseException | None]:
        """Try the route's upstreams in its balanced order, then its fallbacks: (the upstream, its
        result, None), or (the last one tried, None, its failure). The next upstream is tried only
        while nothing reached the caller and the failure is one the resilience rules retry
        (refused, timed out, 429, 5xx...). Each retryable failure counts towards the upstream's
        ejection, unless it came after the caller's response ended with a complete answer
        (``Downstream.ended``); every upstream of the route out at once is a ``_AllEjected``
        failure."""
        store = self._store
        assert store is not None
        failure: BaseException | None = None
        last: Upstream | None = None
        translations: dict[str, tuple[dict[str, Any], list[str]]] = {}
        plan = plane.router.plan(route, store.ejected(), time.time())
        if caller == "completions":  # the legacy API goes to chat-API upstreams only, untranslated
            plan = [(up, probe) for up, probe in plan if up.api == "chat"]
            if not plan and not any(
                plane.upstreams[n].api == "chat" for n in (*route.upstreams, *route.fallbacks)
            ):
                return None, None, _NoRoute("/v1/completions needs an upstream whose api is chat")
        if not plan:
            return None, None, _AllEjected(plane.router.soonest(route, store.ejected(), time.time()))
        wire = caller if caller != "completions" else "chat"
        tried = 0
        for up, probe in plan:
            client = plane.clients.get(up.name)
            if client is None:
                continue
            if probe and not await store.claim_probe(up.name, up.connect_timeout + up.first_byte_timeout):
                continue
            if up.api not in translations:
                try:
                    translations[up.api] = _upstream_request(body, wire, up.api, self.server.max_tokens)
                except translate.Untranslatable as exc:
                    failure = failure or exc
                    continue
            sent, dropped = translations[up.api]
            if route.upstream_model is not None:
                sent = {**sent, "model": route.upstream_model}
            record["upstream"], record["dropped"] = up.name, dropped
            record["api"] = f"{caller}->{up.api}"
            if route.upstream_model is not None:
                record["upstream_model"] = route.upstream_model
            last = up
            tried += 1
            options: dict[str, Any] = {}
            if caller == "completions":
                options["path"] = "/completions"
            extra = self._forwarded(headers, up.api)
            if extra:
                options["headers"] = {**up.headers, **extra}
            plane.router.started(up.name)
            ttfb: float | None = None
            asked = time.monotonic_ns()
            try:
                if down is None:
                    # a whole answer's first byte and first content (ttfb_ms, ttft_ms)
                    result = await client.create_stream(sent, timing=True, **options)
                else:
                    fmt = "passthrough" if caller == "completions" else stream_format(caller, up.api)
                    if on_end is not None and isinstance(client, LoopLeg):
                        options["on_end"] = on_end
                        if on_complete is not None and fmt != "passthrough":  # a relay, a translation
                            options["on_complete"] = on_complete
                    result = await client.create_stream(sent, on_piece or down.piece, format=fmt, **options)
                timing = result.get("timing") or {}
                if timing.get("first_byte") and timing.get("sent"):
                    ttfb = (timing["first_byte"] - timing["sent"]) / 1e9
                elif down is not None and down.first_ns:  # from the request to its first piece
                    ttfb = (down.first_ns - asked) / 1e9
                self._succeeded(up)
                return up, result, None
            except (HTTPStatusError, TransportError) as exc:
                failure = exc
            finally:
                plane.router.ended(up.name, ttfb)
            if down is not None and down.ended:
                # the caller had the whole answer and its end: what the upstream did after its
                # [DONE] (a cut, a reset) is no failure of that answer, nor of the upstream's
                self._succeeded(up)
                return up, None, failure
            if should_retry(failure):
                self._failed(up)
            if down is not None and down.first_ns:
                return up, None, failure  # part of the answer went out: never again elsewhere
            reason = (
                f"http_{failure.status}" if isinstance(failure, HTTPStatusError) else f"curl_{failure.code}"
            )
            self.metrics.fallbacks.add((("upstream", up.name), ("reason", reason)))
            if not should_retry(failure):
                return up, None, failure
        if not tried and failure is None:  # every probe was another caller's
            return None, None, _AllEjected(plane.router.soonest(route, store.ejected(), time.time()))
        return last, None, failure

    def _failed(self, up: Upstream) -> None:
        """Count a retryable failure of ``up`` towards its ejection (in the background)."""
        self._failing.add(up.name)
        store = self._store
        if store is None or not up.eject_after:
            return

        async def count() -> None:
            if await store.failed(up.name, up.eject_after, up.cooldown_seconds):
                self.metrics.ejections.add((("upstream", up.name),))
                log.warning(
                    "upstream %s ejected for %g s after %d failures in a row",
                    up.name,
                    up.cooldown_seconds,
                    up.eject_after,
                )

        self._later(count())

    def _succeeded(self, up: Upstream) -> None:
        """``up`` answered: its failures in a row end (a store call only when it had some here, or
        the shared view has it out)."""
        store = self._store
        if store is None or (up.name not in self._failing and up.name not in store.ejected()):
            return
        self._failing.discard(up.name)
        self._later(store.succeeded(up.name))

    async def _fail(
        self,
        send: Send,
        caller: str,
        up: Upstream | None,
        failure: BaseException | None,
        record: dict[str, Any],
        own: list[Any],
        down: Downstream | None = None,
    ) -> None:
        """The caller's answer when no upstream answered: the upstream's HTTP error (its status
        and Retry-After kept) or 502 / 504, in the caller's API's shape. When a keep-alive comment
        already committed the stream's 200, the same error goes as the API's in-stream error event."""
        shape = _shape(caller)
        extra = list(own)
        name = up.name if up is not None else "-"
        error: Any
        if isinstance(failure, HTTPStatusError):
            if 400 <= failure.status <= 599:
                status, error = failure.status, {"error": failure.error}
            else:  # an HTML page with 200, a redirect: not an answer
                status = 502
                error = _error_payload(
                    f"upstream {name} answered no stream ({failure.result['verdict']['why']})",
                    "upstream_error",
                )
            if failure.retry_after is not None:
                extra.append((b"retry-after", b"%d" % max(0, round(failure.retry_after))))
            why = str(failure.result["verdict"]["why"])
        elif isinstance(failure, TransportError):
            status = 504 if failure.code == 28 else 502
            why = failure_words(failure)
            error = _error_payload(f"upstream {name} failed: {why}", "upstream_error")
        elif isinstance(failure, translate.Untranslatable):
            why = str(failure)
            status, error = 400, _error_payload(why, "invalid_request_error")
        elif isinstance(failure, _AllEjected):
            wait = max(1, math.ceil(failure.retry_after))
            why = f"every upstream of the route is out of rotation; retry after {wait} s"
            status, error = 503, _error_payload(why, "overloaded_error")
            extra.append((b"retry-after", b"%d" % wait))
        elif isinstance(failure, _NoRoute):
            why = str(failure)
            status, error = 404, _error_payload(why, "not_found_error")
        else:
            why = "no upstream"
            status, error = 502, _error_payload(why, "upstream_error")
        status, payload = translate.error(status, error, shape)
        if isinstance(failure, _AllEjected):
            status = 503  # the gateway's own answer: 503 for every API (Messages' 529 is Anthropic's)
        record.update(status=status, outcome="error", why=why)
        if down is not None and down.started:  # a keep-alive comment sent the 200 already
            record["status"] = 200
            await down.fail(stream_error(shape, status, payload))
            return
        await send_whole(send, status, orjson.dumps(payload), extra)

    async def _stream(
        self,
        send: Send,
        headers: Mapping[bytes, bytes],
        body: dict[str, Any],
        caller: str,
        record: dict[str, Any],
        own: list[Any],
        arrived: int,
        state: _Answer,
        plane: _Plane,
        route: Route,
        owner: bytes,
    ) -> None:
        recorder = self._resumer.open(owner) if self._resumer is not None else None
        head = [*SSE_HEADERS, *own]
        if recorder is not None:
            head.append(recorder.header)
            record["stream_id"] = recorder.stream_id
        down = state.down = Downstream(
            send, head, batch=self._batch, keepalive=self.server.keepalive_seconds, wire=state.wire
        )
        first = FirstToken(caller)
        on_piece: Callable[[bytes], Any] = down.on_chunk  # stamps, first content, then the caller
        if recorder is None:
            down.sink.first = first.see  # until the first content: one event parse per piece
        else:

            def relay(data: bytes) -> Any:
                tagged = recorder.piece(data)
                if down.gone:  # the caller left: the answer is read on into Redis
                    down.dropped = True  # not to the caller, that is: its record says it left
                    return recorder.room()
                held = down.piece(tagged)
                return held if held is not None else recorder.room()

            def on_piece(data: bytes) -> Any:
                if not first.at:  # until the first content: one event parse per piece, then nothing
                    first.see(data)
                return relay(data)

        def ended(outcome: Any) -> None:
            # the upstream's transfer ended, told from the loop callback that read its end: a
            # whole answer's end goes to the caller there (as below, where it then sends nothing)
            state.upstream_done = True
            if isinstance(outcome, dict) and _whole(outcome["verdict"]) and down.first_ns and down.end_now():
                state.finished = True

        def completed() -> None:
            # the relay handed on the [DONE] of a complete answer, or the translator its terminal
            # event (nothing after it reaches the caller): the caller's response ends with it,
            # not once the upstream's end arrived.
            # An upstream that does not end its answer soon after is cut (the watcher's gone()
            # arms the grace as it sees the response end)
            if down.first_ns and down.end_now():
                state.finished = state.completed = True

        result: dict[str, Any] | None = None
        whole = False
        try:
            up, result, failure = await self._attempts(
                headers,
                body,
                caller,
                record,
                down,
                plane,
                route,
                on_piece,
                ended if recorder is None else None,
                completed if recorder is None else None,
            )
            if failure is not None and state.completed:
                # what the upstream did after a complete answer's [DONE] (a cut before its own
                # end) changes nothing the caller got: the record is the answer's
                partial = getattr(failure, "result", None)
                result, failure = (partial if isinstance(partial, dict) else None), None
            verdict = result["verdict"] if result is not None else {}
            whole = state.completed or (failure is None and _whole(verdict))
            if whole and down.first_ns:
                # the answer is all here: a caller that leaves once it read the last event (an SDK
                # closes at [DONE]) left nothing unsent, so the watcher must not cancel this one;
                # its end goes out before the record and metrics are written
                state.finished = True
                await down.flush()
                if not down.gone:
                    await down.finish()
        finally:
            if recorder is not None:  # whatever ended the answer: its Redis keys get their TTL
                self._later(recorder.end(whole))
            record["bytes"] = down.relayed
            self._timing(record, arrived, down.first_ns, result, first.at)
            if down.first_ns:
                labels = (("route", caller), ("upstream", record["upstream"] or "-"))
                self.metrics.gaps.merge(labels, down.gaps, (down.last_ns - down.first_ns) / 1e9)
        if result is not None:
            record["tokens_in"], record["tokens_out"] = tokens_of(result)
            record["_folded"] = folded(result)
        if down.first_ns:
            await down.flush()  # what arrived goes out (with the status) before the end is decided
        if not down.first_ns:
            if result is not None:  # the upstream's answer held nothing to send
                failure = TransportError(unfinished_why(result["verdict"]), result=result, code=0)
            await self._fail(send, caller, up, failure, record, own, down)
            return
        record["status"] = 200
        if down.gone and (down.dropped or not whole):
            record.update(status=499, outcome="caller_left", why="the caller went away")
            if recorder is not None:
                record["kept"] = whole  # read to its end into Redis: resumable whole
            return
        if whole:  # every byte and the end went to the server (above); the caller may have left since
            record["outcome"] = "error" if verdict.get("error") else "complete"
            if verdict.get("error"):
                record["why"] = unfinished_why(verdict)
            return
        # unfinished: what came went out, the end does not (the caller's client raises)
        await down.flush()
        cause = failure_words(failure) if failure is not None else unfinished_why(verdict)
        record.update(outcome="cut", why=cause)
        self.metrics.cuts.add(
            (("route", caller), ("upstream", record["upstream"] or "-"), ("cause", "upstream"))
        )

    def _timing(
        self,
        record: dict[str, Any],
        arrived: int,
        first_ns: int,
        result: Mapping[str, Any] | None,
        content_ns: int = 0,
    ) -> None:
        """``ttfb_ms`` (the first byte sent to the caller, or read for a whole answer) and
        ``ttft_ms`` (the read that brought the first content: reasoning, text or a tool call),
        both from the request's arrival, into the record and the two histograms."""
        timing = (result or {}).get("timing") or {}
        first_byte = first_ns or timing.get("first_byte")
        stamps = [t for t in (timing.get("first_content"), timing.get("first_reasoning"), content_ns) if t]
        labels = (("route", record["route"]), ("upstream", record["upstream"] or "-"))
        if first_byte:
            record["ttfb_ms"] = round((first_byte - arrived) / 1e6, 3)
            self.metrics.ttfb.observe(labels, (first_byte - arrived) / 1e9)
        if stamps:
            record["ttft_ms"] = round((min(stamps) - arrived) / 1e6, 3)
            self.metrics.ttft.observe(labels, (min(stamps) - arrived) / 1e9)

    async def _whole(
        self,
        send: Send,
        headers: Mapping[bytes, bytes],
        body: dict[str, Any],
        caller: str,
        record: dict[str, Any],
        own: list[Any],
        arrived: int,
        state: _Answer,
        plane: _Plane,
        route: Route,
    ) -> None:
        up, result, failure = await self._attempts(headers, body, caller, record, None, plane, route)
        if result is None or up is None:
            await self._fail(send, caller, up, failure, record, own)
            return
        self._timing(record, arrived, 0, result)
        record["tokens_in"], record["tokens_out"] = tokens_of(result)
        record["_folded"] = folded(result)
        # the API's answer goes on; fastsse's facts (verdict, timing, http) stay here
        verdict = result.pop("verdict")
        result.pop("timing", None)
        http = result.pop("http", None) or {}
        error = http.get("error")  # an answer that was no stream
        if error is None:
            # the answer's own error: a Responses answer has the field (null when it went well),
            # a chat or Messages fold holds one only when the stream sent it
            error = result.get("error") if up.api == "responses" else result.pop("error", None)
        if error is not None or not verdict.get("complete"):
            why = "the upstream answered an error" if error is not None else unfinished_why(verdict)
            status, payload = translate.error(
                502, {"error": error if error is not None else why}, _shape(caller)
            )
            record.update(status=status, outcome="error", why=why)
            await send_whole(send, status, orjson.dumps(payload), own)
            return
        if caller != up.api and caller != "completions":  # completions: the chat fold's text_completion
            translated = translate.response(result, up.api, caller, lossy=True)
            if translated.dropped:
                record["dropped"] = [*record.get("dropped", []), *translated.dropped]
            result = translated
        state.finished = True
        record.update(status=200, outcome="complete")
        await send_whole(send, 200, orjson.dumps(result), own)

    def _done(self, record: dict[str, Any], arrived: int) -> None:
        """The answer's one record: the metrics, the log line, ``on_answer``."""
        elapsed = (time.monotonic_ns() - arrived) / 1e9
        record["duration_ms"] = round(elapsed * 1000, 3)
        status = record.get("status") or 500
        labels = (("route", record["route"]), ("upstream", record.get("upstream") or "-"))
        metrics = self.metrics
        key = record.get("key")
        metrics.requests.add((*labels, ("status", str(status)), *((("key", key),) if key else ())))
        metrics.duration.observe(labels, elapsed)
        if record.get("outcome") == "caller_left" and record.get("bytes"):
            metrics.cuts.add((*labels, ("cause", "caller")))
        elif record.get("outcome") == "drained" and record.get("bytes"):
            metrics.cuts.add((*labels, ("cause", "drained")))
        for kind in ("in", "out"):
            count = record.get(f"tokens_{kind}")
            if isinstance(count, int):
                metrics.tokens.observe(
                    (*labels, ("gen_ai_token_type", "input" if kind == "in" else "output")), count
                )
        level = logging.INFO if record.get("outcome") in ("complete", None) else logging.WARNING
        if log.isEnabledFor(level):
            log.log(
                level,
                "%s %s %s model=%s status=%s %s%s",
                record["rid"],
                record.get("api") or record["route"],
                record.get("upstream") or "-",
                record.get("model"),
                status,
                record.get("outcome"),
                f": {record['why']}" if record.get("why") else "",
                extra={"answer": record},
            )
        if self._tracer is not None:
            span(self._tracer, record, arrived)
        if self.on_answer is not None:
            self.on_answer(record)

    # /v1/streams/<id>

    async def _resume(
        self, stream_id: str, headers: Mapping[bytes, bytes], receive: Receive, send: Send
    ) -> None:
        """``GET /v1/streams/<stream_id>``: a resumable answer's events after ``Last-Event-ID``,
        for the key that asked for the answer; one log record."""
        from ._resume import serve_resume

        arrived = time.monotonic_ns()
        record: dict[str, Any] = {
            "rid": f"{self._id_prefix}{next(self._ids)}",
            "route": "resume",
            "upstream": None,
            "model": None,
            "status": None,
            "stream_id": stream_id[:64],
        }
        owner = b""
        if self._plane.keys:
            found = self._key(headers)
            if found is None:
                status, body = _error_body(401, "a valid API key is required", "chat", "authentication_error")
                record.update(status=status, outcome="rejected", why="no valid key")
                await send_whole(send, status, body)
                self._done(record, arrived)
                return
            owner, key = found
            record["key"] = key.name if key is not None else None
        last = headers.get(b"last-event-id")
        try:
            resumed = await serve_resume(
                self._resumer,
                stream_id,
                owner,
                last.decode("latin-1") if last is not None else None,
                send,
                receive=receive,
            )
            record.update(status=resumed.status, outcome=resumed.outcome, events=resumed.events)
        finally:
            self._done(record, arrived)

    # /v1/models

    async def _list_models(self, send: Send) -> None:
        """The routes' exact model names; with no ``[[route]]``, the first upstream's model list
        (kept for ``MODELS_TTL`` seconds), fetched without blocking the loop, the next upstream's
        if one fails, within ``MODELS_TIMEOUT`` seconds in all."""
        names = self._plane.router.models()
        if names:
            listed = [{"id": name, "object": "model", "created": 0, "owned_by": "fastsse"} for name in names]
            await send_json(send, 200, {"object": "list", "data": listed})
            return
        now = time.monotonic()
        cached = self._models
        if cached is not None and now - cached[0] < MODELS_TTL:
            await send_whole(send, cached[1], cached[2], content_type=(b"content-type", cached[3]))
            return
        status, data, kind = (
            502,
            b'{"error":{"message":"no upstream answered","type":"upstream_error"}}',
            b"application/json",
        )
        deadline = now + MODELS_TIMEOUT
        if not self._started:  # a server without lifespan: the upstream clients are made now
            await self.startup()
        plane = self._plane
        for up in plane.config.upstreams:
            left = deadline - time.monotonic()
            client = plane.clients.get(up.name)
            if left <= 0 or client is None:
                break
            # the upstream's own client: its key, headers, proxy, CA bundle, certificate, HTTP/2
            try:
                reply = await client.get(
                    "/models",
                    headers=MODELS_HEADERS,
                    timeout=min(left, up.connect_timeout + up.first_byte_timeout),
                    max_body_bytes=MODELS_LIMIT,
                )
                status, headers, data = reply.status, reply.headers, reply.body
            except HTTPStatusError as exc:  # the upstream clients raise for a status of 400 or more
                status, headers, data = exc.status, exc.headers, exc.body
            except FastSSEError as exc:  # refused, timed out, cut, past MODELS_LIMIT, client closed
                status, data = _error_body(502, f"upstream {up.name} failed: {exc}", "chat", "upstream_error")
                kind = b"application/json"
                continue
            kind = headers.get("content-type", "application/json").encode("latin-1")
            if status < 500:
                break
        if status == 200:
            self._models = (now, status, data, kind)
        await send_whole(send, status, data, content_type=(b"content-type", kind))
