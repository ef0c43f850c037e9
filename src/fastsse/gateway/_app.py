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
import hashlib
import hmac
import itertools
import logging
import os
import re
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import orjson

from .. import translate
from .._errors import HTTPStatusError, TransportError
from ..client import should_retry
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
    watch_disconnect,
)
from ._config import GatewayConfig, Upstream
from ._metrics import Metrics

ROUTES: Final = {"/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/messages": "messages"}
LIMIT_FIELD: Final = {
    "chat": "max_completion_tokens",
    "responses": "max_output_tokens",
    "messages": "max_tokens",
}

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
MODELS_LIMIT: Final = 4 << 20
# seconds a streamed answer whose caller left may still take to end (its upstream's end can come
# just after the last event, which an SDK leaves at); its next piece stops it sooner
LEAVE_GRACE_S: Final = 0.25

# The logger and tracer are named after the package ("fastsse.gateway"), not this module.
NAME: Final = __name__.rpartition(".")[0]
log = logging.getLogger(NAME)


class _Answer:
    """One request's state between its handler and the disconnect watcher."""

    __slots__ = ("down", "finished", "gone", "timer")

    def __init__(self) -> None:
        self.finished = False  # nothing the caller could still miss: a disconnect changes nothing
        self.gone = False  # the caller disconnected before that
        self.down: Downstream | None = None
        self.timer: asyncio.TimerHandle | None = None


class BadHeader(Exception):
    """A caller's header that cannot be forwarded (CR, LF or NUL in its value)."""


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


def stream_format(caller: str, upstream_api: str) -> str:
    """The byte format that turns an ``upstream_api`` stream into the ``caller``'s: the chat relay,
    the same API's passthrough, or a translator."""
    if caller != upstream_api:
        return f"to-{caller}"
    return "relay" if caller == "chat" else "passthrough"


def _usage(result: Mapping[str, Any]) -> tuple[int | None, int | None]:
    usage = result.get("usage")
    if not isinstance(usage, dict):
        return None, None
    tokens_in = usage.get("prompt_tokens", usage.get("input_tokens"))
    tokens_out = usage.get("completion_tokens", usage.get("output_tokens"))
    return (
        tokens_in if isinstance(tokens_in, int) else None,
        tokens_out if isinstance(tokens_out, int) else None,
    )


def _why(verdict: Mapping[str, Any]) -> str:
    return str(verdict.get("why") or verdict.get("departures") or "the upstream answer ended unfinished")


def _words(exc: BaseException) -> str:
    """A transport error's words without the upstream's URL (the caller need not learn it)."""
    text = str(exc)
    return text.split(": ", 1)[1] if text.startswith("http") and ": " in text else text


