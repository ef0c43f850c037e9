"""The per-chunk CPU of ``AsyncClient`` on the compiled driver for each stream format, in one
process against the scripted server (in a child, pinned apart): ``format=None`` for chat,
Responses and Messages, ``"relay"`` and ``"to-messages"`` with a cheap ``on_chunk``, and beside
each the writer's or fold's own cost per chunk (the same bytes fed to it directly), so the engine's
share is the difference. Run it on two trees (``PYTHONPATH``) for a before/after.

``python benchmarks/direct_feed.py [--streams 128] [--chunks 200] [--itl-ms 0] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import urllib.request
from typing import Any

import fastsse
from fastsse.testing import spawn_scripted_server

ROWS = (("chat", None), ("responses", None), ("messages", None), ("chat", "relay"), ("chat", "to-messages"))
INPUTS = {
    "chat": {"messages": [{"role": "user", "content": "hi"}]},
    "responses": {"input": "hi"},
    "messages": {"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
}
PATHS = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}


def _body(api: str, itl_ms: float, chunks: int) -> dict[str, Any]:
    return {"model": f"ttft_ms=20,itl_ms={itl_ms:g},chunks={chunks}", **INPUTS[api]}


def engine_cost(url: str, api: str, fmt: str | None, streams: int, chunks: int, itl_ms: float) -> float:
    """µs of this process's CPU per content chunk through AsyncClient (the compiled driver)."""
    got = [0]

    def on_chunk(piece: Any) -> None:
        got[0] += 1

    async def main() -> list[Any]:
        async with fastsse.AsyncClient(
            base_url=url, api_key="x", max_connections=streams, timeout=600, driver="compiled"
        ) as client:
            bodies = [_body(api, itl_ms, chunks) for _ in range(streams)]
            return await asyncio.gather(
                *(client.create_stream(b, on_chunk if fmt else None, api=api, format=fmt) for b in bodies)
            )

    asyncio.run(main())  # warm
    cpu0 = time.process_time()
    results = asyncio.run(main())
    cpu = time.process_time() - cpu0
    assert all(r["verdict"]["complete"] for r in results), results[0]["verdict"]
    return cpu / (streams * chunks) * 1e6


def own_cost(url: str, api: str, fmt: str | None, chunks: int, itl_ms: float, reps: int = 200) -> float:
    """µs per content chunk of the fold or writer alone, fed the answer's bytes one event a write."""
    from fastsse import BACKEND, get_backend
    from fastsse.translate import translator

    request = urllib.request.Request(
        url + PATHS[api],
        data=json.dumps({**_body(api, 0, chunks), "stream": True}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer x", "x-api-key": "x"},
    )
    with urllib.request.urlopen(request) as answer:
        raw = answer.read()
    events = [e + b"\n\n" for e in raw.split(b"\n\n") if e]

    def make() -> Any:
        if fmt == "relay":
            return get_backend(BACKEND).Relay()
        if fmt == "to-messages":
            return translator(api, "messages")
        return getattr(
            get_backend(BACKEND),
            {"chat": "ChatStream", "responses": "ResponsesStream"}.get(api, "MessagesStream"),
        )(None)

    cpu0 = time.process_time()
    for _ in range(reps):
        writer = make()
        for event in events:
            writer.write(event)
        writer.close()
    return (time.process_time() - cpu0) / (reps * chunks) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=128)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with spawn_scripted_server(cpu=0) as server:
        url = server.base_url
        for api, fmt in ROWS:
            runs = [
                engine_cost(url, api, fmt, args.streams, args.chunks, args.itl_ms)
                for _ in range(args.repeats)
            ]
            own = own_cost(url, api, fmt, args.chunks, args.itl_ms)
            best = min(runs)
            name = f"AsyncClient {fmt or api}"
            print(
                f"{name:26} {best:6.2f} µs/chunk (runs {', '.join(f'{r:.2f}' for r in runs)}), own {own:5.2f}, engine {best - own:5.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
