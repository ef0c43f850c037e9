"""``python -m fastsse load compare A.json B.json ...``: every metric of several runs side by side,
the ratio to the first, and whether the difference is more than the runs' own spread; and the
intervals of ``--repeat`` (the same metrics, across the runs of one plan).

A metric is a row of the summary (``metric_rows``): a count or a rate (``requests_per_s``), or one
statistic of a latency (``ttft_ms.p99``). Whether B differs from A:

- both documents from ``--repeat`` (two runs or more each): Welch's t test on the row's value in each
  run, row by row: a difference is significant when it is outside the spread of the runs;
- otherwise, for the latencies, the Mann-Whitney U test on the per-request values in the
  documents' records (one value a request: its TTFT, TPOT, E2E, queue time, mean ITL, mean lag),
  one verdict for the metric; a count or a rate of one run has no spread to test against.

Significant means p < ``ALPHA`` and a difference of at least ``MIN_EFFECT`` (5%) of A's value (and,
for a latency, of ``MIN_MS``, 1 ms, so that a queue or lag of microseconds is not flagged): with
thousands of requests a test finds differences too small to matter (two runs of one plan on a
steady server differ by a percent or two), so a row is flagged only past that minimum effect.
Every test is two-sided, and no correction is made for the number of metrics (about one in 20 of
the metrics that do not differ, by more than the minimum effect, is flagged by chance).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any, Final

from .._errors import InvalidRequest
from . import _stats
from ._plan import COMPLETE, DEFAULT_PERCENTILES, OLD_SCHEMAS, SCHEMA
from ._report import _itl_gaps, _tpot, pkey

COMPARE_SCHEMA: Final = "fastsse.load-compare/1"
ALPHA: Final = 0.05
MIN_EFFECT: Final = 0.05  # the smallest relative difference (|B/A - 1|) a row is flagged for
MIN_MS: Final = 1.0  # and a latency's smallest absolute one, in ms
LEVEL: Final = 0.95  # the confidence level of --repeat's intervals

# (key, label): the counts and rates of a summary
SCALARS: Final = (
    ("requests", "requests"),
    ("complete", "complete"),
    ("duration_s", "duration (s)"),
    ("requests_per_s", "requests/s"),
    ("output_tokens", "output tokens"),
    ("output_tokens_per_s", "output tokens/s"),
    ("input_tokens", "input tokens"),
    ("goodput.requests_per_s", "goodput (requests/s)"),
    ("goodput.share", "goodput (share)"),
    ("token_chunks", "token chunks"),
    ("token_chunks_sharing_a_read", "  sharing a read"),
    ("client_cpu_s", "client CPU (s)"),
    ("client_busy", "client busy (of a core)"),
)
# (key, label): the latencies, each a stats object (mean, percentiles, min, max, n)
LATENCIES: Final = (
    ("ttft_ms", "TTFT (ms)"),
    ("ttft_content_ms", "TTFT content (ms)"),
    ("ttft_reasoning_ms", "TTFT reasoning (ms)"),
    ("tpot_ms", "TPOT (ms)"),
    ("itl_ms", "ITL, token-weighted (ms)"),
    ("e2e_ms", "E2E (ms)"),
    ("queue_ms", "queue (ms)"),
    ("lag_ms", "lag (ms)"),
    ("client_loop_delay_ms", "event loop late (ms)"),
)


def _scalar(summary: dict[str, Any], key: str) -> float | None:
    if key == "complete":
        return float(summary.get("outcomes", {}).get(COMPLETE, 0))
    value: Any = summary
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _stat_keys(percentiles: tuple[float, ...]) -> list[str]:
    return ["mean", *(pkey(q) for q in sorted({*DEFAULT_PERCENTILES, *percentiles})), "min", "max"]


def metric_rows(
    summary: dict[str, Any], percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
) -> dict[str, float | None]:
    """Every metric of a run's summary as ``{key: value}``: the counts and rates by their summary
    key (``requests_per_s``, ``goodput.share``), each latency statistic as ``metric.stat``
    (``ttft_ms.p99``); None where the run has no value (no request with a reasoning token)."""
    out: dict[str, float | None] = {key: _scalar(summary, key) for key, _ in SCALARS}
    for metric, _ in LATENCIES:
        stats = summary.get(metric) or {}
        for stat in _stat_keys(percentiles):
            value = stats.get(stat)
            out[f"{metric}.{stat}"] = float(value) if isinstance(value, (int, float)) else None
    return out


def _label(key: str) -> str:
    labels = dict(SCALARS)
    if key in labels:
        return labels[key]
    return "  " + key.split(".", 1)[1]


def _percentiles(doc: dict[str, Any]) -> tuple[float, ...]:
    return tuple(doc.get("config", {}).get("percentiles") or DEFAULT_PERCENTILES)


# Per-request values, for the Mann-Whitney test: one value a request, so that the requests are the
# samples (a request's ITL values are not independent of each other).


def _mean(values: Any) -> float | None:
    values = list(values)
    return math.fsum(values) / len(values) if values else None


def _since_start(stamp: str) -> Callable[[dict[str, Any]], float | None]:
    def value(r: dict[str, Any]) -> float | None:
        if r.get(stamp) is None or r.get("started") is None:
            return None
        return float(r[stamp] - r["started"])

    return value


def _queue(r: dict[str, Any]) -> float | None:
    if r.get("queued") is None or r.get("started") is None:
        return None
    return float(max(0, r["started"] - r["queued"]))


PER_REQUEST: Final[dict[str, Callable[[dict[str, Any]], float | None]]] = {
    "ttft_ms": _since_start("first_token"),
    "ttft_content_ms": _since_start("first_content"),
    "ttft_reasoning_ms": _since_start("first_reasoning"),
    "tpot_ms": _tpot,
    "itl_ms": lambda r: _mean(_itl_gaps(r)),
    "e2e_ms": _since_start("end"),
    "queue_ms": _queue,
}


def samples(doc: dict[str, Any]) -> dict[str, list[float]]:
    """The per-request values of each latency of a run's (or a repeat's runs') records: those of
    the complete, measured requests (the lag of every measured request, as the summary counts)."""
    records = [r for d in _runs(doc) for r in d.get("requests") or () if not r.get("warmup")]
    ok = [r for r in records if r.get("outcome") == COMPLETE]
    out: dict[str, list[float]] = {}
    for metric, value in PER_REQUEST.items():
        out[metric] = [v for v in map(value, ok) if v is not None]
    out["lag_ms"] = [v for v in (_mean(r.get("lags") or ()) for r in records) if v is not None]
    return out


def _runs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc["runs"]) if doc.get("kind") == "repeat" else [doc]


# --repeat's intervals.


def intervals(runs: list[dict[str, Any]], level: float = LEVEL) -> dict[str, dict[str, Any]]:
    """``{key: {mean, low, high, values}}``: each metric's mean across ``runs`` (run documents) and
    its ``level`` Student-t confidence interval; ``values`` holds each run's value (None where a
    run has none; those runs are left out of the mean). ``low`` and ``high`` are None with fewer
    than two values."""
    percentiles = _percentiles(runs[0]) if runs else DEFAULT_PERCENTILES
    rows = [metric_rows(d["summary"], percentiles) for d in runs]
    out: dict[str, dict[str, Any]] = {}
    for key in rows[0] if rows else ():
        values = [row[key] for row in rows]
        known = [v for v in values if v is not None]
        mean = low = high = None
        if len(known) >= 2:
            mean, low, high = _stats.mean_interval(known, level)
        elif known:
            mean = known[0]
        out[key] = {"mean": mean, "low": low, "high": high, "values": values}
    return out


# Compare.


def check(doc: dict[str, Any], name: str) -> None:
    """It raises InvalidRequest unless ``doc`` is a run or a repeat of a load schema."""
    if doc.get("schema") not in (SCHEMA, *OLD_SCHEMAS):
        raise InvalidRequest(f"{name}: not a {SCHEMA} document ({doc.get('schema')!r})")
    if doc.get("kind", "run") not in ("run", "repeat"):
        raise InvalidRequest(f"{name}: a {doc.get('kind')} cannot be compared: compare its runs (runs[i])")


def _values(doc: dict[str, Any]) -> dict[str, float | None]:
    if doc.get("kind") == "repeat":
        return {key: row["mean"] for key, row in doc["summary"]["metrics"].items()}
    return metric_rows(doc["summary"], _percentiles(doc))


def _per_run(doc: dict[str, Any]) -> dict[str, list[float]] | None:
    if doc.get("kind") != "repeat":
        return None
    return {
        key: [v for v in row["values"] if v is not None] for key, row in doc["summary"]["metrics"].items()
    }


def _verdict(p: float | None, key: str, a: float | None, b: float | None, min_effect: float) -> bool | None:
    """p < ALPHA, and B at least ``min_effect`` of A away from A (a latency: and ``MIN_MS``)."""
    if p is None:
        return None
    if a is None or b is None:
        return p < ALPHA
    diff = abs(b - a)
    if "_ms" in key and diff < MIN_MS:
        return False  # a queue or lag of a few µs either way: no difference a reader can use
    return p < ALPHA and (diff >= min_effect * abs(a) if a else diff > 0)


def compare(
    documents: list[dict[str, Any]], names: list[str], *, min_effect: float = MIN_EFFECT
) -> dict[str, Any]:
    """``compare(documents, names, *, min_effect=0.05) -> dict``: the comparison of runs (or
    repeats) with the first.

    Each row (``metric_rows``) has each document's value, the ratio to the first document's (None
    where either is None or the first is 0) and, against each later document, the test made
    (``welch``, ``mann-whitney`` or None), its p-value and whether the difference is significant:
    p < 0.05 and the ratio at least ``min_effect`` away from 1. It raises InvalidRequest for a
    document that is neither a run nor a repeat, or a ``min_effect`` below 0.
    """
    if not (isinstance(min_effect, (int, float)) and min_effect >= 0 and math.isfinite(min_effect)):
        raise InvalidRequest(f"min_effect must be a number >= 0, not {min_effect!r}")
    for doc, name in zip(documents, names, strict=True):
        check(doc, name)
    values = [_values(d) for d in documents]
    keys = list(values[0])
    for more in values[1:]:
        keys += [k for k in more if k not in keys]
    per_run = [_per_run(d) for d in documents]
    pooled = [samples(d) for d in documents]
    group_tests: list[dict[str, tuple[float, int, int]]] = [{} for _ in documents]
    for k in range(1, len(documents)):
        for metric, _ in LATENCIES:
            a, b = pooled[0].get(metric) or [], pooled[k].get(metric) or []
            if len(a) >= 2 and len(b) >= 2:
                group_tests[k][metric] = (_stats.mann_whitney(a, b)[1], len(a), len(b))
    rows = []
    for key in keys:
        row: dict[str, Any] = {"key": key, "values": [v.get(key) for v in values]}
        base = row["values"][0]
        row["ratios"] = [None if v is None or not base else v / base for v in row["values"]]
        tests: list[dict[str, Any] | None] = [None]
        for k in range(1, len(documents)):
            test: dict[str, Any] | None = None
            a, b = (per_run[0] or {}).get(key) or [], (per_run[k] or {}).get(key) or []
            if len(a) >= 2 and len(b) >= 2:  # both repeats: is B outside the runs' spread?
                test = {"test": "welch", "p": _stats.welch(a, b)[2], "n": [len(a), len(b)]}
            elif "." in key and key.split(".")[0] in group_tests[k]:
                p, na, nb = group_tests[k][key.split(".")[0]]
                test = {"test": "mann-whitney", "p": p, "n": [na, nb]}
            if test is not None:
                test["significant"] = _verdict(test["p"], key, base, row["values"][k], min_effect)
            tests.append(test)
        row["tests"] = tests
        rows.append(row)
    files = [
        {"name": name, "kind": d.get("kind", "run"), "describe": describe(d), "runs": len(_runs(d))}
        for d, name in zip(documents, names, strict=True)
    ]
    return {
        "schema": COMPARE_SCHEMA,
        "alpha": ALPHA,
        "min_effect": min_effect,
        "files": files,
        "rows": rows,
    }


def describe(doc: dict[str, Any]) -> str:
    """One line saying what a run (or a repeat) was."""
    c = doc.get("config") or {}
    load = []
    if c.get("concurrency"):
        load.append(f"concurrency {c['concurrency']}")
    if c.get("rate"):
        load.append(f"rate {c['rate']:g}/s")
    if c.get("trace"):
        load.append(f"trace {c['trace']}")
    runs = f", {len(doc['runs'])} runs" if doc.get("kind") == "repeat" else ""
    requests = doc["summary"].get("requests") if doc.get("kind") != "repeat" else c.get("requests")
    how = ", ".join(load) or "concurrency 1"
    return f"{requests} requests to {c.get('url')} (model {c.get('model')}), {how}, {doc.get('client')}{runs}"


def _number(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.2f}" if abs(value) >= 0.01 else f"{value:.4f}"


def _cell(value: float | None, width: int = 12) -> str:
    return f"{'-' if value is None else _number(value):>{width}}"


def _says(test: dict[str, Any] | None) -> str:
    if test is None:
        return f"{'':>14}"
    p = test["p"]
    shown = "<0.001" if p < 0.001 else f"{p:.3f}"
    return f"{('yes ' if test['significant'] else 'no ') + shown:>14}"


def format_comparison(comparison: dict[str, Any]) -> str:
    """The comparison as the table ``load compare`` prints."""
    files = comparison["files"]
    letters = [chr(ord("A") + i) if i < 26 else f"#{i + 1}" for i in range(len(files))]
    lines = [
        "fastsse load compare: each run against A; X/A is the ratio, differs says whether the difference "
        f"is significant (p < {comparison['alpha']:g}: Mann-Whitney on the per-request values, or "
        f"Welch on the runs of a --repeat) and at least {comparison.get('min_effect', MIN_EFFECT):.0%} "
        "of A's value"
    ]
    for letter, f in zip(letters, files, strict=True):
        lines.append(f"  {letter}  {f['name']}: {f['describe']}")
    head = f"  {'':<26}" + "".join(f"{letter:>12}" for letter in letters)
    for letter in letters[1:]:
        head += f"{letter + '/A':>8}{'differs ' + letter:>14}"
    lines.append(head)
    rows = comparison["rows"]
    metrics = dict(LATENCIES)
    shown_groups: set[str] = set()
    for row in rows:
        key = row["key"]
        if all(v is None for v in row["values"]):
            continue
        group = key.split(".")[0] if "." in key and key.split(".")[0] in metrics else None
        if group is not None and group not in shown_groups:
            shown_groups.add(group)
            # one Mann-Whitney verdict for the metric, on its heading; Welch's are per row
            heading = f"  {metrics[group]:<26}" + " " * 12 * len(files)
            for test in row["tests"][1:]:
                whole = test is not None and test["test"] == "mann-whitney"
                heading += f"{'':>8}" + (_says(test) if whole else f"{'':>14}")
            lines.append(heading.rstrip())
        line = f"  {_label(key):<26}" + "".join(_cell(v) for v in row["values"])
        for ratio, test in zip(row["ratios"][1:], row["tests"][1:], strict=True):
            line += f"{ratio:>8.2f}" if ratio is not None else f"{'-':>8}"
            line += _says(test) if test and test["test"] == "welch" else f"{'':>14}"
        lines.append(line.rstrip())
    return "\n".join(lines)


def plot_comparison(
    documents: list[dict[str, Any]], names: list[str], path: str, *, title: str = "fastsse load compare"
) -> None:
    """Overlay the CDFs of TTFT, ITL (token-weighted) and E2E of each document, under ``title``
    (needs matplotlib; it raises ImportError without it). A panel whose values span more than
    two decades has a logarithmic axis, so a tail does not flatten the bulk."""
    from ._report import _pyplot, itl_values

    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for doc, name in zip(documents, names, strict=True):
        name = os.path.basename(name)
        records = [r for d in _runs(doc) for r in d.get("requests") or () if not r.get("warmup")]
        ok = [r for r in records if r.get("outcome") == COMPLETE]
        series = (
            [(r["first_token"] - r["started"]) / 1e6 for r in ok if r.get("first_token") is not None],
            [v / 1e6 for r in ok for v in itl_values(r)],
            [(r["end"] - r["started"]) / 1e6 for r in ok if r.get("end") is not None],
        )
        for ax, values in zip(axes, series, strict=True):
            if values:
                ordered = sorted(values)
                ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=name)
                if ordered[0] > 0 and ordered[-1] / ordered[0] > 100:
                    ax.set_xscale("log")
    for ax, title in zip(axes, ("TTFT", "ITL (token-weighted)", "E2E"), strict=True):
        ax.set_title(f"{title} CDF")
        ax.set_xlabel("ms")
        ax.set_ylabel("fraction")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_repeat(doc: dict[str, Any]) -> str:
    """A ``--repeat`` document as the table ``load`` prints: each metric's mean, its confidence
    interval and each run's value."""
    summary = doc["summary"]
    runs = doc["runs"]
    level = summary["level"]
    outcomes = [", ".join(f"{k} {v}" for k, v in r["summary"]["outcomes"].items()) or "none" for r in runs]
    lines = [
        f"fastsse load: {summary['runs']} runs of {describe(runs[0])}; the mean of each metric across "
        f"the runs and its {level:.0%} confidence interval (Student's t)",
        "  outcomes: " + " | ".join(outcomes),
        f"  {'':<26}{'mean':>12}{'interval':>24}  "
        + "".join(f"{'run ' + str(i + 1):>11}" for i in range(len(runs))),
    ]
    if doc.get("interrupted"):
        lines.insert(1, f"  interrupted (Ctrl-C) after {len(runs)} of {doc['config'].get('repeat')} runs")
    metrics = dict(LATENCIES)
    shown: set[str] = set()
    for key, row in summary["metrics"].items():
        if all(v is None for v in row["values"]):
            continue
        group = key.split(".")[0] if "." in key else None
        if group in metrics and group not in shown:
            shown.add(group)
            lines.append(f"  {metrics[group]}")
        interval = f"[{_number(row['low'])}, {_number(row['high'])}]" if row["low"] is not None else "-"
        lines.append(
            f"  {_label(key):<26}{_cell(row['mean'])}{interval:>24}  "
            + "".join(_cell(v, 11) for v in row["values"])
        )
    return "\n".join(lines)