class Gateway:
    """``Gateway(config, *, on_answer=None)``: the ASGI app (``await gateway(scope, receive, send)``).

    ``config`` is a ``GatewayConfig`` (``load_config``); ``on_answer(record)`` is called with the
    record of every answer (the dict the log line carries). The upstream clients are made at the
    ASGI lifespan's startup (or at the first request under a server without lifespan) and closed at
    its shutdown; ``drain()`` makes new requests answer 503 while the ones in flight finish (the
    command calls it on SIGTERM). ``metrics`` holds the figures of ``/metrics``.
    """

    def __init__(
        self, config: GatewayConfig, *, on_answer: Callable[[dict[str, Any]], Any] | None = None
    ) -> None:
        self.config = config
        self.server = config.server
        self.upstreams = config.upstreams
        self.metrics = Metrics()
        self.on_answer = on_answer
        self.draining = False
        self.clients: list[Any] = []
        self._keys = [hashlib.sha256(k.encode()).digest() for k in self.server.keys]
        self._ids = itertools.count(1)
        self._id_prefix = f"gw-{os.getpid():x}-{int(time.time()) & 0xFFFFFF:x}-"
        forward = (
            frozenset((*ANTHROPIC_HEADERS, *OPENAI_HEADERS, *self.server.forward_headers)) - NEVER_FORWARDED
        )
        self._forward = frozenset(name.encode("latin-1") for name in forward)  # ASGI names: lower-case bytes
        self._models: tuple[float, int, bytes, bytes] | None = None
        self._batch = Batch()  # every answer's pieces of one loop turn, flushed in one callback
        self._tracer = _tracer() if self.server.otel else None

    # lifecycle

    async def startup(self) -> None:
        """Make one ``AsyncClient`` per upstream (on the running loop)."""
        if self.clients:
            return
        from ..client.aio import AsyncClient

        for up in self.upstreams:
            self.clients.append(
                AsyncClient(
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
                    max_event_bytes=self.server.max_event_bytes,
                    max_connections=up.max_connections,
                    raise_for_status=True,
                    timing=False,
                )
            )

    async def shutdown(self) -> None:
        """Close the upstream clients (a transfer still running is cancelled)."""
        clients, self.clients = self.clients, []
        for client in clients:
            await client.close()

    def drain(self) -> None:
        """Answer new requests 503 (``Retry-After: 1``, ``Connection: close``) from now on."""
        self.draining = True

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
                status, body = _error_body(405, f"{path} takes POST", caller)
                await send_whole(send, status, body, [(b"allow", b"POST")])
                return
            await self._answer(scope, receive, send, caller)
            return
        headers = dict(scope["headers"])
        shape = "messages" if b"anthropic-version" in headers or b"x-api-key" in headers else "chat"
        if path == "/health":
            status = 503 if self.draining else 200
            await send_json(
                send, status, {"status": "draining" if self.draining else "ok", "pid": os.getpid()}
            )
        elif path == "/metrics":
            await send_whole(
                send, 200, self.metrics.render(), content_type=(b"content-type", b"text/plain; version=0.0.4")
            )
        elif path.rstrip("/") == "/v1/models":
            if self._keys and not self._authorized(headers):
                status, body = _error_body(401, "a valid API key is required", shape, "authentication_error")
                await send_whole(send, status, body)
                return
            await self._list_models(send)
        else:
            status, body = _error_body(404, f"no route {path}", shape, "not_found_error")
            await send_whole(send, status, body)

    def _authorized(self, headers: Mapping[bytes, bytes]) -> bool:
        """Whether the caller's key (``Authorization: Bearer``, else ``x-api-key``) is one of the
        configured keys: digests compared in constant time, every key every time."""
        presented = headers.get(b"authorization", b"")
        if presented[:7].lower() == b"bearer ":
            presented = presented[7:].strip()
        else:
            presented = headers.get(b"x-api-key", b"").strip()
        if not presented:
            return False
        digest = hashlib.sha256(presented).digest()
        found = False
        for key in self._keys:
            found |= hmac.compare_digest(digest, key)
        return found

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

        async def refuse(
            status: int, message: str, kind: str | None = None, extra: list[Any] | None = None
        ) -> None:
            status, body = _error_body(status, message, caller, kind)
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
        if self._keys and not self._authorized(headers):
            await refuse(
                401,
                "a valid API key is required (Authorization: Bearer, or x-api-key)",
                "authentication_error",
            )
            return self._done(record, arrived)
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
        record["model"] = model if isinstance(model, str) else None

        task = asyncio.current_task()
        state = _Answer()

        def gone() -> None:
            if state.finished:
                return
            state.gone = True
            if task is None:
                return
            if state.down is not None and state.down.started:
                # the stream went out: its next piece stops the transfer. An SDK leaves as soon as
                # it read the last event, which can be before the upstream's own end arrived: that
                # answer is whole, so a stalled upstream alone is cancelled, after a grace
                state.down.leave()
                state.timer = asyncio.get_running_loop().call_later(LEAVE_GRACE_S, task.cancel)
            else:
                task.cancel()

        watch_disconnect(receive, gone)
        if not self.clients:
            await self.startup()
        self.metrics.in_flight += 1
        try:
            if body.get("stream") is True:
                await self._stream(send, headers, body, caller, record, own, arrived, state)
            else:
                await self._whole(send, headers, body, caller, record, own, state)
        except asyncio.CancelledError:
            if not state.gone:
                record.update(status=record.get("status") or 499, outcome="cut", why="the gateway stopped")
                raise
            record.update(status=499, outcome="caller_left", why="the caller went away")
        except BadHeader as exc:
            await refuse(
                400, f"header {exc}: CR, LF or NUL in its value (header injection)", "invalid_request_error"
            )
        finally:
            state.finished = True
            if state.timer is not None:
                state.timer.cancel()
            self.metrics.in_flight -= 1
            self._done(record, arrived)

    async def _attempts(
        self,
        headers: Mapping[bytes, bytes],
        body: dict[str, Any],
        caller: str,
        record: dict[str, Any],
        down: Downstream | None,
    ) -> tuple[Upstream | None, dict[str, Any] | None, BaseException | None]:
        """Try the upstreams in order: (the upstream, its result, None), or (the last one tried,
        None, its failure). The next upstream is tried only while nothing reached the caller and
        the failure is one the resilience rules retry (refused, timed out, 429, 5xx...)."""
        failure: BaseException | None = None
        last: Upstream | None = None
        translations: dict[str, tuple[dict[str, Any], list[str]]] = {}
        for up, client in zip(self.upstreams, self.clients, strict=False):
            if up.api not in translations:
                try:
                    translations[up.api] = _upstream_request(body, caller, up.api, self.server.max_tokens)
                except translate.Untranslatable as exc:
                    failure = failure or exc
                    continue
            sent, dropped = translations[up.api]
            record["upstream"], record["api"], record["dropped"] = up.name, f"{caller}->{up.api}", dropped
            last = up
            options: dict[str, Any] = {}
            extra = self._forwarded(headers, up.api)
            if extra:
                options["headers"] = {**up.headers, **extra}
            try:
                if down is None:
                    return up, await client.create_stream(sent, **options), None
                fmt = stream_format(caller, up.api)
                return up, await client.create_stream(sent, down.piece, format=fmt, **options), None
            except (HTTPStatusError, TransportError) as exc:
                failure = exc
            if down is not None and down.first_ns:
                return up, None, failure  # part of the answer went out: never again elsewhere
            reason = (
                f"http_{failure.status}" if isinstance(failure, HTTPStatusError) else f"curl_{failure.code}"
            )
            self.metrics.fallbacks.add((("upstream", up.name), ("reason", reason)))
            if not should_retry(failure):
                return up, None, failure
        return last, None, failure

    async def _fail(
        self,
        send: Send,
        caller: str,
        up: Upstream | None,
        failure: BaseException | None,
        record: dict[str, Any],
        own: list[Any],
    ) -> None:
        """The caller's answer when no upstream answered: the upstream's HTTP error (its status
        and Retry-After kept) or 502 / 504, in the caller's API's shape."""
        extra = list(own)
        name = up.name if up is not None else "-"
        if isinstance(failure, HTTPStatusError):
            if 400 <= failure.status <= 599:
                status, payload = translate.error(failure.status, {"error": failure.error}, caller)
                data = orjson.dumps(payload)
            else:  # an HTML page with 200, a redirect: not an answer
                status, data = _error_body(
                    502,
                    f"upstream {name} answered no stream ({failure.result['verdict']['why']})",
                    caller,
                    "upstream_error",
                )
            if failure.retry_after is not None:
                extra.append((b"retry-after", b"%d" % max(0, round(failure.retry_after))))
            why = str(failure.result["verdict"]["why"])
        elif isinstance(failure, TransportError):
            status = 504 if failure.code == 28 else 502
            why = _words(failure)
            status, data = _error_body(status, f"upstream {name} failed: {why}", caller, "upstream_error")
        elif isinstance(failure, translate.Untranslatable):
            why = str(failure)
            status, data = _error_body(400, why, caller, "invalid_request_error")
        else:
            why = "no upstream"
            status, data = _error_body(502, why, caller, "upstream_error")
        record.update(status=status, outcome="error", why=why)
        await send_whole(send, status, data, extra)

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
    ) -> None:
        down = state.down = Downstream(send, [*SSE_HEADERS, *own], batch=self._batch)
        try:
            up, result, failure = await self._attempts(headers, body, caller, record, down)
        finally:
            record["bytes"] = down.relayed
            if down.first_ns:
                record["ttft_ms"] = round((down.first_ns - arrived) / 1e6, 3)
                labels = (("route", caller), ("upstream", record["upstream"] or "-"))
                self.metrics.ttft.observe(labels, (down.first_ns - arrived) / 1e9)
                self.metrics.gaps.merge(labels, down.gaps, (down.last_ns - down.first_ns) / 1e9)
        verdict = result["verdict"] if result is not None else {}
        whole = failure is None and bool(verdict.get("complete") or verdict.get("error"))
        if result is not None:
            record["tokens_in"], record["tokens_out"] = _usage(result)
        if whole and down.first_ns:
            # the answer is all here: a caller that leaves once it read the last event (an SDK
            # closes at [DONE]) left nothing unsent, so the watcher must not cancel this one
            state.finished = True
        if down.first_ns:
            await down.flush()  # what arrived goes out (with the status) before the end is decided
        if not down.started:
            if result is not None:  # the upstream's answer held nothing to send
                failure = TransportError(_why(result["verdict"]), result=result, code=0)
            await self._fail(send, caller, up, failure, record, own)
            return
        record["status"] = 200
        if down.gone and (down.dropped or not whole):
            record.update(status=499, outcome="caller_left", why="the caller went away")
            return
        if whole:  # every byte went to the server, though the caller may have left since
            if not down.gone:
                await down.finish()
            record["outcome"] = "error" if verdict.get("error") else "complete"
            if verdict.get("error"):
                record["why"] = _why(verdict)
            return
        # unfinished: what came went out, the end does not (the caller's client raises)
        await down.flush()
        cause = _words(failure) if failure is not None else _why(verdict)
        record.update(outcome="cut", why=cause)
        self.metrics.cuts.add(
            (("route", caller), ("upstream", record["upstream"] or "-"), ("cause", "upstream"))
        )

    async def _whole(
        self,
        send: Send,
        headers: Mapping[bytes, bytes],
        body: dict[str, Any],
        caller: str,
        record: dict[str, Any],
        own: list[Any],
        state: _Answer,
    ) -> None:
        up, result, failure = await self._attempts(headers, body, caller, record, None)
        if result is None or up is None:
            await self._fail(send, caller, up, failure, record, own)
            return
        record["tokens_in"], record["tokens_out"] = _usage(result)
        verdict = result.pop("verdict")
        result.pop("timing", None)
        result.pop("upstream", None)
        error = result.get("error")  # a Responses answer has the field, null when it went well
        if up.api != "responses":
            result.pop("error", None)
        if error is not None or not verdict.get("complete"):
            why = "the upstream answered an error" if error is not None else _why(verdict)
            status, payload = translate.error(502, {"error": error if error is not None else why}, caller)
            record.update(status=status, outcome="error", why=why)
            await send_whole(send, status, orjson.dumps(payload), own)
            return
        if caller != up.api:
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
        metrics.requests.add((*labels, ("status", str(status))))
        metrics.duration.observe(labels, elapsed)
        if record.get("outcome") == "caller_left" and record.get("bytes"):
            metrics.cuts.add((*labels, ("cause", "caller")))
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
            _span(self._tracer, record, arrived)
        if self.on_answer is not None:
            self.on_answer(record)

    # /v1/models

    async def _list_models(self, send: Send) -> None:
        """The first upstream's model list (kept for ``MODELS_TTL`` seconds), fetched without
        blocking the loop; the next upstream's if one fails."""
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
        for up in self.upstreams:
            try:
                status, kind, data = await _get(up, timeout=up.connect_timeout + up.first_byte_timeout)
            except (OSError, asyncio.TimeoutError, ValueError) as exc:
                _, data = _error_body(
                    502, f"upstream {up.name} failed: {exc or type(exc).__name__}", "chat", "upstream_error"
                )
                continue
            if status < 500:
                break
        if status == 200:
            self._models = (now, status, data, kind)
        await send_whole(send, status, data, content_type=(b"content-type", kind))


