"""Many streams at once: client CPU per chunk and client lag, fastsse's engine beside the peers.

The scripted server (``fastsse.load``) runs in a child process pinned to core 0 and
stamps every chunk with its send time; each client runs in a child process of its own pinned to
core 1, so ``time.process_time()`` there is the client's CPU alone. Per run:

- client CPU per chunk = the client process's CPU time over the run / the token chunks it received;
- lag = the client's receive stamp (``time.monotonic_ns()`` where user code gets the chunk) minus
  the server's send stamp in that chunk (one ``CLOCK_MONOTONIC`` for both processes).

Clients: ``AsyncClient`` and ``Client`` twice each, without ``on_chunk`` (the fold only: what a
caller who wants the answer and its timing record runs; its lag is not measured, as no chunk is
ever handed out) and with an ``on_chunk`` that takes each chunk's stamp (the lag, and the CPU
when every chunk becomes a dict as it does for every peer); the peers are ``fastsse.load``'s:
aiohttp with vLLM ``bench serve``'s framing, the openai SDK's ``AsyncOpenAI``, httpx + httpx-sse,
``fastsse.aiter_chunks`` over aiohttp, ``create_stream`` with one thread per stream.

As a test (``--benchmark-disable``) every client streams 16 x 10 chunks and must get them all.
The full table (512 streams x 100 chunks, 20 ms apart and with no delay) is printed by
``python benchmarks/test_bench_many.py [--streams 512] [--chunks 100] [--clients a,b]``; the numbers
in benchmarks/README.md come from it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import pytest

FASTSSE_CLIENTS = ("AsyncClient", "AsyncClient+on_chunk", "Client", "Client+on_chunk")
# The gateway's byte formats, with an on_chunk that only counts the pieces (the read-cost rows)
FORMAT_CLIENTS = {"AsyncClient relay": "relay", "AsyncClient to-messages": "to-messages"}
PEER_CLIENTS = ("aiohttp-vllm", "openai", "httpx-sse", "fastsse-aiohttp", "fastsse-threads")
CLIENTS = FASTSSE_CLIENTS + PEER_CLIENTS
SERVER_CPU, CLIENT_CPU = 0, 1
STAMP = "fastsse_sent_ns"


# more script keys for every request ("events_per_write=10,chunk_per_event=true"), children too
SCRIPT_ENV = "FASTSSE_BENCH_SCRIPT"


def _body(itl_ms: float, chunks: int) -> dict[str, Any]:
    extra = os.environ.get(SCRIPT_ENV)
    return {
        "model": f"ttft_ms=50,itl_ms={itl_ms:g},chunks={chunks}" + (f",{extra}" if extra else ""),
        "messages": [{"role": "user", "content": "hi"}],
    }


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > cpu:
        os.sched_setaffinity(0, {cpu})


def _percentile(values: list[int], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6


def _fastsse_run(name: str, url: str, bodies: list[dict[str, Any]]) -> tuple[int, list[int], int]:
    """(token chunks, lags in ns, failed streams) for one of fastsse's own clients."""
    import fastsse

    n = len(bodies)
    lags: list[int] = []
    with_cb = name.endswith("+on_chunk")
    fmt = FORMAT_CLIENTS.get(name)
    pieces = [0]

    def count(piece: bytes) -> None:
        pieces[0] += 1

    def on_chunk(chunk: dict[str, Any]) -> None:
        now = time.monotonic_ns()
        choices = chunk["choices"]
        if choices and choices[0]["delta"].get("content"):
            lags.append(now - chunk[STAMP])

    if name.startswith("AsyncClient"):

        async def main() -> list[Any]:
            async with fastsse.AsyncClient(
                base_url=url, api_key="x", max_connections=n, timeout=600
            ) as client:
                if fmt is not None:
                    streams = (client.create_stream(b, count, format=fmt) for b in bodies)
                else:
                    streams = (client.create_stream(b, on_chunk if with_cb else None) for b in bodies)
                return await asyncio.gather(*streams, return_exceptions=True)

        try:
            import uvloop

            outcomes = uvloop.run(main())
        except ImportError:
            outcomes = asyncio.run(main())
    else:
        with fastsse.Client(base_url=url, api_key="x", max_connections=n, timeout=600) as client:
            outcomes = client.run(bodies, (lambda i, c: on_chunk(c)) if with_cb else None)
    chunks = failed = 0
    for outcome in outcomes:
        if isinstance(outcome, BaseException) or not outcome.get("verdict", {}).get("complete"):
            failed += 1
            continue
        if fmt is not None:  # a byte format records no token stamps: the chunks asked for
            chunks += int(bodies[0]["model"].rsplit("chunks=", 1)[1])
        else:
            chunks += len(outcome["timing"]["token_reads"])
    return chunks, lags, failed


def _peer_run(name: str, url: str, bodies: list[dict[str, Any]]) -> tuple[int, list[int], int]:
    from fastsse import load as _peers

    records = _peers.run_peer(name, url, bodies, concurrency=len(bodies), use_uvloop=False)
    chunks = failed = 0
    lags: list[int] = []
    for rec in records:
        if rec.error or not rec.done:
            failed += 1
            continue
        for recv, sent, tokens in zip(rec.recv_ns, rec.sent_ns, rec.tokens, strict=True):
            if tokens:
                chunks += 1
                if sent:
                    lags.append(recv - sent)
    return chunks, lags, failed


