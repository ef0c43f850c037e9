"""Client lag under load: ``python -m fastsse load`` with each client against the scripted server.

    python benchmarks/load_lag.py                       # 16 / 128 / 1024 streams, 3 clients (~3 min)
    python benchmarks/load_lag.py --streams 512 --clients fastsse,aiohttp-vllm --json lag.json

The server (``python -m fastsse serve --scripted``) runs pinned to core 0, every load run pinned to
core 1. Each stream is one request whose answer is ``--chunks`` single-token chunks ``--itl-ms``
apart, one event per HTTP chunk, each stamped with its send time; all streams start together
(``--concurrency N --requests N``). Lag is what the tool reports: the arrival of the read that
brought a token chunk (for the peers: the moment the client handed the chunk over) minus the
server's send stamp. Client CPU per chunk is the load process's CPU time over the run divided by
the token chunks it received. The server's own lateness against its schedule is printed too: when
it is large, the server, not the client, was the limit.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent


def run_one(
    base_url: str, client: str, streams: int, *, cpu: int | None, warmup: int = 0, timeout: float = 900
) -> dict[str, Any]:
    """One load run in its own process (pinned to ``cpu``); returns its ``--json`` document."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        argv = [sys.executable, "-m", "fastsse", "load", base_url, "--model", "scripted"]
        argv += ["--concurrency", str(streams), "--requests", str(streams), "--client", client]
        argv += ["--json", str(out), "--quiet", "--no-usage", "--warmup", str(warmup)]
        if cpu is not None:
            argv = ["taskset", "-c", str(cpu), *argv]
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT / "src") + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
        )
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        if done.returncode not in (0, 1):
            raise RuntimeError(f"load failed ({done.returncode}): {done.stderr.strip()}")
        doc: dict[str, Any] = orjson.loads(out.read_bytes())
        return doc


def row(doc: dict[str, Any], server_late: dict[str, Any]) -> dict[str, Any]:
    s = doc["summary"]
    chunks = s["token_chunks"] or 1
    return {
        "client": doc["client"],
        "streams": doc["config"]["concurrency"],
        "complete": s["outcomes"].get("complete", 0),
        "lag_p50_ms": s["lag_ms"]["p50"],
        "lag_p99_ms": s["lag_ms"]["p99"],
        "lag_max_ms": s["lag_ms"]["max"],
        "itl_p50_ms": s["itl_ms"]["p50"],
        "itl_p99_ms": s["itl_ms"]["p99"],
        "cpu_us_per_chunk": s["client_cpu_s"] / chunks * 1e6,
        "client_busy": s["client_busy"],
        "loop_delay_p99_ms": s["client_loop_delay_ms"]["p99"],
        "client_preempted": s["client_preempted"],
        "server_late_p99_ms": server_late["p99"] / 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", default="16,128,1024")
    parser.add_argument("--clients", default="fastsse,aiohttp-vllm,openai")
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--itl-ms", type=float, default=20.0)
    parser.add_argument("--ttft-ms", type=float, default=500.0, help="time for every stream to connect first")
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from fastsse.testing import spawn_scripted_server

    pin = (os.cpu_count() or 1) > 1
    rows = []
    print(
        "| streams | client | lag p50 (ms) | lag p99 (ms) | ITL p50 / p99 (ms) | client CPU per chunk "
        "| client busy | loop late p99 | server late p99 |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for streams in [int(n) for n in args.streams.split(",")]:
        for client in args.clients.split(","):
            with spawn_scripted_server(
                cpu=args.server_cpu if pin else None,
                ttft_ms=args.ttft_ms,
                itl_ms=args.itl_ms,
                chunks=args.chunks,
            ) as server:
                doc = run_one(server.base_url, client, streams, cpu=args.client_cpu if pin else None)
                late = server.stats()["late_us"]
            r = row(doc, late)
            rows.append(r)
            print(
                f"| {streams} | {r['client']} | {r['lag_p50_ms']:.2f} | {r['lag_p99_ms']:.2f} | "
                f"{r['itl_p50_ms']:.1f} / {r['itl_p99_ms']:.1f} | {r['cpu_us_per_chunk']:.1f} µs | "
                f"{r['client_busy']:.0%} | {r['loop_delay_p99_ms']:.1f} ms | {r['server_late_p99_ms']:.1f} ms |",
                flush=True,
            )
            if r["complete"] != streams:
                print(f"  ({streams - r['complete']} streams did not complete)", flush=True)
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
