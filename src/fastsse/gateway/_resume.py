"""Resumable streams: every event of a streamed answer numbered and kept in Redis, so a caller that
lost its connection asks ``GET /v1/streams/<stream_id>`` with ``Last-Event-ID`` and gets the rest.

- ``Resumer(redis, *, max_bytes, ttl)``: the gateway's one handle on the kept answers, and their
  one writer.
- ``Resumer.open(owner) -> Recorder``: one answer's recorder. ``Recorder.piece(data)`` adds
  ``id: <stream_id>:<n>`` to each event of a piece of SSE bytes (n from 1) and queues the framed
  events for Redis; ``room()`` holds the upstream while they wait; ``end(complete)`` writes the end
  and starts the TTL.
- ``serve_resume(...)``: the answer to ``GET /v1/streams/<stream_id>``: the events after the one
  named by ``Last-Event-ID``, once, in order, from Redis, followed live while the answer is still
  streaming, then the answer's end.

The writer: one task per ``Resumer`` sends, in one Lua call, every answer's events queued since
its previous call (one stream entry per answer per call), then takes what was queued meanwhile.
One call in flight keeps each answer's entries in order, and the batches grow with the load: a
redis-py pipeline costs ~25 µs per command, the one call ~4 µs per answer (measured with 256).

In Redis, per answer (``<id>`` the stream id):

- ``fastsse:gw:rs:<id>``: a Redis stream. Each entry holds consecutive events: its entry id is
  ``0-<n of its last event>`` (so the entries that hold the events after n are ``XREAD`` from
  ``0-<n>``), its fields ``n`` (its first event's number), ``e`` (the events' bytes as the caller
  got them, one after the other) and ``l`` (their lengths, uint32 little-endian). The end is the
  entry ``1-0`` with field ``end``: ``complete``, ``cut`` (the answer ended unfinished) or
  ``truncated`` (recording stopped: see below).
- ``fastsse:gw:rs:<id>:meta``: a hash: ``owner`` (the digest of the caller's key), ``state``
  (``streaming``, ``ended``, ``truncated``) and, once the answer ended, ``events`` (how many it
  had) and ``complete`` (0 or 1).
- ``fastsse:gw:rs:<id>:lock``: held by the one resume in progress (``SET NX`` with a TTL).

Both kept keys expire ``ttl`` seconds after the answer's end, and ``ttl`` + 1 h after their last
write while it streams, so the keys of an instance that died mid-answer go too. Past
``max_bytes`` of events an answer is no longer recorded (its caller still gets every event with
its id): a resume that would need an event that was not kept is refused (410), never answered
with a gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
import secrets
import struct
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import orjson

from ._asgi import SSE_HEADERS, Receive, Send

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["HEADER", "Recorder", "Resumed", "Resumer", "serve_resume"]

log = logging.getLogger(__name__.rpartition(".")[0])  # the package's logger, as _app's

HEADER: Final = b"x-fastsse-stream"
PREFIX: Final = "fastsse:gw:rs:"
ROOM_BYTES: Final = 1 << 20  # an answer's events waiting for Redis past which its upstream is held
STREAMING_EXTRA: Final = 3600.0  # seconds the keys outlive the TTL while the answer streams
LOCK_MS: Final = 30_000  # a resume's lock, refreshed while it follows
READ_COUNT: Final = 64  # entries per XREAD
FOLLOW_IDLE: Final = 360.0  # seconds a live resume waits for a silent answer's next event
_END_ID: Final = b"1-0"  # the end entry: after every 0-<n>
_STREAM_ID: Final = re.compile(r"[A-Za-z0-9_-]{22}\Z")  # secrets.token_urlsafe(16)
_NUMBER: Final = re.compile(r"[0-9]{1,18}\Z")
# An event's end in bytes that are not all LF: a line's end (a CR that is half of a CRLF is not
# one) and the blank line after it
_BOUNDARY: Final = re.compile(rb"(\r\n|\r(?!\n)|\n)(\r\n|\r|\n)")
_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
# what the LF path leaves to the general one (with a CR): a comment-only block, a leading blank
# line (an alternation with "\r" in it would cost 15 times as much: no literal prefix to scan for)
_ODD: Final = re.compile(rb"\n\n[:\n]")
_ODD_START: Final = (b":", b"\n")
_RELEASE: Final = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)
# The writer's one call: KEYS are (stream, meta) per answer, ARGV 11 values per answer:
#  1 start ("1": the meta hash's first write), 2 the n of the entry's last event ("": no entry),
#  3 its first event's n, 4 the events, 5 their lengths, 6 the owner, 7 the keys' TTL in ms,
#  8 the end entry's value ("": none yet), 9 the final state ("": streaming), 10 the event count,
#  11 complete ("0"/"1"). Each answer's commands are pcall'ed: one answer's failure (a key of
#  another type, no memory) is its own; the answer's 1-based index is returned for each failure.
_WRITE: Final = """
local failed = {}
for i = 1, #KEYS, 2 do
  local key, meta, a = KEYS[i], KEYS[i + 1], (i - 1) / 2 * 11
  local ms, bad = ARGV[a + 7], false
  local function call(...)
    local r = redis.pcall(...)
    if type(r) == 'table' and r.err then bad = true end
  end
  if ARGV[a + 1] ~= '' then
    call('HSET', meta, 'owner', ARGV[a + 6], 'state', 'streaming')
    call('PEXPIRE', meta, ms)
  end
  if ARGV[a + 2] ~= '' then
    call('XADD', key, '0-' .. ARGV[a + 2], 'n', ARGV[a + 3], 'e', ARGV[a + 4], 'l', ARGV[a + 5])
    call('PEXPIRE', key, ms)
    call('PEXPIRE', meta, ms)
  end
  if ARGV[a + 8] ~= '' then
    call('XADD', key, '1-0', 'end', ARGV[a + 8])
    call('PEXPIRE', key, ms)
    if ARGV[a + 8] == 'truncated' then
      call('HSET', meta, 'owner', ARGV[a + 6], 'state', 'truncated')
      call('PEXPIRE', meta, ms)
    end
  end
  if ARGV[a + 9] ~= '' then
    call('HSET', meta, 'owner', ARGV[a + 6], 'state', ARGV[a + 9], 'events', ARGV[a + 10],
      'complete', ARGV[a + 11])
    call('PEXPIRE', meta, ms)
    call('PEXPIRE', key, ms)
  end
  if bad then failed[#failed + 1] = (i + 1) / 2 end
end
return failed
"""


class Resumer:
    """``Resumer(redis, *, max_bytes, ttl, follow_idle=360.0)``: where the gateway keeps its
    resumable answers, and their one writer.

    ``redis`` is a ``redis.asyncio.Redis`` client that answers bytes (``decode_responses`` off),
    shared with the gateway's other state; ``max_bytes`` bounds the event bytes kept per answer,
    ``ttl`` the seconds they are kept after its end; a resume that follows an answer live gives up
    (and cuts its response) after ``follow_idle`` seconds without a new event (an instance that
    died mid-answer never writes its end). The writer runs on the loop of the first answer and
    ends whenever nothing is queued: there is nothing to close.
    """

    __slots__ = (
        "_down",
        "_due",
        "_errors",
        "_release",
        "_task",
        "_write",
        "block_ms",
        "follow_idle",
        "max_bytes",
        "redis",
        "ttl",
    )

    def __init__(self, redis: Redis, *, max_bytes: int, ttl: float, follow_idle: float = FOLLOW_IDLE) -> None:
        from redis.exceptions import RedisError

        self.redis = redis
        self.max_bytes = max_bytes
        self.ttl = ttl
        self.follow_idle = follow_idle
        self._errors: tuple[type[BaseException], ...] = (RedisError, OSError)
        self._release = redis.register_script(_RELEASE)
        self._write = redis.register_script(_WRITE)
        self._due: list[Recorder] = []  # recorders with something to write, in order
        self._task: asyncio.Task[None] | None = None
        self._down = False  # the last call failed: logged once until one succeeds
        # an XREAD BLOCK must answer within the client's socket timeout (the shared client's is
        # short): block for a part of it, polling again after
        timeout = redis.connection_pool.connection_kwargs.get("socket_timeout")
        self.block_ms = max(10, min(1000, int(timeout * 600))) if timeout else 1000

    def open(self, owner: bytes) -> Recorder:
        """A recorder for one streamed answer, on the running loop; ``owner`` is the digest of the
        caller's key (b"" when the gateway has no keys): only a resume with the same one finds
        it. The answer is in Redis (as streaming, with no event yet) from the writer's next call:
        a caller that got the header before any event (a keep-alive comment sent it) can resume.
        ``Recorder.end`` must follow, whatever becomes of the answer."""
        recorder = Recorder(self, owner)
        self._enlist(recorder)
        return recorder

    def _enlist(self, recorder: Recorder) -> None:
        """Have ``recorder``'s queue written with the writer's next call."""
        if recorder._listed:
            return
        recorder._listed = True
        self._due.append(recorder)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._writer())

    async def _writer(self) -> None:
        """Write what every due recorder queued, one call at a time, until nothing is due."""
        due: list[Recorder] = []
        try:
            while self._due:
                due, self._due = self._due, []
                keys: list[str] = []
                args: list[Any] = []
                for recorder in due:
                    recorder._take(keys, args)
                failed: set[int] | None = None
                try:
                    answer = await self._write(keys=keys, args=args)
                    failed = {int(i) for i in answer}
                except self._errors as exc:
                    if not self._down:
                        log.warning(
                            "resumable streams: Redis failed (%s): the answers being written stop"
                            " being recorded (their resumes answer 410)",
                            exc,
                        )
                    self._down = True
                except Exception:  # a bug here must not leave an answer's end waiting forever
                    log.exception("resumable streams: the writer failed")
                else:
                    if self._down:
                        log.warning("resumable streams: Redis answers again: new answers are recorded")
                    self._down = False
                written, due = due, []
                for index, recorder in enumerate(written, 1):
                    recorder._written(failed is not None and index not in failed)
        finally:
            self._task = None
            # cancelled (the loop is closing): nobody waits on what was not written
            for recorder in (*due, *self._due):
                recorder._abandon()
            self._due = []


class Recorder:
    """One answer's numbering and recording (``Resumer.open``); not shared between answers.

    ``piece(data)`` takes each piece of SSE bytes the caller is sent (whole events, as the relay,
    the translators and the passthrough hand them on: LF, or the upstream's own CRLF or CR) and
    returns them with ``id: <stream_id>:<n>`` as the last field of every event, so it wins over an
    ``id`` the upstream sent. Comments and blank lines pass unchanged and unnumbered. Bytes after a
    piece's last whole event (none of the engine's formats leave any) are held until the next
    piece ends that event. Nothing waits on Redis here: the events are queued for the writer.
    ``backlog`` is the bytes queued and not yet acknowledged by Redis.
    """

    __slots__ = (
        "_complete",
        "_crcr",
        "_crlf",
        "_done",
        "_ending",
        "_failed",
        "_key",
        "_lengths",
        "_lf",
        "_listed",
        "_marked",
        "_meta",
        "_n",
        "_owner",
        "_pending",
        "_queued",
        "_resumer",
        "_room",
        "_size",
        "_stored",
        "_tail",
        "_taken",
        "_taken_mark",
        "_truncated",
        "_written_start",
        "backlog",
        "header",
        "stream_id",
    )

    def __init__(self, resumer: Resumer, owner: bytes) -> None:
        self._resumer = resumer
        self._owner = owner
        self.stream_id = secrets.token_urlsafe(16)
        sid = self.stream_id.encode()
        self.header: tuple[bytes, bytes] = (HEADER, sid)
        self._lf = b"%b\nid: " + sid + b":%d\n\n"  # block, n: no "%" in a urlsafe id
        self._crlf = b"%b\r\nid: " + sid + b":%d\r\n\r\n"
        self._crcr = b"%b\rid: " + sid + b":%d\r\r"
        self._key = PREFIX + self.stream_id
        self._meta = self._key + ":meta"
        self._n = 0  # events numbered
        self._queued = 0  # the n of the last event queued for Redis
        self._stored = 0  # the n of the last event handed to the writer
        self._size = 0  # bytes of the events queued so far (bounded by max_bytes)
        self.backlog = 0
        self._pending: list[bytes] = []  # the events _stored + 1 .. _queued, a piece's at a time
        self._lengths: list[int] = []  # their lengths
        self._taken = 0  # bytes in the writer's call in flight
        self._tail = b""  # an event not ended yet
        self._written_start = False  # the meta hash's first write was handed to the writer
        self._listed = False  # in the writer's due list
        self._truncated = False  # past max_bytes, or Redis failed: nothing more is queued
        self._marked = False  # the end entry ("truncated") was handed to the writer
        self._taken_mark = False  # ... with the call in flight
        self._failed = False
        self._ending = False
        self._complete = False
        self._done: asyncio.Future[None] | None = None
        self._room: asyncio.Future[None] | None = None

    # the per-piece path

    def piece(self, data: bytes) -> bytes:
        """The bytes to send for ``data``: every whole event with its id line added; its events
        are queued for Redis."""
        if self._tail:
            data = self._tail + data
            self._tail = b""
        # (a piece that starts with the LF of a CRLF whose CR ended the last one: that LF is a
        # leading blank line here, passed on unrecorded, so the caller's reader still joins them)
        if b"\r" not in data and data[:1] not in _ODD_START and not _ODD.search(data):
            # the relay's and the translators' pieces: events only, LF
            blocks = data.split(b"\n\n")
            self._tail = blocks.pop()
            n = self._n
            fmt = self._lf
            events = [fmt % (block, i) for i, block in enumerate(blocks, n + 1)]
            self._n = n + len(events)
            out = kept = b"".join(events)
        else:
            out, events = self._general(data)
            kept = b"".join(events)
        if events and not self._truncated and not self._ending:
            self._queue(kept, events)
        return out

    def _general(self, data: bytes) -> tuple[bytes, list[bytes]]:
        """Comments, blank lines, CRLF, CR or mixed line ends: the bytes to send and the events."""
        if b"\r" not in data:
            return self._blocks(data.split(b"\n\n"), self._lf, b"\n\n")
        if data.count(b"\n") == data.count(b"\r") == data.count(b"\r\n"):
            return self._blocks(data.split(b"\r\n\r\n"), self._crlf, b"\r\n\r\n")
        if b"\n" not in data:
            return self._blocks(data.split(b"\r\r"), self._crcr, b"\r\r")
        return self._mixed(data)

    def _blocks(self, blocks: list[bytes], fmt: bytes, end: bytes) -> tuple[bytes, list[bytes]]:
        """The blocks between blank lines of bytes with one kind of line end: each event framed
        by ``fmt``, comments and blank lines as they were."""
        self._tail = blocks.pop()
        events = []
        out = []
        n = self._n
        for block in blocks:
            first = block[:1]
            if first == b":" or first == b"\n" or first == b"\r" or not first:
                lead, block = _leading(block)
                if lead:
                    out.append(lead)
                if not block or _comments_only(block):
                    out.append(block + end)
                    continue
            n += 1
            event = fmt % (block, n)
            events.append(event)
            out.append(event)
        self._n = n
        return b"".join(out), events

    def _mixed(self, data: bytes) -> tuple[bytes, list[bytes]]:
        """CR line ends, or a mix: events found by their line ends (the WHATWG rules)."""
        events = []
        out = []
        at = 0
        for match in _BOUNDARY.finditer(data):
            block, eol, blank = data[at : match.start()], match[1], match[2]
            at = match.end()
            lead, block = _leading(block)
            if lead:
                out.append(lead)
            if not block or _comments_only(block):
                out.append(block + eol + blank)
                continue
            self._n += 1
            event = block + eol + b"id: " + self.header[1] + b":%d" % self._n + eol + blank
            events.append(event)
            out.append(event)
        self._tail = data[at:]
        return b"".join(out), events

    def _queue(self, kept: bytes, events: list[bytes]) -> None:
        limit = self._resumer.max_bytes
        if self._size + len(kept) > limit:  # keep the events that fit, then stop recording
            count = 0
            for event in events:
                if self._size + len(event) > limit:
                    break
                self._size += len(event)
                count += 1
            events = events[:count]
            kept = b"".join(events)
            self._truncated = True
        else:
            self._size += len(kept)
        if events:
            self._pending.append(kept)
            self._lengths += map(len, events)
            self._queued += len(events)
            self.backlog += len(kept)
        self._resumer._enlist(self)

    def room(self) -> asyncio.Future[None] | None:
        """None, or a future that is done once Redis took enough of this answer's events (fewer
        than 1 MiB left waiting): the caller holds the upstream until then."""
        if self.backlog <= ROOM_BYTES:
            return None
        if self._room is None or self._room.done():
            self._room = asyncio.get_running_loop().create_future()
        return self._room

    # the writer's side

    def _take(self, keys: list[str], args: list[Any]) -> None:
        """Hand everything queued to the writer's call: two keys, and eleven values in ``args``
        (``_WRITE`` says which)."""
        self._listed = False
        keys += (self._key, self._meta)
        resumer = self._resumer
        start = not self._written_start and not self._failed
        self._written_start = True
        entry: list[Any] = [b"", b"", b"", b""]
        if self._pending and not self._failed:
            entry = [
                self._queued,
                self._stored + 1,
                b"".join(self._pending) if len(self._pending) > 1 else self._pending[0],
                struct.pack(f"<{len(self._lengths)}I", *self._lengths),
            ]
            self._stored = self._queued
        self._taken = sum(map(len, self._pending))
        self._pending = []
        self._lengths = []
        end = b""
        if self._truncated and not self._marked:
            end = b"truncated"
            self._marked = True
            self._taken_mark = True
        elif self._ending and not self._truncated:
            end = b"complete" if self._complete else b"cut"
        state: Any = b""
        if self._ending:
            state = b"truncated" if self._truncated else b"ended"
            ms = round(resumer.ttl * 1000)
        else:
            ms = round((resumer.ttl + STREAMING_EXTRA) * 1000)
        args += (
            b"1" if start else b"",
            *entry,
            self._owner,
            max(1, ms),
            end,
            state,
            self._n,
            int(self._complete),
        )

    def _written(self, ok: bool) -> None:
        """The writer's call that held what ``_take`` took returned (``ok``: without an error)."""
        self.backlog -= self._taken
        self._taken = 0
        if not ok and self._taken_mark:
            self._marked = False  # the truncated end entry is written again with the end
        self._taken_mark = False
        if not ok and not self._failed:
            self._failed = self._truncated = True
            self.backlog -= sum(map(len, self._pending))
            self._pending = []
            self._lengths = []
            if not self._ending:  # one try at marking it truncated now, if Redis is back
                self._resumer._enlist(self)
        if self.backlog <= ROOM_BYTES and self._room is not None and not self._room.done():
            self._room.set_result(None)
        if self._ending and not self._listed and self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _abandon(self) -> None:
        """The writer was cancelled: release whoever waits on this answer."""
        self._listed = False
        self.backlog = 0
        for future in (self._room, self._done):
            if future is not None and not future.done():
                future.set_result(None)

    async def end(self, complete: bool) -> None:
        """The answer ended (``complete``: whole, else cut): once the queued events are written,
        its end and the TTL are. Call it for every answer opened, whatever became of it. A second
        call waits for the first; Redis errors are logged, never raised."""
        if not self._ending:
            self._ending = True
            self._complete = complete
            self._done = asyncio.get_running_loop().create_future()
            self._resumer._enlist(self)
        if self._done is not None:
            await asyncio.shield(self._done)


