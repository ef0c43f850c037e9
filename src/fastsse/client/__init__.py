"""The HTTP side: request setup, ``create_stream`` over pycurl, and the byte-iterator adapters.

Everything here is importable from ``fastsse`` itself; pycurl is imported only when a transfer runs.
"""

from __future__ import annotations

from .engine import AsyncChunkStream, AsyncClient, Client
from .stream import ChunkIterator, aiter_chunks, aiter_events, create_stream, iter_chunks, iter_events

__all__ = [
    "AsyncChunkStream",
    "AsyncClient",
    "ChunkIterator",
    "Client",
    "aiter_chunks",
    "aiter_events",
    "create_stream",
    "iter_chunks",
    "iter_events",
]
