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
    "cython": ("_decoder_c", "_aggregator_c", "_responses_c", "_messages_c", "_relay_c", "_translate_c"),
    "python": (
        "_decoder_py",
        "_aggregator_py",
        "_responses_py",
        "_messages_py",
        "_relay_py",
        "_translate_py",
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
    from ._aggregator_py import ChatAggregator as ChatAggregator
    from ._aggregator_py import ChatStream as ChatStream
    from ._decoder_py import Decoder as Decoder
    from ._decoder_py import Event as Event
    from ._messages_py import MessagesAggregator as MessagesAggregator
    from ._messages_py import MessagesStream as MessagesStream
    from ._relay_py import Relay as Relay
    from ._responses_py import ResponsesAggregator as ResponsesAggregator
    from ._responses_py import ResponsesStream as ResponsesStream
    from ._translate_py import ChatToMessages as ChatToMessages
    from ._translate_py import ChatToResponses as ChatToResponses
    from ._translate_py import MessagesToChat as MessagesToChat
    from ._translate_py import ResponsesToChat as ResponsesToChat

    BACKEND = "python"
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
    del _selected
