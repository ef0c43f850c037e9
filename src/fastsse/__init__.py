"""fastsse: Server-Sent Events and OpenAI-style chat streams, decoded and folded at C speed.

``fastsse.BACKEND`` is ``"cython"`` when the compiled modules loaded, ``"python"`` otherwise;
both backends behave identically.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import results
from ._backend import BACKEND
from ._errors import (
    BodyTooLarge,
    ClientClosed,
    EncodeError,
    EventTooLarge,
    FastSSEError,
    HTTPStatusError,
    InvalidRequest,
    SSEError,
    TransportError,
    Untranslatable,
    UsageError,
)
from ._timing import Timing
from ._twins import get_backend
from ._verdict import Verdict
from ._version import __version__
from .chat import ChatAggregator, ChatStream, ChatVerdict
from .chat.encode import ChatChunkEncoder, encode_event
from .check import Finding, StreamChecker, check_stream
from .client import (
    DEFAULT,
    CallOptions,
    ChunkStream,
    Client,
    ClientOptions,
    EventSource,
    Reply,
    Timeouts,
    aiter_chunks,
    aiter_events,
    create_stream,
    iter_chunks,
    iter_events,
)
from .fold import FormatVerdict
from .messages import MessagesAggregator, MessagesStream
from .messages.encode import MessagesEncoder
from .relay import Relay
from .relay.normalize import Normalizer
from .responses import ResponsesAggregator, ResponsesStream
from .responses.encode import ResponsesEncoder
from .sse import Decoder, Event
from .translate import translator

if TYPE_CHECKING:
    from .client.aio import AsyncChunkStream as AsyncChunkStream
    from .client.aio import AsyncClient as AsyncClient
    from .client.aio import AsyncEventSource as AsyncEventSource

__all__ = [
    "BACKEND",
    "DEFAULT",
    "AsyncChunkStream",
    "AsyncClient",
    "AsyncEventSource",
    "BodyTooLarge",
    "CallOptions",
    "ChatAggregator",
    "ChatChunkEncoder",
    "ChatStream",
    "ChatVerdict",
    "ChunkStream",
    "Client",
    "ClientClosed",
    "ClientOptions",
    "Decoder",
    "EncodeError",
    "Event",
    "EventSource",
    "EventTooLarge",
    "FastSSEError",
    "Finding",
    "FormatVerdict",
    "HTTPStatusError",
    "InvalidRequest",
    "MessagesAggregator",
    "MessagesEncoder",
    "MessagesStream",
    "Normalizer",
    "Relay",
    "Reply",
    "ResponsesAggregator",
    "ResponsesEncoder",
    "ResponsesStream",
    "SSEError",
    "StreamChecker",
    "Timeouts",
    "Timing",
    "TransportError",
    "Untranslatable",
    "UsageError",
    "Verdict",
    "__version__",
    "aiter_chunks",
    "aiter_events",
    "check_stream",
    "create_stream",
    "encode_event",
    "get_backend",
    "iter_chunks",
    "iter_events",
    "results",
    "translator",
]


def __getattr__(name: str) -> Any:
    # AsyncClient brings asyncio with it: loaded on first use, not by ``import fastsse``.
    if name in ("AsyncClient", "AsyncChunkStream", "AsyncEventSource"):
        from .client import aio

        return getattr(aio, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
