"""``GET /v1/models`` of an upstream, on the event loop: one HTTP/1.1 request on a connection of
its own, bounded in time and size."""

from __future__ import annotations

import asyncio
import ssl
from typing import Final
from urllib.parse import urlsplit

from ._config import Upstream

MODELS_LIMIT: Final = 4 << 20  # bytes of a model list read at most


async def get_models(up: Upstream, *, timeout: float) -> tuple[int, bytes, bytes]:
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
