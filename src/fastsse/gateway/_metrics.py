"""The gateway's counters and histograms, written as Prometheus text (``Metrics.render``).

Names follow the OpenTelemetry GenAI semantic conventions where one exists (a dot becomes an
underscore, the unit a suffix, as the OpenTelemetry Prometheus exporter writes them):
``gen_ai_server_time_to_first_token_seconds``, ``gen_ai_server_time_per_output_token_seconds``,
``gen_ai_server_request_duration_seconds`` and ``gen_ai_client_token_usage`` (with
``gen_ai_token_type`` = ``input`` / ``output``); the gateway's own are ``fastsse_gateway_*``.

Each worker process keeps its own figures, with nothing shared per request; ``MetricsShare`` makes
one page of them all at scrape time: the scraped worker asks every other one for its figures on a
Unix socket and adds them up (``Metrics.snapshot`` / ``Metrics.merge``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from bisect import bisect_left
from itertools import compress
from typing import Any, Final

import orjson

# seconds: first token and whole answers (10 ms to 5 min)
LATENCY_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
TOKEN_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    """A sample value: an integral one in full (``:g`` would print 1234567 as 1.23457e+06)."""
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _tupled(labels: Any) -> Labels:
    return tuple((str(name), str(value)) for name, value in labels)


def _labels(labels: Labels, extra: str = "") -> str:
    parts = [f'{name}="{_escape(value)}"' for name, value in labels]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class Histogram:
    """One histogram family: per label set, the count in each bucket, the sum and the count."""

    __slots__ = ("bounds", "doc", "name", "series")

    def __init__(self, name: str, doc: str, bounds: tuple[float, ...]) -> None:
        self.name = name
        self.doc = doc
        self.bounds = bounds
        self.series: dict[Labels, list[float]] = {}  # labels -> [bucket counts..., +Inf, sum]

    def observe(self, labels: Labels, value: float) -> None:
        row = self.series.get(labels)
        if row is None:
            row = self.series[labels] = [0.0] * (len(self.bounds) + 2)
        row[bisect_left(self.bounds, value)] += 1
        row[-1] += value

    def rows(self) -> list[list[Any]]:
        """Every series as ``[labels, row]`` (JSON-ready), for ``add_rows`` in another process."""
        return [[labels, row] for labels, row in self.series.items()]

    def add_rows(self, rows: list[list[Any]]) -> None:
        """Add the series of ``rows()`` (the same family's, from another process) to these; a row
        of another bucket layout is left out."""
        width = len(self.bounds) + 2
        for labels, row in rows:
            if len(row) != width:
                continue
            key = _tupled(labels)
            mine = self.series.get(key)
            if mine is None:
                self.series[key] = [float(x) for x in row]
            else:
                for i, x in enumerate(row):
                    mine[i] += x

    def lines(self) -> list[str]:
        out = [f"# HELP {self.name} {self.doc}", f"# TYPE {self.name} histogram"]
        for labels, row in sorted(self.series.items()):
            running = 0.0
            for bound, count in zip((*self.bounds, "+Inf"), row[:-1], strict=False):
                running += count
                le = bound if isinstance(bound, str) else f"{bound:g}"
                bucket = _labels(labels, 'le="' + le + '"')
                out.append(f"{self.name}_bucket{bucket} {_number(running)}")
            out.append(f"{self.name}_sum{_labels(labels)} {_number(row[-1])}")
            out.append(f"{self.name}_count{_labels(labels)} {_number(running)}")
        return out


class Log2Histogram(Histogram):
    """A histogram whose buckets are powers of two nanoseconds (``le`` 2**17 ns = 131 us up to
    2**34 ns = 17 s), filled from counts by bit length (``merge``): what a per-piece path can
    keep with one list increment."""

    LOW: Final = 17
    HIGH: Final = 34

    def __init__(self, name: str, doc: str) -> None:
        super().__init__(name, doc, tuple(2**b / 1e9 for b in range(self.LOW, self.HIGH + 1)))

    def merge(self, labels: Labels, by_bits: list[int], total: float) -> None:
        """Add gaps counted by their bit length in ns (``by_bits[b]``) whose sum is ``total`` s."""
        row = self.series.get(labels)
        if row is None:
            row = self.series[labels] = [0.0] * (len(self.bounds) + 2)
        low, last = self.LOW, len(self.bounds)  # last: +Inf
        # the lengths that have gaps only (a few of the 64): this runs once per answer
        for bits in compress(range(len(by_bits)), by_bits):
            row[min(max(bits - low, 0), last)] += by_bits[bits]
        row[-1] += total


class Counter:
    """One counter family (``_total``), per label set."""

    __slots__ = ("doc", "name", "series")

    def __init__(self, name: str, doc: str) -> None:
        self.name = name
        self.doc = doc
        self.series: dict[Labels, float] = {}

    def add(self, labels: Labels, value: float = 1) -> None:
        self.series[labels] = self.series.get(labels, 0) + value

    def rows(self) -> list[list[Any]]:
        """Every series as ``[labels, value]`` (JSON-ready), for ``add_rows`` in another process."""
        return [[labels, value] for labels, value in self.series.items()]

    def add_rows(self, rows: list[list[Any]]) -> None:
        """Add the series of ``rows()`` (the same family's, from another process) to these."""
        series = self.series
        for labels, value in rows:
            key = _tupled(labels)
            series[key] = series.get(key, 0) + value

    def lines(self) -> list[str]:
        out = [f"# HELP {self.name} {self.doc}", f"# TYPE {self.name} counter"]
        out += [
            f"{self.name}{_labels(labels)} {_number(float(value))}"
            for labels, value in sorted(self.series.items())
        ]
        return out


class Metrics:
    """Every figure the gateway keeps; ``render()`` is the ``/metrics`` page, ``snapshot()`` and
    ``merge()`` carry the figures of one process into another's."""

    def __init__(self) -> None:
        self.requests = Counter(
            "fastsse_gateway_requests_total",
            "Answers by route, upstream and the HTTP status sent to the caller.",
        )
        self.cuts = Counter(
            "fastsse_gateway_cuts_total",
            "Streamed answers cut (ended without their terminator) by route, upstream and cause.",
        )
        self.fallbacks = Counter(
            "fastsse_gateway_upstream_failures_total",
            "Upstream attempts that failed before any byte reached the caller, by upstream and reason.",
        )
        self.limited = Counter(
            "fastsse_gateway_limited_total",
            "Requests refused by a key's limit, by key name and limit (rpm, tpm, max_streams, redis).",
        )
        self.ejections = Counter(
            "fastsse_gateway_upstream_ejections_total",
            "Times an upstream was taken out of rotation after consecutive failures, by upstream.",
        )
        self.ttfb = Histogram(
            "fastsse_gateway_time_to_first_byte_seconds",
            "Time from the request's arrival to the first byte of the answer sent to the caller.",
            LATENCY_BUCKETS,
        )
        self.ttft = Histogram(
            "gen_ai_server_time_to_first_token_seconds",
            "Time from the request's arrival to the first content token (reasoning, text or a tool "
            "call) sent to the caller.",
            LATENCY_BUCKETS,
        )
        self.gaps = Log2Histogram(
            "gen_ai_server_time_per_output_token_seconds",
            "Time between two pieces of a streamed answer (one upstream read each; a token per read "
            "for most servers).",
        )
        self.duration = Histogram(
            "gen_ai_server_request_duration_seconds",
            "Time from the request's arrival to the end of its answer.",
            LATENCY_BUCKETS,
        )
        self.tokens = Histogram(
            "gen_ai_client_token_usage", "Tokens per answer as the upstream reported them.", TOKEN_BUCKETS
        )
        self.in_flight = 0

    def families(self) -> tuple[Counter | Histogram, ...]:
        """The counters and histograms in the order the page lists them."""
        return (
            self.requests,
            self.cuts,
            self.fallbacks,
            self.limited,
            self.ejections,
            self.ttfb,
            self.ttft,
            self.gaps,
            self.duration,
            self.tokens,
        )

    def snapshot(self) -> dict[str, Any]:
        """Every figure as a JSON-ready dict: ``{"families": {name: rows}, "in_flight": n}``."""
        return {
            "families": {family.name: family.rows() for family in self.families()},
            "in_flight": self.in_flight,
        }

    def merge(self, snapshot: dict[str, Any], *, gauges: bool = True) -> None:
        """Add another process's ``snapshot()`` to these figures: counters and histograms add up,
        and so does the ``in_flight`` gauge unless ``gauges`` is false (the figures of a process that
        has exited). A family this version does not know is left out."""
        families = {family.name: family for family in self.families()}
        for name, rows in snapshot.get("families", {}).items():
            family = families.get(name)
            if family is not None:
                family.add_rows(rows)
        if gauges:
            self.in_flight += int(snapshot.get("in_flight", 0))

    def render(self) -> bytes:
        """Every family as Prometheus text (format 0.0.4)."""
        lines = [
            "# HELP fastsse_gateway_in_flight Answers being served now.",
            "# TYPE fastsse_gateway_in_flight gauge",
            f"fastsse_gateway_in_flight {self.in_flight}",
        ]
        for family in self.families():
            lines += family.lines()
        return ("\n".join(lines) + "\n").encode()


class MetricsShare:
    """``MetricsShare(directory, *, wait=1.0)``: one ``/metrics`` page for every worker process
    whose share uses the same ``directory`` (a private one, made before the workers are forked).

    Make one per worker, in the worker. ``await start(metrics)`` serves this worker's figures on the
    Unix socket ``<directory>/<pid>-<token>.sock``; ``await page(metrics)`` is the page of every
    worker: this one's figures plus those each other live worker answers on its socket (asked
    concurrently, ``wait`` seconds each at most), plus the last figures of every worker that has
    exited or does not answer (its ``.json`` file). Nothing is shared per request: the cost is paid
    at scrape time. A worker writes its figures to its ``.json`` file whenever they are shown (its
    own page, a peer's question) and at ``close()``, so a figure a scrape once showed is never
    taken back, even after the worker is killed: counters do not go backwards when a worker is
    replaced (what it counted after the last scrape and before a SIGKILL is lost).
    """

    def __init__(self, directory: str | os.PathLike[str], /, *, wait: float = 1.0) -> None:
        self.directory = os.fspath(directory)
        self.wait = wait
        self.name = ""
        self._metrics: Metrics | None = None
        self._server: asyncio.AbstractServer | None = None

    def _path(self, name: str, suffix: str) -> str:
        return os.path.join(self.directory, name + suffix)

    async def start(self, metrics: Metrics) -> None:
        """Serve ``metrics`` on this worker's socket, on the running loop. It raises OSError if the
        socket cannot be made (a directory path too long for a Unix socket, or not writable)."""
        self.name = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._metrics = metrics
        self._server = await asyncio.start_unix_server(self._answer, path=self._path(self.name, ".sock"))

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            if self._metrics is not None:
                writer.write(self._keep(self._metrics.snapshot()))
                await writer.drain()
        writer.close()

    def _keep(self, snapshot: dict[str, Any]) -> bytes:
        """The figures as JSON, written to this worker's ``.json`` file first (atomically)."""
        data = orjson.dumps(snapshot)
        if self.name:
            final = self._path(self.name, ".json")
            with contextlib.suppress(OSError):
                with open(final + ".tmp", "wb") as file:
                    file.write(data)
                os.replace(final + ".tmp", final)
        return data

    async def _ask(self, name: str) -> dict[str, Any] | None:
        """A live worker's figures, or None when it does not answer within ``wait``."""
        path = self._path(name, ".sock")

        async def read() -> bytes:
            reader, writer = await asyncio.open_unix_connection(path)
            try:
                return await reader.read()
            finally:
                writer.close()

        try:
            data = await asyncio.wait_for(read(), self.wait)
        except (ConnectionRefusedError, FileNotFoundError):
            with contextlib.suppress(OSError):
                os.unlink(path)  # nobody listens there any more: the worker is gone
            return None
        except (OSError, asyncio.TimeoutError):
            return None
        try:
            snapshot = orjson.loads(data)
        except orjson.JSONDecodeError:  # cut short: the worker went away while answering
            return None
        return snapshot if isinstance(snapshot, dict) else None

    async def page(self, metrics: Metrics) -> bytes:
        """The Prometheus page of every worker's figures (``Metrics.render`` of their sum)."""
        self._metrics = metrics
        total = Metrics()
        own = metrics.snapshot()
        self._keep(own)
        total.merge(own)
        names: set[str] = set()
        with contextlib.suppress(OSError):
            for entry in os.listdir(self.directory):
                stem, dot, suffix = entry.rpartition(".")
                if dot and suffix in ("sock", "json") and stem != self.name:
                    names.add(stem)
        ordered = sorted(names)
        live = await asyncio.gather(*(self._ask(name) for name in ordered))
        for name, snapshot in zip(ordered, live, strict=True):
            if snapshot is not None:
                total.merge(snapshot)
                continue
            try:  # exited or not answering: its last figures, without its gauge
                with open(self._path(name, ".json"), "rb") as file:
                    kept = orjson.loads(file.read())
            except (OSError, orjson.JSONDecodeError):
                continue
            if isinstance(kept, dict):
                total.merge(kept, gauges=False)
        return total.render()

    def close(self, metrics: Metrics) -> None:
        """Write this worker's final figures and stop answering on its socket (sync: callable at
        shutdown, with or without the loop)."""
        self._metrics = None
        if not self.name:
            return
        self._keep(metrics.snapshot())
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(Exception):  # the loop may be closed already
                server.close()
        with contextlib.suppress(OSError):
            os.unlink(self._path(self.name, ".sock"))