def _leading(block: bytes) -> tuple[bytes, bytes]:
    """A block's leading blank lines (they dispatch nothing) apart from the rest."""
    rest = block.lstrip(b"\r\n")
    return block[: len(block) - len(rest)], rest


def _comments_only(block: bytes) -> bool:
    """Whether every line of ``block`` is a comment (no field: not an event)."""
    return all(line[:1] == b":" for line in _LINE_END.split(block))


# GET /v1/streams/<stream_id>


class Resumed(NamedTuple):
    """How a resume went, for the log line: the ``status`` sent, the ``outcome`` (``complete``;
    or cut: ``cut`` (as the answer was), ``truncated``, ``gap`` (events missing in Redis),
    ``caller_left``, ``stalled`` (no new event for ``follow_idle`` seconds), ``redis``; or the
    refusal's code) and the ``events`` sent."""

    status: int
    outcome: str
    events: int


class _Gone(Exception):
    """The resuming caller left."""


def _error(status: int, message: str, kind: str, code: str) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})


async def _refuse(
    send: Send, status: int, message: str, kind: str, code: str, retry: bool = False
) -> Resumed:
    body = _error(status, message, kind, code)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if retry:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
    return Resumed(status, code, 0)


def _not_found(send: Send) -> Awaitable[Resumed]:
    # one answer for an unknown, expired, forged or someone else's stream
    return _refuse(
        send, 404, "no such stream (unknown, expired, or not yours)", "not_found_error", "stream_not_found"
    )


