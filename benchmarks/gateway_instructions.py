"""The user-space instructions a relay executes per answer, counted by valgrind's callgrind: a
figure this noisy VM cannot move (the CPU-time benchmarks spread by 10-20% between runs; these
counts repeat within 0.2%). ``python benchmarks/gateway_instructions.py MODEL ANSWERS NAME=SRC
[NAME=SRC ...] [nginx] [loop]`` runs, for each contender, the scripted upstream (``python -m fastsse
serve``) and ``fastsse load`` (4 at a time) outside valgrind, the relay inside it with its
instrumentation off; after 100 answers of warm-up it is switched on for ``ANSWERS`` answers of
``MODEL`` (``long-1``: 1 chunk, ``long-20``: 20 in as few reads as TCP makes them; ``paced-N``: N
chunks 10 ms apart from the scripted upstream, one read each, as a real model's), then off, and
the counts are summed.
``SRC`` is a ``src`` folder with its extensions built (``python -m fastsse gateway`` from that
tree); ``nginx`` is nginx as a C byte relay (one process, ``proxy_pass``, buffering off);
``loop`` is the prototype of the next data plane (``_gateway_peers.py loop``: no product feature).
The kernel's share (loopback TCP, about half of a relayed chunk's CPU) is not in these counts.
Per chunk: run ``paced-101`` and ``paced-1`` and take the difference over 100."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile

from gateway_request_cost import free_port, wait_port  # the benchmarks folder is on the path

WARMUP = 100


def nginx_argv(upstream_port: int, port: int, work: str) -> list[str]:
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(
            "daemon off;\nmaster_process off;\nworker_processes 1;\n"
            f"pid {work}/nginx.pid;\nerror_log {work}/error.log warn;\n"
            "events { worker_connections 1024; }\n"
            "http {\n  access_log off;\n"
            f"  client_body_temp_path {work}/body; proxy_temp_path {work}/proxy;\n"
            f"  fastcgi_temp_path {work}/fcgi; uwsgi_temp_path {work}/uwsgi; scgi_temp_path {work}/scgi;\n"
            f"  upstream up {{ server 127.0.0.1:{upstream_port}; keepalive 64; }}\n"
            f"  server {{\n    listen 127.0.0.1:{port};\n"
            "    location / {\n"
            '      proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection "";\n'
            "      proxy_buffering off; proxy_request_buffering off;\n"
            "    }\n  }\n}\n"
        )
    return [shutil.which("nginx") or "nginx", "-c", conf, "-p", work]


def load(port: int, model: str, answers: int) -> None:
    argv = [sys.executable, "-m", "fastsse", "load", f"http://127.0.0.1:{port}/v1", "--model", model]
    argv += [
        "--concurrency",
        "4",
        "--requests",
        str(answers),
        "--quiet",
        "--api-key",
        "x",
        "--timeout",
        "120",
    ]
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=900)


def count(contender: str, model: str, answers: int) -> float:
    """Thousands of instructions per answer of ``contender`` (``nginx`` or ``NAME=SRC``)."""
    up, port = free_port(), free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    script: list[str] = []
    if model.startswith("paced-"):
        script = ["--scripted", "--ttft-ms", "0", "--itl-ms", "10", "--chunks", model.partition("-")[2]]
        model = "scripted"
    upstream = subprocess.Popen(
        [sys.executable, "-m", "fastsse", "serve", *script, "--port", str(up), "--quiet"], **quiet
    )
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "callgrind.out")
        env = dict(os.environ)
        if contender == "nginx":
            argv = nginx_argv(up, port, work)
        elif contender == "loop":  # the prototype of the next data plane (_gateway_peers.py)
            peers = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_gateway_peers.py")
            argv = [sys.executable, peers, "loop", f"http://127.0.0.1:{up}/v1", str(port)]
        else:
            env["PYTHONPATH"] = contender.partition("=")[2]
            argv = [sys.executable, "-m", "fastsse", "gateway", "--upstream", f"http://127.0.0.1:{up}/v1"]
            argv += ["--port", str(port)]
        grind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
        relay = subprocess.Popen([*grind, *argv], env=env, **quiet)
        try:
            wait_port(up)
            wait_port(port, 120)  # valgrind starts slowly
            load(port, model, WARMUP)
            subprocess.run(["callgrind_control", "-i", "on", str(relay.pid)], **quiet, check=True)
            load(port, model, answers)
            subprocess.run(["callgrind_control", "-i", "off", str(relay.pid)], **quiet, check=True)
        finally:
            relay.terminate()
            upstream.terminate()
            relay.wait(60)
            upstream.wait(10)
        total = 0
        for name in glob.glob(out + "*"):
            with open(name) as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("totals:")), 0)
    return total / answers / 1000


def main() -> None:
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    model, answers, contenders = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    for contender in contenders:
        name = contender.partition("=")[0]
        print(
            f"{name}: {count(contender, model, answers):,.0f} k instructions per answer of {model}",
            flush=True,
        )


if __name__ == "__main__":
    main()
