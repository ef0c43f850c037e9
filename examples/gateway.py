"""An OpenAI-compatible streaming gateway in one file: ``POST /v1/chat/completions`` is forwarded to
an upstream server and its event stream relayed to the caller, repaired on the way, with the
answer folded for the log (guardrails, billing) in the same pass.

    pip install "fastsse-cython[gateway]"
    FASTSSE_UPSTREAM=http://127.0.0.1:8000/v1 uvicorn --app-dir examples --factory gateway:create_app --port 8080

The upstream transfer runs on ``fastsse.AsyncClient`` (libcurl's multi handle on the event loop,
many streams per thread) with ``format="relay"``: each read goes straight into a compiled
``fastsse.Relay``, whose compliant bytes are handed to the downstream response. At the end the
gateway logs the folded answer, its verdict and the usage.

Failures stay failures. An upstream that answers with an HTTP error gets the same status and its
error object back. A stream the upstream cut (the connection dropped, a choice never finished,
an event over ``max_event_bytes``) is cut downstream too: the gateway ends the response without
the chunked terminator, so the caller's HTTP client raises instead of taking a partial answer
for a finished one. An error payload in the stream is forwarded in the OpenAI error shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

import fastsse

log = logging.getLogger("fastsse.gateway")


class UpstreamCut(Exception):
    """The upstream stream ended without a whole answer: abort the downstream response."""


def _error(status: int, message: str, kind: str = "invalid_request_error") -> Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def create_app(
    upstream: str | None = None,
    *,
    api_key: str | None = None,
    max_connections: int = 256,
    max_event_bytes: int = 16 << 20,
) -> Starlette:
    """``create_app(upstream=None, *, api_key=None, max_connections=256, max_event_bytes=16 MiB) -> Starlette``

    ``upstream`` is the upstream's base URL (``FASTSSE_UPSTREAM`` if None), ``api_key`` the key the
    gateway sends upstream (``FASTSSE_UPSTREAM_KEY`` if None). ``app.state.log`` collects one record
    per relayed stream (model, content, finish reasons, usage, verdict) besides the log line.
    It raises ValueError if no upstream is given.
    """
    base_url = upstream or os.environ.get("FASTSSE_UPSTREAM")
    if not base_url:
        raise ValueError("no upstream: pass upstream= or set FASTSSE_UPSTREAM")
    key = api_key if api_key is not None else os.environ.get("FASTSSE_UPSTREAM_KEY")
    client: fastsse.AsyncClient | None = None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        nonlocal client
        client = fastsse.AsyncClient(
            base_url=base_url, api_key=key, max_connections=max_connections, max_event_bytes=max_event_bytes
        )
        try:
            yield
        finally:
            await client.aclose()

    async def chat_completions(request: Request) -> Response:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _error(400, "the request body is not JSON")
        if not isinstance(body, dict) or not body.get("stream"):
            return _error(400, 'this gateway relays streams only: send "stream": true')
        assert client is not None
        pieces: asyncio.Queue[bytes | None] = asyncio.Queue()
        room: list[asyncio.Future[None]] = []  # done once the caller has taken the queue down

        def send(piece: Any) -> Any:  # format="relay": on_chunk receives the bytes to send on
            pieces.put_nowait(piece)
            if pieces.qsize() < 64:
                return None
            room.append(asyncio.get_running_loop().create_future())
            return room[-1]  # a slow caller: hold the upstream until it catches up

        transfer = asyncio.create_task(client.create_stream(body, send, format="relay"))

        def settled(task: asyncio.Task[dict[str, Any]]) -> None:
            # The log does not depend on the caller: it may hang up as soon as [DONE] arrived.
            pieces.put_nowait(None)
            if task.cancelled():
                _record(request.app, {}, failure="cancelled: the caller went away mid-answer")
            elif (exc := task.exception()) is not None:
                _record(request.app, getattr(exc, "result", None) or {}, failure=str(exc))
            else:
                _record(request.app, task.result())

        transfer.add_done_callback(settled)
        first = await pieces.get()
        if first is None:
            # Nothing to relay: an HTTP error (forwarded with its status), or no stream at all.
            if transfer.exception() is not None:
                return _error(502, f"upstream failed: {transfer.exception()}", "upstream_error")
            result = transfer.result()
            if "error" in result:
                status = result.get("status")
                code = status if isinstance(status, int) and status >= 400 else 502
                payload = {"error": fastsse_error_shape(result["error"])}
                return Response(orjson.dumps(payload), status_code=code, media_type="application/json")
            return _error(502, "the upstream sent no event stream", "upstream_error")

        async def relay() -> AsyncIterator[bytes]:
            finished = False  # [DONE] went out: the answer is whole whatever the caller does next
            try:
                piece: bytes | None = first
                while piece is not None:
                    finished = piece.endswith(b"data: [DONE]\n\n")
                    yield piece
                    piece = await pieces.get()
                    while room and pieces.qsize() < 32:
                        room.pop().set_result(None)
                exc = transfer.exception()
                if exc is not None:
                    raise UpstreamCut(str(exc)) from exc
                if not finished and not transfer.result().get("verdict", {}).get("error"):
                    raise UpstreamCut("the upstream stream ended without a whole answer")
            finally:
                if not transfer.done() and not finished:  # the caller went away: stop the upstream too
                    transfer.cancel()

        return StreamingResponse(
            relay(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    app = Starlette(
        routes=[Route("/v1/chat/completions", chat_completions, methods=["POST"])], lifespan=lifespan
    )
    app.state.log = []
    return app


def fastsse_error_shape(error: Any) -> dict[str, Any]:
    """The OpenAI error object for an upstream's error value (a str, an object, anything)."""
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return {"type": "upstream_error", "param": None, "code": None, **error}
    text = error if isinstance(error, str) else orjson.dumps(error).decode()
    return {"message": text, "type": "upstream_error", "param": None, "code": None}


def _record(app: Starlette, result: dict[str, Any], failure: str | None = None) -> dict[str, Any]:
    verdict = result.get("verdict") or {}
    choices = result.get("choices") or []
    entry = {
        "model": result.get("model"),
        "content": [((c.get("message") or {}).get("content")) for c in choices],
        "tool_calls": [len((c.get("message") or {}).get("tool_calls") or []) for c in choices],
        "finish_reasons": verdict.get("finish_reasons"),
        "usage": result.get("usage"),
        "verdict": verdict,
        "failure": failure,
    }
    app.state.log.append(entry)
    log.info(
        "relayed %s: complete=%s finish=%s usage=%s%s",
        entry["model"],
        verdict.get("complete"),
        entry["finish_reasons"],
        entry["usage"],
        f" failure={failure}" if failure else "",
    )
    return verdict
