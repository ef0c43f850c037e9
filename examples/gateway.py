"""fastsse.gateway inside your own service: the whole gateway mounted in a Starlette app, beside a
route of your own that streams one upstream answer through the same parts.

    pip install "fastsse-cython[gateway]"
    FASTSSE_UPSTREAM=http://127.0.0.1:8000/v1 FASTSSE_UPSTREAM_API=chat \\
        uvicorn --app-dir examples --factory gateway:create_app --port 8080

``/v1/chat/completions``, ``/v1/responses``, ``/v1/messages``, ``/v1/models``, ``/health`` and
``/metrics`` are ``fastsse.gateway.Gateway``'s (what ``python -m fastsse gateway`` serves, with
no key, one upstream). ``POST /summarize {"text": ...}`` is this file's: it asks the upstream for
a summary and relays the chat stream as it comes, with backpressure (a slow caller holds the
upstream), the upstream's HTTP error kept (status and Retry-After), and an unfinished answer cut
rather than ended. Without a config file, run ``python -m fastsse gateway --upstream URL``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.routing import Mount, Route

import fastsse
from fastsse.gateway import Downstream, Gateway, TooLarge, config_from, read_body


def create_app(
    upstream: str | None = None, *, api: str | None = None, api_key: str | None = None
) -> Starlette:
    """``create_app(upstream=None, *, api=None, api_key=None) -> Starlette``: ``upstream`` (else
    ``FASTSSE_UPSTREAM``) of ``api`` (else ``FASTSSE_UPSTREAM_API``, else chat), with ``api_key``
    (else ``FASTSSE_UPSTREAM_KEY``). It raises ConfigError for a missing or bad upstream."""
    entry: dict[str, Any] = {
        "name": "upstream",
        "base_url": upstream or os.environ.get("FASTSSE_UPSTREAM", ""),
        "api": api or os.environ.get("FASTSSE_UPSTREAM_API", "chat"),
    }
    key = api_key if api_key is not None else os.environ.get("FASTSSE_UPSTREAM_KEY")
    if key:
        entry["api_key"] = key
    gateway = Gateway(config_from({"upstream": [entry]}))

    async def summarize(scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body = orjson.loads(await read_body(scope, receive, 1 << 20))
        except (TooLarge, orjson.JSONDecodeError):
            return await _json(send, 400, {"error": {"message": 'send {"text": ...} (at most 1 MiB)'}})
        request = {
            "model": body.get("model", "plain"),
            "messages": [
                {"role": "system", "content": "Summarize."},
                {"role": "user", "content": str(body.get("text"))},
            ],
        }
        client = gateway.clients[0]
        down = Downstream(send, [(b"content-type", b"text/event-stream")])
        fmt = "relay" if entry["api"] == "chat" else "to-chat"
        try:
            result = await client.create_stream(request, down.piece, format=fmt)
        except fastsse.HTTPStatusError as exc:  # no stream: the status is still ours to choose
            headers = [(b"retry-after", b"%d" % exc.retry_after)] if exc.retry_after is not None else []
            return await _json(send, exc.status if exc.status >= 400 else 502, {"error": exc.error}, headers)
        except fastsse.TransportError as exc:
            if not down.started:
                return await _json(send, 502, {"error": {"message": str(exc)}})
            return await down.flush()  # cut: what came went out, the end does not
        if result["verdict"]["complete"]:
            await down.finish()
        else:
            await down.flush()  # unfinished: cut, so the caller's client raises

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.startup()
        try:
            yield
        finally:
            await gateway.shutdown()

    routes = [Route("/summarize", _Raw(summarize), methods=["POST"]), Mount("/", app=gateway)]
    return Starlette(routes=routes, lifespan=lifespan)


class _Raw:
    """A raw ASGI endpoint for a Starlette Route (a plain function would get a Request)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


async def _json(send: Any, status: int, payload: Any, headers: list[Any] | None = None) -> None:
    data = orjson.dumps(payload)
    head = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data)), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data})
