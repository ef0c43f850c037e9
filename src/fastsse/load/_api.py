"""The load generator's Python API: one run, a sweep of rates, repeats of one plan."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

from .._errors import LoadError
from . import _compare, _ray
from ._plan import FAILED, SCHEMA, Config, endpoint
from ._report import sweep_row
from ._run import run as run_workers

__all__ = ["json_schema", "repeat", "run", "sweep", "unanswered"]


def run(config: Any, *, progress: Any = None) -> dict[str, Any]:
    """``run(config, *, progress=None) -> dict``: run the load and return the ``--json`` document,
    on Ray actors when ``config.ray`` says so (the worker processes, or the Ray actors).
    It raises InvalidRequest for a bad configuration, LoadError when the workers fail, and
    ``Unavailable`` for a peer client that is not installed."""
    actors = _ray.run_actors if config.ray is not None else None
    return run_workers(config, progress=progress, actors=actors)


def sweep(
    config: Config, points: int, *, progress: Callable[[list[int]], None] | None = None
) -> dict[str, Any]:
    """``sweep(config, points, *, progress=None) -> dict``: the closed-loop maximum, then ``points``
    open-loop runs at evenly spaced rates up to it (``max * k / points``, k = 1..points).

    The document (``kind: "sweep"``) holds one row per run (``rows``, the maximum first) and every
    run's whole document (``runs``). It raises LoadError if the closed loop completed nothing,
    and what ``run`` raises.
    """
    closed = dataclasses.replace(config, rate=None, ramp=None, concurrency=config.concurrency or 1)
    top = run(closed, progress=progress)
    peak = top["summary"]["requests_per_s"]
    if not peak and not top["interrupted"]:
        raise LoadError("the closed-loop run completed no request: there is no maximum to sweep up to")
    runs = [top]
    rows = [sweep_row(None, top)]
    for k in range(1, points + 1):
        if runs[-1]["interrupted"]:  # Ctrl-C: the rows so far
            break
        rate = peak * k / points
        doc = run(dataclasses.replace(config, rate=rate, ramp=None, concurrency=None), progress=progress)
        runs.append(doc)
        rows.append(sweep_row(rate, doc))
    settings = dict(top["config"])
    settings.update(rate=None, sweep_points=points)
    return {
        "schema": SCHEMA,
        "kind": "sweep",
        "fastsse_version": top["fastsse_version"],
        "started_epoch_ns": top["started_epoch_ns"],
        "config": settings,
        "client": top["client"],
        "interrupted": runs[-1]["interrupted"],
        "rows": rows,
        "runs": runs,
    }


def repeat(
    config: Config, times: int, *, progress: Callable[[list[int]], None] | None = None
) -> dict[str, Any]:
    """``repeat(config, times, *, progress=None) -> dict``: ``times`` runs of the same plan (the
    same schedule and bodies: the same seed), one after the other, and each metric's mean with its
    95% confidence interval across them.

    The document (``kind: "repeat"``) holds ``summary.metrics`` (``{key: {mean, low, high,
    values}}``, ``_compare.intervals``) and every run's whole document (``runs``); Ctrl-C keeps
    the runs that had ended. It raises what ``run`` raises.
    """
    runs: list[dict[str, Any]] = []
    for _ in range(times):
        runs.append(run(config, progress=progress))
        if runs[-1]["interrupted"] or unanswered(runs[-1]) is not None:
            break
    top = runs[0]
    settings = dict(top["config"])
    settings["repeat"] = times
    return {
        "schema": SCHEMA,
        "kind": "repeat",
        "fastsse_version": top["fastsse_version"],
        "started_epoch_ns": top["started_epoch_ns"],
        "config": settings,
        "client": top["client"],
        "interrupted": runs[-1]["interrupted"],
        "summary": {
            "runs": len(runs),
            "level": _compare.LEVEL,
            "metrics": _compare.intervals(runs),
        },
        "runs": runs,
    }


def unanswered(doc: dict[str, Any]) -> str | None:
    """``unanswered(doc) -> str | None``: the line for a run none of whose requests got an answer (each refused, unresolved, or timed
    out before its first byte), or None: such a run measured nothing, so the command failed (2)."""
    records = doc["requests"]
    if not records or any(r["outcome"] != FAILED or r["status"] for r in records):
        return None
    causes = Counter(str(r["cause"]) for r in records)
    why = ", ".join(f"{n} x {cause}" for cause, n in causes.most_common())
    config = doc["config"]
    return f"no request got an answer from {endpoint(config['url'], config.get('api') or 'chat')}: {why}"


def json_schema() -> dict[str, Any]:
    """``json_schema() -> dict``: the JSON Schema (draft 2020-12) of the document ``run``,
    ``sweep`` and ``repeat`` return and ``load --json`` writes, as shipped in the package
    (``fastsse/load/schema.json``)."""
    import importlib.resources

    import orjson

    schema: dict[str, Any] = orjson.loads(
        (importlib.resources.files(__package__) / "schema.json").read_bytes()
    )
    return schema
