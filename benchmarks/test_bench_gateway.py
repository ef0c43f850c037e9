"""``python -m fastsse gateway`` against hand-written gateways and the LiteLLM proxy, on one scripted
upstream and one load client: CPU per chunk, added time to first token, added latency of a whole
answer, memory, and whether 1,000 streams are held.

Every gateway runs as its own process pinned to core 1 (``taskset``; the issue's setup), the
scripted upstream (``python -m fastsse serve --scripted``) and the load client (``python -m
fastsse load``) on core 0. The upstream's script is chosen per run through the model name
(``ttft_ms=50,itl_ms=20``: 100 chunks, one per upstream write). CPU per chunk is the gateway's
process CPU time (user + system, its whole process tree) over the run, divided by the token
chunks the client received; "added" figures are the gateway run's percentile minus the direct
run's (the client straight to the upstream), both from the load client's own records.

The contenders: ``fastsse`` (the command, default options: its upstream leg on the event loop),
``fastsse-uvicorn`` (the same command with ``[server] http = "uvicorn"``: the caller's side under
uvicorn, as before the command's own server), ``fastsse-curl`` (the same command with
``transport = "curl"``: the upstream leg through libcurl, as before the loop's), ``httpx`` (a Starlette app over one
``httpx.AsyncClient``, bytes passed through, uvicorn), ``aiohttp`` (``aiohttp.web`` over one
``ClientSession``, bytes passed through), ``loop`` (a prototype of the next data plane: the upstream
leg on uvloop with llhttp and the compiled relay, ``_gateway_peers.loop_main``), ``loop-c`` (the same
with each answer's body relayed in C: ``reference/body_pump.pyx``, built on first use with Cython) and ``litellm`` (``litellm --config`` with callbacks and
spend logs off) where its command is found (``FASTSSE_BENCH_LITELLM``, else ``litellm`` on PATH).
``fastsse-before`` is the command from another tree (``FASTSSE_BENCH_BEFORE``: its ``src`` folder,
extensions built), beside this one in the same run: before and after, on the same machine state.

    python -m pytest benchmarks/test_bench_gateway.py --benchmark-enable -s   # the table (~4 min)
    FASTSSE_GATEWAY_TABLE=gateway.md ...                                             # and write it there

With benchmarks disabled (CI) it is a short plain test of the same harness (8 streams).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("pycurl")
pytest.importorskip("uvicorn")

import fastsse
from fastsse.load import spawn_scripted_server

HERE = pathlib.Path(__file__).resolve().parent
SRC = str(pathlib.Path(fastsse.__file__).resolve().parents[1])
PY = sys.executable
CORES = os.cpu_count() or 1
GATEWAY_CPU, CLIENT_CPU = ("1", "0") if CORES >= 2 else (None, None)


def _pinned(argv: list[str], cpu: str | None) -> list[str]:
    return ["taskset", "-c", cpu, *argv] if cpu is not None and shutil.which("taskset") else argv


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{entry}/stat") as stat:
                parents.setdefault(int(stat.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo += parents.get(current, [])
    return out


def _cpu(pid: int) -> float:
    """User + system seconds of ``pid``'s process tree."""
    total = 0.0
    for one in _tree(pid):
        with contextlib.suppress(OSError):
            with open(f"/proc/{one}/stat") as stat:
                parts = stat.read().rsplit(")", 1)[1].split()
            total += (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _hwm_mb(pid: int) -> float:
    """The peak RSS (VmHWM) of ``pid``'s process tree, summed, in MB."""
    total = 0
    for one in _tree(pid):
        with contextlib.suppress(OSError), open(f"/proc/{one}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
    return total / 1024


@contextlib.contextmanager
def _process(
    argv: list[str], port: int, log: pathlib.Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "wb") as sink:
        proc = subprocess.Popen(
            _pinned(argv, GATEWAY_CPU), env=env or _env(), stdout=sink, stderr=sink, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 90
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv[:4]} did not start:\n{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        time.sleep(0.5)  # past the first accept: the server's start-up CPU is not the run's
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


LITELLM_KEY = "sk-fastsse-bench-0123456789abcdef0123456789abcdef"  # the proxy refuses to start without one


def _nginx(upstream: str, port: int, work: pathlib.Path) -> list[str]:
    """nginx as a C byte relay (the floor): one worker, ``proxy_pass`` with buffering off, HTTP/1.1
    with kept connections to the upstream, no access log."""
    base = upstream.split("://", 1)[1].split("/", 1)[0]
    root = work / "nginx"
    root.mkdir(exist_ok=True)
    conf = root / "nginx.conf"
    conf.write_text(
        "daemon off;\nworker_processes 1;\n"
        f"pid {root}/nginx.pid;\nerror_log {root}/error.log warn;\n"
        "events { worker_connections 8192; }\n"
        "http {\n"
        "  access_log off;\n"
        f"  client_body_temp_path {root}/body; proxy_temp_path {root}/proxy;\n"
        f"  fastcgi_temp_path {root}/fcgi; uwsgi_temp_path {root}/uwsgi; scgi_temp_path {root}/scgi;\n"
        f"  upstream up {{ server {base}; keepalive 1024; }}\n"
        f"  server {{\n    listen 127.0.0.1:{port} backlog=4096;\n"
        "    location / {\n"
        '      proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection "";\n'
        "      proxy_buffering off; proxy_request_buffering off;\n"
        "      proxy_read_timeout 600s;\n"
        "    }\n  }\n}\n"
    )
    return [shutil.which("nginx") or "nginx", "-c", str(conf), "-p", str(root)]


def _litellm() -> str | None:
    return os.environ.get("FASTSSE_BENCH_LITELLM") or shutil.which("litellm")


@contextlib.contextmanager
def contender(name: str, upstream: str, work: pathlib.Path) -> Iterator[tuple[str, int]]:
    """Start gateway ``name`` over ``upstream``: (its base URL, its pid)."""
    port = _free_port()
    log = work / f"{name}.log"
    env = None
    if name in ("fastsse", "fastsse-before"):
        argv = [PY, "-m", "fastsse", "gateway", "--upstream", upstream, "--port", str(port)]
        if name == "fastsse-before":
            env = dict(os.environ, PYTHONPATH=os.environ["FASTSSE_BENCH_BEFORE"])
    elif name in ("fastsse-curl", "fastsse-uvicorn"):  # the command with one part as before
        config = work / f"{name}.toml"
        server = '[server]\nhttp = "uvicorn"\n\n' if name == "fastsse-uvicorn" else ""
        leg = 'transport = "curl"\n' if name == "fastsse-curl" else ""
        config.write_text(f'{server}[[upstream]]\nname = "upstream"\nbase_url = "{upstream}"\n{leg}')
        argv = [PY, "-m", "fastsse", "gateway", "--config", str(config), "--port", str(port)]
    elif name in ("httpx", "aiohttp", "loop", "loop-raw", "loop-c"):
        argv = [PY, str(HERE / "_gateway_peers.py"), name, upstream, str(port)]
    elif name == "nginx":
        argv = _nginx(upstream, port, work)
    elif name == "litellm":
        config = work / "litellm.yaml"
        config.write_text(
            "model_list:\n"
            '  - model_name: "*"\n'
            "    litellm_params:\n"
            '      model: "openai/*"\n'
            f'      api_base: "{upstream}"\n'
            '      api_key: "x"\n'
            "litellm_settings:\n"
            "  drop_params: true\n"
            "  turn_off_message_logging: true\n"
            "general_settings:\n"
            f'  master_key: "{LITELLM_KEY}"\n'
            "  disable_spend_logs: true\n"
            "  disable_error_logs: true\n"
        )
        command = _litellm()
        assert command is not None
        argv = [
            command,
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--num_workers",
            "1",
        ]
    else:
        raise ValueError(name)
    with _process(argv, port, log, env) as proc:
        yield f"http://127.0.0.1:{port}/v1", proc.pid


@dataclass
class Run:
    """One load run's figures (ms unless named otherwise)."""

    requests: int
    complete: int
    chunks: int
    ttft_p50: float
    ttft_p99: float
    e2e_p50: float
    e2e_p99: float
    rps: float
    cpu_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def us_per_chunk(self) -> float:
        return 1e6 * self.cpu_s / self.chunks if self.chunks else float("nan")


def load(
    url: str,
    model: str,
    concurrency: int,
    requests: int,
    work: pathlib.Path,
    pid: int | None = None,
    key: str = "x",
) -> Run:
    out = work / "load.json"
    argv = [PY, "-m", "fastsse", "load", url, "--model", model, "--concurrency", str(concurrency)]
    argv += ["--requests", str(requests), "--json", str(out), "--quiet", "--timeout", "120", "--api-key", key]
    before = _cpu(pid) if pid else 0.0
    subprocess.run(
        _pinned(argv, CLIENT_CPU),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=600,
        check=False,
    )
    used = _cpu(pid) - before if pid else 0.0
    summary = json.loads(out.read_text())["summary"]

    def pct(key: str, q: str) -> float:
        value = (summary.get(key) or {}).get(q)
        return float(value) if value is not None else float("nan")

    return Run(
        requests=summary["requests"],
        complete=summary["outcomes"].get("complete", 0),
        chunks=summary["token_chunks"],
        ttft_p50=pct("ttft_ms", "p50"),
        ttft_p99=pct("ttft_ms", "p99"),
        e2e_p50=pct("e2e_ms", "p50"),
        e2e_p99=pct("e2e_ms", "p99"),
        rps=summary["requests_per_s"],
        cpu_s=used,
    )


# (name, the upstream's script, concurrency, requests): the scenarios. Each script is a
# scripted server of its own (its defaults), the model name plain: LiteLLM reads a model name with
# commas as a list of models (a batch completion), so the script cannot ride in the name.
SLOW = (("ttft_ms", 50), ("itl_ms", 20), ("chunks", 100))
FAST = (("ttft_ms", 0), ("itl_ms", 0), ("chunks", 100))
SHORT = (("ttft_ms", 0), ("itl_ms", 0), ("chunks", 20))
FULL = [("c64", SLOW, 64, 192), ("c256", SLOW, 256, 512), ("nodelay", FAST, 256, 512), ("c1", SHORT, 1, 300)]
QUICK_SLOW = (("ttft_ms", 20), ("itl_ms", 5), ("chunks", 10))
QUICK = [
    ("c64", QUICK_SLOW, 8, 16),
    ("c256", QUICK_SLOW, 8, 16),
    ("nodelay", SHORT, 8, 16),
    ("c1", SHORT, 1, 10),
]
HELD = ("c1000", SLOW, 1000, 1000)


def table(
    rows: dict[str, dict[str, Run]],
    direct: dict[str, Run],
    rss: dict[str, float],
    held: dict[str, Run],
    load_avg: tuple[float, float],
) -> str:
    lines = [
        f"2 cores, each gateway pinned to core {GATEWAY_CPU}, upstream and client on core {CLIENT_CPU}; "
        f"load average {load_avg[0]:.2f} before, {load_avg[1]:.2f} after (1.0 is this benchmark alone)",
        "",
        f"| gateway | C=64, 20 ms: TTFT p50 over direct | CPU per chunk | C=256, 20 ms: TTFT p50 over direct "
        f"| CPU per chunk | req/s (direct {direct['c256'].rps:.0f}) | no delay, C=256: CPU per chunk "
        f"| C=1, 20 chunks: added p50 / p99 | RSS | C=1000 held |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in rows.items():
        c64, c256, nodelay, c1 = runs["c64"], runs["c256"], runs["nodelay"], runs["c1"]

        def over(run: Run, base: Run) -> str:
            return f"{run.ttft_p50 - base.ttft_p50:+.1f} ms (p99 {run.ttft_p99 - base.ttft_p99:+.1f})"

        def done(run: Run) -> str:
            return "" if run.complete == run.requests else f" ({run.complete}/{run.requests} complete)"

        one = f"{c1.e2e_p50 - direct['c1'].e2e_p50:+.2f} / {c1.e2e_p99 - direct['c1'].e2e_p99:+.2f} ms"
        hold = held.get(name)
        kept = (
            "-"
            if hold is None
            else f"{hold.complete}/{hold.requests}, TTFT p50 {hold.ttft_p50:.0f} ms, RSS {hold.extra['rss_mb']:.0f} MB"
        )
        lines.append(
            f"| {name} | {over(c64, direct['c64'])}{done(c64)} | {c64.us_per_chunk:.1f} µs | {over(c256, direct['c256'])}{done(c256)} "
            f"| {c256.us_per_chunk:.1f} µs | {c256.rps:.1f} | {nodelay.us_per_chunk:.1f} µs{done(nodelay)} | {one}{done(c1)} "
            f"| {rss[name]:.0f} MB | {kept} |"
        )
    lines.append("")
    lines.append(
        "direct: "
        + ", ".join(
            f"{k} TTFT p50 {v.ttft_p50:.1f} ms, E2E p50 {v.e2e_p50:.1f} / p99 {v.e2e_p99:.1f} ms"
            for k, v in direct.items()
        )
    )
    return "\n".join(lines)


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _contenders(quick: bool) -> list[str]:
    names = ["fastsse", "fastsse-curl", "httpx", "aiohttp"]
    if os.environ.get("FASTSSE_BENCH_BEFORE"):
        names.insert(1, "fastsse-before")
    if not quick and _importable("uvicorn"):
        names.insert(1, "fastsse-uvicorn")
    if fastsse.BACKEND == "cython" and _importable("uvloop") and _importable("httptools"):
        names.append("loop")  # the prototype of the next data plane (needs the compiled relay)
        if not quick:
            names.append("loop-raw")  # the same, bytes passed through: the design's floor
            names.append("loop-c")  # the same with the body phase in C (reference/body_pump.pyx)
    if shutil.which("nginx"):
        names.insert(0, "nginx")
    if _litellm() and not quick:
        names.append("litellm")
    if os.environ.get("FASTSSE_BENCH_GATEWAYS"):
        names = [n for n in os.environ["FASTSSE_BENCH_GATEWAYS"].split(",") if n in names]
    return names


def test_gateway_table(benchmark: Any, quick: bool) -> None:
    scenarios = QUICK if quick else FULL
    load_before = os.getloadavg()[0]
    work = pathlib.Path(tempfile.mkdtemp(prefix="fastsse-gw-bench-"))
    rows: dict[str, dict[str, Run]] = {}
    rss: dict[str, float] = {}
    held: dict[str, Run] = {}
    direct: dict[str, Run] = {}
    scripts = list(dict.fromkeys(script for _, script, _, _ in scenarios))
    for script in scripts:
        runs = [(key, c, n) for key, one, c, n in scenarios if one == script]
        with spawn_scripted_server(cpu=int(CLIENT_CPU) if CLIENT_CPU else None, **dict(script)) as upstream:
            direct.update({key: load(upstream.base_url, "scripted", c, n, work) for key, c, n in runs})
            for name in _contenders(quick):
                if name in rows and rows[name] is None:
                    continue  # it would not start on an earlier upstream
                secret = LITELLM_KEY if name == "litellm" else "x"
                try:
                    with contender(name, upstream.base_url, work) as (url, pid):
                        got = {key: load(url, "scripted", c, n, work, pid, secret) for key, c, n in runs}
                        rows.setdefault(name, {}).update(got)
                        rss[name] = max(rss.get(name, 0.0), _hwm_mb(pid))  # the peak up to C=256
                        if not quick and name == "fastsse" and script == HELD[1]:
                            held[name] = load(url, "scripted", HELD[2], HELD[3], work, pid)
                            held[name].extra["rss_mb"] = _hwm_mb(pid)
                except RuntimeError as exc:  # a peer that would not start: the table says so
                    if name == "fastsse":
                        raise
                    rows[name] = None  # type: ignore[assignment]
                    print(f"\n{name} left out: {str(exc)[:300]}")
    rows = {name: runs for name, runs in rows.items() if runs is not None}
    text = table(rows, direct, rss, held, (load_before, os.getloadavg()[0]))
    print("\n" + text)
    if os.environ.get("FASTSSE_GATEWAY_TABLE"):
        pathlib.Path(os.environ["FASTSSE_GATEWAY_TABLE"]).write_text(text + "\n")
    shutil.rmtree(work, ignore_errors=True)
    fast = rows["fastsse"]
    assert all(run.complete == run.requests for run in fast.values())
    assert all(run.complete == run.requests for run in held.values())
    benchmark.group = "gateway"
    benchmark.extra_info.update(
        {
            name: {
                k: {
                    "us_per_chunk": r.us_per_chunk,
                    "ttft_p50": r.ttft_p50,
                    "e2e_p50": r.e2e_p50,
                    "e2e_p99": r.e2e_p99,
                }
                for k, r in runs.items()
            }
            for name, runs in rows.items()
        }
    )
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
