"""What ``python -m fastsse load`` reports: the summary, goodput, the ``--json`` document, merges,
the printed text and the plots (each definition, beside vLLM's and AIPerf's, in ``docs/load.md``)."""

from __future__ import annotations

import dataclasses
import math
import operator
from array import array
from collections import Counter
from collections.abc import Iterable
from itertools import chain
from typing import Any, Final

import orjson

from .._errors import InvalidRequest
from ._metrics import format_changes
from ._plan import (
    COMPLETE,
    DEFAULT_PERCENTILES,
    FAILED,
    HTTP_ERROR,
    INCOMPLETE,
    OLD_SCHEMAS,
    SCHEMA,
    STREAM_ERROR,
    Config,
    endpoint,
    not_found,
)

BUSY_WARNING: Final = 0.7  # share of one core above which the client's own queueing shows in the figures
# Wall seconds below which that share says nothing about queueing: a run that ends at once (every
# request refused, a handful of requests) spends its little time on setup, all of it on the CPU.
BUSY_MIN_WALL_S: Final = 1.0
LOOP_DELAY_WARNING_MS: Final = 10.0
PROBE_MS: Final = 10.0  # the event-loop probe's period (_run.PROBE_S)
_API_WORDS: Final = {  # in the summary's first line
    "chat": "",
    "responses": "Responses ",
    "messages": "Messages ",
    "completions": "completions ",
}
_TIMES: Final = (
    "queued", "started", "sent", "first_byte", "first_token",
    "first_content", "first_reasoning", "last_token", "end",
)  # fmt: skip


def dumps(doc: dict[str, Any]) -> bytes:
    """``dumps(doc) -> bytes``: a ``--json`` document as JSON, written by orjson from the records
    as they are (their ``array.array`` fields as lists, nothing copied first).

    It raises TypeError (``orjson.JSONEncodeError``) for a value JSON cannot hold."""
    # orjson's hook for what it cannot write itself: array.tolist, a TypeError for anything else
    return orjson.dumps(doc, default=array.tolist)


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between ranks, as numpy's default."""
    if not values:
        return math.nan
    return _ranked(sorted(values), q)


def _ranked(ordered: list[float], q: float) -> float:
    # the percentile of values already sorted: a run's 400,000 ITL values are sorted once
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def pkey(q: float) -> str:
    """The key of percentile ``q`` in a stats object: ``p50``, ``p99``, ``p99.9``."""
    return f"p{q:g}"


_ROW: Final = array("i", range(1 << 16))  # 0, 1, 2, ...: what a run of reads is compared with


def _stats(
    values_ns: Iterable[float], percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
) -> dict[str, Any]:
    # sorted in ns into one new list, and only the figures are scaled to ms: a run's 2,000,000
    # ITL values are made once, straight into the sorted list
    ordered = sorted(values_ns)
    qs = sorted({*DEFAULT_PERCENTILES, *percentiles})
    if not ordered:
        return {"n": 0, "mean": None, **dict.fromkeys(map(pkey, qs)), "min": None, "max": None}
    out: dict[str, Any] = {"n": len(ordered), "mean": sum(ordered) / len(ordered) / 1e6}
    for q in qs:
        out[pkey(q)] = _ranked(ordered, q) / 1e6
    out["min"], out["max"] = ordered[0] / 1e6, ordered[-1] / 1e6
    return out


def itl_values(record: dict[str, Any]) -> list[float]:
    """Token-weighted inter-token latencies of one request (ns): chunk ``i`` (after the first)
    arriving ``gap`` after chunk ``i-1`` with ``n`` tokens gives ``n`` values of ``gap / n``."""
    return list(_itl_gaps(record))


def _itl_gaps(record: dict[str, Any]) -> Iterable[float]:
    reads, token_reads, tokens = record["reads"], record["token_reads"], record["tokens"]
    if len(token_reads) < 2:
        return ()
    if _in_a_row(token_reads):  # each token chunk its own read, one after the other
        times = reads[token_reads[0] : token_reads[-1] + 1]
    else:
        times = list(map(reads.__getitem__, token_reads))
    if tokens.count(1) == len(tokens):  # a token a chunk, the usual case: the gaps themselves
        return map(operator.sub, times[1:], times[:-1])
    out: list[float] = []
    for k in range(1, len(times)):
        n = tokens[k]
        if n > 0:
            out += [(times[k] - times[k - 1]) / n] * n
    return out


