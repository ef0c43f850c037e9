"""The cold half shared by the Responses and Messages folds on both backends: the verdict type and
the small helpers the result builders use.

The hot halves (one call per event) live twice, in ``responses/_fold_c.pyx`` / ``responses/_fold_py.py`` and
``messages/_fold_c.pyx`` / ``messages/_fold_py.py``; they keep their state in objects whose attribute names
``responses/_result.py`` and ``messages/_result.py`` read, so the two backends cannot disagree about a result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

import orjson

from .._timing import CONTENT as CONTENT
from .._timing import REASONING as REASONING
from .._timing import anchor_pair as anchor_pair
from .._verdict import Verdict
from ..sse import loads_replacing

# How many distinct departures a verdict keeps: a server that repeats one mistake on every event
# must not grow the fold's memory with the stream.
MAX_DEPARTURES = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class FormatVerdict(Verdict):
    """How complete a Responses or Messages stream was (the fields every API shares are
    ``fastsse.Verdict``'s).

    ``complete`` is True when the answer ended as its API ends answers (``response.completed``,
    ``response.incomplete`` for an answer a limit stopped, as chat's ``finish_reason: "length"``,
    or ``message_stop``), no error came, and the stream was not stopped on the client side.
    ``terminal`` names the lifecycle event that ended the stream (``"response.completed"``,
    ``"response.incomplete"``, ``"response.failed"``, ``"message_stop"``) or is None; ``status``
    is the response's ``status`` (Responses) or the ``stop_reason`` (Messages). ``departures``
    lists, in first-seen order, each way the stream departed from the format's grammar that the
    fold tolerated (e.g. ``"item_not_announced"``, ``"block_not_stopped"``).
    """

    terminal: str | None
    status: str | None
    departures: tuple[str, ...] = ()


def why_not(
    terminal: str | None,
    error: object,
    aborted: bool,
    too_large: bool,
    truncated: bool,
    detail: str | None,
) -> str | None:
    """The first reason a stream is not complete, or None. ``detail`` is the format's own reason
    (an incomplete or failed response's reason) and is used when the terminal event came."""
    if aborted:
        return "aborted by the caller"
    if too_large:
        return "an event passed max_event_bytes"
    if error is not None:
        kind = error.get("type") or error.get("code") if isinstance(error, dict) else None
        return f"error: {kind}" if isinstance(kind, str) and kind else "error"
    if terminal is None:
        return "the byte stream ended inside an event" if truncated else "no terminal event"
    return detail


def format_verdict_dict(verdict: FormatVerdict) -> dict[str, Any]:
    """The verdict as plain JSON data, for a fused stream's ``result()["verdict"]``."""
    out = {name: getattr(verdict, name) for name in FormatVerdict.__dataclass_fields__}
    out["departures"] = list(verdict.departures)
    return out


def joined(parts: list[str]) -> str:
    """Join fragments once and keep the joined string as the only fragment, so a later partial
    ``result()`` copies one string instead of re-walking thousands."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return ""
    text = "".join(parts)
    parts[:] = [text]
    return text


# Indexes beyond this are not indexes (and would not fit the compiled fold's C integers).
MAX_INDEX = 2**62


def is_index(value: object) -> TypeGuard[int]:
    """A JSON integer usable as an index: not a bool, not negative, not absurdly large."""
    return type(value) is int and 0 <= value <= MAX_INDEX


def loads(payload: Any) -> Any:
    """orjson, then the mending of invalid UTF-8 and lone surrogate escapes every fold shares, so
    every way into a fold reads a payload alike. It raises orjson.JSONDecodeError if it is not JSON."""
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return loads_replacing(payload)


def is_done(payload: Any) -> bool:
    """A ``[DONE]`` sentinel (OpenRouter ends its Responses streams with one)."""
    if len(payload) > 64:
        return False
    if isinstance(payload, str):
        return payload.strip(" \t\r\n") == "[DONE]"
    return bytes(payload).strip(b" \t\r\n") == b"[DONE]"
