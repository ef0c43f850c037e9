"""fastsse: Server-Sent Events and OpenAI-style chat streams, decoded and folded at C speed.

``fastsse.BACKEND`` is ``"cython"`` when the compiled modules loaded, ``"python"`` otherwise;
both backends behave identically.
"""

from __future__ import annotations

from ._backend import BACKEND, ChatAggregator, ChatStream, Decoder, Event, get_backend
from ._chat import Verdict
from ._errors import EventTooLarge, SSEError, TransportError
from ._timing import Timing
from ._version import __version__
from .check import Finding, StreamChecker, check_stream
from .client import AsyncClient, Client, aiter_chunks, aiter_events, create_stream, iter_chunks, iter_events
from .encode import ChatChunkEncoder, encode_event
from .normalize import Normalizer

__all__ = [
    "BACKEND",
    "AsyncClient",
    "ChatAggregator",
    "ChatChunkEncoder",
    "ChatStream",
    "Client",
    "Decoder",
    "Event",
    "EventTooLarge",
    "Finding",
    "Normalizer",
    "SSEError",
    "StreamChecker",
    "Timing",
    "TransportError",
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
]
