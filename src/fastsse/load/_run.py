"""The run of ``python -m fastsse load``: one request in, one record out, on one clock.

A worker (this process, a ``multiprocessing`` child, or a Ray actor: ``_ray``) opens its own
client on its own event loop, waits for the agreed start, sends its share of the schedule and
returns its records with every stamp moved onto the run's clock (0 = the agreed start, an epoch
time each worker maps to its own ``time.monotonic_ns()`` through one anchor pair).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing
import operator
import os
import signal
import socket
import threading
import time
from array import array
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, Final

from .._errors import LoadError
from .._formats import api_format
from .._timing import chunk_marks
from ..apis import usage_tokens
from . import _metrics, _peers
from ._plan import (
    COMPLETE,
    COMPLETIONS_PATH,
    EPOCH_STAMP_NS,
    FAILED,
    HTTP_ERROR,
    INCOMPLETE,
    STREAM_ERROR,
    Config,
    Share,
    bodies,
    prepare,
    shares,
)
from ._report import assemble

PROBE_S: Final = 0.01  # the event-loop probe's period


# The type codes of a record's arrays: stamps and lags in ns (signed 64 bits), read indexes and
# token counts (32 bits), token kinds (a byte). Arrays hold a run's 100 stamps a request in 800
# bytes where a list of ints takes about 4 KB; the JSON writer turns them into lists (``dumps``).
NS_TYPE: Final = "q"
COUNT_TYPE: Final = "i"
KIND_TYPE: Final = "b"


def _stamps() -> array[int]:
    return array(NS_TYPE)


def _counts() -> array[int]:
    return array(COUNT_TYPE)


@dataclasses.dataclass(slots=True)
class Record:
    """When each part of one request happened, in ns on the run's clock (0 = the run's start).

    The per-chunk fields are ``array.array``s (``reads``, ``lags``: ``q``; ``token_reads``,
    ``tokens``: ``i``; ``token_kinds``: ``b``), built once and never copied after."""

    index: int
    worker: int = 0
    warmup: bool = False
    outcome: str = FAILED
    cause: str | None = None
    status: int = 0
    queued: int | None = None
    started: int | None = None
    sent: int | None = None
    first_byte: int | None = None
    first_token: int | None = None
    first_content: int | None = None
    first_reasoning: int | None = None
    last_token: int | None = None
    end: int | None = None
    reads: array[int] = dataclasses.field(default_factory=_stamps)
    token_reads: array[int] = dataclasses.field(default_factory=_counts)
    tokens: array[int] = dataclasses.field(default_factory=_counts)
    token_kinds: array[int] = dataclasses.field(default_factory=lambda: array(KIND_TYPE))
    lags: array[int] = dataclasses.field(default_factory=_stamps)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    conversation: int | None = None  # with --turns: which conversation, and which turn (from 0)
    turn: int | None = None
    answer: str | None = dataclasses.field(default=None, repr=False)  # the next turn's history only
    attempts: int = 1  # with --retries: the attempts the request took

    @property
    def output_tokens(self) -> int:
        """The usage's completion_tokens when the server reported them, else the tokens counted."""
        return self.completion_tokens if self.completion_tokens is not None else sum(self.tokens)

    def token_times(self) -> list[int]:
        """The arrival time of each token-bearing chunk (its read's stamp)."""
        reads = self.reads
        return [reads[i] for i in self.token_reads]

    def to_json(self) -> dict[str, Any]:
        """The record as its ``--json`` object: the same arrays, not copies (``answer`` left out)."""
        out = dict(zip(_JSON_FIELDS, _json_values(self), strict=True))
        out["output_tokens"] = self.output_tokens
        return out


_JSON_FIELDS: Final = tuple(f.name for f in dataclasses.fields(Record) if f.name != "answer")
_json_values: Final = operator.attrgetter(*_JSON_FIELDS)  # every field at once, in C


