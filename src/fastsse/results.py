"""The shapes of what fastsse returns, for type checkers and readers: one TypedDict per API's
result and one per verdict. Plain dicts at run time (JSON-ready); nothing here costs a call.

``ChatResult`` is a ``chat.completion``, ``ResponsesResult`` a Responses ``response``,
``MessagesResult`` a Messages ``message``: the API's answer as the API shapes it, untouched. fastsse's
own facts sit under three reserved keys beside it: ``verdict`` (``ChatVerdictData`` /
``FormatVerdictData``, both a ``VerdictData``), ``http`` (``HttpData``: the status, ``retry_after``,
``location``, the ``upstream`` that answered, and the ``error`` of an answer that was no stream;
present on every client result, status 200 for a stream) and, from a client, ``timing``
(``fastsse.Timing``). Providers' own top-level fields are kept as they came, so the dicts are not
closed (``total=False`` where a key may be missing).
"""

from __future__ import annotations

from typing import Any, TypedDict

from ._timing import Timing

__all__ = [
    "ChatResult",
    "ChatVerdictData",
    "FormatVerdictData",
    "HttpData",
    "MessagesResult",
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
    stop_reason: str | None  # finish_reason / incomplete_details.reason or status / stop_reason


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


class HttpData(TypedDict):
    """``result["http"]``: the transfer's facts, on every result a client returns."""

    status: int  # the HTTP status (200 for a stream; 0 when no status line came)
    retry_after: float | None  # seconds: retry-after-ms, else Retry-After; None if neither
    location: str | None  # the Location header (a redirect's target: redirects are not followed)
    upstream: str | None  # the base URL that answered (the first, or a fallback), credentials hidden
    error: Any  # None for a stream; an answer that was no stream: the server's error object (its
    # "error" member), else the parsed body, else its text, else the verdict's why


class _Facts(TypedDict, total=False):
    """The keys fastsse adds beside every API's answer."""

    http: HttpData
    timing: Timing  # from a client (or timing=True)


class ChatResult(_Facts, total=False):
    """A folded chat stream: a ``chat.completion`` with its verdict."""

    id: str | None
    object: str  # "chat.completion"
    created: int | None
    model: str | None
    choices: list[dict[str, Any]]
    usage: dict[str, Any] | None
    system_fingerprint: str | None
    service_tier: str | None
    verdict: ChatVerdictData


class ResponsesResult(_Facts, total=False):
    """A folded Responses stream: a ``response`` with its verdict (``status`` is the response's
    own status; the HTTP status is ``http["status"]``)."""

    id: str | None
    object: str  # "response"
    created_at: int | None
    model: str | None
    output: list[dict[str, Any]]
    usage: dict[str, Any] | None
    incomplete_details: dict[str, Any] | None
    status: str | None  # the response's own status
    verdict: FormatVerdictData


class MessagesResult(_Facts, total=False):
    """A folded Messages stream: a ``message`` with its verdict."""

    id: str | None
    type: str  # "message"
    role: str
    model: str | None
    content: list[dict[str, Any]]
    stop_reason: str | None
    stop_sequence: str | None
    usage: dict[str, Any] | None
    verdict: FormatVerdictData
