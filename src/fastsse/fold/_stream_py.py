"""The pure-Python plumbing both typed-event fused streams share (Responses, Messages): the twin of
``_stream_c.pyx``. ``FoldStream`` scans with the SSE decoder, parses each payload and hands it to the
API's aggregator; ``FoldCounters`` is what both aggregators report the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from time import monotonic_ns as _monotonic_ns
from typing import Any

from .._errors import UsageError, too_large
from .._timing import Timing, build_timing
from ..sse._decoder_py import Decoder, Event, as_bytes
from ._base import MAX_DEPARTURES, FormatVerdict, anchor_pair, format_verdict_dict

__all__ = ["FoldCounters", "FoldStream", "OnEvent", "check_payload"]

OnEvent = Callable[[dict[str, Any]], object]


class FoldCounters:
    """What both format aggregators report the same way (the twin of ``FoldCounters`` in
    ``fold/_stream_c.pyx``): the error, the counters, the verdict and the departures."""

    _error: Any
    _skipped: int
    _malformed: int
    _departures: dict[str, None]

    def _verdict(self, aborted: bool, too_big: bool, truncated: bool) -> FormatVerdict:
        raise NotImplementedError

    @property
    def error(self) -> Any:
        """The error of an ``error`` event, or None."""
        return self._error

    @property
    def skipped(self) -> int:
        """Payloads skipped because they were not a JSON object."""
        return self._skipped

    @property
    def malformed(self) -> int:
        """Values of the wrong type dropped from otherwise usable events."""
        return self._malformed

    @property
    def verdict(self) -> FormatVerdict:
        """How complete the stream is so far (``complete``, ``terminal``, ``why``, ...)."""
        return self._verdict(False, False, False)

    def _depart(self, what: str) -> None:
        if what not in self._departures and len(self._departures) < MAX_DEPARTURES:
            self._departures[what] = None


def check_payload(payload: object) -> None:
    if not isinstance(payload, (bytes, str, bytearray, memoryview)):
        raise TypeError(
            f"feed_data() takes str, bytes, bytearray or memoryview, not {type(payload).__name__}"
        )


class FoldStream(Decoder):
    """The plumbing both fused format streams share (the Python twin of each compiled stream)."""

    _agg: Any
    _stops_on_error = False
    _kind: Callable[[dict[str, Any]], int]

    def __init__(
        self, on_chunk: OnEvent | None = None, *, max_event_bytes: int | None = None, timing: bool = False
    ) -> None:
        super().__init__(max_event_bytes=max_event_bytes)
        self._on_chunk = on_chunk
        self._timed = bool(timing)
        self._anchor = anchor_pair() if timing else [0, 0]
        self._reads: list[int] = []
        self._token_reads: list[int] = []
        self._tokens: list[int] = []
        self._token_kinds: list[int] = []
        self._finished = False
        self._aborted = False
        self._too_large = False
        self._closed = False
        self._eof_truncated = False
        self._writing = False

    def write(self, data: bytes | bytearray | memoryview, /) -> int | None:
        """Scan, parse and fold the next bytes: None to go on, 0 once the stream has stopped.

        It raises what ``on_chunk`` raised, EventTooLarge, TypeError and RuntimeError as
        described on the class.
        """
        if self._finished or self._closed:
            return 0
        if self._writing:
            raise UsageError(f"{type(self).__name__}.write() called again from inside on_chunk")
        if self._timed:
            self._reads.append(_monotonic_ns())  # as the bytes arrive, before any is parsed
        chunk = as_bytes(data, self)
        self._writing = True
        self._overflowed = False
        try:
            self._scan(chunk)
        finally:
            self._writing = False
        if self._overflowed:
            self._too_large = True
            self._finished = True
            assert self._limit is not None
            raise too_large(self._limit, [])
        return 0 if self._finished else None

    def feed(self, data: bytes | bytearray | memoryview, /) -> list[Event]:
        """``write`` under the Decoder's name: events are folded, so it returns ``[]``."""
        self.write(data)
        return []

    def close(self, *, truncated: bool = False) -> list[Event]:
        """Mark the end of the byte stream; returns ``[]`` (events are folded, not returned).
        ``truncated=True`` says the transfer broke (a transport error): without its terminal event
        the stream is then reported truncated even if it ended on an event boundary."""
        if not self._closed:
            self._closed = True
            super().close()
            self._eof_truncated = (self.truncated or truncated) and not self._finished
        return []

    def result(self) -> dict[str, Any]:
        """The folded object so far, with ``"verdict"`` (as plain data): a new dict on every call."""
        out: dict[str, Any] = self._agg.result()
        out["verdict"] = format_verdict_dict(self.verdict)
        return out

    def timing(self) -> Timing | None:
        """The timing record so far (a new ``fastsse.Timing`` dict on every call), or None when
        the stream was made without ``timing=True``; the request stamps are left to a client."""
        arrays = self._timing_arrays()
        return None if arrays is None else build_timing(*arrays)

    def _timing_arrays(self) -> tuple[list[int], list[int], list[int], list[int], list[int]] | None:
        # With timing=True: (reads, token_reads, tokens, token_kinds, anchor), copies, in the shape
        # of the chat stream's timing record (one token per text or reasoning delta event).
        if not self._timed:
            return None
        return (
            list(self._reads),
            list(self._token_reads),
            list(self._tokens),
            list(self._token_kinds),
            list(self._anchor),
        )

    @property
    def verdict(self) -> FormatVerdict:
        """How complete the stream is so far (``complete``, ``terminal``, ``why``, ...)."""
        verdict: FormatVerdict = self._agg._verdict(self._aborted, self._too_large, self._eof_truncated)
        return verdict

    def _on_event(self, data: bytes, event_type: bytes | None) -> bool:
        if self._overflowed:
            return True
        agg = self._agg
        name = event_type.decode("utf-8", "replace") if event_type and event_type != b"message" else None
        event = agg._fold(data, name)
        if event is None:
            return False
        if self._timed:
            kind = self._kind(event)
            if kind:
                self._token_reads.append(len(self._reads) - 1)
                self._tokens.append(1)
                self._token_kinds.append(kind)
        stop = self._stops_on_error and agg._error is not None
        on_chunk = self._on_chunk
        if on_chunk is not None:
            try:
                answer = on_chunk(event)
                if answer is not None and not answer:
                    self._aborted = True
                    stop = True
            except BaseException:
                self._aborted = True
                self._finished = True
                raise
        if stop:
            self._finished = True
        return stop