def _warm_up(name: str, url: str) -> None:
    # Imports (and uvloop's) are not part of a client's cost per chunk: load them before the clock.
    import contextlib

    import fastsse
    import fastsse.client.engine
    from fastsse import load as _peers

    with contextlib.suppress(ImportError):
        import pycurl  # noqa: F401  (the engine imports it on first use, inside the clock)
        import uvloop  # noqa: F401
    # fastsse loads its clients lazily (module __getattr__): load them here, not in the first request.
    _ = fastsse.AsyncClient, fastsse.Client
    if name in PEER_CLIENTS:
        _peers.open_peer(name, url, concurrency=1)
    fastsse.ChatStream(timing=True).write(b"data: {}\n\n")


def measure(name: str, url: str, streams: int, chunks: int, itl_ms: float) -> dict[str, Any]:
    """Run one client over ``streams`` concurrent streams in this process; its figures."""
    bodies = [_body(itl_ms, chunks) for _ in range(streams)]
    runner = _fastsse_run if name in FASTSSE_CLIENTS or name in FORMAT_CLIENTS else _peer_run
    _warm_up(name, url)
    cpu0, wall0 = time.process_time(), time.monotonic()
    got, lags, failed = runner(name, url, bodies)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    return {
        "client": name,
        "streams": streams,
        "chunks": got,
        "failed": failed,
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_us_per_chunk": cpu / got * 1e6 if got else float("nan"),
        "busy": cpu / wall if wall else float("nan"),
        "lag_p50_ms": _percentile(lags, 0.5),
        "lag_p99_ms": _percentile(lags, 0.99),
        "lag_mean_ms": statistics.fmean(lags) / 1e6 if lags else float("nan"),
    }


def run_in_child(name: str, url: str, streams: int, chunks: int, itl_ms: float) -> dict[str, Any]:
    """``measure`` in a child process pinned to the client core."""
    argv = [sys.executable, __file__, "--child", name, "--url", url]
    argv += ["--streams", str(streams), "--chunks", str(chunks), "--itl-ms", str(itl_ms)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{name} failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _table(rows: list[dict[str, Any]], title: str) -> str:
    out = [
        title,
        "| client | CPU per chunk (µs) | busy | lag p50 (ms) | lag p99 (ms) | failed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['client']} | {r['cpu_us_per_chunk']:.1f} | {r['busy']:.0%} | {r['lag_p50_ms']:.2f} | "
            f"{r['lag_p99_ms']:.2f} | {r['failed']} |"
        )
    return "\n".join(out)


# As a test: every client, small, and it must get every chunk.


@pytest.fixture(scope="module")
def scripted_url() -> Any:
    from fastsse.testing import spawn_scripted_server

    with spawn_scripted_server(cpu=SERVER_CPU if (os.cpu_count() or 1) > 1 else None) as server:
        yield server.base_url


@pytest.mark.parametrize("itl_ms", [20, 0], ids=["20ms", "no-delay"])
@pytest.mark.parametrize("client", CLIENTS)
def test_many_streams(benchmark: Any, scripted_url: str, quick: bool, client: str, itl_ms: float) -> None:
    streams, chunks = (16, 10) if quick else (512, 100)
    benchmark.group = f"many:{itl_ms}ms"
    if client in PEER_CLIENTS:
        from fastsse import load as _peers

        try:
            _peers.open_peer(client, scripted_url, concurrency=1)
        except _peers.Unavailable as exc:
            pytest.skip(str(exc))
    figures: dict[str, Any] = {}

    def once() -> None:
        figures.update(run_in_child(client, scripted_url, streams, chunks, itl_ms))

    benchmark.pedantic(once, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    assert figures["failed"] == 0
    assert figures["chunks"] == streams * chunks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=512)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--itl-ms", type=float, default=None, help="one delay only (default: 20 and 0)")
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--url", help="a scripted server already running (default: start one on core 0)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write every row to this file")
    args = parser.parse_args(argv)
    if args.child:
        _pin(CLIENT_CPU)
        print(json.dumps(measure(args.child, args.url, args.streams, args.chunks, args.itl_ms or 0.0)))
        return 0
    from fastsse.testing import spawn_scripted_server

    delays = [args.itl_ms] if args.itl_ms is not None else [20.0, 0.0]
    rows: list[dict[str, Any]] = []
    server = None if args.url else spawn_scripted_server(cpu=SERVER_CPU)
    url = args.url or (server.base_url if server else "")
    try:
        for itl in delays:
            block = []
            for name in args.clients.split(","):
                try:
                    row = run_in_child(name, url, args.streams, args.chunks, itl)
                except RuntimeError as exc:
                    print(f"{name}: {exc}", file=sys.stderr)
                    continue
                row["itl_ms"] = itl
                block.append(row)
                print(
                    f"  {name}: {row['cpu_us_per_chunk']:.1f} us/chunk, lag p99 {row['lag_p99_ms']:.2f} ms",
                    file=sys.stderr,
                )
            rows += block
            title = f"\n{args.streams} streams x {args.chunks} chunks, {itl:g} ms between chunks (load {os.getloadavg()[0]:.2f})"
            print(_table(block, title), flush=True)
    finally:
        if server is not None:
            server.close()
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
    raise SystemExit(main())
