"""``python -m fastsse load URL --model M``: a load generator for OpenAI-compatible streaming servers.

It sends chat requests at a concurrency and/or an arrival rate, records when every part of every
answer arrived (the many-streams engine's ``result["timing"]``: a stamp per read, taken before
parsing, and the tokens each chunk carried), and summarises TTFT, TPOT, ITL (token-weighted), E2E
latency, throughput, failures by cause and the client's own CPU use. The exact definitions, beside
vLLM ``bench serve``'s and AIPerf's, are in ``docs/load.md``; so is the ``--json`` schema.

``--client`` runs the same schedule through another HTTP client (``_peers``) so that its figures can
be set beside fastsse's on the same server.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import multiprocessing
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, Final

import orjson

from .._formats import api_format
from .._timing import chunk_marks
from . import _peers
from ._common import Parser, prog, say

SCHEMA: Final = "fastsse.load/1"
STAMP: Final = "fastsse_sent_ns"
CLIENTS: Final = ("fastsse", *_peers.PEERS)
BUSY_WARNING: Final = 0.7  # share of one core above which the client's own queueing shows in the figures
DEFAULT_PROMPT: Final = "Write a long story about a lighthouse keeper and the sea."
MESSAGES_MAX_TOKENS: Final = 1024  # the Messages API requires max_tokens; this without --max-tokens
APIS: Final = ("chat", "responses", "messages")
_API_WORDS: Final = {"chat": "", "responses": "Responses ", "messages": "Messages "}  # in the summary

# what each outcome means (docs/load.md, "Outcomes")
COMPLETE, INCOMPLETE, STREAM_ERROR, HTTP_ERROR, FAILED = "complete", "incomplete", "error", "http", "failed"


# The configuration, as the workers receive it (picklable, plain data).


@dataclasses.dataclass(frozen=True)
class Config:
    url: str
    model: str
    api_key: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    concurrency: int | None = None
    rate: float | None = None
    arrival: str = "poisson"
    requests: int | None = None
    duration: float | None = None
    warmup: int = 0
    max_tokens: int | None = None
    prompt: str = DEFAULT_PROMPT
    dataset: tuple[str, ...] = ()  # the dataset's lines, JSON text each
    extra_body: str | None = None  # JSON object merged into every body
    usage: bool = True
    seed: int = 0
    client: str = "fastsse"
    timeout: float = 600.0
    lag: bool = True
    loop: str = "auto"
    workers: int = 1
    http2: bool = False
    api: str = "chat"


def _bodies(config: Config) -> Callable[[int], dict[str, Any]]:
    """Request ``i``'s body: the dataset's line ``i mod len`` (or the prompt), model and stream set."""
    extra = orjson.loads(config.extra_body) if config.extra_body else {}
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(config.dataset, 1):
        row = orjson.loads(line)
        if not isinstance(row, dict):
            raise ValueError(f"dataset line {number}: a JSON object is needed, not {type(row).__name__}")
        rows.append(row)
    prompt_only = {"prompt", "max_tokens"}

    # the output limit's name in each API; Messages requires one
    limit_key = "max_output_tokens" if config.api == "responses" else "max_tokens"
    messages_key = "input" if config.api == "responses" else "messages"

    def body(i: int) -> dict[str, Any]:
        whole = False
        limit = config.max_tokens
        if rows:
            row = rows[i % len(rows)]
            if messages_key in row or not set(row) <= prompt_only:
                out = dict(row)  # a request body: sent as it is, unknown fields included
                whole = True
            else:
                out = {messages_key: [{"role": "user", "content": str(row.get("prompt", ""))}]}
                if row.get("max_tokens") is not None:
                    limit = row["max_tokens"]
        else:
            out = {messages_key: [{"role": "user", "content": config.prompt}]}
        if config.api == "messages" and limit is None:
            limit = MESSAGES_MAX_TOKENS
        if limit is not None and limit_key not in out:
            out[limit_key] = limit
        if config.usage and not whole and config.api == "chat":  # the other APIs always report usage
            options = dict(out.get("stream_options") or {})
            options.setdefault("include_usage", True)
            out["stream_options"] = options
        out.update(extra)
        out["model"] = config.model
        out["stream"] = True
        return out

    return body


# One request's record.


@dataclasses.dataclass
class Record:
    """When each part of one request happened, in ns on the run's clock (0 = the run's start)."""

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
    reads: list[int] = dataclasses.field(default_factory=list)
    token_reads: list[int] = dataclasses.field(default_factory=list)
    tokens: list[int] = dataclasses.field(default_factory=list)
    token_kinds: list[int] = dataclasses.field(default_factory=list)
    lags: list[int] = dataclasses.field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def output_tokens(self) -> int:
        """The usage's completion_tokens when the server reported them, else the tokens counted."""
        return self.completion_tokens if self.completion_tokens is not None else sum(self.tokens)

    def token_times(self) -> list[int]:
        """The arrival time of each token-bearing chunk (its read's stamp)."""
        reads = self.reads
        return [reads[i] for i in self.token_reads]

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["output_tokens"] = self.output_tokens
        return out


