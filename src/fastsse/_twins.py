"""Each backend as one namespace: ``get_backend(name)``, and the selected one as ``_backend.current``.

This module sits above every domain it gathers (the import-linter layers say so). The domains pick
their own twin under ``_backend.COMPILED``, so ``get_backend(BACKEND)`` holds the very classes
``fastsse`` exports; the other backend is imported only when asked for.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from . import _backend
from ._errors import InvalidRequest


def get_backend(name: str) -> SimpleNamespace:
    """``get_backend(name) -> SimpleNamespace``

    Return the namespace of one backend: ``name``, ``Decoder``, ``Event``, ``ChatAggregator``,
    ``ChatStream``, ``ResponsesAggregator``, ``ResponsesStream``, ``MessagesAggregator``,
    ``MessagesStream``, ``Relay``, and the translators ``ChatToMessages``, ``ChatToResponses``,
    ``MessagesToChat``, ``ResponsesToChat``. Every class in it comes from that backend: never a mix.

    It raises InvalidRequest for a name other than ``"cython"`` or ``"python"`` and ImportError if that
    backend cannot be loaded (e.g. the package was built without its extensions).
    """
    # The compiled modules have no stubs (type checkers read the twins), hence the ignores.
    if name == "cython":
        from .chat import _fold_c as chat_c  # type: ignore[attr-defined]
        from .messages import _fold_c as messages_c  # type: ignore[attr-defined]
        from .relay import _relay_c  # type: ignore[attr-defined]
        from .responses import _fold_c as responses_c  # type: ignore[attr-defined]
        from .sse import _decoder_c  # type: ignore[attr-defined]
        from .translate import _from_chat_c, _to_chat_c  # type: ignore[attr-defined]

        return _namespace(
            name, _decoder_c, chat_c, responses_c, messages_c, _relay_c, _from_chat_c, _to_chat_c
        )
    if name == "python":
        from .chat import _fold_py as chat_py
        from .messages import _fold_py as messages_py
        from .relay import _relay_py
        from .responses import _fold_py as responses_py
        from .sse import _decoder_py
        from .translate import _from_chat_py, _to_chat_py

        return _namespace(
            name, _decoder_py, chat_py, responses_py, messages_py, _relay_py, _from_chat_py, _to_chat_py
        )
    raise InvalidRequest(f"unknown backend {name!r}; expected 'cython' or 'python'")


def _namespace(
    name: str, sse: Any, chat: Any, responses: Any, messages: Any, relay: Any, from_chat: Any, to_chat: Any
) -> SimpleNamespace:
    return SimpleNamespace(
        name=name,
        Decoder=sse.Decoder,
        Event=sse.Event,
        ChatAggregator=chat.ChatAggregator,
        ChatStream=chat.ChatStream,
        ResponsesAggregator=responses.ResponsesAggregator,
        ResponsesStream=responses.ResponsesStream,
        MessagesAggregator=messages.MessagesAggregator,
        MessagesStream=messages.MessagesStream,
        Relay=relay.Relay,
        ChatToMessages=from_chat.ChatToMessages,
        ChatToResponses=from_chat.ChatToResponses,
        MessagesToChat=to_chat.MessagesToChat,
        ResponsesToChat=to_chat.ResponsesToChat,
    )


# What the transports and translator() build their streams from: one namespace, so the tests
# switch every stream format to one backend by replacing this name alone.
_backend.current = get_backend(_backend.BACKEND)
