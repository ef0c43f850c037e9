"""Exceptions shared by both backends (the compiled modules import them from here)."""

from __future__ import annotations

import operator
from typing import Any


class SSEError(ValueError):
    """Root of every error fastsse raises about the stream it was given."""


class EventTooLarge(SSEError):
    """A line or an event's data passed ``max_event_bytes``.

    ``events`` holds every event the same ``feed`` call completed (before and after the oversized
    one), so nothing already parsed is lost; ``limit`` is the bound that was passed.
    """

    def __init__(self, message: str, *, limit: int, events: list[Any] | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.events: list[Any] = events if events is not None else []


class TransportError(SSEError):
    """The HTTP transfer failed (refused, timed out, reset mid-stream).

    ``result`` holds the partial aggregate folded from what arrived before the failure.
    """

    def __init__(
        self, message: str, *, result: dict[str, Any] | None = None, code: int | None = None
    ) -> None:
        super().__init__(message)
        self.result: dict[str, Any] = result if result is not None else {}
        self.code = code


def too_large(limit: int, events: list[Any]) -> EventTooLarge:
    return EventTooLarge(
        f"an SSE line or event data exceeded max_event_bytes={limit}; the event was dropped",
        limit=limit,
        events=events,
    )


def bad_input_type(data: object, owner: object) -> TypeError:
    """The TypeError for a non-buffer given to ``owner.feed`` (a Decoder) or ``owner.write`` (a ChatStream),
    naming the call the user made, the same on both backends (the fused streams are written to)."""
    cls = type(owner).__name__
    call = f"{cls}.write()" if cls.endswith("Stream") else f"{cls}.feed()"
    hint = " (encode text first: text.encode())" if isinstance(data, str) else ""
    return TypeError(f"{call} takes bytes, bytearray or memoryview, not {type(data).__name__}{hint}")


def event_limit(value: object, call: str) -> int | None:
    """``max_event_bytes`` checked the same way on both backends: None, or an int of at least 1.

    It raises TypeError for a non-integer (a str, a float, a bool) and ValueError below 1, naming
    ``call`` (``"Decoder"``, ``"iter_events"``...).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(
            f"{call}(max_event_bytes=...) takes a positive int or None, not {type(value).__name__}"
        )
    limit = operator.index(value)  # type: ignore[arg-type]
    if limit < 1:
        raise ValueError(f"{call}(max_event_bytes=...) takes a positive int or None, not {limit!r}")
    return limit
