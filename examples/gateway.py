"""A gateway in one file: chat completions, Responses and Messages served over one upstream that
speaks any of the three, streamed or not, with the answer folded for the log in the same pass.

    pip install "fastsse-cython[gateway]"
    FASTSSE_UPSTREAM=http://127.0.0.1:8000/v1 FASTSSE_UPSTREAM_API=chat \\
        uvicorn --app-dir examples --factory gateway:create_app --port 8080

``POST /v1/chat/completions``, ``/v1/responses`` and ``/v1/messages`` take a request in their API;
``fastsse.translate.request`` turns it into the upstream's (``FASTSSE_UPSTREAM_API``: ``chat``,
``responses`` or ``messages``; what the upstream cannot express is left out and logged). The
transfer runs on ``fastsse.AsyncClient`` (libcurl's multi handle on the event loop): a stream goes
downstream through the compiled translators (``format="to-messages"``...) or, between two chat
ends, the compiled ``Relay``, read by read; a request with ``"stream": false`` is streamed from the
upstream all the same and folded, and the whole answer is translated by
``fastsse.translate.response``. ``GET /v1/models`` is the upstream's, passed through.

Failures stay failures. An upstream HTTP error comes back with its status in the caller's API's
error shape (``fastsse.translate.error``). A stream the upstream cut, or whose answer the fold
finds unfinished (a choice without a finish reason, even after ``[DONE]``), is cut downstream:
the response ends without the chunked terminator, so the caller's HTTP client raises instead of
taking a partial answer for a finished one, and the gateway logs one line for it (request id,
model, bytes relayed, cause). An error inside the stream reaches the caller in its API's shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

import fastsse
from fastsse import translate

log = logging.getLogger("fastsse.gateway")

ROUTES: Final = {"/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/messages": "messages"}
LIMIT_FIELD: Final = {
    "chat": "max_completion_tokens",
    "responses": "max_output_tokens",
    "messages": "max_tokens",
}
LOG_LIMIT: Final = 1000  # records app.state.log keeps, newest last
# Pieces waiting for a slow caller: at QUEUE_HIGH the upstream transfer is paused (TCP backpressure
# reaches the upstream server), at QUEUE_LOW it resumes. A piece is one upstream read at most.
QUEUE_HIGH: Final = 64
QUEUE_LOW: Final = 32
ANTHROPIC_VERSION: Final = "2023-06-01"


class UpstreamCut(Exception):
    """The upstream answer was not whole: the downstream response is aborted, not ended."""


def create_app(
    upstream: str | None = None,
    *,
    api: str | None = None,
    api_key: str | None = None,
    max_connections: int = 256,
    max_event_bytes: int = 16 << 20,
    max_tokens: int = 4096,
) -> Starlette:
    """``create_app(upstream=None, *, api=None, api_key=None, max_connections=256,
    max_event_bytes=16 MiB, max_tokens=4096) -> Starlette``

    ``upstream`` is the upstream's base URL (``FASTSSE_UPSTREAM`` if None), ``api`` its API
    (``FASTSSE_UPSTREAM_API``, else ``"chat"``), ``api_key`` the key sent upstream
    (``FASTSSE_UPSTREAM_KEY``). ``max_tokens`` is the limit sent to a Messages upstream, which
    requires one, for a request that has none. ``app.state.log`` keeps the last ``LOG_LIMIT``
    records, one per answer (model, content, tool calls, finish, usage, verdict, what the
    translation left out, failure). It raises ValueError if no upstream is given or ``api`` is
    not one of the three.
    """
    base_url = upstream or os.environ.get("FASTSSE_UPSTREAM")
    if not base_url:
        raise ValueError("no upstream: pass upstream= or set FASTSSE_UPSTREAM")
    upstream_api = api or os.environ.get("FASTSSE_UPSTREAM_API") or "chat"
    if upstream_api not in translate.APIS:
        raise ValueError(f"the upstream API must be one of {translate.APIS}, not {upstream_api!r}")
    key = api_key if api_key is not None else os.environ.get("FASTSSE_UPSTREAM_KEY")
    _make_visible(log)
    ids = itertools.count(1)
    client: fastsse.AsyncClient | None = None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        nonlocal client
        client = fastsse.AsyncClient(
            base_url=base_url,
            api_key=key,
            api=upstream_api,
            max_connections=max_connections,
            max_event_bytes=max_event_bytes,
        )
        try:
            yield
        finally:
            await client.aclose()

    async def answer(request: Request) -> Response:
        caller = ROUTES[request.url.path.rstrip("/")]
        rid = request.headers.get("x-request-id", "")[:64] or f"gw-{next(ids)}"
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            return _error(400, "the request body is not a JSON object", caller)
        try:
            sent, dropped = _upstream_request(body, caller, upstream_api, max_tokens)
        except translate.Untranslatable as exc:
            return _error(400, str(exc), caller, param=exc.field)
        if dropped:
            log.info(
                "%s %s->%s left out what the upstream cannot take: %s", rid, caller, upstream_api, dropped
            )
        note = {
            "rid": rid,
            "api": f"{caller}->{upstream_api}",
            "model": body.get("model"),
            "dropped": dropped,
        }
        assert client is not None
        if body.get("stream") is True:
            return await _stream(request.app, client, sent, caller, upstream_api, note)
        return await _whole(request.app, client, sent, caller, upstream_api, note)

    async def models(request: Request) -> Response:
        headers = {"Accept": "application/json"}
        if key and upstream_api == "messages":
            headers |= {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
        elif key:
            headers["Authorization"] = f"Bearer {key}"
        url = base_url.rstrip("/") + "/models"
        status, payload, kind = await asyncio.to_thread(_get, url, headers)
        return Response(payload, status_code=status, media_type=kind)

    app = Starlette(
        routes=[Route(path, answer, methods=["POST"]) for path in ROUTES]
        + [Route("/v1/models", models, methods=["GET"])],
        lifespan=lifespan,
    )
    app.state.log = []
    return app


def _upstream_request(
    body: dict[str, Any], caller: str, upstream_api: str, max_tokens: int
) -> tuple[dict[str, Any], list[str]]:
    """The body to send upstream and what its translation left out."""
    if caller == upstream_api:
        sent, dropped = dict(body), []
    else:
        if upstream_api == "messages" and not any(body.get(k) for k in ("max_tokens", LIMIT_FIELD[caller])):
            body = {**body, LIMIT_FIELD[caller]: max_tokens}
        translated = translate.request(body, caller, upstream_api, lossy=True)
        sent, dropped = dict(translated), translated.dropped
    if upstream_api == "chat" and body.get("stream") is not True:
        # a whole answer is folded from a stream (the engine streams every request): ask for usage
        sent["stream_options"] = {"include_usage": True}
    return sent, dropped


async def _stream(
    app: Starlette,
    client: fastsse.AsyncClient,
    sent: dict[str, Any],
    caller: str,
    upstream_api: str,
    note: dict[str, Any],
) -> Response:
    pieces: asyncio.Queue[bytes | None] = asyncio.Queue()
    room: list[asyncio.Future[None]] = []  # each done once the caller has taken the queue down

    def put(piece: bytes) -> asyncio.Future[None] | None:
        pieces.put_nowait(piece)
        if pieces.qsize() < QUEUE_HIGH:
            return None
        # a slow caller: a pending future tells the engine to pause the upstream until it is done
        room.append(asyncio.get_running_loop().create_future())
        return room[-1]

    send: Callable[[Any], Any] = put
    if caller != upstream_api:
        fmt = f"to-{caller}"  # the compiled translator: the caller's API, read by read
    elif caller == "chat":
        fmt = "relay"  # the compiled Relay: chat out, repaired where the upstream departs
    else:
        fmt = upstream_api  # the same API: each event the fold read, written out again

        def send(event: Any) -> Any:
            return put(b"event: %s\ndata: %s\n\n" % (str(event.get("type")).encode(), orjson.dumps(event)))

    transfer = asyncio.create_task(client.create_stream(sent, send, format=fmt))
    relayed = 0

    def settled(task: asyncio.Task[dict[str, Any]]) -> None:
        pieces.put_nowait(None)
        if task.cancelled():
            _record(app, note, {}, failure="cancelled: the caller went away mid-answer")
        elif (exc := task.exception()) is not None:
            _record(app, note, getattr(exc, "result", None) or {}, failure=str(exc), relayed=relayed)
        else:
            result = task.result()
            verdict = result["verdict"]
            if isinstance(
                result.get("status"), int
            ):  # no stream (an HTTP error...); Responses has its own str status
                failure: str | None = verdict["why"]
            elif verdict["complete"] or verdict["error"]:
                failure = None
            else:
                failure = _why(verdict)
            _record(app, note, result, failure=failure, relayed=relayed)

    transfer.add_done_callback(settled)
    first = await pieces.get()
    if first is None:  # nothing to relay: an HTTP error, or no stream at all
        failed = _failed(transfer, caller)
        log.warning(
            "%s model=%s upstream answered no stream: HTTP %d", note["rid"], note["model"], failed.status_code
        )
        return failed

    async def relay() -> AsyncIterator[bytes]:
        nonlocal relayed
        ended = False  # the terminal event went out: a caller leaving now stops nothing
        try:
            piece: bytes | None = first
            while piece is not None:
                ended = _terminal(piece)
                relayed += len(piece)
                yield piece
                piece = await pieces.get()
                while room and pieces.qsize() < QUEUE_LOW:
                    room.pop().set_result(None)
            exc = transfer.exception()
            result = transfer.result() if exc is None else {}
            verdict = result.get("verdict") or {}  # a transport failure's partial result may have none
            # the fold decides how the caller's response ends, not the last bytes: an unfinished
            # choice after [DONE] is a cut answer too; an error already went down in the stream
            if exc is not None or not (verdict.get("complete") or verdict.get("error")):
                cause = str(exc) if exc is not None else _why(verdict)
                log.warning(
                    "%s model=%s cut after %d bytes relayed: %s", note["rid"], note["model"], relayed, cause
                )
                raise UpstreamCut(cause)
        finally:
            if not transfer.done() and not ended:  # the caller went away: stop the upstream too
                transfer.cancel()

    headers = {"Cache-Control": "no-cache", "x-request-id": note["rid"]}
    return StreamingResponse(relay(), media_type="text/event-stream", headers=headers)


async def _whole(
    app: Starlette,
    client: fastsse.AsyncClient,
    sent: dict[str, Any],
    caller: str,
    upstream_api: str,
    note: dict[str, Any],
) -> Response:
    try:
        result = await client.create_stream(sent)  # the upstream API's fold: its whole answer
    except fastsse.TransportError as exc:
        log.warning("%s model=%s cut: %s", note["rid"], note["model"], exc)
        _record(app, note, exc.result, failure=str(exc))
        return _error(502, f"upstream failed: {exc}", caller, kind="upstream_error")
    if isinstance(result.get("status"), int):  # no stream (an HTTP error...): the verdict says why
        _record(app, note, result, failure=result["verdict"]["why"])
        failed = _failed_result(result, caller)
        log.warning("%s model=%s upstream answered HTTP %d", note["rid"], note["model"], failed.status_code)
        return failed
    # the upstream's answer, streamed or whole (a JSON answer is folded as its stream)
    verdict = result.pop("verdict")
    result.pop("timing", None)
    error = result.get("error")  # a Responses answer has the field, null when it went well
    if upstream_api != "responses":
        result.pop("error", None)
    if error is not None or not verdict.get("complete"):
        failure = "the upstream answered an error" if error is not None else _why(verdict)
        _record(app, note, result, failure=failure)
        log.warning("%s model=%s %s", note["rid"], note["model"], failure)
        status, payload = translate.error(502, {"error": error if error is not None else failure}, caller)
        return Response(orjson.dumps(payload), status_code=status, media_type="application/json")
    _record(app, note, {**result, "verdict": verdict})
    if caller != upstream_api:
        translated = translate.response(result, upstream_api, caller, lossy=True)
        if translated.dropped:
            log.info("%s the answer in %s left out: %s", note["rid"], caller, translated.dropped)
        result = translated
    return Response(
        orjson.dumps(result), media_type="application/json", headers={"x-request-id": note["rid"]}
    )


def _failed(transfer: asyncio.Task[dict[str, Any]], caller: str) -> Response:
    """The response when the upstream sent no stream: its HTTP error in the caller's shape."""
    if transfer.exception() is not None:
        return _error(502, f"upstream failed: {transfer.exception()}", caller, kind="upstream_error")
    return _failed_result(transfer.result(), caller)


