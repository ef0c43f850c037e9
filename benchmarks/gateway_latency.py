"""What a relay adds to one answer's time at concurrency 1, measured by a raw HTTP/1.1 client
(one kept-alive socket, no client library in the way): ``python benchmarks/gateway_latency.py
MODEL ANSWERS ROUNDS NAME=SRC [NAME=SRC ...] [nginx]``. For each round, each contender in turn (the
order reversed every other round) relays ``ANSWERS`` answers of ``MODEL`` (``long-20``: 20 chunks,
no delay) from the scripted upstream (``python -m fastsse serve``); the relay runs alone on core 1,
the upstream and this client on core 0 (``taskset``), and the upstream is also asked directly in
the same round, answer for answer in turn with the relay's. It prints, per contender and round,
the answer's time (request sent to the chunked terminator read) at p50 and p99 over direct's, and
the p50 from the
``[DONE]`` event to the terminator (what a relay spends ending the answer). ``SRC`` is a ``src``
folder with its extensions built (``python -m fastsse gateway`` from that tree); ``nginx`` is
nginx as a C byte relay (as in ``gateway_instructions.py``). The first 50 answers of each run are
warm-up. Linux only (taskset)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time

from gateway_instructions import nginx_argv  # the benchmarks folder is on the path
from gateway_request_cost import free_port, wait_port

WARMUP = 50


def _request(model: str) -> bytes:
    body = b'{"model":"%s","stream":true,"messages":[{"role":"user","content":"hi"}]}' % model.encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )


class Caller:
    """One kept-alive connection and the answers read on it: (the answer's time, [DONE] to the
    terminator) in µs."""

    def __init__(self, port: int, model: str) -> None:
        self.port = port
        self.request = _request(model)
        self.sock = self._connect()

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def answer(self) -> tuple[float, float]:
        start = time.perf_counter_ns()
        self.sock.sendall(self.request)
        data = b""
        done = 0
        while not data.endswith(b"\r\n0\r\n\r\n"):
            more = self.sock.recv(65536)
            if not more and not data:  # a server that ends a kept-alive connection after so many
                # requests (nginx's keepalive_requests, 1000): once more on a new one
                self.sock.close()
                self.sock = self._connect()
                return self.answer()
            if not more:
                raise SystemExit(f"port {self.port} closed the connection: {data[-200:]!r}")
            data += more
            if not done and b"data: [DONE]" in data:
                done = time.perf_counter_ns()
        end = time.perf_counter_ns()
        return (end - start) / 1e3, (end - (done or end)) / 1e3


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def one_round(contender: str, model: str, count: int) -> tuple[float, float, float]:
    """(added p50, added p99, [DONE] to the end p50) in µs of ``contender`` against direct."""
    py = sys.executable
    up, port = free_port(), free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    upstream = subprocess.Popen(
        ["taskset", "-c", "0", py, "-m", "fastsse", "serve", "--port", str(up), "--quiet"], **quiet
    )
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ)
        if contender == "nginx":
            argv = nginx_argv(up, port, work)
        else:
            env["PYTHONPATH"] = contender.partition("=")[2]
            argv = [py, "-m", "fastsse", "gateway", "--upstream", f"http://127.0.0.1:{up}/v1"]
            argv += ["--port", str(port)]
        relay = subprocess.Popen(["taskset", "-c", "1", *argv], env=env, **quiet)
        try:
            wait_port(up)
            wait_port(port)
            # the two take turns, answer by answer: both meet the machine in the same state
            direct_caller, relay_caller = Caller(up, model), Caller(port, model)
            direct, relayed = [], []
            for i in range(WARMUP + count):
                pair = direct_caller.answer(), relay_caller.answer()
                if i >= WARMUP:
                    direct.append(pair[0])
                    relayed.append(pair[1])
            direct_caller.sock.close()
            relay_caller.sock.close()
        finally:
            relay.terminate()
            upstream.terminate()
            relay.wait(10)
            upstream.wait(10)
    times = [t for t, _ in relayed]
    base = [t for t, _ in direct]
    return (
        _pct(times, 0.5) - _pct(base, 0.5),
        _pct(times, 0.99) - _pct(base, 0.99),
        _pct([d for _, d in relayed], 0.5),
    )


def main() -> None:
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    model, count, rounds, contenders = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    os.sched_setaffinity(0, {0})  # this client beside the upstream, the relay alone on core 1
    runs: dict[str, list[tuple[float, float, float]]] = {c: [] for c in contenders}
    for turn in range(rounds):
        for contender in contenders if turn % 2 == 0 else contenders[::-1]:
            runs[contender].append(one_round(contender, model, count))
    for contender, values in runs.items():
        name = contender.partition("=")[0]
        figures = ", ".join(f"{a:+.0f} / {b:+.0f} ({d:.0f})" for a, b, d in values)
        p50s = sorted(a for a, _, _ in values)
        print(
            f"{model} {name}: added p50 / p99 µs ([DONE] to the end p50): {figures};"
            f" median added p50 {p50s[len(p50s) // 2]:+.0f} µs"
        )


if __name__ == "__main__":
    main()
