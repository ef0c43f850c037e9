"""The ``"relay"`` stream format of ``AsyncClient`` / ``Client``: a ``Relay`` behind the engine's
stream protocol, so a gateway gets compliant bytes out of the same write callback that would
otherwise fold chunks.

With ``format="relay"`` the request's ``on_chunk`` receives ``bytes``: each non-empty piece the
relay has to send downstream, in order, the tail (``[DONE]`` when the answer is whole) last;
returning False stops the transfer (the downstream client went away). The result is the relay's
``result()``: the fold of what was forwarded, with its ``verdict`` (and ``timing``: the read stamps
and ``first_byte``; token stamps are not recorded for this format).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .._backend import Relay
from .._errors import EventTooLarge
from .._timing import Timing, anchor_pair, build_timing

SendBytes = Callable[[bytes], Any]


class RelayStream:
    """``RelayStream(on_bytes=None, *, max_event_bytes=None, timing=False)``: what the engine drives."""

    __slots__ = ("_anchor", "_reads", "_relay", "_send", "_stopped")

    def __init__(
        self, on_bytes: SendBytes | None = None, *, max_event_bytes: int | None = None, timing: bool = False
    ) -> None:
        self._relay = Relay(max_event_bytes=max_event_bytes)
        self._send = on_bytes
        self._reads: list[int] | None = [] if timing else None
        self._anchor = anchor_pair() if timing else None
        self._stopped = False

    def write(self, data: bytes, /) -> int | None:
        """The engine's write callback: None to go on, 0 to stop the transfer."""
        if self._reads is not None:
            self._reads.append(time.monotonic_ns())
        if self._stopped:
            return 0
        try:
            out = self._relay.write(data)
        except EventTooLarge as exc:
            self._stopped = True
            self._deliver(exc.events[0] if exc.events else b"")
            raise
        if out and not self._deliver(out):
            self._stopped = True
            return 0
        return None

    def _deliver(self, piece: bytes) -> bool:
        if not piece or self._send is None:
            return True
        answer = self._send(piece)
        return answer is None or bool(answer)

    def close(self, *, truncated: bool = False) -> None:
        tail = self._relay.close(truncated=truncated)
        if not self._stopped:
            self._deliver(tail)

    def result(self) -> dict[str, Any]:
        return self._relay.result()

    def timing(self) -> Timing | None:
        if self._reads is None or self._anchor is None:
            return None
        return build_timing(self._reads, [], [], [], self._anchor)

    @property
    def relay(self) -> Any:
        """The ``Relay`` (``verdict``, ``text()``)."""
        return self._relay
