"""``load --metrics-url URL``: the server's own Prometheus metrics, read before and after a run.

vLLM, SGLang and TGI expose their counters and histograms at ``/metrics`` in the Prometheus text
format (``vllm:prompt_tokens_total``, ``vllm:time_to_first_token_seconds_bucket{le="0.1",...}``,
``sglang:...``, ``tgi_request_duration_bucket``...). ``scrape(url)`` reads one exposition;
``changes(before, after)`` says what the run changed, each series named as the server spells it
(``name{label="value",...}``):

- ``counters``: the growth of every counter (and of a summary's ``_sum`` and ``_count``) that grew;
- ``histograms``: per histogram series, the growth of its ``_count`` and ``_sum``, their mean, and
  the quantiles of the observations the run added (the growth of each bucket, interpolated within
  a bucket as Prometheus's ``histogram_quantile`` does);
- ``gauges``: ``[before, after]`` of every gauge that moved (requests running, cache usage).

A counter that went down (the server restarted) is reported from 0, as Prometheus's ``increase``.
"""

from __future__ import annotations

import math
import re
import urllib.request
from typing import Any, Final

from .._errors import LoadError

QUANTILES: Final = (50.0, 90.0, 99.0)
TIMEOUT_S: Final = 10.0
MAX_BYTES: Final = 32 << 20  # an exposition larger than this is not a metrics page

_SAMPLE: Final = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?\s*$"
)
_LABEL: Final = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


class Exposition:
    """One scrape: ``types`` (family name -> counter, gauge, histogram, summary, untyped) and
    ``samples`` (``(name, labels)`` -> value, the labels a sorted tuple of pairs)."""

    def __init__(self) -> None:
        self.types: dict[str, str] = {}
        self.samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}


def parse(text: str) -> Exposition:
    """``parse(text) -> Exposition``: the Prometheus text format (0.0.4; OpenMetrics' ``# EOF``
    and ``_created`` samples are read too). Lines it cannot read are skipped."""
    out = Exposition()
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                out.types[parts[2]] = parts[3].strip().lower()
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        labels = tuple(sorted((k, v) for k, v in _LABEL.findall(match["labels"] or "")))
        out.samples[(match["name"], labels)] = value
    return out


def scrape(url: str, *, timeout: float = TIMEOUT_S) -> Exposition:
    """Read ``url`` (a Prometheus ``/metrics`` page). It raises OSError if it cannot be read (an
    HTTP error status included) and ValueError if the page holds no sample."""
    request = urllib.request.Request(url, headers={"Accept": "text/plain;version=0.0.4, */*;q=0.1"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        body = answer.read(MAX_BYTES + 1)
    if len(body) > MAX_BYTES:
        raise LoadError(f"{url} sent more than {MAX_BYTES >> 20} MiB: not a metrics page")
    exposition = parse(body.decode("utf-8", "replace"))
    if not exposition.samples:
        raise LoadError(f"{url} holds no Prometheus sample")
    return exposition


def _family(name: str, types: dict[str, str]) -> tuple[str, str]:
    """The family a sample belongs to and its type: ``x_bucket`` of histogram ``x``, ..."""
    for suffix in ("_bucket", "_sum", "_count", "_created", "_total"):
        stem = name[: -len(suffix)]
        if name.endswith(suffix) and types.get(stem) in ("histogram", "summary", "counter"):
            return stem, types[stem]
    if name in types:
        return name, types[name]
    return name, "counter" if name.endswith("_total") else "gauge"  # untyped: by the convention


def series(name: str, labels: tuple[tuple[str, str], ...]) -> str:
    """A series as the server spells it: ``name{a="1",b="2"}``."""
    if not labels:
        return name
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"


def _increase(before: float | None, after: float) -> float:
    return after if before is None or after < before else after - before


def _quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """``histogram_quantile``: ``buckets`` are (upper bound, cumulative count), +Inf last."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q / 100 * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound  # in the open bucket: its lower bound, as Prometheus says
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return None


def changes(before: Exposition, after: Exposition) -> dict[str, Any]:
    """What changed between two scrapes: ``{counters, histograms, gauges}`` (see the module)."""
    types = {**before.types, **after.types}
    counters: dict[str, float] = {}
    gauges: dict[str, list[float | None]] = {}
    hist: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]] = {}
    for (name, labels), value in after.samples.items():
        family, kind = _family(name, types)
        old = before.samples.get((name, labels))
        if name.endswith("_created"):
            continue
        if kind == "histogram":
            rest = tuple(kv for kv in labels if kv[0] != "le")
            entry = hist.setdefault((family, rest), {"buckets": [], "sum": 0.0, "count": 0.0})
            grew = _increase(old, value)
            if name.endswith("_bucket"):
                le = dict(labels).get("le", "+Inf")
                entry["buckets"].append((float(le), grew))
            elif name.endswith("_sum"):
                entry["sum"] = value - old if old is not None and value >= old else value
            elif name.endswith("_count"):
                entry["count"] = grew
        elif kind == "counter" or (kind == "summary" and name.endswith(("_sum", "_count"))):
            grew = _increase(old, value)
            if grew:
                counters[series(name, labels)] = grew
        elif kind in ("gauge", "untyped") and old != value:
            gauges[series(name, labels)] = [old, value]
    histograms: dict[str, dict[str, Any]] = {}
    for (family, labels), entry in sorted(hist.items()):
        if not entry["count"]:
            continue
        buckets = sorted(entry["buckets"])
        stats: dict[str, Any] = {
            "count": entry["count"],
            "sum": entry["sum"],
            "mean": entry["sum"] / entry["count"],
        }
        for q in QUANTILES:
            stats[f"p{q:g}"] = _quantile(q, buckets)
        histograms[series(family, labels)] = stats
    return {
        "counters": dict(sorted(counters.items())),
        "histograms": histograms,
        "gauges": dict(sorted(gauges.items())),
    }


def metrics_url(base_url: str) -> str:
    """The ``/metrics`` page of the server at an API base URL (``http://host:8000/v1``)."""
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root + "/metrics"


def format_changes(found: dict[str, Any]) -> list[str]:
    """The lines of the printed summary for ``doc["server_metrics"]``."""
    lines = [f"  server metrics ({found['url']}), what the run changed:"]
    if found.get("histograms"):
        # the server's own histograms: a quantile is only as fine as its buckets
        lines.append(
            "    (histogram quantiles: interpolated within the server's buckets, as histogram_quantile)"
        )
    if found.get("error"):
        return [*lines, f"    {found['error']}"]
    if not (found["counters"] or found["histograms"] or found["gauges"]):
        return [*lines, "    nothing"]
    for name, grew in found["counters"].items():
        lines.append(f"    {name} +{_number(grew)}")
    for name, stats in found["histograms"].items():
        quantiles = " ".join(
            f"p{q:g} {_number(stats[f'p{q:g}'])}" for q in QUANTILES if stats.get(f"p{q:g}") is not None
        )
        lines.append(
            f"    {name}: +{_number(stats['count'])} observed, sum +{_number(stats['sum'])}, "
            f"mean {_number(stats['mean'])}" + (f", {quantiles}" if quantiles else "")
        )
    for name, (old, new) in found["gauges"].items():
        lines.append(f"    {name} {_number(old)} -> {_number(new)}")
    return lines


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.4g}"