def _from_peer(index: int, rec: _peers.PeerRecord, queued: int) -> Record:
    """A peer's record: each chunk counts as its own read (a peer does not show its reads)."""
    out = Record(index=index, queued=queued, started=rec.start_ns, end=rec.end_ns, status=rec.status)
    out.reads = array(NS_TYPE, rec.recv_ns)
    out.first_byte = rec.recv_ns[0] if rec.recv_ns else None
    anchor = None
    for i, (tokens, reasoning) in enumerate(zip(rec.tokens, rec.reasoning, strict=True)):
        if tokens > 0:
            out.token_reads.append(i)
            out.tokens.append(tokens)
            out.token_kinds.append(2 if reasoning else 1)
            sent = rec.sent_ns[i]
            if sent:
                if sent >= EPOCH_STAMP_NS:
                    anchor = anchor or [time.monotonic_ns(), time.time_ns()]
                out.lags.append(rec.recv_ns[i] - _on_monotonic(sent, anchor))
    _firsts(out)
    out.completion_tokens = rec.usage_tokens or None
    if rec.status >= 400:
        out.outcome, out.cause = HTTP_ERROR, f"http {rec.status}"
    elif rec.error == "stream error":
        out.outcome, out.cause = STREAM_ERROR, "error payload in the stream"
    elif rec.error is not None:
        out.outcome = INCOMPLETE if rec.recv_ns else FAILED
        out.cause = rec.error.split(":")[0] if out.outcome == FAILED else f"cut mid-stream ({rec.error[:60]})"
    elif not rec.done:
        out.outcome, out.cause = INCOMPLETE, "no [DONE] or no finish_reason"
    else:
        out.outcome = COMPLETE
    return out


def _on_monotonic(sent: int, anchor: list[int] | None) -> int:
    """A send stamp on this process's monotonic clock: epoch ns (``EPOCH_STAMP_NS``) moved across
    through an ``[monotonic_ns, epoch_ns]`` pair read together; else it is on that clock already
    (the server's, on this machine)."""
    if sent >= EPOCH_STAMP_NS and anchor:
        return sent - anchor[1] + anchor[0]
    return sent


def _firsts(out: Record) -> None:
    times = out.token_times()
    for at, kind in zip(times, out.token_kinds, strict=True):
        if kind & 1 and out.first_content is None:
            out.first_content = at
        if kind & 2 and out.first_reasoning is None:
            out.first_reasoning = at
    if times:
        out.first_token, out.last_token = times[0], times[-1]


# the curl results a load run meets, by what they mean for the request
_CURL_CAUSES: Final = {
    6: "host not found",
    7: "connection refused",
    18: "cut mid-stream",
    28: "timed out",
    52: "empty reply",
    55: "send failed",
    56: "connection reset",
}


def _from_result(index: int, result: dict[str, Any], sent_stamps: list[int], queued: int, exc: Any) -> Record:
    """A record from the engine's result (or the partial result a TransportError carries)."""
    out = Record(index=index, queued=queued)
    timing = result.get("timing") or {}
    for key in ("started", "sent", "first_byte", "end"):
        setattr(out, key, timing.get(key))
    out.attempts = timing.get("attempts") or 1
    out.reads = array(NS_TYPE, timing.get("reads") or ())
    out.token_reads = array(COUNT_TYPE, timing.get("token_reads") or ())
    out.tokens = array(COUNT_TYPE, timing.get("tokens") or ())
    out.token_kinds = array(KIND_TYPE, timing.get("token_kinds") or ())
    _firsts(out)
    if sent_stamps and len(sent_stamps) == len(out.token_reads):
        anchor = timing.get("anchor")
        out.lags = array(
            NS_TYPE,
            [t - _on_monotonic(s, anchor) for t, s in zip(out.token_times(), sent_stamps, strict=True) if s],
        )
    tokens_in, tokens_out = usage_tokens(result.get("usage"))  # any API's names (fastsse.apis)
    if tokens_in is not None:
        out.prompt_tokens = tokens_in
    if tokens_out is not None:
        out.completion_tokens = tokens_out
    http = result.get("http") or {}
    status = http.get("status")
    out.status = status if isinstance(status, int) and status else (200 if not exc or out.reads else 0)
    verdict = result.get("verdict") or {}
    if exc is not None:
        code = getattr(exc, "code", None)
        text = (
            f"{_CURL_CAUSES.get(code, 'transport error')} (curl {code})"
            if code is not None
            else type(exc).__name__
        )
        out.outcome, out.cause = (INCOMPLETE if out.reads else FAILED), text
    elif isinstance(status, int) and status >= 400:
        out.outcome, out.cause = HTTP_ERROR, f"http {status}"
    elif verdict.get("error"):
        out.outcome, out.cause = STREAM_ERROR, "error payload in the stream"
    elif verdict.get("complete"):  # a limit's end included (length, max_tokens, incomplete)
        out.outcome = COMPLETE
    else:
        out.outcome = INCOMPLETE
        if "done" in verdict:  # chat
            out.cause = "no [DONE]" if not verdict.get("done") else "no finish_reason"
        else:  # Responses, Messages: the verdict says why
            out.cause = str(verdict.get("why") or "no terminal event")
    if out.outcome == COMPLETE:
        choices = result.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message") or {}
            content = message.get("content") if isinstance(message, dict) else None
            out.answer = content if isinstance(content, str) else ""
    return out