def _from_peer(index: int, rec: _peers.PeerRecord, queued: int) -> Record:
    """A peer's record: each chunk counts as its own read (a peer does not show its reads)."""
    out = Record(index=index, queued=queued, started=rec.start_ns, end=rec.end_ns, status=rec.status)
    out.reads = list(rec.recv_ns)
    out.first_byte = rec.recv_ns[0] if rec.recv_ns else None
    for i, (tokens, reasoning) in enumerate(zip(rec.tokens, rec.reasoning, strict=True)):
        if tokens > 0:
            out.token_reads.append(i)
            out.tokens.append(tokens)
            out.token_kinds.append(2 if reasoning else 1)
            if rec.sent_ns[i]:
                out.lags.append(rec.recv_ns[i] - rec.sent_ns[i])
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
    out.reads = list(timing.get("reads") or ())
    out.token_reads = list(timing.get("token_reads") or ())
    out.tokens = list(timing.get("tokens") or ())
    out.token_kinds = list(timing.get("token_kinds") or ())
    _firsts(out)
    if sent_stamps and len(sent_stamps) == len(out.token_reads):
        out.lags = [t - s for t, s in zip(out.token_times(), sent_stamps, strict=True) if s]
    usage = result.get("usage")
    if isinstance(usage, dict):
        # chat names them prompt / completion tokens; Responses and Messages input / output tokens
        for field, names in (
            ("prompt_tokens", ("prompt_tokens", "input_tokens")),
            ("completion_tokens", ("completion_tokens", "output_tokens")),
        ):
            value = next((usage[n] for n in names if isinstance(usage.get(n), int)), None)
            if value is not None:
                setattr(out, field, value)
    status = result.get("status")
    out.status = status if isinstance(status, int) else (200 if not exc or out.reads else 0)
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
    elif verdict.get("complete") or verdict.get("terminal") == "response.incomplete":
        # response.incomplete is a whole answer a limit ended, as chat's finish_reason "length"
        out.outcome = COMPLETE
    else:
        out.outcome = INCOMPLETE
        if "done" in verdict:  # chat
            out.cause = "no [DONE]" if not verdict.get("done") else "no finish_reason"
        else:  # Responses, Messages: the verdict says why
            out.cause = str(verdict.get("why") or "no terminal event")
    return out


# Drivers: one request in, one Record out.