def _failed_result(result: dict[str, Any], caller: str) -> Response:
    """An upstream's answer that was no stream (the result's ``error`` and ``status``) in the
    caller's shape; the upstream's ``Retry-After`` goes back with it."""
    status = result.get("status")
    status = status if isinstance(status, int) and 400 <= status <= 599 else 502
    status, payload = translate.error(status, {"error": result["error"]}, caller)
    headers = {}
    if isinstance(result.get("retry_after"), float):
        headers["Retry-After"] = str(max(0, round(result["retry_after"])))
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json", headers=headers)


def _terminal(piece: bytes) -> bool:
    """The piece ends with the API's last event: ``[DONE]``, ``message_stop``, a finished response."""
    tail = piece[-200:]
    return tail.endswith(b"data: [DONE]\n\n") or (
        tail.endswith(b"}\n\n")
        and (
            b'"type":"message_stop"' in tail
            or b"response.completed" in tail
            or b"response.incomplete" in tail
        )
    )


def _why(verdict: dict[str, Any]) -> str:
    return str(verdict.get("why") or verdict.get("departures") or "the upstream answer ended unfinished")


def _error(status: int, message: str, caller: str, *, kind: str | None = None, param: Any = None) -> Response:
    """An error of the gateway's own, in the caller's API's shape."""
    upstream = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    status, payload = translate.error(status, upstream, caller)
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json")