def _in_a_row(indexes: Any) -> bool:
    # read indexes first, first + 1, ..., last: an array of the records' type is compared with a
    # slice of _ROW in C, anything else (lists from JSON) value by value
    first, last = indexes[0], indexes[-1]
    if last - first != len(indexes) - 1:
        return False
    if isinstance(indexes, array) and indexes.typecode == _ROW.typecode and last < len(_ROW):
        return bool(indexes == _ROW[first : last + 1])
    return list(indexes) == list(range(first, last + 1))


def _sharing(record: dict[str, Any]) -> int:
    # token chunks that came in a read an earlier one came in
    token_reads = record["token_reads"]
    if not token_reads or _in_a_row(token_reads):
        return 0
    return len(token_reads) - len(set(token_reads))


def _tpot(r: dict[str, Any]) -> float | None:
    if r["output_tokens"] > 1 and r["first_token"] is not None and r["last_token"] is not None:
        return float(r["last_token"] - r["first_token"]) / float(r["output_tokens"] - 1)
    return None


def is_good(r: dict[str, Any], slos: dict[str, float]) -> bool:
    """True when ``r`` completed and met every SLO (ms): ``ttft``, ``tpot``, ``e2el``. A request of
    one output token has no TPOT and meets any TPOT SLO (as vLLM counts it, TPOT 0)."""
    if r["outcome"] != COMPLETE or r["started"] is None:
        return False
    measured = {
        "ttft": None if r["first_token"] is None else r["first_token"] - r["started"],
        "tpot": _tpot(r) or 0.0,
        "e2el": None if r["end"] is None else r["end"] - r["started"],
    }
    for key, limit_ms in slos.items():
        value = measured[key]
        if value is None or value / 1e6 > limit_ms:
            return False
    return True