def _tracer() -> Any:
    """The OpenTelemetry tracer of the gateway. It raises ConfigError when opentelemetry-api is
    not installed (``server.otel = true`` asked for it)."""
    try:
        from opentelemetry import trace
    except ImportError:
        from ._config import ConfigError

        raise ConfigError("server.otel needs opentelemetry-api: pip install opentelemetry-api") from None
    return trace.get_tracer(NAME)


def _span(tracer: Any, record: dict[str, Any], arrived: int) -> None:
    """One SERVER span per answer, after the OpenTelemetry GenAI conventions, from its arrival to
    now (``time.monotonic_ns`` moved onto the wall clock OpenTelemetry stamps with)."""
    from opentelemetry.trace import SpanKind, Status, StatusCode

    start = time.time_ns() - (time.monotonic_ns() - arrived)
    operation = {"chat": "chat", "responses": "responses", "messages": "chat"}[record["route"]]
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.request.model": record.get("model") or "",
        "http.response.status_code": record.get("status") or 0,
        "fastsse.gateway.route": record["route"],
        "fastsse.gateway.upstream": record.get("upstream") or "-",
        "fastsse.gateway.outcome": record.get("outcome") or "",
        "fastsse.gateway.request_id": record["rid"],
    }
    if isinstance(record.get("tokens_in"), int):
        attributes["gen_ai.usage.input_tokens"] = record["tokens_in"]
    if isinstance(record.get("tokens_out"), int):
        attributes["gen_ai.usage.output_tokens"] = record["tokens_out"]
    span = tracer.start_span(
        f"{operation} {record.get('model') or ''}".strip(),
        kind=SpanKind.SERVER,
        start_time=start,
        attributes=attributes,
    )
    if record.get("outcome") not in ("complete", None):
        span.set_attribute("error.type", str(record.get("outcome")))
        span.set_status(Status(StatusCode.ERROR, str(record.get("why") or "")))
    span.end()


