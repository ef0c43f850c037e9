"""The conformance linter: ``check_stream(data, api=...)``, ``checker(api)``, and the finding codes.

Each API keeps its rules beside its fold (``chat/lint.py``, ``responses/lint.py``,
``messages/lint.py``), over the SSE framing rules every API shares (``sse/lint.py``); this module is
the one way to reach them.
``CODES`` lists the framing and chat codes, ``API_CODES`` the codes each typed-event API adds;
docs/conformance.md says what each one breaks in which client. ``python -m fastsse check`` is the
command-line face (``fastsse.cli.check``).
"""

from __future__ import annotations

from typing import Final

from .._errors import InvalidRequest
from ..chat.lint import CODES, StreamChecker
from ..messages.lint import CODES as _MESSAGES_CODES
from ..messages.lint import MessagesChecker
from ..responses.lint import CODES as _RESPONSES_CODES
from ..responses.lint import ResponsesChecker
from ..sse.lint import ERROR, WARNING, CodeInfo, Finding, FramingChecker

__all__ = [
    "API_CODES",
    "CODES",
    "ERROR",
    "WARNING",
    "CodeInfo",
    "Finding",
    "FramingChecker",
    "MessagesChecker",
    "ResponsesChecker",
    "StreamChecker",
    "check_stream",
    "checker",
]

API_CODES: Final[dict[str, dict[str, CodeInfo]]] = {
    "responses": _RESPONSES_CODES,
    "messages": _MESSAGES_CODES,
}


def checker(
    api: str = "chat", /, *, expect_usage: bool = False, max_event_bytes: int | None = None
) -> FramingChecker:
    """``checker(api="chat", /, *, expect_usage=False, max_event_bytes=None) -> FramingChecker``

    A fresh incremental checker for ``api``: ``"chat"`` (``StreamChecker``), ``"responses"``
    (``ResponsesChecker``) or ``"messages"`` (``MessagesChecker``), each a ``FramingChecker`` (the
    SSE framing rules all three share); ``feed(data)`` it the bytes as they come, ``close()`` it at
    the end, then read ``findings``. With ``max_event_bytes=N`` an event past N bytes is skipped
    unread and reported (``event-too-large``), so memory stays bounded.
    It raises InvalidRequest for another API and for ``expect_usage`` with a non-chat API, and what
    ``StreamChecker`` raises for a bad ``max_event_bytes``.
    """
    if api == "chat":
        return StreamChecker(expect_usage=expect_usage, max_event_bytes=max_event_bytes)
    if expect_usage:
        raise InvalidRequest("expect_usage applies to chat streams only")
    if api == "responses":
        return ResponsesChecker(max_event_bytes=max_event_bytes)
    if api == "messages":
        return MessagesChecker(max_event_bytes=max_event_bytes)
    raise InvalidRequest(f"unknown api {api!r}; expected 'chat', 'responses' or 'messages'")


def check_stream(
    data: bytes | bytearray | memoryview,
    /,
    *,
    expect_usage: bool = False,
    api: str = "chat",
    max_event_bytes: int | None = None,
) -> list[Finding]:
    """``check_stream(data, /, *, expect_usage=False, api="chat", max_event_bytes=None) -> list[Finding]``

    Lint one complete captured stream and return every finding in stream order (empty when the
    stream is compliant). ``api`` picks the grammar: ``"chat"``, ``"responses"`` or ``"messages"``;
    ``max_event_bytes`` is ``checker``'s.
    It raises TypeError if ``data`` is not a byte buffer and ValueError for an unknown ``api`` or
    ``expect_usage`` with a non-chat one, and what ``checker`` raises for ``max_event_bytes``.
    """
    lint = checker(api, expect_usage=expect_usage, max_event_bytes=max_event_bytes)
    lint.feed(data)
    lint.close()
    return lint.findings
