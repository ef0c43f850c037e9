"""A burst of callers on a cold gateway: when their requests reach the upstream.
``python benchmarks/gateway_burst.py [CALLERS] [ROUNDS]`` starts the scripted upstream (TTFT 50 ms,
20 ms between chunks, 100 chunks) and ``fastsse load`` (``CALLERS`` at once, default 256) on core
0, and a ``Gateway`` on its ``HttpServer`` in a child process on core 1, with no connection to the
upstream kept yet: every caller needs a new one. The child stamps each request's arrival (its head
and body parsed) and each request's write to the upstream; the line printed per round is the
first and the last write after the first arrival, the arrivals' span, and the client's TTFT p50 /
p99. Run it with ``PYTHONPATH=<tree>/src`` to measure another tree (Linux: taskset)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from gateway_request_cost import free_port, wait_port  # the benchmarks folder is on the path

CHILD = r"""
import asyncio, json, socket, sys, time
import uvloop
from fastsse.client import _loop
from fastsse.gateway import Gateway, HttpServer, config_from, _http

arrived, sent = [], []
on_message_complete = _http.Connection.on_message_complete
def stamped_arrival(self):
    arrived.append(time.monotonic_ns())
    return on_message_complete(self)
_http.Connection.on_message_complete = stamped_arrival
send = _loop._Transfer._send
def stamped_send(self):
    send(self)
    sent.append(time.monotonic_ns())
_loop._Transfer._send = stamped_send

async def main(upstream, port, seconds):
    gateway = Gateway(config_from({"upstream": [{"name": "u", "base_url": upstream}]}, {}))
    await gateway.startup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(4096)
    server = HttpServer(gateway)
    await server.start(sock)
    await asyncio.sleep(seconds)

uvloop.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
print(json.dumps({"arrived": arrived, "sent": sent}))
"""


def one_round(callers: int) -> str:
    py = sys.executable
    up, gw = free_port(), free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    script = ["--scripted", "--ttft-ms", "50", "--itl-ms", "20", "--chunks", "100"]
    upstream = subprocess.Popen(
        ["taskset", "-c", "0", py, "-m", "fastsse", "serve", *script, "--port", str(up), "--quiet"], **quiet
    )
    child = subprocess.Popen(
        ["taskset", "-c", "1", py, "-c", CHILD, f"http://127.0.0.1:{up}/v1", str(gw), "12"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(up)
        wait_port(gw)
        time.sleep(0.5)
        with tempfile.TemporaryDirectory() as work:
            out = os.path.join(work, "load.json")
            argv = ["taskset", "-c", "0", py, "-m", "fastsse", "load", f"http://127.0.0.1:{gw}/v1"]
            argv += ["--model", "scripted", "--concurrency", str(callers), "--requests", str(callers)]
            argv += ["--quiet", "--api-key", "x", "--json", out]
            subprocess.run(argv, **quiet, check=False, timeout=120)
            with open(out) as f:
                ttft = json.load(f)["summary"]["ttft_ms"]
        stamps = json.loads(child.communicate(timeout=60)[0].decode().strip().splitlines()[-1])
    finally:
        for proc in (child, upstream):
            proc.kill()
            proc.wait()
    arrived, sent = stamps["arrived"][:callers], sorted(stamps["sent"])[:callers]
    t0 = arrived[0]
    return (
        f"arrivals over {(arrived[-1] - t0) / 1e6:5.1f} ms; upstream writes from {(sent[0] - t0) / 1e6:5.1f}"
        f" to {(sent[-1] - t0) / 1e6:5.1f} ms; client TTFT p50 {ttft['p50']:.1f} / p99 {ttft['p99']:.1f} ms"
    )


def main() -> None:
    callers = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    for _ in range(rounds):
        print(one_round(callers), flush=True)


if __name__ == "__main__":
    main()
