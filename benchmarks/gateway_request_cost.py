"""The gateway's CPU per request: ``python benchmarks/gateway_request_cost.py MODEL REQUESTS ROUNDS
NAME=SRC [NAME=SRC ...]`` runs, for each tree (``SRC``: a ``src`` folder with its extensions built;
``SRC@uvicorn``: the same with ``[server] http = "uvicorn"``),
the scripted upstream (``python -m fastsse serve``) and one ``fastsse load`` client (4 at a time)
on core 0 and ``python -m fastsse gateway`` on core 1 (``taskset``), and prints the gateway
process's CPU time (``/proc/PID/stat`` utime + stime) over ``REQUESTS`` answers of ``MODEL``
(``long-20``: 20 chunks; ``long-1``, ``long-2``), after 200 answers of warm-up, in µs per
request. The trees take turns, the order reversed every other round: on a busy machine compare
the rounds side by side (Linux only: taskset and /proc)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
WARMUP = 200


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port}")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def one_run(src: str, model: str, requests: int) -> float:
    """The gateway's CPU per request (µs) over ``requests`` answers, with tree ``src`` (``SRC@uvicorn``:
    with ``[server] http = "uvicorn"``)."""
    src, _, http = src.partition("@")
    env = dict(os.environ, PYTHONPATH=src)
    py = sys.executable
    up, gw = free_port(), free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    upstream = subprocess.Popen(
        ["taskset", "-c", "0", py, "-m", "fastsse", "serve", "--port", str(up), "--quiet"], **quiet
    )
    argv = ["taskset", "-c", "1", py, "-m", "fastsse", "gateway"]
    if http:
        config = f"/tmp/fastsse-request-cost-{os.getpid()}.toml"
        with open(config, "w") as f:
            f.write(f'[server]\nhttp = "{http}"\n\n[[upstream]]\nname = "upstream"\n')
            f.write(f'base_url = "http://127.0.0.1:{up}/v1"\n')
        argv += ["--config", config, "--port", str(gw)]
    else:
        argv += ["--upstream", f"http://127.0.0.1:{up}/v1", "--port", str(gw)]
    gateway = subprocess.Popen(argv, **quiet)
    try:
        wait_port(up)
        wait_port(gw)
        load = ["taskset", "-c", "0", py, "-m", "fastsse", "load", f"http://127.0.0.1:{gw}/v1"]
        load += ["--model", model, "--concurrency", "4", "--quiet", "--requests"]
        subprocess.run([*load, str(WARMUP)], env=env, check=True, stdout=subprocess.DEVNULL)
        before = cpu_seconds(gateway.pid)
        subprocess.run([*load, str(requests)], env=env, check=True, stdout=subprocess.DEVNULL)
        return (cpu_seconds(gateway.pid) - before) / requests * 1e6
    finally:
        for proc in (gateway, upstream):
            proc.terminate()
            proc.wait()


def main() -> None:
    model, requests, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    trees = [arg.split("=", 1) for arg in sys.argv[4:]]
    runs: dict[str, list[float]] = {name: [] for name, _ in trees}
    for turn in range(rounds):
        for name, src in trees if turn % 2 == 0 else trees[::-1]:
            runs[name].append(one_run(src, model, requests))
    for name, values in runs.items():
        ordered = sorted(values)
        figures = " ".join(f"{v:.0f}" for v in values)
        print(
            f"{model} {name}: {figures}  (min {ordered[0]:.0f}, median {ordered[len(ordered) // 2]:.0f} µs)"
        )


if __name__ == "__main__":
    main()
