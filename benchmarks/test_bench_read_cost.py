"""What a read costs: fastsse's engine against libcurl driven from C, in one interleaved session.

Every client streams from the scripted server (``fastsse.testing.spawn_scripted_server``, a child
process pinned to core 0: 50 ms to the first token, then one event per HTTP chunk, each stamped
with its send time) from a child process of its own pinned to core 1. Clients:

- ``C-raw``: sockets + epoll, one ``recv`` per readiness, counting event ends: the floor
  (``reference/raw_floor.c``);
- ``C-libcurl``: libcurl (the copy pycurl brought) driven by ``curl_multi_socket_action`` +
  epoll with a C write callback counting event ends: what libcurl itself costs, the reference the
  target is a ratio of (``reference/curl_floor.c``);
- ``C-libcurl-outside``: a second libcurl floor written outside the project, read from
  ``../shared/reference/floor`` (``curl_multi_sse.c``: the same ``curl_multi_socket_action`` +
  epoll loop with C callbacks); it asks its own question (``max_tokens``, a fixed model name), so
  it streams from a scripted server of its own whose defaults carry the load's delay, pinned as
  the shared one is. Its lag is not read (its scanner looks for another stamp). The table divides
  by the cheaper of the two floors, run for run;
- ``Cython-libcurl+ChatStream``: the same libcurl loop in Cython, each read handed by the C write
  callback to a real ``ChatStream`` (``reference/curl_chatstream.pyx``): the compiled driver's
  shape, before the stream has a C entry point (a bytes object and a compiled call per read);
  ``+on_chunk``: with a Python ``on_chunk`` that takes each chunk's stamp;
- ``AsyncClient`` / ``Client``: fastsse's engine folding every stream (no chunk objects); the
  ``+on_chunk`` rows add an ``on_chunk`` that takes each chunk's stamp (their lag);
- ``aiohttp-vllm``: aiohttp with vLLM ``bench serve``'s framing (``fastsse.load.PEERS``);
- ``curl_cffi``: curl_cffi's ``AsyncSession`` (libcurl under asyncio) with the same framing.

Figures per run: client CPU per content chunk (the client process's CPU time over its run, over
the content chunks it received), busy (that CPU over the run's wall time), lag p50/p99 (receive
stamp minus the server's send stamp, content chunks only), and **others**: the CPU that neither
the client nor the server used during the run, from ``/proc/stat``, on the client's core and on
all cores. A run with others above ``QUIET`` (0.05) on the client's core was disturbed; each row keeps the median of its
quiet repeats (the quietest run when none was quiet) and says how many were quiet, beside the median of its ratios to the reference
paired by repeat. The order of clients is rotated per repeat, so no client always runs first or
last. Sleeps per chunk (the client's voluntary context switches) say how often it woke up: a
client that drains its sockets sooner wakes, and pays the kernel, more often.

As a test (``--benchmark-disable``) every client streams 16 x 10 chunks at both delays and must
get them all; the C references skip, with the reason, where no C compiler, libcurl headers or
libcurl are found (``_reference.py``). The table in benchmarks/README.md ("Read cost") comes from
``python benchmarks/test_bench_read_cost.py [--repeats 3] [--wait-quiet S] [--clients a,b]
[--loads 128x20,256x0] [--json out.json] [--tree before=PATH]``; with ``--tree``, a client
``Client@before`` runs fastsse from the checkout at PATH in the same session (a before/after
table without the session's drift between them).
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import pytest

import _reference  # beside this file: on sys.path under pytest and as a script
import test_bench_many as many

C_CLIENTS = ("C-raw", "C-libcurl")
OUTSIDE = "C-libcurl-outside"  # the second floor (../shared/reference/floor), its own server
CYTHON = "Cython-libcurl+ChatStream"
CYTHON_ON_CHUNK = CYTHON + "+on_chunk"
FASTSSE_CLIENTS = ("AsyncClient", "AsyncClient+on_chunk", "Client", "Client+on_chunk")
PEER_CLIENTS = ("aiohttp-vllm", "curl_cffi")
# format="relay" / "to-messages" with an on_chunk that counts the pieces: their cost over the C
# reference minus their compiled fold's own (benchmarks/direct_feed.py measures that in-process)
FORMAT_CLIENTS = tuple(many.FORMAT_CLIENTS)
CLIENTS = (*C_CLIENTS, OUTSIDE, CYTHON, CYTHON_ON_CHUNK, *FASTSSE_CLIENTS, *FORMAT_CLIENTS, *PEER_CLIENTS)
COUNTS_EVENTS = (*C_CLIENTS, CYTHON, CYTHON_ON_CHUNK)  # clients that report event ends, not content chunks
REFERENCE = "C-libcurl"
FLOOR = "floor"  # per repeat, the cheaper of the two C libcurl floors: what the ratios divide by
# (streams, ms between chunks): where fastsse is not saturated, as the issue sets the target.
LOADS = ((128, 20.0), (256, 0.0))
# --tree LABEL=PATH: "Client@LABEL" runs the client from the checkout at PATH (its extensions
# built in place), in the same session as this one: a before/after table with no session between
TREES: dict[str, str] = {}
TREE_SRC = "FASTSSE_BENCH_TREE_SRC"
CHUNKS = 100
QUIET = 0.05  # of the client's core used by other processes during a run: above it, disturbed
EVENTS_AROUND_CONTENT = 3  # the role chunk, the finish chunk and [DONE]
_EXE = {"C-raw": "raw_floor", "C-libcurl": "curl_floor"}


# The curl_cffi peer (not in fastsse.load.PEERS: the package does not depend on curl_cffi).


def _curl_cffi_run(url: str, bodies: list[dict[str, Any]]) -> tuple[int, list[int], int]:
    """(content chunks, lags in ns, failed streams) for curl_cffi's ``AsyncSession``, each read
    decoded, split at blank lines, ``data: `` removed, stamped and ``json.loads``-ed (the framing
    of the aiohttp-vllm row, so the two rows differ in the HTTP client only)."""
    from curl_cffi.requests import AsyncSession

    endpoint = url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": "Bearer x"}

    async def one(session: Any, body: dict[str, Any]) -> tuple[int, list[int], bool]:
        chunks, lags, done = 0, [], False
        response = await session.post(endpoint, json={**body, "stream": True}, headers=headers, stream=True)
        try:
            if response.status_code != 200:
                return 0, [], False
            decoder = codecs.getincrementaldecoder("utf-8")()
            pending = ""
            async for raw in response.aiter_content():
                pending += decoder.decode(raw)
                *events, pending = pending.split("\n\n")
                for event in events:
                    event = event.strip()
                    if not event or event.startswith(":"):
                        continue
                    text = event.removeprefix("data: ")
                    if text == "[DONE]":
                        done = True
                        continue
                    now = time.monotonic_ns()
                    data = json.loads(text)
                    choices = data.get("choices") or []
                    if choices and choices[0].get("delta", {}).get("content"):
                        chunks += 1
                        lags.append(now - data[many.STAMP])
        finally:
            await response.aclose()
        return chunks, lags, done

    async def main() -> list[Any]:
        async with AsyncSession(max_clients=len(bodies), timeout=600) as session:
            return await asyncio.gather(*(one(session, b) for b in bodies), return_exceptions=True)

    total, lags, failed = 0, [], 0
    for outcome in asyncio.run(main()):
        if isinstance(outcome, BaseException) or not outcome[2]:
            failed += 1
            continue
        total += outcome[0]
        lags += outcome[1]
    return total, lags, failed


def measure(name: str, url: str, streams: int, chunks: int, itl_ms: float) -> dict[str, Any]:
    """One Python client's run in this process (the child): ``test_bench_many.measure``'s figures."""
    if name in (CYTHON, CYTHON_ON_CHUNK):
        driver = _reference.build_module("curl_chatstream")
        body = json.dumps({**many._body(itl_ms, chunks), "stream": True}).encode()
        many._warm_up("AsyncClient", url)  # fastsse's imports, as for its own clients
        endpoint = url.rstrip("/") + "/chat/completions"
        return dict(driver.run(endpoint, body, streams, chunks, name == CYTHON_ON_CHUNK))
    if name != "curl_cffi":
        return many.measure(name, url, streams, chunks, itl_ms)
    import curl_cffi.requests  # noqa: F401  (imports are not a cost per chunk)

    bodies = [many._body(itl_ms, chunks) for _ in range(streams)]
    cpu0, wall0 = time.process_time(), time.monotonic()
    got, lags, failed = _curl_cffi_run(url, bodies)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    return {
        "client": name,
        "streams": streams,
        "chunks": got,
        "failed": failed,
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_us_per_chunk": cpu / got * 1e6 if got else math.nan,
        "busy": cpu / wall if wall else math.nan,
        "lag_p50_ms": many._percentile(lags, 0.5),
        "lag_p99_ms": many._percentile(lags, 0.99),
    }


# Who else used the CPU during a run.


def _busy_jiffies() -> dict[str, int]:
    """CPU time spent running anything, in clock ticks, for all cores ("cpu") and each ("cpu0",
    ...): user, nice, system, irq and softirq (a process's utime + stime include the irq and
    softirq ticks taken in its context, so the two can be subtracted); not idle, iowait, nor steal
    (time the hypervisor took)."""
    busy = {}
    with open("/proc/stat") as stat:
        for line in stat:
            if not line.startswith("cpu"):
                break
            name, *fields = line.split()
            user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
            busy[name] = user + nice + system + irq + softirq
    return busy


def _usage(*, children: bool) -> tuple[float, float]:
    """(user + system seconds, voluntary context switches) of this process or of its waited-for
    children; nan where the resource module is missing (Windows: no /proc either, so no others)."""
    try:
        import resource
    except ImportError:
        return math.nan, math.nan
    usage = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, float(usage.ru_nvcsw)


def _process_jiffies(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


class Others:
    """The CPU, in cores, that processes other than the client, the server and this one used
    between ``start()`` and ``stop(client_cpu_s)``: ``(on all cores, on the client's core)``; nan
    where ``/proc`` is not there. The client is pinned to its core and the server to another, so
    what else ran on the client's core is the busy time there minus the client's CPU."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def _sample(self) -> tuple[dict[str, int], int, float, float]:
        server = _process_jiffies(self.server_pid) if self.server_pid else 0
        return _busy_jiffies(), server, _usage(children=False)[0], time.monotonic()

    def start(self) -> None:
        try:
            self._start: tuple[dict[str, int], int, float, float] | None = self._sample()
        except OSError:
            self._start = None

    def stop(self, client_cpu_s: float) -> tuple[float, float]:
        if self._start is None:
            return math.nan, math.nan
        busy, server, mine, wall = self._sample()
        b0, s0, m0, w0 = self._start
        seconds = max(wall - w0, 1e-9)
        others_s = (busy["cpu"] - b0["cpu"] - (server - s0)) / self.hz - client_cpu_s - (mine - m0)
        core = f"cpu{many.CLIENT_CPU}"
        if core not in busy:
            return max(0.0, others_s) / seconds, math.nan
        on_core_s = (busy[core] - b0[core]) / self.hz - client_cpu_s
        return max(0.0, others_s) / seconds, max(0.0, on_core_s) / seconds


def _pin_client() -> None:
    many._pin(many.CLIENT_CPU)


def run_once(
    name: str, url: str, streams: int, chunks: int, itl_ms: float, server_pid: int | None
) -> dict[str, Any]:
    """One run of client ``name`` in a child process pinned to the client core, with the CPU other
    processes used meanwhile: ``others`` on the client's core, ``others_all`` on every core.

    It raises ``_reference.Unavailable`` when a C reference cannot be built here and RuntimeError
    when the client fails.
    """
    if name == OUTSIDE:
        return _run_outside(streams, chunks, itl_ms)
    name, _, label = name.partition("@")  # "Client@before": the client, from another tree
    if label and (label not in TREES or name not in (*FASTSSE_CLIENTS, *FORMAT_CLIENTS)):
        raise RuntimeError(
            f"{name}@{label}: no tree {label!r} (--tree {label}=PATH), or not a fastsse client"
        )
    others = Others(server_pid)
    cpu0, sleeps0 = _usage(children=True)
    if name in C_CLIENTS:
        exe = _reference.build(_EXE[name])
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as body_file:
            json.dump({**many._body(itl_ms, chunks), "stream": True}, body_file)
        argv = [str(exe), url.rstrip("/") + "/chat/completions", body_file.name, str(streams), str(chunks)]
    else:
        argv = [sys.executable, os.path.abspath(__file__), "--child", name, "--url", url]
        argv += ["--streams", str(streams), "--chunks", str(chunks), "--itl-ms", str(itl_ms)]
    pin = hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > many.CLIENT_CPU
    env = {**os.environ, **({"FASTSSE_BENCH_CPU": str(many.CLIENT_CPU)} if pin else {})}
    if label:
        env[TREE_SRC] = os.path.join(TREES[label], "src")
    others.start()
    try:
        returncode, out, err = _child(argv, env, pin)
    finally:
        if name in C_CLIENTS:
            os.unlink(body_file.name)
    cpu1, sleeps1 = _usage(children=True)
    others_all, others_core = others.stop(cpu1 - cpu0)
    done = subprocess.CompletedProcess(argv, returncode, out, err)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{name} failed ({done.returncode}): {done.stderr[-2000:]}")
    row: dict[str, Any] = json.loads(lines[-1])
    if name in COUNTS_EVENTS:
        # The C clients count every event; a stream's content chunks are all but three of its events.
        content = row["events"] - EVENTS_AROUND_CONTENT * (streams - row["failed"])
        row.update(
            client=name,
            streams=streams,
            chunks=content,
            cpu_us_per_chunk=row["cpu_s"] / content * 1e6 if content > 0 else math.nan,
            busy=row["cpu_s"] / row["wall_s"] if row["wall_s"] else math.nan,
        )
    # How often the client went to sleep (voluntary context switches over its whole life, start-up
    # included: a few dozen) per content chunk: each sleep is a wake-up the kernel charges for, and
    # a client that drains its sockets faster sleeps, and pays, more often.
    row.update(
        itl_ms=itl_ms,
        others=others_core,
        others_all=others_all,
        sleeps_per_chunk=(sleeps1 - sleeps0) / max(1, row["chunks"]),
    )
    if label:
        row["client"] = f"{name}@{label}"
    return row


def _child(argv: list[str], env: dict[str, str], pin: bool) -> tuple[int, str, str]:
    """Run one client process to its end (at most 900 s): its exit status, stdout and stderr."""
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if pin:
        # At once, so that its start-up (a Python child's imports) runs on the client core too
        # and the others figure of that core stays honest; the children also pin themselves.
        with contextlib.suppress(OSError):  # it may have exited already
            os.sched_setaffinity(child.pid, {many.CLIENT_CPU})
    try:
        out, err = child.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
    return child.returncode, out, err


def _script_extra() -> dict[str, Any]:
    """``--script``'s keys (the environment carries them to the children), as the server's defaults."""
    from fastsse.load import coerce_field

    extra = os.environ.get(many.SCRIPT_ENV)
    pairs = [part.split("=", 1) for part in extra.split(",")] if extra else []
    return {key: coerce_field(key, value) for key, value in pairs}


def _run_outside(streams: int, chunks: int, itl_ms: float) -> dict[str, Any]:
    """One run of the outside floor against a scripted server of its own (its request names no
    script: the server's defaults give the delay), in the row shape of ``run_once``."""
    from fastsse.testing import spawn_scripted_server

    exe = _reference.build_shared_floor()
    pin = hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > many.CLIENT_CPU
    with spawn_scripted_server(
        cpu=many.SERVER_CPU if pin else None, ttft_ms=50, itl_ms=itl_ms, chunks=chunks, **_script_extra()
    ) as server:
        port = server.base_url.split(":")[2].split("/")[0]
        argv = [str(exe), "--port", port, "-C", str(streams), "-N", str(streams), "-K", str(chunks)]
        argv += ["--itl-ms", f"{itl_ms:g}", "--no-lag"]
        others = Others(server.pid)
        cpu0, sleeps0 = _usage(children=True)
        others.start()
        returncode, out, err = _child(argv, dict(os.environ), pin)
        cpu1, sleeps1 = _usage(children=True)
        others_all, others_core = others.stop(cpu1 - cpu0)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if returncode != 0 or not lines:
        raise RuntimeError(f"{OUTSIDE} failed ({returncode}): {err[-2000:]}")
    got = json.loads(lines[-1])
    return {
        "client": OUTSIDE,
        "streams": streams,
        "chunks": got["content_chunks"],
        "failed": got["failures"],
        "cpu_s": got["cpu_s"],
        "wall_s": got["wall_s"],
        "cpu_us_per_chunk": got["cpu_us_per_chunk"],
        "busy": got["cpu_util"],
        "lag_p50_ms": math.nan,
        "lag_p99_ms": math.nan,
        "itl_ms": itl_ms,
        "others": others_core,
        "others_all": others_all,
        "sleeps_per_chunk": (sleeps1 - sleeps0) / max(1, got["content_chunks"]),
    }


def session(
    url: str,
    server_pid: int | None,
    clients: list[str],
    loads: tuple[tuple[int, float], ...],
    chunks: int,
    repeats: int,
    wait_quiet: float = 0.0,
) -> dict[tuple[str, int, float], list[dict[str, Any]]]:
    """Every (client, load) ``repeats`` times, interleaved: each repeat runs every load and every
    client once, the client order rotated by one per repeat. Runs that cannot be built are left out.
    With ``wait_quiet`` each run first waits up to that many seconds for a quiet machine."""
    runs: dict[tuple[str, int, float], list[dict[str, Any]]] = {}
    for rep in range(repeats):
        order = clients[rep % len(clients) :] + clients[: rep % len(clients)]
        for streams, itl in loads:
            for name in order:
                try:
                    if name in (CYTHON, CYTHON_ON_CHUNK):
                        _reference.build_module("curl_chatstream")  # here, to skip with the reason
                    if wait_quiet > 0:
                        wait_for_quiet(server_pid, wait_quiet)
                    row = run_once(name, url, streams, chunks, itl, server_pid)
                except _reference.Unavailable as exc:
                    print(f"  {name}: skipped ({exc})", file=sys.stderr)
                    continue
                except RuntimeError as exc:
                    print(f"  {name}: {exc}", file=sys.stderr)
                    continue
                row["repeat"] = rep
                runs.setdefault((name, streams, itl), []).append(row)
                print(
                    f"  [{rep + 1}/{repeats}] C={streams} {itl:g} ms {name}: {row['cpu_us_per_chunk']:.1f} us/chunk, "
                    f"busy {row['busy']:.0%}, others {row['others']:.2f} on its core and "
                    f"{row['others_all']:.2f} in all, load {os.getloadavg()[0]:.2f}",
                    file=sys.stderr,
                )
    return runs


def wait_for_quiet(server_pid: int | None, timeout: float) -> float:
    """Wait until other processes use at most ``QUIET`` of the client's core over half a second, or
    ``timeout`` seconds have passed; the last share seen."""
    deadline = time.monotonic() + timeout
    while True:
        others = Others(server_pid)
        others.start()
        time.sleep(0.5)
        share = others.stop(0.0)[1]
        if not share > QUIET or time.monotonic() >= deadline:
            return share


def paired_ratio(runs: list[dict[str, Any]], refs: list[dict[str, Any]]) -> float:
    """The median over repeats of (this client's CPU per chunk / the reference's in the same
    repeat), quiet repeats only when there are any: a ratio of neighbours in time."""
    by_rep = {r["repeat"]: r for r in refs if "repeat" in r}
    pairs = [(r, by_rep[r["repeat"]]) for r in runs if r.get("repeat") in by_rep]
    quiet = [(r, f) for r, f in pairs if not (r["others"] > QUIET or f["others"] > QUIET)]
    ratios = [r["cpu_us_per_chunk"] / f["cpu_us_per_chunk"] for r, f in (quiet or pairs)]
    return statistics.median(ratios) if ratios else math.nan


def quietest(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The row's run, with how many were quiet: of the quiet runs (others at most ``QUIET``; nan
    counts as quiet) the one with the median CPU per chunk (the lower middle one of an even
    count), else the run with the least CPU used by others."""
    quiet = sorted((r for r in rows if not r["others"] > QUIET), key=lambda r: r["cpu_us_per_chunk"])
    best = quiet[(len(quiet) - 1) // 2] if quiet else min(rows, key=lambda r: r["others"])
    return {**best, "quiet_runs": len(quiet), "runs": len(rows)}


def _floor_runs(
    runs: dict[tuple[str, int, float], list[dict[str, Any]]], loads: list[tuple[int, float]]
) -> dict[tuple[str, int, float], list[dict[str, Any]]]:
    """For each load, per repeat, the cheaper run of the two C libcurl floors (``REFERENCE`` and
    ``OUTSIDE``): the floor the ratios are taken to."""
    floors = {}
    for s, i in loads:
        by_repeat: dict[Any, dict[str, Any]] = {}
        for name in (REFERENCE, OUTSIDE):
            for row in runs.get((name, s, i), []):
                held = by_repeat.get(row.get("repeat"))
                if held is None or row["cpu_us_per_chunk"] < held["cpu_us_per_chunk"]:
                    by_repeat[row.get("repeat")] = row
        if by_repeat:
            floors[(FLOOR, s, i)] = list(by_repeat.values())
    return floors


def tables(runs: dict[tuple[str, int, float], list[dict[str, Any]]], clients: list[str]) -> str:
    """The issue's table (CPU per content chunk of each client's quietest run, and its ratio to the
    C libcurl reference's quietest) and the details, with the median of the ratios paired by repeat."""
    loads = sorted({(s, i) for _, s, i in runs}, key=lambda load: (-load[1], load[0]))
    runs = {**runs, **_floor_runs(runs, loads)}
    best = {key: quietest(rows) for key, rows in runs.items()}
    head = " | ".join(f"C={s}, " + (f"{i:g} ms apart" if i else "no delay") for s, i in loads)
    out = [f"| client | {head} |", "|---|" + "---:|" * len(loads)]
    for name in [FLOOR, *clients]:
        cells = []
        for s, i in loads:
            row, ref = best.get((name, s, i)), best.get((FLOOR, s, i))
            if row is None:
                cells.append("not run")
                continue
            ratio = f" ({row['cpu_us_per_chunk'] / ref['cpu_us_per_chunk']:.2f}x)" if ref else ""
            cells.append(f"{row['cpu_us_per_chunk']:.1f} µs{ratio}")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += [
        "",
        "| client | load | CPU/chunk (µs) | x ref, paired | busy | sleeps/chunk | lag p50 (ms) | lag p99 (ms) "
        "| others: client core / all | quiet runs | failed |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s, i in loads:
        for name in clients:
            row = best.get((name, s, i))
            if row is None:
                continue
            paired = paired_ratio(runs[(name, s, i)], runs.get((FLOOR, s, i), []))
            out.append(
                f"| {name} | C={s}, {i:g} ms | {row['cpu_us_per_chunk']:.1f} | {paired:.2f} | {row['busy']:.0%} | "
                f"{row.get('sleeps_per_chunk', math.nan):.2f} | "
                f"{row['lag_p50_ms']:.2f} | {row['lag_p99_ms']:.2f} | {row['others']:.2f} / "
                f"{row.get('others_all', math.nan):.2f} | "
                f"{row['quiet_runs']}/{row['runs']} | {row['failed']} |"
            )
    return "\n".join(out)


# As a test: every client once per load, small, and it must get every chunk.


@pytest.fixture(scope="module")
def scripted() -> Any:
    from fastsse.testing import spawn_scripted_server

    with spawn_scripted_server(cpu=many.SERVER_CPU if (os.cpu_count() or 1) > 1 else None) as server:
        yield server


@pytest.mark.parametrize("load", LOADS, ids=[f"C{s}-{i:g}ms" for s, i in LOADS])
@pytest.mark.parametrize("client", CLIENTS)
def test_read_cost(benchmark: Any, scripted: Any, quick: bool, client: str, load: tuple[int, float]) -> None:
    streams, itl = load
    chunks = CHUNKS
    if quick:
        streams, chunks = 16, 10
    benchmark.group = f"read-cost:C{load[0]}:{itl:g}ms"
    if client == "curl_cffi":
        pytest.importorskip("curl_cffi", reason="curl_cffi is not installed (pip install curl_cffi)")
    if client == "aiohttp-vllm":
        pytest.importorskip("aiohttp", reason="aiohttp is not installed (pip install aiohttp)")
    try:
        if client in C_CLIENTS:
            _reference.build(_EXE[client])
        elif client == OUTSIDE:
            _reference.build_shared_floor()
        elif client in (CYTHON, CYTHON_ON_CHUNK):
            _reference.build_module("curl_chatstream")
    except _reference.Unavailable as exc:
        pytest.skip(str(exc))
    figures: dict[str, Any] = {}

    def once() -> None:
        figures.update(run_once(client, scripted.base_url, streams, chunks, itl, scripted.pid))

    benchmark.pedantic(once, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    assert figures["failed"] == 0
    assert figures["chunks"] == streams * chunks
    if client in COUNTS_EVENTS:
        assert figures["events"] == streams * (chunks + EVENTS_AROUND_CONTENT)
        assert 0 < figures["lag_samples"] <= streams * chunks
        assert 0 <= figures["lag_p50_ms"] <= figures["lag_p99_ms"]
    if client in ("C-libcurl", CYTHON, CYTHON_ON_CHUNK) and _reference.libcurl() is not None:
        # It ran on the libcurl the engine runs on (pycurl's copy): the same version string.
        pycurl = pytest.importorskip("pycurl")
        assert figures["library"] == pycurl.version.split(" ", 1)[1]


def test_a_tree_and_a_script_are_checked_before_any_run(monkeypatch: Any, tmp_path: Any) -> None:
    """``--tree`` needs a checkout and ``--script`` known keys: a usage error, not a failed session;
    a client from an unknown tree fails its run with the reason."""
    with pytest.raises(SystemExit):
        main(["--tree", f"old={tmp_path}"])  # no src/fastsse there
    monkeypatch.setenv(many.SCRIPT_ENV, "events_per_write=10,chunk_per_event=true")
    assert _script_extra() == {"events_per_write": 10, "chunk_per_event": True}
    assert (
        many._body(20, 5)["model"] == "ttft_ms=50,itl_ms=20,chunks=5,events_per_write=10,chunk_per_event=true"
    )
    with pytest.raises(SystemExit):
        main(["--script", "no_such_key=1"])
    with pytest.raises(RuntimeError, match="no tree 'nowhere'"):
        run_once("Client@nowhere", "http://127.0.0.1:9/v1", 1, 1, 0.0, None)


def test_the_table_keeps_the_median_quiet_run_and_divides_by_the_reference() -> None:
    def run(name: str, us: float, others: float) -> dict[str, Any]:
        return {
            "client": name,
            "cpu_us_per_chunk": us,
            "busy": 0.5,
            "lag_p50_ms": 0.1,
            "lag_p99_ms": 1.0,
            "others": others,
            "failed": 0,
        }

    runs = {
        ("C-libcurl", 128, 20.0): [run("C-libcurl", 30.0, 0.5), run("C-libcurl", 10.0, 0.01)],
        ("Client", 128, 20.0): [run("Client", 15.0, 0.02), run("Client", 9.0, 0.3)],
    }
    for rows in runs.values():
        for rep, row in enumerate(rows):
            row["repeat"] = rep
    assert quietest(runs[("Client", 128, 20.0)])["cpu_us_per_chunk"] == 15.0
    three = [run("Client", 12.0, 0.0), run("Client", 20.0, 0.01), run("Client", 14.0, 0.04)]
    assert quietest(three)["cpu_us_per_chunk"] == 14.0
    assert quietest([run("Client", 12.0, 0.3), run("Client", 20.0, 0.2)])["cpu_us_per_chunk"] == 20.0
    text = tables(runs, ["C-libcurl", "Client", "curl_cffi"])
    assert "| floor | 10.0 µs (1.00x) |" in text
    assert "| C-libcurl | 10.0 µs (1.00x) |" in text
    assert "| Client | 15.0 µs (1.50x) |" in text
    assert "| curl_cffi | not run |" in text
    # Paired by repeat: 15/30 (the reference disturbed) and 9/10 (the client disturbed): no quiet
    # pair, so the median of both, 0.70.
    assert "| Client | C=128, 20 ms | 15.0 | 0.70 | 50% | nan | 0.10 | 1.00 | 0.02 / nan | 1/2 | 0 |" in text
    assert (
        paired_ratio(
            [{**run("Client", 12.0, 0.0), "repeat": 0}], [{**run("C-libcurl", 10.0, 0.0), "repeat": 0}]
        )
        == 1.2
    )
    # the floor is, per repeat, the cheaper of the two C libcurl floors: the outside one in repeat
    # 0 (20 < 30), ours in repeat 1 (10 < 12)
    outside = [{**run(OUTSIDE, 20.0, 0.01), "repeat": 0}, {**run(OUTSIDE, 12.0, 0.01), "repeat": 1}]
    floors = _floor_runs({**runs, (OUTSIDE, 128, 20.0): outside}, [(128, 20.0)])[(FLOOR, 128, 20.0)]
    assert [r["cpu_us_per_chunk"] for r in floors] == [20.0, 10.0]
    text = tables({**runs, (OUTSIDE, 128, 20.0): outside}, ["C-libcurl", OUTSIDE, "Client"])
    assert "| floor | 10.0 µs (1.00x) |" in text  # of two quiet floor runs, the lower middle one
    assert f"| {OUTSIDE} | 12.0 µs (1.20x) |" in text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=CHUNKS)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument(
        "--loads",
        default=",".join(f"{s}x{i:g}" for s, i in LOADS),
        help="STREAMSxMS,... (default 128x20,256x0)",
    )
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        help="before each run, wait up to this many seconds for the client's core to be quiet",
    )
    parser.add_argument("--json", help="also write every run to this file")
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="another checkout (extensions built in place): a client named NAME@LABEL runs from it",
    )
    parser.add_argument(
        "--script",
        help="more script keys for every stream, e.g. events_per_write=10,chunk_per_event=true",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--streams", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--itl-ms", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for tree in args.tree:
        label, _, path = tree.partition("=")
        if not label or not os.path.isdir(os.path.join(path, "src", "fastsse")):
            parser.error(f"--tree {tree}: LABEL=PATH of a checkout (PATH/src/fastsse)")
        TREES[label] = os.path.abspath(path)
    if args.script:
        os.environ[many.SCRIPT_ENV] = args.script
        try:
            _script_extra()
        except ValueError as exc:
            parser.error(f"--script: {exc}")
    if args.child:
        _pin_client()
        row = measure(args.child, args.url, args.streams, args.chunks, args.itl_ms or 0.0)
        import fastsse

        row["tree"] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(fastsse.__file__))))
        # When the measured window ended (CLOCK_MONOTONIC): a profiler can keep to the window.
        row["window_end_ns"] = time.monotonic_ns()
        print(json.dumps(row))
        return 0
    from fastsse.testing import spawn_scripted_server

    loads = tuple((int(s), float(i)) for s, i in (part.split("x") for part in args.loads.split(",")))
    clients = args.clients.split(",")
    load_before = os.getloadavg()
    with spawn_scripted_server(cpu=many.SERVER_CPU) as server:
        runs = session(
            server.base_url, server.pid, clients, loads, args.chunks, args.repeats, args.wait_quiet
        )
    print(
        f"\n{args.chunks} chunks per stream, {args.repeats} interleaved repeats, median of the quiet runs kept "
        f"(load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after)\n"
    )
    print(tables(runs, clients), flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump([row for rows in runs.values() for row in rows], out, indent=1)
    return 0


if __name__ == "__main__":
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    sys.path.insert(0, os.environ.get(TREE_SRC) or here)
    raise SystemExit(main())
