"""Resuming a cut Responses stream without folding anything twice: ``Resumable``.

A Responses request sent with ``"background": true`` makes the server keep the response; its
stream names the response (``response.created``) and numbers every event (``sequence_number``).
When such a stream is cut (or ends without its terminal event), the engine asks for the rest with
``GET {base_url}/responses/{id}?stream=true&starting_after=N`` (the OpenAI Responses API's own
resume), N the last event that arrived whole, and feeds it to the same fold: the answer continues
as if nothing happened.

``Resumable`` stands between the transfer and the request's own stream (the fold or a
translator): it passes the bytes on one whole event at a time, keeps the bytes of an event still
unfinished, and reads each event's sequence number and the response id. At a cut the unfinished
event is dropped (the resume sends it again); an event whose number was already passed on (a
server that repeats one) is dropped and counted; numbers that jump (a server that skipped one)
are a gap, which makes the answer incomplete. It costs a line scan and a JSON parse per event, for
background requests only.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

from ..apis import APIS

__all__ = ["MAX_RESUMES", "Resumable"]

# A stream cut more often than this is not resumed again: the failure is the caller's.
MAX_RESUMES: Final = 8

_LINE: Final = re.compile(rb"\r\n|\r|\n")
_TERMINAL: Final = frozenset(APIS["responses"].terminal)
_NAMING: Final = frozenset({"response.created", "response.in_progress", "response.queued"})


def _data(block: bytes) -> bytes | None:
    """The ``data`` of one event block (its lines joined by LF, as the SSE rules do), or None."""
    parts = []
    for line in _LINE.split(block):
        if line[:5] == b"data:":
            value = line[5:]
            parts.append(value[1:] if value[:1] == b" " else value)
    return b"\n".join(parts) if parts else None


class Resumable:
    """``Resumable(inner)``: the request's ``inner`` stream behind the event-by-event pass-through
    (the engine's stream protocol: ``write``, ``close``, ``result``, ``timing``).

    ``response_id`` and ``last_sequence`` say where a resume starts; ``terminal`` whether the
    answer ended; ``restart()`` drops the unfinished event before the next connection's bytes;
    ``resumes``, ``repeated`` and ``gaps`` are reported in ``result()["verdict"]``.
    """

    __slots__ = (
        "gaps",
        "holder",
        "inner",
        "last_sequence",
        "repeated",
        "response_id",
        "resumes",
        "tail",
        "terminal",
    )

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.tail = b""  # the bytes of the event not finished yet
        self.response_id: str | None = None
        self.last_sequence = -1
        self.terminal = False
        self.resumes = 0
        self.repeated = 0
        self.gaps: list[tuple[int, int]] = []
        self.holder: Any = None

    def write(self, data: Any, /) -> int | None:
        buf = self.tail + bytes(data)
        out: list[bytes] = []
        start = line_start = 0
        for match in _LINE.finditer(buf):
            if match.end() == len(buf) and match.group() == b"\r":
                break  # a CR that an LF may follow: decided by the next read
            blank = match.start() == line_start
            line_start = match.end()
            if blank:
                block = buf[start:line_start]
                start = line_start
                if self._keep(block):
                    out.append(block)
        self.tail = buf[start:]
        if not out:
            return None
        answer: int | None = self.inner.write(b"".join(out))
        return answer

    def _keep(self, block: bytes) -> bool:
        data = _data(block)
        if data is None:
            return True  # a comment or a field-only block: harmless to pass on twice
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return True  # the fold counts it as it would
        if not isinstance(event, dict):
            return True
        seq = event.get("sequence_number")
        if type(seq) is int:
            if seq <= self.last_sequence:
                self.repeated += 1
                return False
            if self.last_sequence >= 0 and seq > self.last_sequence + 1:
                self.gaps.append((self.last_sequence + 1, seq - 1))
            self.last_sequence = seq
        kind = event.get("type")
        if kind in _NAMING and self.response_id is None:
            response = event.get("response")
            rid = response.get("id") if isinstance(response, dict) else None
            if isinstance(rid, str) and rid:
                self.response_id = rid
        elif kind in _TERMINAL or kind == "error":
            self.terminal = True
        return True

    def restart(self) -> None:
        """Drop the unfinished event of the connection that broke: the resume sends it whole."""
        self.tail = b""
        self.resumes += 1

    def close(self, *, truncated: bool = False) -> Any:
        if self.tail:  # the bytes ended inside an event: the fold sees them and says so
            tail, self.tail = self.tail, b""
            self.inner.write(tail)
        return self.inner.close(truncated=truncated)

    def result(self) -> dict[str, Any]:
        out = dict(self.inner.result())
        verdict = out.get("verdict")
        if isinstance(verdict, dict) and (self.resumes or self.repeated or self.gaps):
            verdict["resumes"] = self.resumes
            verdict["repeated_events"] = self.repeated
            if self.gaps:
                first, last = self.gaps[0]
                verdict["complete"] = False
                verdict["why"] = f"the resumed stream skipped events {first}-{last}"
                departures = verdict.get("departures")
                if isinstance(departures, list) and "sequence_gap" not in departures:
                    departures.append("sequence_gap")
        return out

    def timing(self) -> Any:
        return self.inner.timing()

    @property
    def verdict(self) -> Any:
        return self.inner.verdict