# Drivers: one request in, one Record out.


class _EngineDriver:
    """fastsse's many-streams engine (``fastsse.AsyncClient``), its timing record on every result."""

    label = "fastsse AsyncClient"

    def __init__(self, config: Config, concurrency: int) -> None:
        from .. import AsyncClient

        key_header = "x-api-key" if config.api == "messages" else "authorization"
        own_auth = any(name.lower() == key_header for name, _ in config.headers)
        legacy = config.api == "completions"  # the chat API's fold reads a choice's text
        self.client = AsyncClient(
            base_url=config.url,
            api="chat" if legacy else config.api,
            path=COMPLETIONS_PATH if legacy else None,  # None: the API's own path
            api_key=None if own_auth else config.api_key,  # both at once is refused by the request setup
            headers=dict(config.headers) or None,
            max_connections=concurrency,
            timeout=config.timeout,
            http2=config.http2,
            max_retries=config.retries,
        )
        self.lag = config.lag
        self.lag_field = config.lag_field
        # which events carry tokens: the engine's own rule, so the stamps line up with its records
        self.marks: Callable[[dict[str, Any]], int] = (
            (lambda chunk: chunk_marks(chunk)[0])
            if config.api in ("chat", "completions")
            else api_format(config.api).token_kind
        )

    async def __aenter__(self) -> _EngineDriver:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(None, None, None)

    async def one(self, index: int, body: dict[str, Any], queued: int) -> Record:
        from .. import TransportError

        stamps: list[int] = []
        on_chunk = None
        if self.lag:
            marks = self.marks

            field = self.lag_field

            def on_chunk(chunk: dict[str, Any]) -> None:
                if marks(chunk):
                    sent = chunk.get(field)
                    stamps.append(sent if type(sent) is int else 0)

        try:
            result = await self.client.create_stream(body, on_chunk)
        except TransportError as exc:
            return _from_result(index, exc.result, stamps, queued, exc)
        return _from_result(index, result, stamps, queued, None)


class _PeerDriver:
    """Another HTTP client (``_peers``), for comparison runs; also the fallback without the engine."""

    def __init__(self, name: str, config: Config, concurrency: int) -> None:
        self.label = _peers.PEERS[name][0]
        self.peer = _peers.open_peer(
            name,
            config.url,
            concurrency=concurrency,
            headers=_auth(config),
            timeout=config.timeout,
            stamp=config.lag_field,
        )

    async def __aenter__(self) -> _PeerDriver:
        await self.peer.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.peer.__aexit__(None, None, None)

    async def one(self, index: int, body: dict[str, Any], queued: int) -> Record:
        return _from_peer(index, await self.peer.one(body), queued)


def _auth(config: Config) -> dict[str, str]:
    headers = dict(config.headers)
    if config.api_key and not any(k.lower() == "authorization" for k in headers):
        headers["Authorization"] = f"Bearer {config.api_key}"
    return headers


def engine_available() -> bool:
    """True when this fastsse has the many-streams engine (``fastsse.AsyncClient``)."""
    import fastsse

    return hasattr(fastsse, "AsyncClient")