def summarize(
    records: list[dict[str, Any]],
    workers: list[dict[str, Any]],
    *,
    goodput: dict[str, float] | None = None,
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES,
) -> dict[str, Any]:
    """The summary of the measured (non-warm-up) records; see docs/load.md for each definition."""
    measured = [r for r in records if not r["warmup"]]
    ok = [r for r in measured if r["outcome"] == COMPLETE]
    ttft, ttft_content, ttft_reasoning, tpot, e2e, queue = [], [], [], [], [], []
    by_turn: dict[int, list[float]] = {}
    for r in ok:
        started = r["started"]
        if r["first_token"] is not None and started is not None:
            ttft.append(r["first_token"] - started)
            if r.get("turn") is not None:
                by_turn.setdefault(r["turn"], []).append(r["first_token"] - started)
        if r["first_content"] is not None and started is not None:
            ttft_content.append(r["first_content"] - started)
        if r["first_reasoning"] is not None and started is not None:
            ttft_reasoning.append(r["first_reasoning"] - started)
        if r["end"] is not None and started is not None:
            e2e.append(r["end"] - started)
        if r["queued"] is not None and started is not None:
            queue.append(max(0, started - r["queued"]))
        value = _tpot(r)
        if value is not None:
            tpot.append(value)
    # the two long series one after the other, each gone before the next is made
    itl_ms = _stats(chain.from_iterable(map(_itl_gaps, ok)), percentiles)
    lag_ms = _stats(chain.from_iterable(r["lags"] for r in measured), percentiles)
    starts = [r["started"] for r in measured if r["started"] is not None]
    ends = [r["end"] for r in measured if r["end"] is not None]
    span = (max(ends) - min(starts)) / 1e9 if starts and ends else 0.0
    output = sum(r["output_tokens"] for r in ok)
    prompts = [r["prompt_tokens"] for r in ok if r.get("prompt_tokens") is not None]
    causes = Counter(f"{r['outcome']}: {r['cause']}" for r in measured if r["outcome"] != COMPLETE)
    cpu = sum(w["cpu_s"] for w in workers)
    wall = max((w["wall_s"] for w in workers), default=0.0)
    busiest = max((w["cpu_s"] / w["wall_s"] for w in workers if w["wall_s"] > 0), default=0.0)
    loop_delay = _stats([d for w in workers for d in w.get("loop_delays_ns") or ()], percentiles)
    known = [w["preempted"] for w in workers if w.get("preempted", -1) >= 0]
    preempted = sum(known) if known else -1
    reads_shared = sum(map(_sharing, measured))
    good = None
    if goodput:
        n_good = sum(is_good(r, goodput) for r in measured)
        good = {
            "slo_ms": dict(goodput),
            "good_requests": n_good,
            "requests_per_s": n_good / span if span else None,
            "share": n_good / len(measured) if measured else None,
        }
    summary = {
        "requests": len(measured),
        "warmup_requests": len(records) - len(measured),
        "outcomes": dict(Counter(r["outcome"] for r in measured)),
        "failures_by_cause": dict(causes.most_common()),
        "duration_s": span,
        "requests_per_s": len(ok) / span if span else None,
        "output_tokens": output,
        "output_tokens_per_s": output / span if span else None,
        "input_tokens": sum(prompts) if prompts else None,
        "goodput": good,
        "retried_requests": sum(1 for r in measured if r.get("attempts", 1) > 1),
        "attempts": sum(r.get("attempts", 1) for r in measured),
        "token_chunks": sum(len(r["tokens"]) for r in measured),
        "token_chunks_sharing_a_read": reads_shared,
        "ttft_ms": _stats(ttft, percentiles),
        "ttft_content_ms": _stats(ttft_content, percentiles),
        "ttft_reasoning_ms": _stats(ttft_reasoning, percentiles),
        "ttft_by_turn_ms": [_stats(by_turn[t], percentiles) for t in sorted(by_turn)],
        "tpot_ms": _stats(tpot, percentiles),
        "itl_ms": itl_ms,
        "e2e_ms": _stats(e2e, percentiles),
        "queue_ms": _stats(queue, percentiles),
        "lag_ms": lag_ms,
        "client_cpu_s": cpu,
        "client_busy": busiest,
        "client_wall_s": wall,
        "client_loop_delay_ms": loop_delay,
        "client_preempted": preempted,
        "warnings": [],
    }
    warnings: list[str] = summary["warnings"]
    counted = sum(sum(r["tokens"]) for r in ok)
    reported = [r["completion_tokens"] for r in ok if r["completion_tokens"] is not None]
    if len(reported) == len(ok) and ok and sum(reported) != counted:
        warnings.append(
            f"the server reported {sum(reported):,} completion tokens, the chunks carried {counted:,} countable "
            "ones: ITL treats a chunk without continuous usage or logprobs as one token (ask for "
            "stream_options.continuous_usage_stats or logprobs to count them); TPOT and tokens/s use usage"
        )
    if busiest > BUSY_WARNING and wall >= BUSY_MIN_WALL_S:
        warnings.append(
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
        warnings.append(
            f"the client's event loop woke up to {loop_delay['p99']:.1f} ms late (p99 of a {PROBE_MS:g} ms "
            f"timer); reads waited as long and the latencies include it: {why}"
        )
    return summary


def _settings(config: Config) -> dict[str, Any]:
    out = dataclasses.asdict(config)
    out["dataset"] = len(config.dataset)
    out["trace_rows"] = len(config.trace_rows)
    out["prefix"] = len(config.prefix.split())  # words; the text itself is in every prompt
    out["api_key"] = "***" if config.api_key else None
    out["headers"] = [k for k, _ in config.headers]
    out["goodput"] = dict(config.goodput) or None
    out["percentiles"] = list(config.percentiles)
    return out


def assemble(
    config: Config, workers: list[dict[str, Any]], started_epoch: int, *, interrupted: bool = False
) -> dict[str, Any]:
    """The ``--json`` document of a run from its workers' results (``interrupted``: Ctrl-C ended
    it early, also when a worker says so)."""
    from .. import __version__

    records = sorted((r for w in workers for r in w["records"]), key=lambda r: r["index"])
    info = [{k: v for k, v in w.items() if k != "records"} for w in workers]
    return {
        "schema": SCHEMA,
        "kind": "run",
        "fastsse_version": __version__,
        "started_epoch_ns": started_epoch,
        "origin_epoch_ns": workers[0]["origin_epoch_ns"] if workers else started_epoch,
        "config": _settings(config),
        "client": workers[0]["driver"] if workers else config.client,
        "interrupted": interrupted or any(w.get("interrupted") for w in workers),
        "workers": info,
        "summary": summarize(
            records, info, goodput=dict(config.goodput) or None, percentiles=config.percentiles
        ),
        "requests": records,
    }


def merge(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """``merge(documents) -> dict``: one result from several ``--json`` documents (e.g. one per machine).

    Each document's times are moved onto the earliest document's origin through its epoch origin,
    request indexes are renumbered, and the summary is recomputed (goodput and percentiles from the
    first document's config). Documents of ``fastsse.load/1`` are read too; the result is
    ``fastsse.load/2``. It raises InvalidRequest for a document of another schema or a sweep.
    """
    for doc in documents:
        if doc.get("schema") not in (SCHEMA, *OLD_SCHEMAS):
            raise InvalidRequest(f"not a {SCHEMA} document: {doc.get('schema')!r}")
        if doc.get("kind", "run") != "run":
            raise InvalidRequest(f"a {doc.get('kind')} cannot be merged: merge the runs of one load point")
    base = min(doc["origin_epoch_ns"] for doc in documents)
    records: list[dict[str, Any]] = []
    workers: list[dict[str, Any]] = []
    for doc in documents:
        shift = doc["origin_epoch_ns"] - base
        for w in doc["workers"]:
            workers.append({**w, "worker": len(workers)})
        for r in doc["requests"]:
            r = {"conversation": None, "turn": None, **r}
            for key in _TIMES:
                if r[key] is not None:
                    r[key] += shift
            r["reads"] = [t + shift for t in r["reads"]]
            r["index"] = len(records)
            records.append(r)
    out = dict(documents[0])
    config = out["config"]
    out.update(schema=SCHEMA, kind="run", origin_epoch_ns=base, workers=workers, requests=records)
    out["summary"] = summarize(
        records,
        workers,
        goodput=config.get("goodput") or None,
        percentiles=tuple(config.get("percentiles") or DEFAULT_PERCENTILES),
    )
    return out


# Text.


def _columns(doc: dict[str, Any]) -> tuple[float, ...]:
    return tuple(doc["config"].get("percentiles") or DEFAULT_PERCENTILES)


def _cell(value: float | None) -> str:
    return f"{value:>10.2f}" if value is not None else f"{'-':>10}"


def format_summary(doc: dict[str, Any]) -> str:
    """The summary as the text ``python -m fastsse load`` prints."""
    s = doc["summary"]
    c = doc["config"]
    load = []
    if c["concurrency"]:
        load.append(f"concurrency {c['concurrency']}")
    if c.get("trace"):
        speed = c.get("trace_speed", 1.0)
        load.append(f"trace {c['trace']}" + (f" at {speed:g}x" if speed != 1.0 else ""))
    elif c.get("ramp"):
        load.append(f"ramp {c['ramp']} {c['ramp_start_rps']:g} to {c['ramp_end_rps']:g}/s ({c['arrival']})")
    elif c["rate"]:
        bursts = f", burstiness {c['burstiness']:g}" if c.get("burstiness", 1.0) != 1.0 else ""
        load.append(f"rate {c['rate']:g}/s ({c['arrival']}{bursts})")
    if c.get("turns", 1) > 1:
        load.append(f"{c['turns']} turns a conversation")
    runners = {w.get("runner", "inline") for w in doc["workers"]}
    where = " (Ray actors)" if runners == {"ray"} else ""
    lines = [
        f"fastsse load: {s['requests']} {_API_WORDS.get(c.get('api') or 'chat', '')}requests to {c['url']} "
        f"(model {c['model']}), "
        f"client: {doc['client']}, {', '.join(load) or 'concurrency 1'}, {len(doc['workers'])} worker(s){where}",
    ]
    if doc.get("interrupted"):
        lines.append("  interrupted (Ctrl-C): the requests in flight were cancelled; these had ended")
    outcomes = s["outcomes"]
    lines.append(
        "  "
        + "   ".join(
            f"{k} {outcomes.get(k, 0)}" for k in (COMPLETE, INCOMPLETE, STREAM_ERROR, HTTP_ERROR, FAILED)
        )
    )
    for cause, n in s["failures_by_cause"].items():
        lines.append(f"    {n} x {cause}")
    if s.get("retried_requests"):
        lines.append(
            f"  retried: {s['retried_requests']} requests, {s['attempts']} attempts in all (--retries)"
        )
    rps = s["requests_per_s"]
    tps = s["output_tokens_per_s"]
    lines.append(
        f"  duration {s['duration_s']:.2f} s   requests/s {rps or 0:.2f}   output tokens/s {tps or 0:,.0f}"
        f"   ({s['output_tokens']:,} tokens, {s['token_chunks']:,} token chunks,"
        f" {s['token_chunks_sharing_a_read']:,} sharing a read)"
    )
    if s.get("input_tokens") is not None:
        lines.append(f"  input tokens {s['input_tokens']:,} (the server's usage.prompt_tokens)")
    good = s.get("goodput")
    if good:
        slo = ", ".join(f"{k} <= {v:g} ms" for k, v in good["slo_ms"].items())
        lines.append(
            f"  goodput {good['requests_per_s'] or 0:.2f} requests/s: {good['good_requests']:,} of "
            f"{s['requests']:,} requests ({good['share'] or 0:.0%}) met {slo}"
        )
    qs = _columns(doc)
    lines.append(f"  {'(ms)':<22}{'mean':>10}" + "".join(f"{pkey(q):>10}" for q in qs) + f"{'n':>10}")
    rows = [
        ("TTFT", s["ttft_ms"]),
        ("  content", s["ttft_content_ms"]),
        ("  reasoning", s["ttft_reasoning_ms"]),
        *((f"  turn {t + 1}", st) for t, st in enumerate(s.get("ttft_by_turn_ms") or ())),
        ("TPOT", s["tpot_ms"]),
        ("ITL (token-weighted)", s["itl_ms"]),
        ("E2E", s["e2e_ms"]),
        ("queue (slot wait)", s["queue_ms"]),
        ("lag (recv - sent)", s["lag_ms"]),
    ]
    for label, st in rows:
        if not st["n"]:
            continue
        lines.append(
            f"  {label:<22}{_cell(st['mean'])}"
            + "".join(_cell(st.get(pkey(q))) for q in qs)
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
    if doc.get("server_metrics"):
        lines += format_changes(doc["server_metrics"])
    for warning in s["warnings"]:
        lines.append(f"  warning: {warning}")
    missing = sum(r.get("status") == 404 and not r.get("warmup") for r in doc.get("requests") or ())
    if missing:
        url = c["url"]
        lines.append(
            f"  hint: {missing:,} request(s) got HTTP 404 from {endpoint(url, c.get('api') or 'chat')}{not_found(url)}"
        )
    return "\n".join(lines)


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib: pip install 'fastsse-cython[plot]'") from exc
    return plt


def token_rate(records: list[dict[str, Any]], start: int) -> tuple[list[float], list[float], float]:
    """``--plot``'s output tokens/s over time: (bar starts in s since ``start``, tokens/s of each
    bar, the bar's width in s), about 60 bars. A chunk's tokens are what its record counted, scaled
    so that each request's add up to its usage's ``completion_tokens`` where the server reported
    it: a chunk may carry several tokens, which a count of chunks would not show."""
    arrivals: list[tuple[int, float]] = []
    for r in records:
        counted = sum(r["tokens"])
        usage = r.get("completion_tokens")
        scale = usage / counted if isinstance(usage, int) and usage > 0 and counted else 1.0
        arrivals += [(r["reads"][i], n * scale) for i, n in zip(r["token_reads"], r["tokens"], strict=True)]
    if not arrivals:
        return [], [], 0.0
    first = min(t for t, _ in arrivals)
    width = max(0.1, (max(t for t, _ in arrivals) - first) / 1e9 / 60)
    bins: dict[int, float] = {}
    for t, n in arrivals:
        key = int((t - first) / 1e9 // width)
        bins[key] = bins.get(key, 0.0) + n
    xs = range(max(bins) + 1)
    return [(first - start) / 1e9 + x * width for x in xs], [bins.get(x, 0.0) / width for x in xs], width


def plot(doc: dict[str, Any], path: str) -> None:
    """Write latency CDFs (TTFT, ITL, E2E, lag) and throughput over time to ``path`` (needs matplotlib).

    It raises ImportError without matplotlib (``pip install 'fastsse-cython[plot]'``).
    """
    plt = _pyplot()
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
    # throughput over time: output tokens by the second their chunk arrived; requests in flight
    spans = sorted(
        (r["started"], r["end"]) for r in records if r["started"] is not None and r["end"] is not None
    )
    start = spans[0][0] if spans else 0
    ax = axes.flat[4]
    starts, rates, width = token_rate(ok, start)
    if starts:
        ax.bar(starts, rates, width=width, align="edge")
    ax.set_title("output tokens/s over time")
    ax.set_xlabel("s since start")
    ax = axes.flat[5]
    if spans:
        events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
        xs2, ys, level = [], [], 0
        for t, d in events:
            level += d
            xs2.append((t - start) / 1e9)
            ys.append(level)
        ax.step(xs2, ys, where="post")
    ax.set_title("requests in flight")
    ax.set_xlabel("s since start")
    fig.suptitle(f"fastsse load: {doc['client']} against {doc['config']['url']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# Sweeps.


def sweep_row(offered: float | None, doc: dict[str, Any]) -> dict[str, Any]:
    """One sweep point: its offered rate (None: the closed-loop maximum) and what it achieved."""
    s = doc["summary"]
    good = s.get("goodput") or {}
    return {
        "offered_rps": offered,
        "requests": s["requests"],
        "complete": s["outcomes"].get(COMPLETE, 0),
        "requests_per_s": s["requests_per_s"],
        "output_tokens_per_s": s["output_tokens_per_s"],
        "goodput_rps": good.get("requests_per_s"),
        "goodput_share": good.get("share"),
        "ttft_ms": s["ttft_ms"],
        "itl_ms": s["itl_ms"],
        "tpot_ms": s["tpot_ms"],
        "e2e_ms": s["e2e_ms"],
    }


def format_sweep(doc: dict[str, Any]) -> str:
    """The sweep as a table: one row per point, the closed-loop maximum first."""
    qs = _columns(doc)
    c = doc["config"]
    good = bool(c.get("goodput"))
    head = f"{'offered/s':>10}{'req/s':>9}{'tok/s':>9}" + (f"{'good/s':>8}{'good':>6}" if good else "")
    for name in ("TTFT", "ITL", "E2E"):
        head += "".join(f"{name + ' ' + pkey(q):>13}" for q in qs)
    head += f"{'ok':>8}"
    lines = [
        f"fastsse load sweep: {c['url']} (model {c['model']}), closed-loop maximum at concurrency "
        f"{c['concurrency'] or 1}, then {len(doc['rows']) - 1} rate(s) up to it; latencies in ms",
        head,
    ]
    for row in doc["rows"]:
        offered = "max" if row["offered_rps"] is None else f"{row['offered_rps']:.2f}"
        line = f"{offered:>10}{row['requests_per_s'] or 0:>9.2f}{row['output_tokens_per_s'] or 0:>9.0f}"
        if good:
            line += f"{row['goodput_rps'] or 0:>8.2f}{row['goodput_share'] or 0:>6.0%}"
        for key in ("ttft_ms", "itl_ms", "e2e_ms"):
            for q in qs:
                value = row[key].get(pkey(q))
                line += f"{value:>13.2f}" if value is not None else f"{'-':>13}"
        line += f"{row['complete']:>4}/{row['requests']:<3}"
        lines.append(line)
    return "\n".join(lines)


def plot_sweep(doc: dict[str, Any], path: str) -> None:
    """Latency (TTFT, ITL, E2E at each chosen percentile) against achieved output tokens/s, one
    point per rate of the sweep. It raises ImportError without matplotlib."""
    plt = _pyplot()
    rows = [r for r in doc["rows"] if r["offered_rps"] is not None]
    xs = [r["output_tokens_per_s"] or 0 for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, (key, name) in zip(
        axes, (("ttft_ms", "TTFT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E")), strict=True
    ):
        for q in _columns(doc):
            ax.plot(xs, [r[key].get(pkey(q)) for r in rows], marker="o", label=pkey(q))
        for x, r in zip(xs, rows, strict=True):
            ax.annotate(f"{r['offered_rps']:.1f}/s", (x, r[key].get("p50") or 0), fontsize=7)
        ax.set_title(f"{name} against throughput")
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel("ms")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"fastsse load sweep against {doc['config']['url']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