async def _get(up: Upstream, *, timeout: float) -> tuple[int, bytes, bytes]:
    """``GET {base_url}/models`` on the loop (HTTP/1.1, one connection): (status, content type,
    body). It raises OSError, asyncio.TimeoutError, or ValueError for an answer it cannot read."""
    url = urlsplit(up.base_url.rstrip("/") + "/models")
    secure = url.scheme.lower() == "https"
    port = url.port or (443 if secure else 80)
    head = [
        f"GET {url.path or '/'}{'?' + url.query if url.query else ''} HTTP/1.1",
        f"Host: {url.netloc.rpartition('@')[2]}",
    ]
    head += ["Accept: application/json", "Connection: close", "User-Agent: fastsse-gateway"]
    if up.api_key and up.api == "messages":
        head += [f"x-api-key: {up.api_key}", "anthropic-version: 2023-06-01"]
    elif up.api_key:
        head.append(f"Authorization: Bearer {up.api_key}")
    head += [f"{k}: {v}" for k, v in up.headers.items()]

    async def fetch() -> tuple[int, bytes, bytes]:
        reader, writer = await asyncio.open_connection(
            url.hostname, port, ssl=ssl.create_default_context() if secure else None
        )
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            raw = await reader.read(MODELS_LIMIT)
            while len(raw) < MODELS_LIMIT:
                more = await reader.read(MODELS_LIMIT - len(raw))
                if not more:
                    break
                raw += more
        finally:
            writer.close()
        top, _, rest = raw.partition(b"\r\n\r\n")
        lines = top.split(b"\r\n")
        status = int(lines[0].split()[1])
        fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
        if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            rest = _unchunk(rest)
        return status, fields.get(b"content-type", b"application/json"), rest

    return await asyncio.wait_for(fetch(), timeout)


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return bytes(out)
