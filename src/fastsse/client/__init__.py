"""The HTTP side: request setup, the many-streams engine (``Client``, ``AsyncClient``),
``create_stream`` over pycurl, and the byte-iterator adapters.

Everything here is importable from ``fastsse`` itself; pycurl is imported only when a transfer runs,
and asyncio only when ``AsyncClient`` is first looked up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import ClientClosed
from ._options import DEFAULT, OPTIONS, CallOptions, ClientOptions, Option
from ._retry import should_retry
from .iterators import ChunkIterator, aiter_chunks, aiter_events, iter_chunks, iter_events
from .sync import ChunkStream, Client, create_stream

if TYPE_CHECKING:
    from .aio import AsyncChunkStream as AsyncChunkStream
    from .aio import AsyncClient as AsyncClient

__all__ = [
    "DEFAULT",
    "OPTIONS",
    "AsyncChunkStream",
    "AsyncClient",
    "CallOptions",
    "ChunkIterator",
    "ChunkStream",
    "Client",
    "ClientClosed",
    "ClientOptions",
    "Option",
    "aiter_chunks",
    "aiter_events",
    "create_stream",
    "iter_chunks",
    "iter_events",
    "should_retry",
]


def __getattr__(name: str) -> Any:
    if name in ("AsyncClient", "AsyncChunkStream"):
        from . import aio

        return getattr(aio, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
