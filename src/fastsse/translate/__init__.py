"""Incremental stream translation between chat completions, Responses and Messages.

``translator(source, target)`` returns an object with ``write(data) -> bytes`` (the translated
bytes the new upstream bytes allow, possibly empty) and ``close() -> bytes``, one call per upstream
read, like a relay. Each upstream goes through its fused fold stream (``ChatStream``, ``MessagesStream``,
``ResponsesStream``: the scanner, reader and fold), so the translation and the upstream's fold come
from one pass (``result()``, ``verdict``). The translators are compiled, with pure-Python twins of
identical behaviour, chosen with the rest of the backend (``fastsse.BACKEND``); on the compiled
backend the hot deltas (text, reasoning, refusals, tool-call arguments) are written from the
upstream's bytes with no Python object per event. Messages <-> Responses goes through chat.

The target's terminal event is written only when the upstream answer was whole (chat: a
``finish_reason`` and ``[DONE]``; Messages: ``message_stop``; Responses: ``response.completed`` or
``response.incomplete``); an upstream that stops early stays truncated downstream, and an upstream
error becomes the target's error. docs/translation.md lists the field mapping.

The bodies around the streams, for a gateway that serves one API over an upstream of another:
``request(body, source, target)`` translates a request body, ``response(body, source, target)`` a
whole (non-streaming) answer, ``error(status, body, target)`` an upstream's HTTP error. Each
returns a ``Translated`` dict; what the target cannot express raises ``Untranslatable`` naming the
field, or with ``lossy=True`` is left out and listed in ``Translated.dropped``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

from .. import _backend
from .._errors import InvalidRequest
from ..apis import NAMES
from ._answer import MESSAGE_LIMIT, error, response
from ._bodies import Translated, Untranslatable
from ._request import request

if TYPE_CHECKING or not _backend.COMPILED:
    from ._from_chat_py import ChatToMessages, ChatToResponses
    from ._to_chat_py import MessagesToChat, ResponsesToChat
else:
    from ._from_chat_c import ChatToMessages, ChatToResponses, MessagesToChat, ResponsesToChat

__all__ = [
    "APIS",
    "MESSAGE_LIMIT",
    "ChatToMessages",
    "ChatToResponses",
    "MessagesToChat",
    "ResponsesToChat",
    "Translated",
    "Translator",
    "Untranslatable",
    "error",
    "request",
    "response",
    "translator",
]

APIS: Final = NAMES


class Translator(Protocol):
    """What every translator offers: ``write(data) -> bytes``, ``close() -> bytes``, ``result()``,
    the upstream's fold with its verdict, and ``complete``."""

    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        """Feed upstream bytes; return the translated bytes they allow (possibly empty)."""
        ...

    def close(self, *, truncated: bool = False) -> bytes:
        """End the upstream; return the last translated bytes (the terminal event if it was whole)."""
        ...

    def result(self) -> dict[str, Any]:
        """The upstream's fold, with its verdict."""
        ...

    @property
    def complete(self) -> bool:
        """True once the terminal event of a whole answer went out: nothing more is written."""
        ...


class _Chain:
    """Two translators in a row: Messages <-> Responses through chat."""

    def __init__(self, first: Translator, second: Translator) -> None:
        self._first = first
        self._second = second

    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        return self._second.write(self._first.write(data))

    def close(self, *, truncated: bool = False) -> bytes:
        return self._second.write(self._first.close(truncated=truncated)) + self._second.close()

    def result(self) -> dict[str, Any]:
        """The upstream's fold (the first translator's), with its verdict."""
        return self._first.result()

    @property
    def complete(self) -> bool:
        """The second translator's: its terminal event went out (after the first's ``[DONE]``)."""
        return self._second.complete


def translator(source: str, target: str, /, **options: Any) -> Translator:
    """``translator(source, target, /, **options) -> Translator``

    Return a translator from ``source`` to ``target`` (each ``"chat"``, ``"responses"`` or
    ``"messages"``): ``ChatToMessages``, ``ChatToResponses``, ``MessagesToChat``,
    ``ResponsesToChat``, or for Messages <-> Responses the two through chat in a row. ``options``
    go to the class(es) (``max_event_bytes``; ``created`` and ``include_usage`` towards chat).
    It raises ValueError for an unknown API or ``source == target`` and TypeError for an option
    the class does not take.
    """
    classes = _backend.current
    if source not in APIS or target not in APIS:
        raise InvalidRequest(
            f"unknown API {source if source not in APIS else target!r}; expected one of {APIS}"
        )
    if source == target:
        raise InvalidRequest(f"nothing to translate: source and target are both {source!r}")
    limit = {"max_event_bytes": options["max_event_bytes"]} if "max_event_bytes" in options else {}
    if source == "chat":
        direct: Translator = (classes.ChatToMessages if target == "messages" else classes.ChatToResponses)(
            **options
        )
        return direct
    to_chat: Translator = (classes.MessagesToChat if source == "messages" else classes.ResponsesToChat)(
        **{k: v for k, v in options.items() if k != "max_event_bytes"} | limit
    )
    if target == "chat":
        return to_chat
    from_chat = classes.ChatToMessages if target == "messages" else classes.ChatToResponses
    return _Chain(to_chat, from_chat(**limit))