async def serve_resume(
    resumer: Resumer,
    stream_id: str,
    owner: bytes,
    last_event_id: str | bytes | None,
    send: Send,
    *,
    receive: Receive | None = None,
) -> Resumed:
    """Answer ``GET /v1/streams/<stream_id>`` on ASGI ``send``: a ``text/event-stream`` of the
    events after ``last_event_id`` (``<stream_id>:<n>``; None or empty: from the first), each as
    the caller first got it, in order, once; followed live while the answer still streams; then
    the end of the response, or a cut one if the answer was cut. When the answer has ended and
    the caller has its every event: 204 (an ``EventSource`` stops there instead of reconnecting). ``owner`` is the digest of the
    caller's key (b"" without keys). ``receive`` (the request's ASGI receive, its body unread):
    a caller that leaves stops the resume at once, releasing the stream for the next.

    Refusals, in the chat error shape (``{"error": {"message", "type", "param", "code"}}``): 404
    ``stream_not_found`` for an unknown, expired or malformed id, a ``Last-Event-ID`` of another
    stream, or another key's stream (the same answer: it does not say the stream exists); 400
    ``bad_last_event_id`` for an event number that is not one; 416 ``event_past_end`` for an n
    past the last event of an ended answer; 410 ``stream_truncated`` when the events the caller
    needs were not kept (past ``resume_max_bytes``, or Redis failed while recording); 409
    ``stream_busy`` (``Retry-After: 1``) while another resume of the same stream is running; 503
    ``redis_unavailable`` (``Retry-After: 1``) when Redis does not answer. Redis failing after
    the status went out cuts the response. It returns a ``Resumed`` and raises what ``send``
    raises only before the status went out.
    """
    if not _STREAM_ID.match(stream_id):
        return await _not_found(send)
    after = 0
    if last_event_id:
        text = last_event_id.decode("latin-1") if isinstance(last_event_id, bytes) else last_event_id
        part, colon, number = text.strip().rpartition(":")
        if not colon or part != stream_id:
            return await _not_found(send)
        if not _NUMBER.match(number):
            return await _refuse(
                send,
                400,
                f"Last-Event-ID must be {stream_id}:<event number>",
                "invalid_request_error",
                "bad_last_event_id",
            )
        after = int(number)
    redis = resumer.redis
    key = PREFIX + stream_id
    lock = key + ":lock"
    try:
        stored, state, events, complete = await redis.hmget(
            key + ":meta", [b"owner", b"state", b"events", b"complete"]
        )
    except resumer._errors:
        return await _unavailable(send)
    if not isinstance(stored, bytes) or not hmac.compare_digest(stored, owner):
        return await _not_found(send)
    if events is not None:  # the answer ended
        if after > int(events):
            return await _refuse(
                send,
                416,
                f"the answer ended at event {int(events)}: there is no event after {after}",
                "invalid_request_error",
                "event_past_end",
            )
        if after == int(events):
            # the caller has every event there is: 204, which also tells an EventSource (that
            # reconnects whenever a response ends) to stop
            await send(
                {"type": "http.response.start", "status": 204, "headers": [(HEADER, stream_id.encode())]}
            )
            await send({"type": "http.response.body", "body": b""})
            return Resumed(204, "complete" if complete == b"1" else "cut", 0)
    if state == b"truncated":
        return await _refuse(
            send,
            410,
            "the events after this one were not kept (the answer passed resume_max_bytes,"
            " or Redis failed while it was recorded)",
            "invalid_request_error",
            "stream_truncated",
        )
    token = secrets.token_hex(8)
    try:
        if not await redis.set(lock, token, nx=True, px=LOCK_MS):
            return await _refuse(
                send,
                409,
                "this stream is being resumed by another request",
                "conflict_error",
                "stream_busy",
                retry=True,
            )
    except resumer._errors:
        return await _unavailable(send)
    gone = [False]
    watcher = asyncio.get_running_loop().create_task(_watch(receive, gone)) if receive else None
    try:
        return await _follow(resumer, stream_id, after, send, gone, lock)
    finally:
        if watcher is not None:
            watcher.cancel()
        with contextlib.suppress(*resumer._errors):  # else it expires
            await resumer._release(keys=[lock], args=[token])


