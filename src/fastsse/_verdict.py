"""``Verdict``: the base every API's verdict shares (chat's ``ChatVerdict``, Responses' and
Messages' ``FormatVerdict``), so code that handles all three APIs reads one set of fields."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Verdict"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """How complete a stream's answer was: the fields every API's verdict has.

    ``complete`` is True when the answer arrived whole (each API's rule is in its subclass);
    ``why`` says in a few words why it is not (None exactly when it is), for example
    ``"no [DONE] and the stream was not closed"``, ``"error: overloaded_error"`` or
    ``"HTTP 429 rate_limit_exceeded: ..."``. ``usage`` and ``error``: whether usage and an
    error arrived. For a fused stream also ``aborted`` (``on_chunk`` returned False or raised),
    ``too_large`` (an event passed ``max_event_bytes``) and ``truncated`` (the bytes ended inside
    an event, or the transfer broke). The counters: ``skipped`` payloads that were not a JSON
    object, ``ignored`` payloads after the end (``[DONE]``, the terminal event, an error),
    ``malformed`` values of the wrong type that were dropped. ``stop_reason``: why the model
    stopped, in its API's words, or None before it said: chat's ``finish_reason`` (the first
    choice's), a Responses answer's ``incomplete_details.reason`` or else its ``status``, a
    Messages answer's ``stop_reason``. A length limit is a ``stop_reason`` (``"length"``,
    ``"max_output_tokens"``, ``"max_tokens"``), not an incomplete answer.
    """

    complete: bool
    why: str | None
    usage: bool
    error: bool
    aborted: bool = False
    too_large: bool = False
    truncated: bool = False
    skipped: int = 0
    ignored: int = 0
    malformed: int = 0
    stop_reason: str | None = None