class _EngineDriver:
    """fastsse's many-streams engine (``fastsse.AsyncClient``), its timing record on every result."""

    label = "fastsse AsyncClient"

    def __init__(self, config: Config, concurrency: int) -> None:
        from .. import AsyncClient

        key_header = "x-api-key" if config.api == "messages" else "authorization"
        own_auth = any(name.lower() == key_header for name, _ in config.headers)
        self.client = AsyncClient(
            base_url=config.url,
            api=config.api,
            api_key=None if own_auth else config.api_key,  # both at once is refused by the request setup
            headers=dict(config.headers) or None,
            max_connections=concurrency,
            timeout=config.timeout,
            http2=config.http2,
        )
        self.lag = config.lag
        # which events carry tokens: the engine's own rule, so the stamps line up with its records
        self.marks: Callable[[dict[str, Any]], int] = (
            (lambda chunk: chunk_marks(chunk)[0])
            if config.api == "chat"
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

            def on_chunk(chunk: dict[str, Any]) -> None:
                if marks(chunk):
                    sent = chunk.get(STAMP)
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
            name, config.url, concurrency=concurrency, headers=_auth(config), timeout=config.timeout
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


# The schedule of one process.


@dataclasses.dataclass
class Share:
    """What one worker runs: request indexes ``worker, worker + workers, ...``."""

    worker: int
    workers: int
    concurrency: int | None
    rate: float | None
    requests: int | None
    warmup: int


def _shares(config: Config) -> list[Share]:
    k = config.workers
    out = []
    for w in range(k):

        def part(total: int | None, w: int = w) -> int | None:
            return None if total is None else total // k + (1 if w < total % k else 0)

        out.append(
            Share(
                worker=w,
                workers=k,
                concurrency=part(config.concurrency),
                rate=None if config.rate is None else config.rate / k,
                requests=part(config.requests),
                warmup=part(config.warmup) or 0,
            )
        )
    return out


class Counters:
    """done / failed / in flight / tokens, shared with the progress display (an mp.Array for workers)."""

    def __init__(self, store: Any, worker: int) -> None:
        self.store = store
        self.base = 4 * worker

    def add(self, slot: int, value: int) -> None:
        self.store[self.base + slot] += value


async def _phase(
    driver: Any,
    body: Callable[[int], dict[str, Any]],
    indexes: Iterator[int],
    share: Share,
    config: Config,
    origin: int,
    counters: Counters,
    records: list[Record],
    *,
    count: int | None,
    duration: float | None,
    warmup: bool,
    rng: random.Random,
) -> None:
    """Send ``count`` requests (or until ``duration`` seconds passed) and wait for them all."""
    slots = asyncio.Semaphore(share.concurrency) if share.concurrency else None
    deadline = None if duration is None else time.monotonic_ns() + int(duration * 1e9)

    def more(sent: int) -> bool:
        if count is not None and sent >= count:
            return False
        return deadline is None or time.monotonic_ns() < deadline

    async def run(i: int, queued: int) -> None:
        counters.add(2, 1)
        try:
            if slots is None:
                record = await driver.one(i, body(i), queued)
            else:
                async with slots:
                    record = await driver.one(i, body(i), queued)
        except Exception as exc:
            record = Record(index=i, queued=queued, outcome=FAILED, cause=f"{type(exc).__name__}: {exc}")
        finally:
            counters.add(2, -1)
        record.worker = share.worker
        record.warmup = warmup
        _shift(record, origin)
        records.append(record)
        counters.add(0 if record.outcome == COMPLETE else 1, 1)
        counters.add(3, record.output_tokens)

    if share.rate:
        tasks = set()
        sent = 0
        due = time.monotonic_ns()
        while more(sent):
            gap = rng.expovariate(share.rate) if config.arrival == "poisson" else 1.0 / share.rate
            due += int(gap * 1e9)
            pause = (due - time.monotonic_ns()) / 1e9
            if pause > 0:
                await asyncio.sleep(pause)
            if not more(sent):
                break
            # queued is the scheduled arrival: if the client dispatches it late, that shows as queue time
            task = asyncio.create_task(run(next(indexes), due))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            sent += 1
        if tasks:
            await asyncio.gather(*tasks)
        return

    # closed loop: `concurrency` users, each sends its next request when the last one ended
    issued = 0

    async def user() -> None:
        nonlocal issued
        while more(issued):
            issued += 1
            await run(next(indexes), time.monotonic_ns())

    await asyncio.gather(*(user() for _ in range(share.concurrency or 1)))


def _shift(record: Record, origin: int) -> None:
    # every stamp onto the run's clock; the reads too (token_reads index into them)
    for key in ("queued", "started", "sent", "first_byte", "first_token", "first_content"):
        value = getattr(record, key)
        if value is not None:
            setattr(record, key, value - origin)
    for key in ("first_reasoning", "last_token", "end"):
        value = getattr(record, key)
        if value is not None:
            setattr(record, key, value - origin)
    record.reads = [t - origin for t in record.reads]


@dataclasses.dataclass
class WorkerResult:
    worker: int
    pid: int
    anchor: list[int]  # [monotonic_ns, epoch_ns], read together
    origin_epoch_ns: int  # the run's 0 on this worker's clock is this epoch time
    cpu_s: float
    wall_s: float
    driver: str
    loop_delays_ns: list[int]  # how late each probe wake-up of the event loop came
    preempted: int  # involuntary context switches during the measured phase (-1: not known here)
    records: list[dict[str, Any]]


PROBE_S: Final = 0.01  # the event-loop probe's period
LOOP_DELAY_WARNING_MS: Final = 10.0


async def _probe(delays: list[int], stop: asyncio.Event) -> None:
    """Wake every PROBE_S and record how late: a loop that cannot keep its timers (busy, or starved
    of CPU by other processes) delays every read the same way, whatever the CPU figures say."""
    while not stop.is_set():
        due = time.monotonic_ns() + int(PROBE_S * 1e9)
        await asyncio.sleep(PROBE_S)
        delays.append(max(0, time.monotonic_ns() - due))


async def _run_share(config: Config, share: Share, start_epoch_ns: int, counters: Counters) -> WorkerResult:
    anchor = [time.monotonic_ns(), time.time_ns()]
    # the run's 0, on this process's monotonic clock: the agreed start, in epoch time, moved across
    origin = anchor[0] + (start_epoch_ns - anchor[1])
    body = _bodies(config)
    indexes = iter(range(share.worker, 1 << 62, share.workers))
    rng = random.Random(config.seed * 1_000_003 + share.worker)
    concurrency = share.concurrency or 1024
    records: list[Record] = []
    async with _driver(config, concurrency) as driver:
        wait = (start_epoch_ns - time.time_ns()) / 1e9
        if wait > 0:
            await asyncio.sleep(wait)
        if share.warmup:
            await _phase(
                driver, body, indexes, share, config, origin, counters, records,
                count=share.warmup, duration=None, warmup=True, rng=rng,
            )  # fmt: skip
        delays: list[int] = []
        stop = asyncio.Event()
        probe = asyncio.create_task(_probe(delays, stop))
        switches0 = _involuntary_switches()
        cpu0, wall0 = time.process_time(), time.monotonic()
        await _phase(
            driver, body, indexes, share, config, origin, counters, records,
            count=share.requests, duration=config.duration, warmup=False, rng=rng,
        )  # fmt: skip
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        switches = _involuntary_switches()
        stop.set()
        await probe
    return WorkerResult(
        worker=share.worker,
        pid=os.getpid(),
        anchor=anchor,
        origin_epoch_ns=start_epoch_ns,
        cpu_s=cpu,
        wall_s=wall,
        driver=driver.label,
        loop_delays_ns=delays,
        preempted=switches - switches0 if switches0 >= 0 else -1,
        records=[r.to_json() for r in sorted(records, key=lambda r: r.index)],
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


def _run_in_process(config: Config, share: Share, start_epoch_ns: int, counters: Counters) -> WorkerResult:
    loop = _new_loop(config.loop)
    try:
        return loop.run_until_complete(_run_share(config, share, start_epoch_ns, counters))
    finally:
        loop.close()


def _worker_main(config: Config, share: Share, start_epoch_ns: int, store: Any, conn: Any) -> None:
    try:
        result = _run_in_process(config, share, start_epoch_ns, Counters(store, share.worker))
        conn.send_bytes(orjson.dumps(dataclasses.asdict(result)))
    except BaseException as exc:
        conn.send_bytes(orjson.dumps({"error": f"{type(exc).__name__}: {exc}"}))
    finally:
        conn.close()


def run(config: Config, *, progress: Callable[[list[int]], None] | None = None) -> dict[str, Any]:
    """``run(config, *, progress=None) -> dict``: run the load and return the result (the ``--json`` document).

    ``progress(counters)`` is called about twice a second with [done, failed, in flight, tokens].
    It raises ValueError for a bad dataset line and RuntimeError if a worker process fails.
    """
    _bodies(config)(0)  # a bad dataset or extra body fails here, before anything is sent
    shares = _shares(config)
    started_epoch = time.time_ns()
    start = started_epoch + (int(0.3e9) if config.workers > 1 else 0)
    results: list[dict[str, Any]] = []
    if config.workers == 1:
        store = [0, 0, 0, 0]
        stop = threading.Event()
        ticker = _ticker(store, progress, stop) if progress else None
        try:
            outcome = _run_in_process(config, shares[0], start, Counters(store, 0))
        finally:
            stop.set()
            if ticker is not None:
                ticker.join()
        results.append(dataclasses.asdict(outcome))
    else:
        ctx = multiprocessing.get_context("spawn")
        shared = ctx.Array("q", 4 * config.workers, lock=False)
        # workers need the time to import before the agreed start
        start = time.time_ns() + int(1.5e9)
        procs = []
        for share in shares:
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker_main, args=(config, share, start, shared, child), daemon=True)
            proc.start()
            child.close()
            procs.append((proc, parent))
        stop = threading.Event()
        ticker = _ticker(shared, progress, stop, config.workers) if progress else None
        try:
            for proc, parent in procs:
                data = orjson.loads(parent.recv_bytes())
                proc.join()
                if "error" in data:
                    raise RuntimeError(f"a load worker failed: {data['error']}")
                results.append(data)
        finally:
            stop.set()
            if ticker is not None:
                ticker.join()
            for proc, _ in procs:
                if proc.is_alive():
                    proc.terminate()
    return assemble(config, results, started_epoch)


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


# The summary.


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between ranks, as numpy's default."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _stats(values_ns: list[float]) -> dict[str, Any]:
    ms = [v / 1e6 for v in values_ns]
    if not ms:
        return {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None, "min": None, "max": None}
    return {
        "n": len(ms),
        "mean": sum(ms) / len(ms),
        "p50": percentile(ms, 50),
        "p90": percentile(ms, 90),
        "p99": percentile(ms, 99),
        "min": min(ms),
        "max": max(ms),
    }


def itl_values(record: dict[str, Any]) -> list[float]:
    """Token-weighted inter-token latencies of one request (ns): chunk ``i`` (after the first)
    arriving ``gap`` after chunk ``i-1`` with ``n`` tokens gives ``n`` values of ``gap / n``."""
    reads = record["reads"]
    times = [reads[i] for i in record["token_reads"]]
    out: list[float] = []
    for k in range(1, len(times)):
        n = record["tokens"][k]
        if n > 0:
            out += [(times[k] - times[k - 1]) / n] * n
    return out


def summarize(records: list[dict[str, Any]], workers: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary of the measured (non-warm-up) records; see docs/load.md for each definition."""
    measured = [r for r in records if not r["warmup"]]
    ok = [r for r in measured if r["outcome"] == COMPLETE]
    ttft, ttft_content, ttft_reasoning, tpot, itl, e2e, queue, lag = [], [], [], [], [], [], [], []
    for r in ok:
        started = r["started"]
        if r["first_token"] is not None and started is not None:
            ttft.append(r["first_token"] - started)
        if r["first_content"] is not None and started is not None:
            ttft_content.append(r["first_content"] - started)
        if r["first_reasoning"] is not None and started is not None:
            ttft_reasoning.append(r["first_reasoning"] - started)
        if r["end"] is not None and started is not None:
            e2e.append(r["end"] - started)
        if r["queued"] is not None and started is not None:
            queue.append(max(0, started - r["queued"]))
        if r["output_tokens"] > 1 and r["first_token"] is not None and r["last_token"] is not None:
            tpot.append((r["last_token"] - r["first_token"]) / (r["output_tokens"] - 1))
        itl += itl_values(r)
    for r in measured:
        lag += r["lags"]
    starts = [r["started"] for r in measured if r["started"] is not None]
    ends = [r["end"] for r in measured if r["end"] is not None]
    span = (max(ends) - min(starts)) / 1e9 if starts and ends else 0.0
    output = sum(r["output_tokens"] for r in ok)
    causes = Counter(f"{r['outcome']}: {r['cause']}" for r in measured if r["outcome"] != COMPLETE)
    cpu = sum(w["cpu_s"] for w in workers)
    wall = max((w["wall_s"] for w in workers), default=0.0)
    busiest = max((w["cpu_s"] / w["wall_s"] for w in workers if w["wall_s"] > 0), default=0.0)
    loop_delay = _stats([d for w in workers for d in w.get("loop_delays_ns") or ()])
    known = [w["preempted"] for w in workers if w.get("preempted", -1) >= 0]
    preempted = sum(known) if known else -1
    reads_shared = sum(len(r["token_reads"]) - len(set(r["token_reads"])) for r in measured)
    summary = {
        "requests": len(measured),
        "warmup_requests": len(records) - len(measured),
        "outcomes": dict(Counter(r["outcome"] for r in measured)),
        "failures_by_cause": dict(causes.most_common()),
        "duration_s": span,
        "requests_per_s": len(ok) / span if span else None,
        "output_tokens": output,
        "output_tokens_per_s": output / span if span else None,
        "token_chunks": sum(len(r["tokens"]) for r in measured),
        "token_chunks_sharing_a_read": reads_shared,
        "ttft_ms": _stats(ttft),
        "ttft_content_ms": _stats(ttft_content),
        "ttft_reasoning_ms": _stats(ttft_reasoning),
        "tpot_ms": _stats(tpot),
        "itl_ms": _stats(itl),
        "e2e_ms": _stats(e2e),
        "queue_ms": _stats(queue),
        "lag_ms": _stats(lag),
        "client_cpu_s": cpu,
        "client_busy": busiest,
        "client_wall_s": wall,
        "client_loop_delay_ms": loop_delay,
        "client_preempted": preempted,
        "warnings": [],
    }
    counted = sum(sum(r["tokens"]) for r in ok)
    reported = [r["completion_tokens"] for r in ok if r["completion_tokens"] is not None]
    if len(reported) == len(ok) and ok and sum(reported) != counted:
        summary["warnings"].append(
            f"the server reported {sum(reported):,} completion tokens, the chunks carried {counted:,} countable "
            "ones: ITL treats a chunk without continuous usage or logprobs as one token (ask for "
            "stream_options.continuous_usage_stats or logprobs to count them); TPOT and tokens/s use usage"
        )
    if busiest > BUSY_WARNING:
        summary["warnings"].append(
            f"the client was busy {busiest:.0%} of a core: its own queueing may be in the latencies "
            "(use --workers, or a lower load)"
        )
    if loop_delay["n"] and loop_delay["p99"] > LOOP_DELAY_WARNING_MS:
        why = (
            "the client itself was busy: use --workers or a lower load"
            if busiest > BUSY_WARNING
            else f"the client used only {busiest:.0%} of a core and was preempted {preempted:,} times: "
            "other processes took its CPU; use a quieter machine or pin the client to a free core"
            if preempted >= 0
            else f"the client used only {busiest:.0%} of a core: other processes took its CPU"
        )
        summary["warnings"].append(
            f"the client's event loop woke up to {loop_delay['p99']:.1f} ms late (p99 of a {PROBE_S * 1e3:g} ms "
            f"timer); reads waited as long and the latencies include it: {why}"
        )
    return summary


def assemble(config: Config, workers: list[dict[str, Any]], started_epoch: int) -> dict[str, Any]:
    """The ``--json`` document of a run from its workers' results."""
    from .. import __version__

    records = sorted((r for w in workers for r in w["records"]), key=lambda r: r["index"])
    info = [{k: v for k, v in w.items() if k != "records"} for w in workers]
    settings = dataclasses.asdict(config)
    settings["dataset"] = len(config.dataset)
    settings["api_key"] = "***" if config.api_key else None
    settings["headers"] = [k for k, _ in config.headers]
    return {
        "schema": SCHEMA,
        "fastsse_version": __version__,
        "started_epoch_ns": started_epoch,
        "origin_epoch_ns": workers[0]["origin_epoch_ns"] if workers else started_epoch,
        "config": settings,
        "client": workers[0]["driver"] if workers else config.client,
        "workers": info,
        "summary": summarize(records, info),
        "requests": records,
    }


def merge(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """``merge(documents) -> dict``: one result from several ``--json`` documents (e.g. one per machine).

    Each document's times are moved onto the earliest document's origin through its epoch origin,
    request indexes are renumbered, and the summary is recomputed. It raises ValueError for a
    document of another schema.
    """
    for doc in documents:
        if doc.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document: {doc.get('schema')!r}")
    base = min(doc["origin_epoch_ns"] for doc in documents)
    records: list[dict[str, Any]] = []
    workers: list[dict[str, Any]] = []
    for doc in documents:
        shift = doc["origin_epoch_ns"] - base
        for w in doc["workers"]:
            workers.append({**w, "worker": len(workers)})
        for r in doc["requests"]:
            r = dict(r)
            for key in (
                "queued", "started", "sent", "first_byte", "first_token",
                "first_content", "first_reasoning", "last_token", "end",
            ):  # fmt: skip
                if r[key] is not None:
                    r[key] += shift
            r["reads"] = [t + shift for t in r["reads"]]
            r["index"] = len(records)
            records.append(r)
    out = dict(documents[0])
    out.update(origin_epoch_ns=base, workers=workers, requests=records)
    out["summary"] = summarize(records, workers)
    return out


# Output.


def format_summary(doc: dict[str, Any]) -> str:
    """The summary as the text ``python -m fastsse load`` prints."""
    s = doc["summary"]
    c = doc["config"]
    load = []
    if c["concurrency"]:
        load.append(f"concurrency {c['concurrency']}")
    if c["rate"]:
        load.append(f"rate {c['rate']:g}/s ({c['arrival']})")
    lines = [
        f"fastsse load: {s['requests']} {_API_WORDS.get(c.get('api') or 'chat', '')}requests to {c['url']} "
        f"(model {c['model']}), "
        f"client: {doc['client']}, {', '.join(load) or 'concurrency 1'}, {len(doc['workers'])} worker(s)",
    ]
    outcomes = s["outcomes"]
    lines.append(
        "  "
        + "   ".join(
            f"{k} {outcomes.get(k, 0)}" for k in (COMPLETE, INCOMPLETE, STREAM_ERROR, HTTP_ERROR, FAILED)
        )
    )
    for cause, n in s["failures_by_cause"].items():
        lines.append(f"    {n} x {cause}")
    rps = s["requests_per_s"]
    tps = s["output_tokens_per_s"]
    lines.append(
        f"  duration {s['duration_s']:.2f} s   requests/s {rps or 0:.2f}   output tokens/s {tps or 0:,.0f}"
        f"   ({s['output_tokens']:,} tokens, {s['token_chunks']:,} token chunks,"
        f" {s['token_chunks_sharing_a_read']:,} sharing a read)"
    )
    lines.append(f"  {'(ms)':<22}{'mean':>10}{'p50':>10}{'p90':>10}{'p99':>10}{'n':>10}")
    rows = [
        ("TTFT", "ttft_ms"),
        ("  content", "ttft_content_ms"),
        ("  reasoning", "ttft_reasoning_ms"),
        ("TPOT", "tpot_ms"),
        ("ITL (token-weighted)", "itl_ms"),
        ("E2E", "e2e_ms"),
        ("queue (slot wait)", "queue_ms"),
        ("lag (recv - sent)", "lag_ms"),
    ]
    for label, key in rows:
        st = s[key]
        if not st["n"]:
            continue
        lines.append(
            f"  {label:<22}"
            + "".join(f"{st[q]:>10.2f}" for q in ("mean", "p50", "p90", "p99"))
            + f"{st['n']:>10,}"
        )
    delay = s["client_loop_delay_ms"]
    late = f"; event loop late p50 {delay['p50']:.2f} / p99 {delay['p99']:.2f} ms" if delay["n"] else ""
    if s["client_preempted"] >= 0:
        late += f"; preempted {s['client_preempted']:,} times"
    lines.append(
        f"  client CPU {s['client_cpu_s']:.2f} s over {s['client_wall_s']:.2f} s; busiest worker"
        f" {s['client_busy']:.0%} of a core{late}"
    )
    for warning in s["warnings"]:
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: str) -> None:
    """Write latency CDFs (TTFT, ITL, E2E, lag) and throughput over time to ``path`` (needs matplotlib).

    It raises ImportError without matplotlib (``pip install 'fastsse-cython[plot]'``).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib: pip install 'fastsse-cython[plot]'") from exc
    records = [r for r in doc["requests"] if not r["warmup"]]
    ok = [r for r in records if r["outcome"] == COMPLETE]
    series = {
        "TTFT": [(r["first_token"] - r["started"]) / 1e6 for r in ok if r["first_token"] is not None],
        "ITL (token-weighted)": [v / 1e6 for r in ok for v in itl_values(r)],
        "E2E": [(r["end"] - r["started"]) / 1e6 for r in ok if r["end"] is not None],
        "lag (recv - sent)": [v / 1e6 for r in records for v in r["lags"]],
    }
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for ax, (name, values) in zip(axes.flat, series.items(), strict=False):
        if values:
            ordered = sorted(values)
            ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))])
        ax.set_title(f"{name} CDF")
        ax.set_xlabel("ms")
        ax.set_ylabel("fraction")
        ax.grid(alpha=0.3)
    # throughput over time: tokens by the second their chunk arrived; requests in flight
    ax = axes.flat[4]
    arrivals = [(r["reads"][i], n) for r in ok for i, n in zip(r["token_reads"], r["tokens"], strict=True)]
    if arrivals:
        first = min(t for t, _ in arrivals)
        width = max(0.1, (max(t for t, _ in arrivals) - first) / 1e9 / 60)  # about 60 bars
        bins: Counter[int] = Counter()
        for t, n in arrivals:
            bins[int((t - first) / 1e9 // width)] += n
        xs = list(range(max(bins) + 1))
        ax.bar(
            [first / 1e9 + x * width for x in xs], [bins[x] / width for x in xs], width=width, align="edge"
        )
    ax.set_title("output tokens/s over time")
    ax.set_xlabel("s since start")
    ax = axes.flat[5]
    spans = sorted(
        (r["started"], r["end"]) for r in records if r["started"] is not None and r["end"] is not None
    )
    if spans:
        events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
        xs2, ys, level = [], [], 0
        for t, d in events:
            level += d
            xs2.append(t / 1e9)
            ys.append(level)
        ax.step(xs2, ys, where="post")
    ax.set_title("requests in flight")
    ax.set_xlabel("s since start")
    fig.suptitle(f"fastsse load: {doc['client']} against {doc['config']['url']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# The command line.


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        "load",
        "Load an OpenAI-compatible streaming server and measure TTFT, TPOT, ITL, E2E and "
        "throughput with a client that is not the bottleneck (docs/load.md).",
        epilog=f"{prog('load merge')} A.json B.json --json ALL.json merges runs made at the same "
        "time on several machines onto one clock.",
    )
    p.add_argument("url", help="the API base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True, help="the model name sent in every request")
    p.add_argument(
        "--api",
        choices=APIS,
        default="chat",
        help="request format: chat completions (default), responses or messages (fastsse client only)",
    )
    p.add_argument("--concurrency", type=int, help="requests in flight at most (closed loop without --rate)")
    p.add_argument("--rate", type=float, help="requests per second arriving (open loop)")
    p.add_argument(
        "--arrival", choices=("poisson", "constant"), default="poisson", help="arrival process for --rate"
    )
    p.add_argument("--requests", type=int, help="requests to send (default 100 unless --duration)")
    p.add_argument("--duration", type=float, help="seconds to keep sending (in-flight requests then finish)")
    p.add_argument("--warmup", type=int, default=0, help="requests sent first and left out of the figures")
    p.add_argument("--max-tokens", type=int, help="max_tokens of every request")
    p.add_argument("--prompt", default=DEFAULT_PROMPT, help="the user message (without --dataset)")
    p.add_argument(
        "--dataset",
        help="JSONL: a request body per line (sent as it is, model and stream set) or {prompt, max_tokens}",
    )
    p.add_argument("--extra-body", help="a JSON object merged into every request body")
    p.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"), help="default: $OPENAI_API_KEY")
    p.add_argument("--no-usage", action="store_true", help="do not ask for stream_options.include_usage")
    p.add_argument("--seed", type=int, default=0, help="seed of the Poisson arrivals")
    p.add_argument(
        "--timeout", type=float, default=600.0, help="seconds a request may take in all (default 600)"
    )
    p.add_argument(
        "--client", choices=CLIENTS, default="fastsse", help="the HTTP client (peers: for comparisons)"
    )
    p.add_argument(
        "--no-lag", action="store_true", help="do not read the server's send stamps (no per-chunk dict)"
    )
    p.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="event loop (auto: uvloop if installed)",
    )
    p.add_argument("--workers", type=int, default=1, help="processes, each with its own client (default 1)")
    p.add_argument(
        "--http2",
        action="store_true",
        help="speak HTTP/2, streams multiplexed on shared connections (fastsse only)",
    )
    p.add_argument(
        "--json", metavar="FILE", help="write the summary and every request record (schema fastsse.load/1)"
    )
    p.add_argument(
        "--plot", metavar="FILE.png", help="latency CDFs and throughput over time (needs matplotlib)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress display")
    return p


def config_from_args(args: argparse.Namespace) -> Config:
    """The ``Config`` of parsed arguments; it raises ValueError for inconsistent ones."""
    if args.concurrency is not None and args.concurrency < 1:
        raise ValueError("--concurrency must be >= 1")
    if args.rate is not None and not args.rate > 0:
        raise ValueError("--rate must be > 0")
    if args.workers < 1:
        raise ValueError("--workers must be >= 1")
    if args.requests is not None and args.requests < 0:
        raise ValueError("--requests must be >= 0")
    if args.http2 and args.client != "fastsse":
        raise ValueError("--http2 needs --client fastsse (the peers speak HTTP/1.1 here)")
    if args.api != "chat" and args.client != "fastsse":
        raise ValueError(f"--api {args.api} needs --client fastsse (the peers here speak chat completions)")
    if args.concurrency is not None and args.concurrency < args.workers:
        raise ValueError("--concurrency must be at least --workers (each worker needs a slot)")
    headers = []
    for line in args.header:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"--header must be 'Name: value', not {line!r}")
        headers.append((name.strip(), value.strip()))
    dataset: tuple[str, ...] = ()
    if args.dataset:
        with open(args.dataset, encoding="utf-8") as f:
            dataset = tuple(line for line in f.read().splitlines() if line.strip())
        if not dataset:
            raise ValueError(f"--dataset {args.dataset} has no requests")
    if args.extra_body is not None and not isinstance(orjson.loads(args.extra_body), dict):
        raise ValueError("--extra-body must be a JSON object")
    requests = args.requests
    if requests is None and args.duration is None:
        requests = 100
    concurrency = args.concurrency
    if concurrency is None and args.rate is None:
        concurrency = 1
    return Config(
        url=args.url,
        model=args.model,
        api_key=args.api_key,
        headers=tuple(headers),
        concurrency=concurrency,
        rate=args.rate,
        arrival=args.arrival,
        requests=requests,
        duration=args.duration,
        warmup=args.warmup,
        max_tokens=args.max_tokens,
        prompt=args.prompt,
        dataset=dataset,
        extra_body=args.extra_body,
        usage=not args.no_usage,
        seed=args.seed,
        client=args.client,
        timeout=args.timeout,
        lag=not args.no_lag,
        loop=args.loop,
        workers=args.workers,
        http2=args.http2,
        api=args.api,
    )


def merge_main(argv: list[str]) -> int:
    """``python -m fastsse load merge A.json B.json ... [--json OUT] [--plot OUT.png]``."""
    p = Parser(
        "load merge",
        "Merge --json results of runs made at the same time (other machines, other processes) "
        "onto one clock and summarise them together.",
    )
    p.add_argument("files", nargs="+", help="--json documents of schema fastsse.load/1")
    p.add_argument("--json", metavar="FILE", help="write the merged document")
    p.add_argument("--plot", metavar="FILE.png", help="plot the merged run")
    args = p.parse_args(argv)
    try:
        docs = []
        for name in args.files:
            with open(name, "rb") as f:
                docs.append(orjson.loads(f.read()))
        doc = merge(docs)
    except (OSError, ValueError, KeyError) as exc:
        say("load merge", str(exc))
        return 2
    print(format_summary(doc))
    if args.json:
        with open(args.json, "wb") as f:
            f.write(orjson.dumps(doc))
    if args.plot:
        plot(doc, args.plot)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m fastsse load``: run the load, print the summary; 0 when every request completed."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    args = _parser().parse_args(argv)
    try:
        config = config_from_args(args)
    except (OSError, ValueError) as exc:
        say("load", str(exc))
        return 2
    if config.client == "fastsse" and not engine_available():
        if config.api != "chat":
            say("load", f"--api {config.api} needs fastsse's AsyncClient, which this fastsse lacks")
            return 2
        say("load", "this fastsse has no AsyncClient; using create_stream in threads")
    show = not args.quiet and sys.stderr.isatty()
    started = time.monotonic()

    def progress(counts: list[int]) -> None:
        done, failed, flight, tokens = counts
        elapsed = time.monotonic() - started
        sys.stderr.write(
            f"\r  {done:,} done  {flight:,} in flight  {failed:,} failed  "
            f"{tokens / elapsed if elapsed else 0:,.0f} tokens/s   "
        )
        sys.stderr.flush()

    try:
        doc = run(config, progress=progress if show else None)
    except (RuntimeError, ValueError, _peers.Unavailable, ImportError) as exc:
        print(file=sys.stderr)
        say("load", str(exc))
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        say("load", "interrupted")
        return 130
    if show:
        sys.stderr.write("\n")
    print(format_summary(doc))
    if args.json:
        with open(args.json, "wb") as f:
            f.write(orjson.dumps(doc))
    if args.plot:
        try:
            plot(doc, args.plot)
        except ImportError as exc:
            say("load", str(exc))
            return 2
    outcomes = doc["summary"]["outcomes"]
    return 0 if outcomes.get(COMPLETE, 0) == doc["summary"]["requests"] else 1