async def _unavailable(send: Send) -> Resumed:
    return await _refuse(
        send, 503, "resumable streams are kept in Redis, which did not answer", "api_error",
        "redis_unavailable", retry=True,
    )  # fmt: skip


async def _watch(receive: Receive, gone: list[bool]) -> None:
    """Set ``gone[0]`` when the caller disconnects (the GET's empty body comes first)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    gone[0] = True


async def _follow(
    resumer: Resumer, stream_id: str, after: int, send: Send, gone: list[bool], lock: str
) -> Resumed:
    """Send the entries after ``0-<after>`` up to the end entry, waiting for new ones."""
    redis = resumer.redis
    key = PREFIX + stream_id
    meta = key + ":meta"
    await send({"type": "http.response.start", "status": 200, "headers": _headers(stream_id)})
    body: Callable[[bytes], Awaitable[None]] = _body(send)
    last = b"0-%d" % after
    sent = 0  # events sent; the last one's n is ``after``
    now = time.monotonic()
    heard = checked = locked = now
    while True:
        if gone[0]:
            return Resumed(200, "caller_left", sent)
        try:
            answer = await redis.xread({key: last}, count=READ_COUNT, block=resumer.block_ms)
        except resumer._errors:
            return Resumed(200, "redis", sent)  # cut: the caller's client sees a broken stream
        entries = _entries(answer)
        now = time.monotonic()
        end = None
        if entries:
            heard = now
            out = []
            count = 0
            for entry, fields in entries:
                if entry == _END_ID:
                    end = fields.get(b"end", b"cut")
                    break
                events, first, upto = fields[b"e"], int(fields[b"n"]), int(entry[2:])
                if first > after + 1:  # never written by the writer: the keys expired under it
                    end = b"gap"
                    break
                if first <= after:  # the entry holds events the caller has: skip them
                    lengths = struct.unpack(f"<{len(fields[b'l']) // 4}I", fields[b"l"])
                    events = events[sum(lengths[: after - first + 1]) :]
                    first = after + 1
                out.append(events)
                count += upto - first + 1
                after = upto
                last = entry
            if out:
                try:
                    await body(out[0] if len(out) == 1 else b"".join(out))
                except _Gone:
                    return Resumed(200, "caller_left", sent)
                sent += count
        if end is not None:
            try:
                if end == b"complete":
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return Resumed(200, "complete", sent)
                if end == b"truncated":
                    await body(b": fastsse: the rest of this answer was not kept (resume_max_bytes)\n\n")
                elif end == b"gap":
                    await body(b": fastsse: events of this answer expired before they were read\n\n")
            except Exception:
                return Resumed(200, "caller_left", sent)
            return Resumed(200, end.decode() if end in (b"truncated", b"gap") else "cut", sent)
        try:
            if now - locked > LOCK_MS / 3000:
                locked = now
                await redis.pexpire(lock, LOCK_MS)
            if not entries and now - checked > 5.0:
                checked = now
                if not await redis.exists(meta):
                    return Resumed(200, "stalled", sent)  # expired under us
        except resumer._errors:
            return Resumed(200, "redis", sent)
        if now - heard > resumer.follow_idle:
            return Resumed(200, "stalled", sent)


def _headers(stream_id: str) -> list[tuple[bytes, bytes]]:
    return [*SSE_HEADERS, (HEADER, stream_id.encode())]


def _body(send: Send) -> Callable[[bytes], Awaitable[None]]:
    async def body(data: bytes) -> None:
        try:
            await send({"type": "http.response.body", "body": data, "more_body": True})
        except Exception as exc:
            raise _Gone from exc

    return body


def _entries(answer: Any) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """The entries of one stream's XREAD answer (RESP2: a list of [key, entries]; RESP3: a dict)."""
    if not answer:
        return []
    if isinstance(answer, dict):
        (found,) = answer.values()
        return list(found[0] if found and isinstance(found[0], list) and len(found) == 1 else found)
    return list(answer[0][1])
