"""What the gateway's control plane costs: ``python -m fastsse gateway`` with routes, with per-key
limits checked in Redis and with resumable streams, beside the same gateway without them, in one
session on the same scripted upstream and the same load.

The configs, each a step over the one before:

- ``base``: one ``[[upstream]]``, no ``[[route]]``, no ``[[key]]`` (the gateway before issue 42);
- ``routes``: 20 ``[[route]]`` tables (10 exact names, then 10 globs; every route ``balance =
  "latency"`` over two ``[[upstream]]`` entries that name the same scripted server). Half the
  requests ask for the last exact name, half for a model only the last glob matches;
- ``limits``: ``routes`` plus one ``[[key]]`` with ``rpm``, ``tpm`` and ``max_streams`` too high
  to refuse, and ``[server] redis_url`` to a real ``redis-server``: every request is admitted by
  one Lua call and released by another;
- ``resumable``: ``limits`` plus ``[server] resumable = true``: every event numbered and written to
  Redis.

The same harness as ``test_bench_gateway.py`` (its helpers are imported): the gateway runs as its
own process pinned to core 1 (``taskset``), the scripted upstreams (``python -m fastsse serve
--scripted``), ``redis-server`` and the load client (``python -m fastsse load``) on core 0. The
configs run interleaved (base, routes, limits, resumable, then again) for ``FASTSSE_CONTROL_REPEATS``
rounds (default 3), each run a fresh gateway warmed by a few requests first. Two loads:

- **per request**: C=1, 2,000 answers of 5 chunks, no delay (``ttft_ms=0,itl_ms=0,chunks=5``): the
  gateway's CPU per request, and the whole answer's added latency (p50 / p99 of the client's E2E)
  against ``base`` in the same round;
- **per chunk**: C=64, 256 answers of 100 chunks 20 ms apart (the issue's setup): the gateway's CPU
  per token chunk the client received.

Gateway CPU is its process tree's user + system time over the load run (``/proc``, clock ticks);
Redis's is its own ``used_cpu_user + used_cpu_sys`` (``INFO cpu``, microseconds) over the same run.
Each figure is the median over the rounds; a "Δ" is the median of the per-round differences to
``base`` in the same round, with their range. Under the table: what Redis ran (``INFO
commandstats``), the Redis calls that timed out (the gateway's Redis timeout is 0.5 s; a run with
one fails its limits open and stops recording meanwhile, so it understates the cost) and the CPU
of each config idle.

Two in-process benchmarks resolve what the table cannot: ``test_router_cost`` (one request's
router work) and ``test_limit_check_cost`` (one ``admit`` + ``release`` against Redis).

    python -m pytest benchmarks/test_bench_gateway_control.py -k table --benchmark-enable -s  # the table (~5 min)
    FASTSSE_GATEWAY_CONTROL_TABLE=control.md FASTSSE_CONTROL_REPEATS=5 ...                   # and write it there
    python -m pytest benchmarks/test_bench_gateway_control.py -k "router or limit" --benchmark-enable -s

With benchmarks disabled (CI) it is a short plain test of the same harness (one round, a few
answers per config) that checks each config is in effect (its Redis keys are there).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fastsse.gateway import RedisStore, Router, config_from
from fastsse.load import spawn_scripted_server
from test_bench_gateway import (
    CLIENT_CPU,
    GATEWAY_CPU,
    PY,
    SLOW,
    _free_port,
    _pinned,
    _process,
    _tree,
    load,
)

redis = pytest.importorskip("redis")

CONFIGS = ("base", "routes", "limits", "resumable")
EXACT, GLOB = "exact-09", "glob-09-bench"  # the last exact route, and a name only the last glob takes
KEY = "sk-fastsse-control-bench-0123456789abcdef"
IDLE_S = 5.0  # seconds a warmed, idle gateway is watched once per config (the Redis refresh task)
# What the gateway logs when a Redis call failed (its socket timeout is 0.5 s): limits then fail
# open and a resumable answer stops being recorded, so that run's figures leave out some of the cost
OUTAGES = ("unreachable: limits fail", "resumable streams: Redis failed")


@dataclass(frozen=True)
class Load:
    """One load: the upstream's script, the concurrency and the answers per model (two models)."""

    name: str
    script: tuple[tuple[str, float], ...]
    concurrency: int
    per_model: int
    warmup: tuple[int, int]  # (concurrency, answers) of the unmeasured warm-up, exact model only


