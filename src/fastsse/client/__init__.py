"""The HTTP side: request setup, the many-streams engine (``Client``, ``AsyncClient``),
``create_stream`` over pycurl, plain requests on the same engine (``Client.get`` / ``post``, a
``Reply``), ``EventSource`` / ``AsyncEventSource`` for any SSE endpoint, and the byte-iterator
adapters.

Everything here is importable from ``fastsse`` itself; pycurl is imported only when a transfer runs,
and asyncio only when ``AsyncClient`` (or ``AsyncEventSource``) is first looked up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import ClientClosed
from ._options import (
    DEFAULT,
    OPTIONS,
    SOURCE_OPTIONS,
    CallOptions,
    ClientOptions,
    Option,
    SourceOptions,
    Timeouts,
)
from ._plain import Reply

# The one request setup, shared with the gateway's config check and the load plan; not public API.
from ._request import prepare as prepare
from ._request import redact as redact
from ._retry import should_retry

# The caller's side of a streamed answer, for the gateway's direct writes; not public API.
from ._streams import new_sink as new_sink
from .iterators import ChunkIterator, aiter_chunks, aiter_events, iter_chunks, iter_events
from .sync import ChunkStream, Client, EventSource, create_stream

if TYPE_CHECKING:
    from ._loop import LoopLeg as LoopLeg
    from .aio import AsyncChunkStream as AsyncChunkStream
    from .aio import AsyncClient as AsyncClient
    from .aio import AsyncEventSource as AsyncEventSource

_ASYNC = ("AsyncClient", "AsyncChunkStream", "AsyncEventSource")

__all__ = [
    "DEFAULT",
    "OPTIONS",
    "SOURCE_OPTIONS",
    "AsyncChunkStream",
    "AsyncClient",
    "AsyncEventSource",
    "CallOptions",
    "ChunkIterator",
    "ChunkStream",
    "Client",
    "ClientClosed",
    "ClientOptions",
    "EventSource",
    "Option",
    "Reply",
    "SourceOptions",
    "Timeouts",
    "aiter_chunks",
    "aiter_events",
    "create_stream",
    "iter_chunks",
    "iter_events",
    "should_retry",
]


def __getattr__(name: str) -> Any:
    if name in _ASYNC:
        from . import aio

        return getattr(aio, name)
    if name == "LoopLeg":  # the gateway's upstream leg on the event loop (httptools, when used)
        from ._loop import LoopLeg

        return LoopLeg
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
