"""The shapes of what fastsse returns, for type checkers and readers: one TypedDict per API's
result and one per verdict. Plain dicts at run time (JSON-ready); nothing here costs a call.

``ChatResult`` is a ``chat.completion``, ``ResponsesResult`` a Responses ``response``,
``MessagesResult`` a Messages ``message``, each with ``verdict`` (``ChatVerdictData`` /
``FormatVerdictData``, both a ``VerdictData``) and, from a client, ``timing``
(``fastsse.Timing``). The keys marked "no stream" are present only when the answer was no stream
(an HTTP error, a redirect, a 204, a page): ``error``, ``status`` (the HTTP status; a Responses
result's own ``status`` is the response's), ``retry_after`` and, for a redirect, ``location``. Providers' own top-level fields are kept as they came, so the dicts are
not closed (``total=False`` where a key may be missing).
"""

from __future__ import annotations

from typing import Any, TypedDict

from ._timing import Timing

__all__ = [
    "ChatResult",
    "ChatVerdictData",
    "FormatVerdictData",
    "MessagesResult",
    "NoStream",
    "ResponsesResult",
    "VerdictData",
]


class VerdictData(TypedDict):
    """``result["verdict"]``: ``fastsse.Verdict``'s fields as plain data (the same for every API)."""

    complete: bool
    why: str | None
    usage: bool
    error: bool
    aborted: bool
    too_large: bool
    truncated: bool
    skipped: int
    ignored: int
    malformed: int


class ChatVerdictData(VerdictData):
    """A chat result's verdict: ``fastsse.ChatVerdict`` as plain data."""

    done: bool
    finish_reasons: list[str | None]
    unknown_parts: int


class FormatVerdictData(VerdictData):
    """A Responses or Messages result's verdict: ``fastsse.FormatVerdict`` as plain data."""

    terminal: str | None
    status: str | None
    departures: list[str]


class NoStream(TypedDict, total=False):
    """The keys an answer that was no stream adds to its API's (empty) result."""

    error: Any  # the server's error object (its "error" member), else the parsed body, else its text
    retry_after: float | None  # seconds: retry-after-ms, else Retry-After; None if neither
    location: str  # a redirect's Location (redirects are not followed)
    timing: Timing  # from a client (or timing=True)


class ChatResult(NoStream, total=False):
    """A folded chat stream: a ``chat.completion`` with its verdict."""

    id: str | None
    object: str  # "chat.completion"
    created: int | None
    model: str | None
    choices: list[dict[str, Any]]
    usage: dict[str, Any] | None
    system_fingerprint: str | None
    service_tier: str | None
    status: int  # no stream: the HTTP status
    verdict: ChatVerdictData


class ResponsesResult(NoStream, total=False):
    """A folded Responses stream: a ``response`` with its verdict (``status`` is the response's
    own status, or the HTTP status when the answer was no stream)."""

    id: str | None
    object: str  # "response"
    created_at: int | None
    model: str | None
    output: list[dict[str, Any]]
    usage: dict[str, Any] | None
    incomplete_details: dict[str, Any] | None
    status: str | int | None  # the response's status; no stream: the HTTP status
    verdict: FormatVerdictData


class MessagesResult(NoStream, total=False):
    """A folded Messages stream: a ``message`` with its verdict."""

    id: str | None
    type: str  # "message"
    role: str
    model: str | None
    content: list[dict[str, Any]]
    stop_reason: str | None
    stop_sequence: str | None
    usage: dict[str, Any] | None
    status: int  # no stream: the HTTP status
    verdict: FormatVerdictData