def _driver(config: Config, concurrency: int) -> Any:
    if config.client == "fastsse":
        if engine_available():
            return _EngineDriver(config, concurrency)
        return _PeerDriver("fastsse-threads", config, concurrency)
    return _PeerDriver(config.client, config, concurrency)


# The schedule of one worker.


class Counters:
    """done / failed / in flight / tokens, shared with the progress display (an mp.Array for workers)."""

    def __init__(self, store: Any, worker: int) -> None:
        self.store = store
        self.base = 4 * worker

    def add(self, slot: int, value: int) -> None:
        self.store[self.base + slot] += value


async def _phase(
    driver: Any,
    body: Callable[..., dict[str, Any]],
    share: Share,
    config: Config,
    origin: int,
    counters: Counters,
    records: list[Record],
    *,
    schedule: list[tuple[int, int]] | None,
    indexes: Iterator[int],
    count: int | None,
    duration: float | None,
    warmup: bool,
) -> None:
    """Send this phase's conversations and wait for them all: at the ``schedule``'s arrival offsets
    (open loop), else ``count`` of them (or until ``duration`` passed) from ``share.concurrency`` users."""
    slots = asyncio.Semaphore(share.concurrency) if share.concurrency else None
    turns = config.turns

    async def one(i: int, payload: dict[str, Any], queued: int) -> Record:
        counters.add(2, 1)
        record: Record
        try:
            if slots is None:
                record = await driver.one(i, payload, queued)
            else:
                async with slots:
                    record = await driver.one(i, payload, queued)
        except Exception as exc:
            record = Record(index=i, queued=queued, outcome=FAILED, cause=f"{type(exc).__name__}: {exc}")
        finally:
            counters.add(2, -1)
        record.worker = share.worker
        record.warmup = warmup
        return record

    async def conversation(c: int, queued: int) -> None:
        # one request without --turns; with it, T requests, each carrying the earlier answers
        history: list[dict[str, Any]] = []
        for t in range(turns):
            index = c * turns + t if turns > 1 else c
            payload = body(index, history)
            record = await one(index, payload, queued)
            answer, record.answer = record.answer, None  # kept for the next turn only, not for the run
            if turns > 1:
                record.conversation, record.turn = c, t
            _shift(record, origin)
            records.append(record)
            counters.add(0 if record.outcome == COMPLETE else 1, 1)
            counters.add(3, record.output_tokens)
            if answer is None or t + 1 == turns:  # a turn that failed ends its conversation
                return
            history = [*(payload.get("messages") or ()), {"role": "assistant", "content": answer}]
            queued = time.monotonic_ns()

    if schedule is not None:
        start = time.monotonic_ns()
        deadline = None if duration is None else start + int(duration * 1e9)
        tasks: set[asyncio.Task[None]] = set()
        try:
            for c, offset in schedule:
                due = start + offset
                pause = (due - time.monotonic_ns()) / 1e9
                if pause > 0:
                    await asyncio.sleep(pause)
                if deadline is not None and time.monotonic_ns() >= deadline:
                    break
                # queued is the scheduled arrival: if the client dispatches it late, that shows as queue time
                task = asyncio.create_task(conversation(c, due))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            await _cancel(tasks)  # interrupted, or a conversation failed: none is left running
        return

    # closed loop: `concurrency` users, each sends its next conversation when the last one ended
    deadline = None if duration is None else time.monotonic_ns() + int(duration * 1e9)
    issued = 0

    def more() -> bool:
        if count is not None and issued >= count:
            return False
        return deadline is None or time.monotonic_ns() < deadline

    async def user() -> None:
        nonlocal issued
        while more():
            issued += 1
            await conversation(next(indexes), time.monotonic_ns())

    users = [asyncio.create_task(user()) for _ in range(share.concurrency or 1)]
    try:
        await asyncio.gather(*users)
    finally:
        await _cancel(users)


