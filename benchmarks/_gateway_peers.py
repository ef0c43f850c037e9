"""The hand-written gateways the gateway benchmark sets beside ``python -m fastsse gateway``: byte
passthroughs with no parsing (the least a gateway can do), each one file's worth of what a team
writes first.

    python benchmarks/_gateway_peers.py httpx UPSTREAM PORT     # Starlette + one httpx.AsyncClient, uvicorn
    python benchmarks/_gateway_peers.py aiohttp UPSTREAM PORT   # aiohttp.web + one ClientSession

``UPSTREAM`` is the upstream's base URL (``.../v1``); both serve ``POST /v1/chat/completions``
and pass the upstream's status and bytes through unchanged.
"""

from __future__ import annotations

import sys
from typing import Any


def httpx_app(upstream: str) -> Any:
    import contextlib

    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    client: httpx.AsyncClient | None = None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        nonlocal client
        limits = httpx.Limits(max_connections=2048, max_keepalive_connections=2048)
        client = httpx.AsyncClient(base_url=upstream, timeout=600, limits=limits)
        yield
        await client.aclose()

    async def chat(request: Request) -> StreamingResponse:
        assert client is not None
        sent = client.build_request(
            "POST",
            "/chat/completions",
            content=await request.body(),
            headers={"content-type": "application/json"},
        )
        answer = await client.send(sent, stream=True)

        async def body() -> Any:
            try:
                async for piece in answer.aiter_raw():
                    yield piece
            finally:
                await answer.aclose()

        kind = answer.headers.get("content-type", "text/event-stream")
        return StreamingResponse(body(), status_code=answer.status_code, media_type=kind)

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])], lifespan=lifespan)


def aiohttp_main(upstream: str, port: int) -> None:
    import aiohttp
    from aiohttp import web

    async def start(app: web.Application) -> None:
        app["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def stop(app: web.Application) -> None:
        await app["session"].close()

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        session: aiohttp.ClientSession = request.app["session"]
        async with session.post(
            upstream + "/chat/completions", data=body, headers={"content-type": "application/json"}
        ) as answer:
            response = web.StreamResponse(
                status=answer.status, headers={"content-type": answer.headers.get("content-type", "")}
            )
            await response.prepare(request)
            async for piece in answer.content.iter_any():
                await response.write(piece)
            await response.write_eof()
            return response

    app = web.Application()
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, backlog=4096)


def main(argv: list[str]) -> None:
    kind, upstream, port = argv[0], argv[1].rstrip("/"), int(argv[2])
    if kind == "aiohttp":
        aiohttp_main(upstream, port)
        return
    import uvicorn

    uvicorn.run(
        httpx_app(upstream), host="127.0.0.1", port=port, log_level="warning", access_log=False, backlog=4096
    )


if __name__ == "__main__":
    main(sys.argv[1:])