FULL = (
    Load("request", (("ttft_ms", 0), ("itl_ms", 0), ("chunks", 5)), 1, 1000, (8, 48)),
    Load("chunk", SLOW, 64, 128, (8, 8)),
)
QUICK = (
    Load("request", (("ttft_ms", 0), ("itl_ms", 0), ("chunks", 5)), 1, 10, (2, 4)),
    Load("chunk", (("ttft_ms", 20), ("itl_ms", 5), ("chunks", 10)), 8, 8, (2, 2)),
)


@dataclass
class Measured:
    """One config's figures on one load in one round: both models' runs pooled."""

    requests: int = 0
    complete: int = 0
    chunks: int = 0
    cpu_s: float = 0.0
    redis_s: float = 0.0
    e2e_ms: list[float] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)
    outages: int = 0  # Redis failures the gateway logged during the run
    commands: dict[str, tuple[int, int]] = field(default_factory=dict)  # Redis: name -> (calls, µs)


class RedisServer:
    """``redis-server`` on a free loopback port, pinned to the client's core, nothing kept on disk;
    ``client`` a ``redis.Redis`` on it, ``cpu()`` its own CPU seconds so far."""

    def __init__(self, work: pathlib.Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            message = "redis-server is not installed (apt-get install redis-server)"
            if os.environ.get("CI") == "true":
                pytest.fail(message + "; CI installs it, so this is a broken install")
            pytest.skip(message)
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        argv = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(work), "--protected-mode", "yes"]
        self.proc = subprocess.Popen(
            _pinned(argv, CLIENT_CPU), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(redis.exceptions.ConnectionError):
                if self.client.ping():
                    break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def cpu(self) -> float:
        info = self.client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def commands(self) -> dict[str, tuple[int, int]]:
        """Calls and µs per command since the last ``CONFIG RESETSTAT`` (scripts' inner ones too)."""
        stats = self.client.info("commandstats")
        return {name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for name, v in stats.items()}

    def keys(self, pattern: str) -> int:
        return sum(1 for _ in self.client.scan_iter(match=pattern, count=1000))

    def close(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


LIMITS = {"rpm": 10**9, "tpm": 10**12, "max_streams": 10**6}  # never reached


def config_data(name: str, upstream: str, redis_url: str) -> dict[str, Any]:
    """Config ``name`` over the scripted server at ``upstream``, as the parsed TOML would be."""
    server: dict[str, Any] = {"host": "127.0.0.1"}
    if name in ("limits", "resumable"):
        server["redis_url"] = redis_url
    if name == "resumable":
        server["resumable"] = True
    if name == "base":
        return {"server": server, "upstream": [{"name": "up", "base_url": upstream}]}
    models = [f"exact-{i:02d}" for i in range(10)] + [f"glob-{i:02d}-*" for i in range(10)]
    data: dict[str, Any] = {
        "server": server,
        "upstream": [{"name": up, "base_url": upstream} for up in ("a", "b")],
        "route": [{"model": m, "upstreams": ["a", "b"], "balance": "latency"} for m in models],
    }
    if name in ("limits", "resumable"):
        data["key"] = [{"name": "bench", "key": KEY, **LIMITS}]
    return data


def config_text(name: str, upstream: str, redis_url: str) -> str:
    """The TOML of ``config_data`` (JSON's strings, numbers, booleans and lists are TOML's)."""
    data = config_data(name, upstream, redis_url)
    out = ["[server]", *(f"{k} = {json.dumps(v)}" for k, v in data["server"].items())]
    for table in ("upstream", "route", "key"):
        for fields in data.get(table, ()):
            out += ["", f"[[{table}]]", *(f"{k} = {json.dumps(v)}" for k, v in fields.items())]
    return "\n".join(out) + "\n"


@contextlib.contextmanager
def gateway(
    name: str, upstream: str, redis_url: str, work: pathlib.Path
) -> Iterator[tuple[str, int, pathlib.Path]]:
    """Start the gateway of config ``name``: (its base URL, its pid, its log file)."""
    port = _free_port()
    config = work / f"{name}.toml"
    config.write_text(config_text(name, upstream, redis_url))
    argv = [PY, "-m", "fastsse", "gateway", "--config", str(config), "--port", str(port)]
    log = work / f"{name}.log"
    with _process(argv, port, log) as proc:
        yield f"http://127.0.0.1:{port}/v1", proc.pid, log


def _run_s(pid: int) -> float:
    """Seconds ``pid``'s process tree ran, from every thread's ``schedstat`` (ns, where the
    ``/proc/<pid>/stat`` ticks of ``_cpu`` are too coarse: an idle gateway)."""
    total = 0
    for one in _tree(pid):
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{one}/task"):
                with contextlib.suppress(OSError), open(f"/proc/{one}/task/{task}/schedstat") as stat:
                    total += int(stat.read().split()[0])
    return total / 1e9


def measure(url: str, spec: Load, work: pathlib.Path, pid: int | None, store: RedisServer) -> Measured:
    """Run ``spec`` against ``url``, half the answers for each model, and pool the figures."""
    out = Measured()
    for model in (EXACT, GLOB):
        before = store.cpu()
        run = load(url, model, spec.concurrency, spec.per_model, work, pid, KEY)
        out.redis_s += store.cpu() - before
        out.requests += run.requests
        out.complete += run.complete
        out.chunks += run.chunks
        out.cpu_s += run.cpu_s
        for record in json.loads((work / "load.json").read_text())["requests"]:
            started = record["started"]
            if record["warmup"] or started is None:
                continue
            if record["end"] is not None:
                out.e2e_ms.append((record["end"] - started) / 1e6)
            if record["first_token"] is not None:
                out.ttft_ms.append((record["first_token"] - started) / 1e6)
    return out


def _pct(values: list[float], q: float) -> float:
    """The nearest-rank percentile ``q`` (0-100) of ``values``."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def _us(seconds: float, count: int) -> float:
    return 1e6 * seconds / count if count else float("nan")


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _signed(value: float, digits: int) -> str:
    return f"{value if round(value, digits) else 0.0:+.{digits}f}"  # never "-0"


def _delta(values: list[float], digits: int) -> str:
    """The median of per-round differences, with their range when there are several rounds."""
    middle = _signed(_median(values), digits)
    if len(values) < 2:
        return middle
    return f"{middle} ({_signed(min(values), digits)}…{_signed(max(values), digits)})"


def _calls(rounds: list[dict[str, dict[str, Measured]]], config: str, load_name: str) -> str:
    """What Redis ran for ``config`` on one load, from every round: scripts and stream writes per
    request (or chunk) and their µs per call (a script's time includes the commands it calls)."""
    runs = [one[config][load_name] for one in rounds]
    count = sum(m.requests if load_name == "request" else m.chunks for m in runs)
    parts = []
    for name in ("evalsha", "xadd", "hgetall"):
        calls = sum(m.commands.get(name, (0, 0))[0] for m in runs)
        usec = sum(m.commands.get(name, (0, 0))[1] for m in runs)
        if calls:
            parts.append(f"{name} {calls / count:.2f} × {usec / calls:.1f} µs")
    total = sum(sum(c for c, _ in m.commands.values()) for m in runs)
    return f"{config} per {load_name}: {', '.join(parts)} ({total / count:.2f} commands in all)"


def table(
    rounds: list[dict[str, dict[str, Measured]]],
    direct: list[Measured],
    idle: dict[str, tuple[float, float]],
    conditions: str,
) -> str:
    """The markdown table of the rounds (config -> load name -> figures)."""

    def per(config: str, load_name: str, what: str) -> list[float]:
        values = []
        for one in rounds:
            m = one[config][load_name]
            count = m.requests if load_name == "request" else m.chunks
            values.append(_us(m.cpu_s if what == "cpu" else m.redis_s, count))
        return values

    def added(config: str, q: float) -> list[float]:
        return [
            _pct(one[config]["request"].e2e_ms, q) - _pct(one["base"]["request"].e2e_ms, q) for one in rounds
        ]

    lines = [
        conditions,
        "",
        "| config | µs CPU per request | Δ vs base | µs per chunk | Δ vs base | redis µs per request "
        "| redis µs per chunk | added p50 / p99 (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for config in CONFIGS:
        request, chunk = per(config, "request", "cpu"), per(config, "chunk", "cpu")
        base_request, base_chunk = per("base", "request", "cpu"), per("base", "chunk", "cpu")
        d_request = [a - b for a, b in zip(request, base_request, strict=True)]
        d_chunk = [a - b for a, b in zip(chunk, base_chunk, strict=True)]
        redis_request, redis_chunk = per(config, "request", "redis"), per(config, "chunk", "redis")
        has_redis = config in ("limits", "resumable")
        lines.append(
            f"| {config} | {_median(request):.0f} | {'-' if config == 'base' else _delta(d_request, 0)} "
            f"| {_median(chunk):.1f} | {'-' if config == 'base' else _delta(d_chunk, 1)} "
            f"| {f'{_median(redis_request):.0f}' if has_redis else '-'} "
            f"| {f'{_median(redis_chunk):.1f}' if has_redis else '-'} "
            f"| {'-' if config == 'base' else _delta(added(config, 50), 2) + ' / ' + _delta(added(config, 99), 2)} |"
        )
    base_p50 = [_pct(one["base"]["request"].e2e_ms, 50) for one in rounds]
    base_p99 = [_pct(one["base"]["request"].e2e_ms, 99) for one in rounds]
    d_p50 = [_pct(m.e2e_ms, 50) for m in direct]
    d_p99 = [_pct(m.e2e_ms, 99) for m in direct]
    lines += [
        "",
        f"per request, E2E p50 / p99: direct {_median(d_p50):.2f} / {_median(d_p99):.2f} ms, "
        f"through base {_median(base_p50):.2f} / {_median(base_p99):.2f} ms",
        "per chunk, TTFT p50 (ms): "
        + ", ".join(
            f"{c} {_median([_pct(one[c]['chunk'].ttft_ms, 50) for one in rounds]):.1f}" for c in CONFIGS
        ),
    ]
    lines.append(
        "Redis (INFO commandstats; a script's µs include the commands it runs): "
        + "; ".join(_calls(rounds, c, n) for c in ("limits", "resumable") for n in ("request", "chunk"))
    )
    outages = {
        f"{c} {n}": sum(one[c][n].outages for one in rounds)
        for c in ("limits", "resumable")
        for n in ("request", "chunk")
    }
    if any(outages.values()):
        lines.append(
            "Redis calls that timed out (0.5 s) in these runs, limits failing open and recording stopping "
            "meanwhile (those runs understate the cost): "
            + ", ".join(f"{k} {v}" for k, v in outages.items() if v)
        )
    if idle:
        lines.append(
            "idle (warmed, no requests; ms of CPU per second): "
            + ", ".join(f"{c} gateway {g:.1f}, redis {r:.1f}" for c, (g, r) in idle.items())
        )
    return "\n".join(lines)


def test_gateway_control_table(benchmark: Any, quick: bool) -> None:
    loads = QUICK if quick else FULL
    repeats = 1 if quick else int(os.environ.get("FASTSSE_CONTROL_REPEATS", "3"))
    load_before = os.getloadavg()
    work = pathlib.Path(tempfile.mkdtemp(prefix="fastsse-gw-control-"))
    rounds: list[dict[str, dict[str, Measured]]] = []
    direct: list[Measured] = []
    idle: dict[str, tuple[float, float]] = {}
    found: dict[str, int] = {}
    store = RedisServer(work)
    cpu = int(CLIENT_CPU) if CLIENT_CPU else None
    try:
        with contextlib.ExitStack() as stack:
            upstreams = {
                spec.name: stack.enter_context(spawn_scripted_server(cpu=cpu, **dict(spec.script))).base_url
                for spec in loads
            }
            for _ in range(repeats):
                one: dict[str, dict[str, Measured]] = {c: {} for c in CONFIGS}
                direct.append(measure(upstreams["request"], loads[0], work, None, store))
                for spec in loads:
                    for config in CONFIGS:
                        store.client.flushall()
                        with gateway(config, upstreams[spec.name], store.url, work) as (url, pid, log):
                            load(url, EXACT, *spec.warmup, work, None, KEY)
                            if not quick and spec.name == "request" and config not in idle:
                                cpu_before, redis_before = _run_s(pid), store.cpu()
                                time.sleep(IDLE_S)
                                idle[config] = (
                                    1e3 * (_run_s(pid) - cpu_before) / IDLE_S,
                                    1e3 * (store.cpu() - redis_before) / IDLE_S,
                                )
                            before = sum(log.read_text(errors="replace").count(o) for o in OUTAGES)
                            store.client.config_resetstat()
                            got = one[config][spec.name] = measure(url, spec, work, pid, store)
                            got.commands = store.commands()
                            got.outages = (
                                sum(log.read_text(errors="replace").count(o) for o in OUTAGES) - before
                            )
                            found[config] = store.keys("fastsse:gw:*")
                            found[config + ":resume"] = store.keys("fastsse:gw:rs:*")
                rounds.append(one)
    finally:
        store.close()
    load_after = os.getloadavg()
    conditions = (
        f"{os.cpu_count()} cores, the gateway pinned to core {GATEWAY_CPU}, the scripted upstream, redis-server "
        f"and the load client on core {CLIENT_CPU}; {repeats} rounds of base, routes, limits, resumable; load average "
        f"{load_before[0]:.2f} / {load_before[1]:.2f} / {load_before[2]:.2f} before, "
        f"{load_after[0]:.2f} / {load_after[1]:.2f} / {load_after[2]:.2f} after (1, 5, 15 min; about 1 is this "
        f"benchmark alone); per request: C={loads[0].concurrency}, {2 * loads[0].per_model} answers of "
        f"{dict(loads[0].script)['chunks']:.0f} chunks; per chunk: C={loads[1].concurrency}, "
        f"{2 * loads[1].per_model} answers of {dict(loads[1].script)['chunks']:.0f} chunks "
        f"{dict(loads[1].script)['itl_ms']:.0f} ms apart"
    )
    text = table(rounds, direct, idle, conditions)
    print("\n" + text)
    if os.environ.get("FASTSSE_GATEWAY_CONTROL_TABLE"):
        pathlib.Path(os.environ["FASTSSE_GATEWAY_CONTROL_TABLE"]).write_text(text + "\n")
    logs = {c: (work / f"{c}.log").read_text(errors="replace")[-2000:] for c in CONFIGS}
    shutil.rmtree(work, ignore_errors=True)
    for one in rounds:
        for config, runs in one.items():
            for name, m in runs.items():
                assert m.complete == m.requests > 0, (config, name, m.complete, m.requests, logs[config])
    # each config is in effect: limits count in Redis, resumable streams are kept there
    assert found["base"] == found["routes"] == 0
    assert found["limits"] > 0 and found["limits:resume"] == 0
    assert found["resumable:resume"] > 0
    benchmark.group = "gateway-control"
    benchmark.extra_info.update(
        {
            config: {
                name: [
                    {
                        "us_per_request": _us(one[config][name].cpu_s, one[config][name].requests),
                        "us_per_chunk": _us(one[config][name].cpu_s, one[config][name].chunks),
                        "redis_us_per_request": _us(one[config][name].redis_s, one[config][name].requests),
                        "redis_us_per_chunk": _us(one[config][name].redis_s, one[config][name].chunks),
                        "e2e_p50": _pct(one[config][name].e2e_ms, 50),
                        "e2e_p99": _pct(one[config][name].e2e_ms, 99),
                        "ttft_p50": _pct(one[config][name].ttft_ms, 50),
                        "redis_outages": one[config][name].outages,
                        "redis_commands": one[config][name].commands,
                    }
                    for one in rounds
                ]
                for name in ("request", "chunk")
            }
            for config in CONFIGS
        }
    )
    benchmark.extra_info["idle_ms_per_s"] = idle
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


# The two pieces the end-to-end table cannot resolve, in process: the router's work for one
# request (a lookup cached by name, the plan, the latency bookkeeping) and one limit check
# (admit + release, two Lua calls) against a real redis-server.


@pytest.mark.parametrize("model", ["no routes", "exact", "glob", "new name"])
def test_router_cost(benchmark: Any, model: str) -> None:
    """``route``, ``plan``, ``started`` and ``ended`` for one request: over the base config (no
    ``[[route]]``), or the 20 routes with the last exact name, a name the last glob takes, or a
    name never seen before (the lookup cache misses: every route is tried)."""
    config = config_from(
        config_data("base" if model == "no routes" else "routes", "http://127.0.0.1:9/v1", "")
    )
    router = Router(config)
    fresh = itertools.count()

    def one() -> str:
        name = {"exact": EXACT, "glob": GLOB}.get(model) or f"glob-09-{next(fresh)}"
        route = router.route(name)
        assert route is not None
        upstream = router.plan(route, {}, time.time())[0][0].name
        router.started(upstream)
        router.ended(upstream, 0.001)
        return upstream

    benchmark.group = "gateway-control:router"
    assert benchmark(one) in ("up", "a", "b")


def test_limit_check_cost(benchmark: Any, quick: bool) -> None:
    """One request's limit check as the gateway makes it (``RedisStore.admit`` then ``release``
    with ``rpm``, ``tpm`` and ``max_streams`` set), in sequence, this process pinned to the
    gateway's core and Redis to the client's: wall time per check (the round), and CPU per check
    of this process and of Redis in ``extra_info``."""
    work = pathlib.Path(tempfile.mkdtemp(prefix="fastsse-gw-limits-"))
    server = RedisServer(work)
    store = RedisStore(server.url)
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    checks, rounds = (20, 1) if quick else (2000, 5)
    leases = itertools.count()

    async def many() -> None:
        for _ in range(checks):
            lease = f"bench-{next(leases)}"
            assert await store.admit("bench", **LIMITS, lease=lease) is None
            await store.release("bench", lease, 110)

    affinity = os.sched_getaffinity(0)
    try:
        if GATEWAY_CPU is not None:
            os.sched_setaffinity(0, {int(GATEWAY_CPU)})
        loop.run_until_complete(store.start())
        loop.run_until_complete(many())  # connections made, scripts loaded
        server.client.config_resetstat()
        cpu, redis_cpu = time.process_time(), server.cpu()
        benchmark.pedantic(lambda: loop.run_until_complete(many()), rounds=rounds, iterations=1)
        cpu, redis_cpu = time.process_time() - cpu, server.cpu() - redis_cpu
        commands = server.commands()
    finally:
        os.sched_setaffinity(0, affinity)
        loop.run_until_complete(store.close())
        loop.close()
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    count = checks * rounds
    assert commands["evalsha"][0] == 2 * count  # every check reached Redis: none failed open
    benchmark.group = "gateway-control:limits"
    benchmark.extra_info.update(
        checks_per_round=checks,
        cpu_us_per_check=_us(cpu, count),
        redis_cpu_us_per_check=_us(redis_cpu, count),
        evalsha_us=commands["evalsha"][1] / commands["evalsha"][0],
    )
    print(
        f"\nlimit check: {_us(cpu, count):.0f} µs CPU here, {_us(redis_cpu, count):.0f} µs in Redis "
        f"(its scripts {commands['evalsha'][1] / commands['evalsha'][0]:.1f} µs a call) per admit + release"
    )
