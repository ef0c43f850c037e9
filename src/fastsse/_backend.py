"""The one place that picks the compiled or the pure-Python backend, for every hot module at once.

``FASTSSE_NO_EXTENSIONS=1`` (also true/yes/on) forces the Python backend; otherwise the compiled
modules are imported together (never a mix) and any ImportError falls back to Python silently.
``fastsse.BACKEND`` says which one won. Both stay importable side by side through ``get_backend``.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import SimpleNamespace
from typing import TYPE_CHECKING

_NAMES = {
    "cython": (
        "sse._decoder_c",
        "chat._fold_c",
        "responses._fold_c",
        "messages._fold_c",
        "relay._relay_c",
        "translate._from_chat_c",
    ),
    "python": (
        "sse._decoder_py",
        "chat._fold_py",
        "responses._fold_py",
        "messages._fold_py",
        "relay._relay_py",
        "translate._translate_py",
    ),
}


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on", "y")


NO_EXTENSIONS: bool = _flag("FASTSSE_NO_EXTENSIONS") or sys.implementation.name != "cpython"


def get_backend(name: str) -> SimpleNamespace:
    """Return the namespace of one backend: ``name``, ``Decoder``, ``Event``, ``ChatAggregator``,
    ``ChatStream``, ``ResponsesAggregator``, ``ResponsesStream``, ``MessagesAggregator``, ``MessagesStream``, ``Relay``,
    and the translators ``ChatToMessages``, ``ChatToResponses``, ``MessagesToChat``, ``ResponsesToChat``.

    It raises ValueError for a name other than ``"cython"`` or ``"python"`` and ImportError if that
    backend cannot be loaded (e.g. the package was built without its extensions).
    """
    try:
        decoder_mod, aggregator_mod, responses_mod, messages_mod, relay_mod, translate_mod = _NAMES[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; expected 'cython' or 'python'") from None
    decoder = importlib.import_module(f"fastsse.{decoder_mod}")
    aggregator = importlib.import_module(f"fastsse.{aggregator_mod}")
    responses = importlib.import_module(f"fastsse.{responses_mod}")
    messages = importlib.import_module(f"fastsse.{messages_mod}")
    relay = importlib.import_module(f"fastsse.{relay_mod}")
    translate = importlib.import_module(f"fastsse.{translate_mod}")
    return SimpleNamespace(
        name=name,
        Decoder=decoder.Decoder,
        Event=decoder.Event,
        ChatAggregator=aggregator.ChatAggregator,
        ChatStream=aggregator.ChatStream,
        ResponsesAggregator=responses.ResponsesAggregator,
        ResponsesStream=responses.ResponsesStream,
        MessagesAggregator=messages.MessagesAggregator,
        MessagesStream=messages.MessagesStream,
        Relay=relay.Relay,
        ChatToMessages=translate.ChatToMessages,
        ChatToResponses=translate.ChatToResponses,
        MessagesToChat=translate.MessagesToChat,
        ResponsesToChat=translate.ResponsesToChat,
    )


if TYPE_CHECKING:
    # "X as X" marks the names as re-exported for mypy --strict (no implicit re-export).
    from .chat._fold_py import ChatAggregator as ChatAggregator
    from .chat._fold_py import ChatStream as ChatStream
    from .messages._fold_py import MessagesAggregator as MessagesAggregator
    from .messages._fold_py import MessagesStream as MessagesStream
    from .relay._relay_py import Relay as Relay
    from .responses._fold_py import ResponsesAggregator as ResponsesAggregator
    from .responses._fold_py import ResponsesStream as ResponsesStream
    from .sse._decoder_py import Decoder as Decoder
    from .sse._decoder_py import Event as Event
    from .translate._translate_py import ChatToMessages as ChatToMessages
    from .translate._translate_py import ChatToResponses as ChatToResponses
    from .translate._translate_py import MessagesToChat as MessagesToChat
    from .translate._translate_py import ResponsesToChat as ResponsesToChat

    BACKEND = "python"
    current: SimpleNamespace
else:
    _selected = None
    if not NO_EXTENSIONS:
        try:
            _selected = get_backend("cython")
        except ImportError:
            _selected = None
    if _selected is None:
        _selected = get_backend("python")
    BACKEND: str = _selected.name
    Decoder = _selected.Decoder
    Event = _selected.Event
    ChatAggregator = _selected.ChatAggregator
    ChatStream = _selected.ChatStream
    ResponsesAggregator = _selected.ResponsesAggregator
    ResponsesStream = _selected.ResponsesStream
    MessagesAggregator = _selected.MessagesAggregator
    MessagesStream = _selected.MessagesStream
    Relay = _selected.Relay
    ChatToMessages = _selected.ChatToMessages
    ChatToResponses = _selected.ChatToResponses
    MessagesToChat = _selected.MessagesToChat
    ResponsesToChat = _selected.ResponsesToChat
    # What the transports and translator() build their streams from: one namespace, so the tests
    # switch every stream format to one backend by replacing this name alone.
    current = _selected
    del _selected