async def _cancel(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel the tasks still running and wait until they have ended."""
    left = [t for t in tasks if not t.done()]
    for task in left:
        task.cancel()
    if left:
        await asyncio.gather(*left, return_exceptions=True)


_TIMES: Final = (
    "queued", "started", "sent", "first_byte", "first_token",
    "first_content", "first_reasoning", "last_token", "end",
)  # fmt: skip


def _shift(record: Record, origin: int) -> None:
    # every stamp onto the run's clock; the reads too (token_reads index into them)
    for key in _TIMES:
        value = getattr(record, key)
        if value is not None:
            setattr(record, key, value - origin)
    record.reads = array(NS_TYPE, [t - origin for t in record.reads])


@dataclasses.dataclass
class WorkerResult:
    worker: int
    pid: int
    host: str
    runner: str  # "inline" (this process), "process" (--workers), "ray" (an actor)
    anchor: list[int]  # [monotonic_ns, epoch_ns], read together
    origin_epoch_ns: int  # the run's 0 on this worker's clock is this epoch time
    cpu_s: float
    wall_s: float
    driver: str
    loop_delays_ns: list[int]  # how late each probe wake-up of the event loop came
    preempted: int  # involuntary context switches during the measured phase (-1: not known here)
    records: list[dict[str, Any]]
    interrupted: bool = False  # Ctrl-C ended the run early: the records are those that had ended

    def to_dict(self) -> dict[str, Any]:
        """The result as the dict ``assemble`` takes: the same records, not deep copies of them
        (``dataclasses.asdict`` would copy every array of every record)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class Interrupt:
    """Ctrl-C for one worker. ``request()`` (thread-safe: a SIGINT handler calls it, or a Ray
    actor's ``stop``) ends the worker's run early: its requests in flight are cancelled, its client
    is closed on its own loop, and it returns the records of the requests that had ended."""

    def __init__(self) -> None:
        self.requested = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def request(self) -> None:
        """End the run early (any thread; again is a no-op)."""
        self.requested = True
        loop, event = self._loop, self._event
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    async def until(self, work: Awaitable[None]) -> bool:
        """Await ``work`` unless the run is interrupted first (then cancel it): True if it was."""
        if self._event is None:
            self._loop, self._event = asyncio.get_running_loop(), asyncio.Event()
        if self.requested:
            self._event.set()
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait((task, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            await _cancel((stop,))
        if not task.done():
            await _cancel((task,))
            return True
        task.result()  # what the work raised
        return False


@contextlib.contextmanager
def on_sigint(callback: Callable[[], None], *, again: bool = False) -> Iterator[None]:
    """Within the block, SIGINT (Ctrl-C) calls ``callback`` instead of raising KeyboardInterrupt:
    the first time only, a second one raising as before, or every time with ``again``. Only the
    main thread can catch signals: elsewhere (a Ray actor's thread) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        if not again:
            signal.signal(signal.SIGINT, previous)
        callback()

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


async def _probe(delays: list[int], stop: asyncio.Event) -> None:
    """Wake every PROBE_S and record how late: a loop that cannot keep its timers (busy, or starved
    of CPU by other processes) delays every read the same way, whatever the CPU figures say."""
    while not stop.is_set():
        due = time.monotonic_ns() + int(PROBE_S * 1e9)
        await asyncio.sleep(PROBE_S)
        delays.append(max(0, time.monotonic_ns() - due))


async def _run_share(
    config: Config, share: Share, start_epoch_ns: int, counters: Counters, runner: str, interrupt: Interrupt
) -> WorkerResult:
    anchor = [time.monotonic_ns(), time.time_ns()]
    # the run's 0, on this process's monotonic clock: the agreed start, in epoch time, moved across
    origin = anchor[0] + (start_epoch_ns - anchor[1])
    body = bodies(config)
    indexes = iter(range(share.worker, 1 << 62, share.workers))
    concurrency = share.concurrency or 1024
    records: list[Record] = []
    delays: list[int] = []
    cpu = wall = 0.0
    switches0 = switches = -1
    async with _driver(config, concurrency) as driver:
        wait = (start_epoch_ns - time.time_ns()) / 1e9
        stopped = wait > 0 and await interrupt.until(asyncio.sleep(wait))
        if not stopped and (share.warmup or share.warmup_arrivals):
            stopped = await interrupt.until(
                _phase(
                    driver,
                    body,
                    share,
                    config,
                    origin,
                    counters,
                    records,
                    schedule=share.warmup_arrivals,
                    indexes=indexes,
                    count=share.warmup,
                    duration=None,
                    warmup=True,
                )
            )
        if not stopped:
            stop = asyncio.Event()
            probe = asyncio.create_task(_probe(delays, stop))
            switches0 = _involuntary_switches()
            cpu0, wall0 = time.process_time(), time.monotonic()
            try:
                await interrupt.until(
                    _phase(
                        driver,
                        body,
                        share,
                        config,
                        origin,
                        counters,
                        records,
                        schedule=share.arrivals,
                        indexes=indexes,
                        count=share.requests,
                        duration=config.duration,
                        warmup=False,
                    )
                )
            finally:
                cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
                switches = _involuntary_switches()
                stop.set()
                await _cancel((probe,))
    return WorkerResult(
        worker=share.worker,
        pid=os.getpid(),
        host=socket.gethostname(),
        runner=runner,
        anchor=anchor,
        origin_epoch_ns=start_epoch_ns,
        cpu_s=cpu,
        wall_s=wall,
        driver=driver.label,
        loop_delays_ns=delays,
        preempted=switches - switches0 if switches0 >= 0 else -1,
        records=[r.to_json() for r in sorted(records, key=lambda r: r.index)],
        interrupted=interrupt.requested,
    )


def _involuntary_switches() -> int:
    """The process's involuntary context switches so far: the kernel took the CPU away (-1: unknown)."""
    try:
        import resource
    except ImportError:  # Windows
        return -1
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw)


def _new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind != "asyncio":
        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
        except ImportError:
            if kind == "uvloop":
                raise
    return asyncio.new_event_loop()


def run_share(
    config: Config,
    share: Share,
    start_epoch_ns: int,
    counters: Counters,
    runner: str = "inline",
    interrupt: Interrupt | None = None,
) -> WorkerResult:
    """Run one worker's share on a new event loop of this thread (a process's, or a Ray actor's).

    ``interrupt.request()`` ends it early (the result then has ``interrupted``); without an
    ``interrupt``, Ctrl-C in the main thread does (a second one raises KeyboardInterrupt)."""
    loop = _new_loop(config.loop)
    own = interrupt is None
    interrupt = interrupt or Interrupt()
    work = loop.create_task(_run_share(config, share, start_epoch_ns, counters, runner, interrupt))
    try:
        with on_sigint(interrupt.request) if own else contextlib.nullcontext():
            return loop.run_until_complete(work)
    finally:
        # a second Ctrl-C left the run's task pending: end it here, where its client can still
        # close on a running loop (asyncio.run does the same)
        if not work.done():
            work.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(work)
        loop.close()


def _worker_main(config: Config, share: Share, start_epoch_ns: int, store: Any, conn: Any) -> None:
    # started with SIGINT ignored (``_quiet_sigint``), so that a Ctrl-C during its start cannot
    # kill it without a word; from here the terminal's Ctrl-C (it reaches the whole group) and the
    # parent's passing it on are one request, and the parent's stop flag covers the time before
    interrupt = Interrupt()
    try:
        with on_sigint(interrupt.request, again=True):
            if store[len(store) - 1]:
                interrupt.request()
            result = run_share(
                config, share, start_epoch_ns, Counters(store, share.worker), "process", interrupt
            )
        # pickled: the records' arrays cross as their bytes, and arrive as arrays
        conn.send(result.to_dict())
    except BaseException as exc:
        conn.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        conn.close()


@contextlib.contextmanager
def _quiet_sigint() -> Iterator[None]:
    """Ignore SIGINT while child processes start: they inherit that (and Python keeps it) until
    they install their own handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run(
    config: Config,
    *,
    progress: Callable[[list[int]], None] | None = None,
    actors: Callable[[Config, list[Share]], list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """``run(config, *, progress=None, actors=None) -> dict``: run the load and return the result
    (the ``--json`` document).

    ``progress(counters)`` is called about twice a second with [done, failed, in flight, tokens]
    (not with ``config.ray``: the actors report at the end). ``actors(config, shares)`` runs the
    shares on Ray actors for ``config.ray`` (``_ray.run_actors``, handed in by the command so
    that this module, which the actors import, does not import theirs). It raises InvalidRequest for
    a bad dataset line or tokenizer, LoadError if a worker fails, and ImportError for
    ``config.ray`` without ray.
    """
    config = prepare(config)
    bodies(config)(0)  # a bad dataset or extra body fails here, before anything is sent
    parts = shares(config)
    before = _scrape_before(config)
    started_epoch = time.time_ns()
    results: list[dict[str, Any]] = []
    interrupted = Interrupt()  # what the parent of process workers saw (each worker reports its own)
    if config.ray is not None:
        if actors is None:
            raise LoadError("run(config) with config.ray needs actors= (_ray.run_actors)")
        results = actors(config, parts)
    elif config.workers == 1:
        store = [0, 0, 0, 0]
        stop = threading.Event()
        ticker = _ticker(store, progress, stop) if progress else None
        try:
            outcome = run_share(config, parts[0], started_epoch, Counters(store, 0))
        finally:
            stop.set()
            if ticker is not None:
                ticker.join()
        results.append(outcome.to_dict())
    else:
        ctx = multiprocessing.get_context("spawn")
        # the workers' counters, and a last slot: the parent's stop flag
        shared = ctx.Array("q", 4 * config.workers + 1, lock=False)
        # workers need the time to import before the agreed start
        start = time.time_ns() + int(1.5e9)
        procs = []
        with _quiet_sigint():
            for share in parts:
                parent, child = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=_worker_main, args=(config, share, start, shared, child), daemon=True
                )
                proc.start()
                child.close()
                procs.append((proc, parent))
        stop = threading.Event()
        ticker = _ticker(shared, progress, stop, config.workers) if progress else None

        def pass_on() -> None:  # Ctrl-C here (or a SIGINT sent to this process alone) stops them all
            interrupted.requested = True
            shared[4 * config.workers] = 1
            for proc, _ in procs:
                if proc.is_alive() and proc.pid is not None and os.name == "posix":
                    os.kill(proc.pid, signal.SIGINT)

        try:
            with on_sigint(pass_on):
                for proc, parent in procs:
                    try:
                        data = parent.recv()
                    except EOFError:
                        proc.join()
                        data = {"error": f"it ended without its result (exit code {proc.exitcode})"}
                    proc.join()
                    if "error" in data:
                        if interrupted.requested:  # stopped before it could run: nothing to add
                            continue
                        raise LoadError(f"a load worker failed: {data['error']}")
                    results.append(data)
        finally:
            stop.set()
            if ticker is not None:
                ticker.join()
            for proc, _ in procs:
                if proc.is_alive():
                    proc.terminate()
    doc = assemble(config, results, started_epoch, interrupted=interrupted.requested)
    if before is not None and config.metrics_url is not None:
        doc["server_metrics"] = _scrape_after(config.metrics_url, before)
    return doc


def _scrape_before(config: Config) -> _metrics.Exposition | None:
    """The server's metrics before the run (``--metrics-url``); LoadError if they cannot be read."""
    if config.metrics_url is None:
        return None
    try:
        return _metrics.scrape(config.metrics_url)
    except (OSError, ValueError) as exc:
        raise LoadError(f"--metrics-url {config.metrics_url}: {exc}") from None


def _scrape_after(url: str, before: _metrics.Exposition) -> dict[str, Any]:
    """What the run changed in the server's metrics, or why they could not be read again."""
    try:
        return {"url": url, **_metrics.changes(before, _metrics.scrape(url))}
    except (OSError, ValueError) as exc:
        error = f"not read after the run: {exc}"
        return {"url": url, "error": error, "counters": {}, "histograms": {}, "gauges": {}}


def _ticker(
    store: Any, progress: Callable[[list[int]], None] | None, stop: threading.Event, workers: int = 1
) -> threading.Thread:
    def loop() -> None:
        while not stop.wait(0.5):
            totals = [sum(store[4 * w + i] for w in range(workers)) for i in range(4)]
            if progress is not None:
                progress(totals)

    thread = threading.Thread(target=loop, name="fastsse-load-progress", daemon=True)
    thread.start()
    return thread