def _get(url: str, headers: dict[str, str]) -> tuple[int, bytes, str]:
    """GET ``url`` (blocking: run in a thread): (status, body, content type)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
            return r.status, r.read(1 << 22), r.headers.get("Content-Type", "application/json")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(1 << 22), exc.headers.get("Content-Type", "application/json")
    except (urllib.error.URLError, OSError) as exc:
        return (
            502,
            orjson.dumps({"error": {"message": f"upstream failed: {exc}", "type": "upstream_error"}}),
            ("application/json"),
        )


def _record(
    app: Starlette,
    note: dict[str, Any],
    result: dict[str, Any],
    *,
    failure: str | None = None,
    relayed: int = 0,
) -> None:
    """One record per answer in ``app.state.log`` (bounded), and one log line."""
    verdict = result.get("verdict") or {}
    choices = result.get("choices")
    if choices is not None:  # a chat answer
        messages = [c.get("message") or {} for c in choices]
        content: Any = [m.get("content") for m in messages]
        calls = sum(len(m.get("tool_calls") or []) for m in messages)
    elif "content" in result:  # a Messages answer
        content = "".join(b.get("text", "") for b in result.get("content") or [] if b.get("type") == "text")
        calls = sum(1 for b in result.get("content") or [] if b.get("type") == "tool_use")
    else:  # a Responses answer
        items = result.get("output") or []
        content = "".join(
            p.get("text", "") for i in items if i.get("type") == "message" for p in i.get("content") or []
        )
        calls = sum(1 for i in items if i.get("type") == "function_call")
    entry = {
        **note,
        "content": content,
        "tool_calls": calls,
        "finish": verdict.get("finish_reasons") or verdict.get("status"),
        "usage": result.get("usage"),
        "verdict": verdict,
        "relayed": relayed,
        "failure": failure,
    }
    records = app.state.log
    records.append(entry)
    if len(records) > LOG_LIMIT:  # bounded: a long-running gateway keeps the newest
        del records[0]
    if failure is None:
        log.info(
            "%s %s model=%s complete=%s finish=%s usage=%s",
            note["rid"],
            note["api"],
            entry["model"],
            verdict.get("complete"),
            entry["finish"],
            entry["usage"],
        )


class _QuietCuts(logging.Filter):
    """Drops the server's traceback for an aborted response: the gateway logged that cut already."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        inner = getattr(exc, "exceptions", None) or [exc]  # an exception group around it
        # by name: the filter outlives a reload of this module, whose UpstreamCut is a new class
        return not any(type(e).__name__ == "UpstreamCut" for e in inner)


def _make_visible(logger: logging.Logger) -> None:
    """INFO lines of ``logger`` on stderr under a bare ``uvicorn`` command (whose logging config
    knows only its own loggers), unless the application configured logging; and no traceback
    from uvicorn for a cut this gateway reported in one line."""
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    server_log = logging.getLogger("uvicorn.error")
    if not any(type(f).__name__ == "_QuietCuts" for f in server_log.filters):
        server_log.addFilter(_QuietCuts())
