"""Pure-Python ``Relay``: the readable twin of ``relay/_relay_c.pyx``.

The scanner is ``sse._decoder_py.Decoder`` (subclassed, like ``ChatStream``), the fold its
``ChatAggregator``, the repair rules ``_relay.RelayCore``, which both backends share; here every
event goes through that core, where the compiled relay forwards or splices most chunks itself.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, NoReturn

from .._errors import UsageError, too_large
from ..chat import ChatVerdict
from ..chat._fold_py import ChatAggregator
from ..sse._decoder_py import Decoder, as_bytes
from ._core import OnChunk, RelayCore, check_options

__all__ = ["Relay"]


class Relay(Decoder):
    """Relay(*, on_chunk=None, max_event_bytes=None, usage="end", model=None, id=None, drop_fields=(), comments=True, keep_text=True)

    Upstream bytes in, compliant bytes out, folded on the way: one per proxied stream, not safe to
    share between threads. ``write(data) -> bytes`` takes the next upstream bytes and returns what
    to send downstream now (often ``b""``); ``close() -> bytes`` ends the upstream and returns the
    tail. ``result()``, ``verdict`` and ``text()`` give the fold of what was forwarded, as
    ``ChatStream`` does. The README's "Relay" section lists every repair and option.

    ``write`` raises TypeError for anything but a byte buffer (the relay stays usable), ValueError
    after ``close()``, RuntimeError if ``on_chunk`` writes to its own relay, what ``on_chunk``
    raised, and EventTooLarge when an event passes ``max_event_bytes`` (the relay then stops; the
    exception's ``events`` holds one ``bytes``: what that call had to send before the event).
    The constructor raises ValueError or TypeError for a bad option.

    ``keep_text=False``: the fold keeps the facts and not the text (``ChatAggregator``'s option:
    ``text()`` is then ``""`` and ``result()`` has ``text_chars``), for a relay that only logs.
    """

    def __init__(
        self,
        *,
        on_chunk: OnChunk | None = None,
        max_event_bytes: int | None = None,
        usage: str = "end",
        model: str | None = None,
        id: str | None = None,
        drop_fields: Collection[str] = (),
        comments: bool = True,
        keep_text: bool = True,
    ) -> None:
        super().__init__(max_event_bytes=max_event_bytes)
        drop = check_options(usage, model, id, drop_fields)
        self._agg = ChatAggregator(keep_text=keep_text)
        self._core = RelayCore(
            self._agg, usage=usage, model=model, id=id, drop_fields=drop, on_chunk=on_chunk
        )
        self._comments = bool(comments)
        self._sent: list[bytes] = []
        self._closed = False
        self._too_large = False
        self._eof_truncated = False
        self._writing = False

    def write(self, data: bytes | bytearray | memoryview, /) -> bytes:
        """Relay the next upstream bytes; returns the bytes to send downstream now."""
        if self._closed:
            raise UsageError("write() after close(): a Relay forwards one stream")
        if self._writing:
            raise UsageError("Relay.write() called again from inside on_chunk")
        chunk = as_bytes(data, self)
        self._writing = True
        self._overflowed = False
        try:
            self._scan(chunk)
        finally:
            self._writing = False
        out = self._take()
        if self._overflowed:
            self._stop_too_large()
            assert self._limit is not None
            raise too_large(self._limit, [out])
        return out

    def close(self, *, truncated: bool = False) -> bytes:  # type: ignore[override]  # the tail to send, not events
        """End the upstream; returns the tail: the held usage chunk and ``[DONE]`` when the answer
        is whole (every choice finished, no error, nothing cut), else nothing at all.
        ``truncated=True`` says the upstream transfer broke (a transport error): the answer is then
        not whole unless it had already ended, and the client gets no ``[DONE]``."""
        if self._closed:
            return b""
        self._closed = True
        core = self._core
        pending = not self._line and not self._head and self._data_size >= 0 and not self._discarding
        if pending and not core.stopped and not self._stopped:
            # every line of the last event arrived, only its blank line is missing: keep it
            self._overflowed = False
            self._process(b"")
        super().close()
        self._eof_truncated = (self._truncated or truncated) and not core.stopped and not self._too_large
        whole = not (self._eof_truncated or self._too_large) and self._answered()
        return self._take() + core.close(whole)

    def result(self) -> dict[str, Any]:
        """The folded ``chat.completion`` of what was forwarded, with ``"verdict"``: a new dict per call."""
        core = self._core
        # the fold's result with the relay's verdict, built once (not the fold's own, then replaced)
        return self._agg._result(
            core.aborted, self._too_large, self._eof_truncated or core.lost, self._closed
        )

    @property
    def complete(self) -> bool:
        """True once the answer sent is complete and nothing after can change it: ``[DONE]`` came
        after every choice finished (no error, abort or lost chunk). What comes next, a cut
        included, sends nothing more."""
        return self._core.stopped and self.verdict.complete

    @property
    def verdict(self) -> ChatVerdict:
        """How complete the forwarded stream is so far (``complete``, ``done``, ``truncated``, ...)."""
        core = self._core
        # a chunk that could not be read leaves a hole in the answer: as a cut would
        return self._agg._verdict(
            core.aborted, self._too_large, self._eof_truncated or core.lost, self._closed
        )

    @property
    def aggregator(self) -> ChatAggregator:
        """The ``ChatAggregator`` the forwarded chunks are folded into."""
        return self._agg

    def text(self, index: int = 0, /) -> str:
        """The content of choice ``index`` forwarded so far (``""`` if none), without building the result."""
        choice = self._agg._choices.get(index)
        if choice is None or choice.content is None:
            return ""
        return "".join(choice.content)

    @property
    def feed(self) -> NoReturn:  # a relay hands out bytes, never events
        """A Relay has no ``feed``: ``write(data)`` takes the upstream bytes and returns the bytes to
        send. (The scanner's ``feed`` it is built on returns events and would skip ``write``'s checks.)"""
        raise AttributeError(
            "'Relay' object has no attribute 'feed': write(data) relays upstream bytes and returns the bytes to send"
        )

    # internals

    def _take(self) -> bytes:
        out = b"".join(self._sent)
        self._sent.clear()
        return out

    def _stop_too_large(self) -> None:
        self._too_large = True
        self._core.stopped = True
        self._stopped = True

    def _answered(self) -> bool:
        # every choice finished (a verdict's finish_reasons, without building the verdict)
        choices = self._agg._choices
        return bool(choices) and all(c.finish_reason is not None for c in choices.values())

    def _on_event(self, data: bytes, event_type: bytes | None) -> bool:
        if self._overflowed:
            return True
        core = self._core
        if core.stopped:
            return True
        self._sent.append(core.event(data, event_type == b"error", b"\n" in data))
        return core.stopped

    def _on_comment(self, line: bytes) -> bool:
        if self._comments and not self._core.stopped:
            self._sent.append(line + b"\n\n")
        return False
