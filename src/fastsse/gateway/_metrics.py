"""The gateway's counters and histograms, written as Prometheus text (``Metrics.render``).

Names follow the OpenTelemetry GenAI semantic conventions where one exists (a dot becomes an
underscore, the unit a suffix, as the OpenTelemetry Prometheus exporter writes them):
``gen_ai_server_time_to_first_token_seconds``, ``gen_ai_server_time_per_output_token_seconds``,
``gen_ai_server_request_duration_seconds`` and ``gen_ai_client_token_usage`` (with
``gen_ai_token_type`` = ``input`` / ``output``); the gateway's own are ``fastsse_gateway_*``.
Each worker process keeps its own figures (a scrape reaches one worker).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

# seconds: first token and whole answers (10 ms to 5 min)
LATENCY_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
TOKEN_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


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

    def lines(self) -> list[str]:
        out = [f"# HELP {self.name} {self.doc}", f"# TYPE {self.name} histogram"]
        for labels, row in sorted(self.series.items()):
            running = 0.0
            for bound, count in zip((*self.bounds, "+Inf"), row[:-1], strict=False):
                running += count
                le = bound if isinstance(bound, str) else f"{bound:g}"
                bucket = _labels(labels, 'le="' + le + '"')
                out.append(f"{self.name}_bucket{bucket} {running:g}")
            out.append(f"{self.name}_sum{_labels(labels)} {row[-1]:g}")
            out.append(f"{self.name}_count{_labels(labels)} {running:g}")
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
        last = len(self.bounds)  # +Inf
        for bits, count in enumerate(by_bits):
            if count:
                row[min(max(bits - self.LOW, 0), last)] += count
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

    def lines(self) -> list[str]:
        out = [f"# HELP {self.name} {self.doc}", f"# TYPE {self.name} counter"]
        out += [f"{self.name}{_labels(labels)} {value:g}" for labels, value in sorted(self.series.items())]
        return out


class Metrics:
    """Every figure the gateway keeps; ``render()`` is the ``/metrics`` page."""

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
        self.ttft = Histogram(
            "gen_ai_server_time_to_first_token_seconds",
            "Time from the request's arrival to the first byte of the answer sent to the caller.",
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

    def render(self) -> bytes:
        """Every family as Prometheus text (format 0.0.4)."""
        lines = [
            "# HELP fastsse_gateway_in_flight Answers being served now.",
            "# TYPE fastsse_gateway_in_flight gauge",
            f"fastsse_gateway_in_flight {self.in_flight}",
        ]
        for family in (
            self.requests,
            self.cuts,
            self.fallbacks,
            self.ttft,
            self.gaps,
            self.duration,
            self.tokens,
        ):
            lines += family.lines()
        return ("\n".join(lines) + "\n").encode()
