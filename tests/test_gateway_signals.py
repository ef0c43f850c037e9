"""``python -m fastsse gateway`` and the signals a deployment sends, as real processes on 127.0.0.1:
SIGTERM to the main process with streams in flight and new callers arriving (``/health`` 503
``draining``, new requests 503 with Retry-After, the listener open until the streams end whole,
exit 0), a stream still running at the grace's end (logged ``drained``), SIGHUP with a changed
config (swapped in for new requests, streams in flight untouched) and with a broken one (the old
one stays, the reason logged), SIGKILL of the main process (the workers go too), each with one
process and with workers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
pytest.importorskip("pycurl")

from _gateway_process import GatewayProcess, toml  # noqa: E402
from fastsse.testing.server import LoopbackServer, serve_in_thread  # noqa: E402


def chat(model: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[LoopbackServer, LoopbackServer]]:
    with serve_in_thread(port=0) as one, serve_in_thread(port=0) as two:
        yield one, two


def worker_of(rid: str) -> int:
    """The pid of the worker that answered, from its request id (``gw-<pid hex>-...``)."""
    return int(rid.split("-")[1], 16)


def health_pids(url: str, count: int, timeout: float = 15) -> set[int]:
    """The pids of ``count`` distinct workers, from ``/health`` on new connections."""
    pids: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(pids) < count and time.monotonic() < deadline:
        with httpx.Client(timeout=5) as http:
            pids.add(http.get(url + "/health").json()["pid"])
    assert len(pids) == count, pids
    return pids


def exited(pid: int) -> bool:
    """True when ``pid`` is gone (or a zombie nobody reaped yet: it has exited all the same)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


class Streams:
    """``n`` streamed answers of ``model`` on one client, each a connection of its own; ``wait()``
    returns once every one has its first bytes; ``results()`` each body (or the exception)."""

    def __init__(self, url: str, n: int, model: str) -> None:
        self.url, self.n, self.model = url, n, model
        self.started = 0
        self.ready = asyncio.Event()
        limits = httpx.Limits(max_connections=n + 8, max_keepalive_connections=n + 8)
        self.client = httpx.AsyncClient(timeout=60, limits=limits)
        self.tasks = [asyncio.ensure_future(self._one()) for _ in range(n)]

    async def _one(self) -> bytes:
        try:
            async with self.client.stream(
                "POST", self.url + "/v1/chat/completions", json=chat(self.model)
            ) as r:
                assert r.status_code == 200, r.status_code
                pieces = r.aiter_raw()
                got = await pieces.__anext__()
                self._arrived()
                async for piece in pieces:
                    got += piece
                return got
        finally:
            self._arrived(ended=True)

    def _arrived(self, ended: bool = False) -> None:
        if not ended:
            self.started += 1
        if self.started >= self.n or ended:
            self.ready.set()

    async def wait(self, timeout: float = 30) -> None:
        await asyncio.wait_for(self.ready.wait(), timeout)
        assert self.started == self.n, f"{self.started} of {self.n} streams started"

    async def results(self, timeout: float = 60) -> list[Any]:
        try:
            done = await asyncio.wait_for(asyncio.gather(*self.tasks, return_exceptions=True), timeout)
        finally:
            await self.client.aclose()
        return list(done)


async def late_callers(url: str, count: int, pause: float = 0.05) -> list[Any]:
    """``count`` new callers, one after another, each on a new connection: ``(status, body or
    Retry-After)`` of a chat request and of ``/health``, or ``"refused"``. They run on a thread of
    their own: the loop of the streams in flight, busy, could hold a request's head past the
    gateway's ``keep_alive_seconds`` (which then closes the connection)."""

    def call() -> list[Any]:
        out: list[Any] = []
        for _ in range(count):
            try:
                with httpx.Client(timeout=10) as http:
                    r = http.post(url + "/v1/chat/completions", json=chat("plain"))
                    out.append(("chat", r.status_code, r.headers.get("retry-after")))
                with httpx.Client(timeout=10) as http:
                    h = http.get(url + "/health")
                    out.append(("health", h.status_code, h.json().get("status")))
            except httpx.TransportError:
                out.append("refused")
            time.sleep(pause)
        return out

    return await asyncio.to_thread(call)


def posts(url: str, model: str, count: int) -> list[tuple[int, str]]:
    """``count`` requests for ``model``, each on a new connection (so on any worker): the status
    and request id of each."""
    out = []
    for _ in range(count):
        with httpx.Client(timeout=10) as http:
            r = http.post(url + "/v1/chat/completions", json=chat(model))
            out.append((r.status_code, r.headers.get("x-request-id", "")))
    return out


def whole(body: Any) -> bool:
    return isinstance(body, bytes) and body.endswith(b"data: [DONE]\n\n")


# -- SIGTERM ------------------------------------------------------------------------------------


def drain_scenario(gw: GatewayProcess, streams: int, model: str) -> tuple[list[Any], list[Any], int, float]:
    """Start ``streams`` streams, SIGTERM the main process once all are in flight, send new callers
    while they run; the streams' bodies, what the late callers got, the exit status and the
    seconds from the signal to the exit."""
    assert gw.proc is not None

    async def scenario() -> tuple[list[Any], list[Any]]:
        running = Streams(gw.url, streams, model)
        await running.wait()
        gw.signal(signal.SIGTERM)
        await asyncio.sleep(0.3)  # the signal reaches the workers
        late = await late_callers(gw.url, 5)
        return await running.results(), late

    signalled = time.monotonic()
    bodies, late = asyncio.run(scenario())
    code = gw.proc.wait(30)
    return bodies, late, code, time.monotonic() - signalled


@pytest.mark.parametrize(("workers", "http"), [(1, "fastsse"), (2, "fastsse"), (2, "uvicorn")])
def test_sigterm_drains_the_streams_in_flight_refusing_new_callers(
    upstreams: tuple[LoopbackServer, LoopbackServer], workers: int, http: str
) -> None:
    """slow-200: 15 tokens 200 ms apart (3 s), so the late callers come while the streams run.
    ``http``: the command's own server, or uvicorn's (``[server] http``), with the same signals."""
    gw = GatewayProcess(
        [{"name": "a", "base_url": upstreams[0].base_url}],
        server={"workers": workers, "grace_seconds": 20, "http": http},
    ).start()
    try:
        bodies, late, code, _ = drain_scenario(gw, 16, "slow-200")
    finally:
        gw.stop()
    assert all(whole(b) for b in bodies), bodies
    # the listener stays open while the streams run: every late caller is answered 503
    assert late and all(entry != "refused" for entry in late), late
    assert {e for e in late if e[0] == "chat"} == {("chat", 503, "1")}, late
    assert {e for e in late if e[0] == "health"} == {("health", 503, "draining")}, late
    records = [r for r in gw.records() if r["model"] == "slow-200"]
    assert len(records) == 16 and {r["outcome"] for r in records} == {"complete"}, records
    assert code == 0, gw.text()[-2000:]
    gw.dir.cleanup()


@pytest.mark.parametrize("http", ["fastsse", "uvicorn"])
def test_a_stream_past_the_grace_is_cut_and_logged_drained(
    upstreams: tuple[LoopbackServer, LoopbackServer], http: str
) -> None:
    """slow-1000 takes 15 s; the grace is 0.5 s: the stream is cut, logged ``drained``, and the
    process exits well before the stream would have ended."""
    gw = GatewayProcess(
        [{"name": "a", "base_url": upstreams[0].base_url}],
        server={"workers": 2, "grace_seconds": 0.5, "http": http},
    ).start()
    try:
        bodies, _, code, took = drain_scenario(gw, 2, "slow-1000")
    finally:
        gw.stop()
    assert not any(whole(b) for b in bodies), bodies
    records = [r for r in gw.records() if r["model"] == "slow-1000"]
    assert [r["outcome"] for r in records] == ["drained", "drained"], records
    assert code == 0
    assert took < 10, took  # the grace and the shutdown, not the 15 s of the stream
    gw.dir.cleanup()


@pytest.mark.parametrize(
    ("sig", "http"), [(signal.SIGTERM, "fastsse"), (signal.SIGINT, "fastsse"), (signal.SIGTERM, "uvicorn")]
)
def test_a_second_signal_stops_at_once(
    upstreams: tuple[LoopbackServer, LoopbackServer], sig: int, http: str
) -> None:
    """The first signal drains (a 15 s stream, a 30 s grace), the second stops the workers now."""
    gw = GatewayProcess(
        [{"name": "a", "base_url": upstreams[0].base_url}],
        server={"workers": 2, "grace_seconds": 30, "http": http},
    ).start()
    try:
        assert gw.proc is not None

        async def scenario() -> list[Any]:
            running = Streams(gw.url, 2, "slow-1000")
            await running.wait()
            gw.signal(sig)
            await asyncio.sleep(0.5)
            draining = await late_callers(gw.url, 1)
            gw.signal(sig)
            await running.results()
            return draining

        signalled = time.monotonic()
        draining = asyncio.run(scenario())
        code = gw.proc.wait(15)
        took = time.monotonic() - signalled
        text = gw.text()
    finally:
        gw.stop()
        gw.dir.cleanup()
    assert ("health", 503, "draining") in draining, draining
    assert code == 0
    assert took < 10, took  # not the stream's 15 s, nor the grace's 30
    assert f"{signal.Signals(sig).name} again: the workers stop now" in text


@pytest.mark.slow
def test_sigterm_with_256_streams_and_new_callers(upstreams: tuple[LoopbackServer, LoopbackServer]) -> None:
    gw = GatewayProcess(
        [{"name": "a", "base_url": upstreams[0].base_url}],
        # the client's one loop is busy with 256 streams: a head of its may come late
        server={"workers": 2, "grace_seconds": 30, "keep_alive_seconds": 30},
    ).start()
    try:
        bodies, late, code, _ = drain_scenario(gw, 256, "slow-300")
    finally:
        gw.stop()
    assert sum(whole(b) for b in bodies) == 256, [b for b in bodies if not whole(b)][:3]
    assert {e for e in late if e[0] == "chat"} == {("chat", 503, "1")}, late
    records = [r for r in gw.records() if r["model"] == "slow-300"]
    assert len(records) == 256 and {r["outcome"] for r in records} == {"complete"}
    assert code == 0
    gw.dir.cleanup()


# -- SIGHUP -------------------------------------------------------------------------------------


def routed(upstreams: tuple[LoopbackServer, LoopbackServer], *, second: bool, **server: Any) -> str:
    """A config of upstreams a and b where ``slow-*`` goes to a; with ``second``, ``plain`` goes
    to b too (without it, ``plain`` is unrouted: 404)."""
    ups = [{"name": "a", "base_url": upstreams[0].base_url}, {"name": "b", "base_url": upstreams[1].base_url}]
    routes: list[dict[str, Any]] = [
        {"model": "slow-*", "upstreams": ["a"]},
        {"model": "slow-1", "upstreams": ["b"]},  # shadowed by slow-*: a warning
    ]
    if second:
        routes.append({"model": "plain", "upstreams": ["b"]})
    return toml({"host": "127.0.0.1", "port": 0, **server}, ups, routes)


@pytest.mark.parametrize("workers", [1, 2])
def test_sighup_swaps_the_config_in_without_dropping_a_stream(
    upstreams: tuple[LoopbackServer, LoopbackServer], workers: int
) -> None:
    gw = GatewayProcess([{"name": "x", "base_url": upstreams[0].base_url}], server={"workers": workers})
    gw.config.write_text(routed(upstreams, second=False, workers=workers))
    gw.start()
    try:
        assert gw.proc is not None
        with httpx.Client(timeout=10) as http:
            assert http.post(gw.url + "/v1/chat/completions", json=chat("plain")).status_code == 404

        async def scenario() -> tuple[list[Any], list[int], list[str]]:
            running = Streams(gw.url, 4, "slow-200")
            await running.wait()
            # the new config: plain routed to b, a restart-only field changed, one worker more
            gw.config.write_text(routed(upstreams, second=True, workers=workers + 1, log="text"))
            gw.signal(signal.SIGHUP)
            await asyncio.sleep(0.5)  # the main process checks it, the workers' next tick takes it
            answers = await asyncio.to_thread(posts, gw.url, "plain", 8)  # any worker's config
            return await running.results(), [s for s, _ in answers], [rid for _, rid in answers]

        bodies, statuses, rids = asyncio.run(scenario())
        alive = gw.proc.poll() is None
        with httpx.Client(timeout=10) as http:
            after = http.get(gw.url + "/health").json()
    finally:
        code = gw.stop()
    assert alive, gw.text()[-2000:]  # SIGHUP no longer kills the main process
    assert after["status"] == "ok"
    assert all(whole(b) for b in bodies), bodies  # the streams in flight went on, whole
    assert statuses == [200] * 8, statuses
    records = gw.records()
    assert {r["outcome"] for r in records if r["model"] == "slow-200"} == {"complete"}
    assert {r["upstream"] for r in records if r["rid"] in rids} == {"b"}
    text = gw.text()
    assert "server.workers, server.log changed: ignored until a restart" in text
    # the shadowed route is a warning at start and again at the reload, from one process each time
    assert text.count("(model 'slow-1') is shadowed by route[0]") == 2, text[-3000:]
    assert text.count("configuration reloaded in process") == workers, text[-3000:]
    assert code == 0
    gw.dir.cleanup()


@pytest.mark.slow
def test_sighup_during_256_streams(upstreams: tuple[LoopbackServer, LoopbackServer]) -> None:
    gw = GatewayProcess([{"name": "x", "base_url": upstreams[0].base_url}], server={"workers": 2})
    # the client's one loop is busy with 256 streams: a head of its may come late
    gw.config.write_text(routed(upstreams, second=False, workers=2, keep_alive_seconds=30))
    gw.start()
    try:

        async def scenario() -> tuple[list[Any], list[int]]:
            running = Streams(gw.url, 256, "slow-200")
            await running.wait()
            gw.config.write_text(routed(upstreams, second=True, workers=2, keep_alive_seconds=30))
            gw.signal(signal.SIGHUP)
            await asyncio.sleep(1.0)
            answers = await asyncio.to_thread(posts, gw.url, "plain", 6)
            return await running.results(), [status for status, _ in answers]

        bodies, statuses = asyncio.run(scenario())
    finally:
        code = gw.stop()
    assert sum(whole(b) for b in bodies) == 256, [b for b in bodies if not whole(b)][:3]
    assert statuses == [200] * 6
    records = [r for r in gw.records() if r["model"] == "slow-200"]
    assert len(records) == 256 and {r["outcome"] for r in records} == {"complete"}
    assert code == 0
    gw.dir.cleanup()


@pytest.mark.parametrize("workers", [1, 2])
def test_sighup_with_a_broken_config_keeps_the_old_one(
    upstreams: tuple[LoopbackServer, LoopbackServer], workers: int
) -> None:
    with GatewayProcess(
        [{"name": "a", "base_url": upstreams[0].base_url}], server={"workers": workers}
    ) as gw:
        assert gw.proc is not None
        good = gw.config.read_text()
        broken = [
            good + '\n[[route]]\nmodel = "plain"\nupstreams = ["nowhere"]\n',  # an unknown upstream
            good.replace("[server]", "[server]\ngrace_seconds = -1"),
            "this is [not TOML",
        ]
        for text in broken:
            gw.config.write_text(text)
            gw.signal(signal.SIGHUP)
            time.sleep(0.3)
        deadline = time.monotonic() + 10
        while gw.text().count("was not reloaded") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        with httpx.Client(timeout=10) as http:
            statuses = [
                http.post(gw.url + "/v1/chat/completions", json=chat("plain")).status_code for _ in range(4)
            ]
        alive = gw.proc.poll() is None
        # and a good one after the broken ones is taken
        gw.config.write_text(good.replace("[server]", "[server]\nmax_body_bytes = 10"))
        gw.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while gw.text().count("configuration reloaded in process") < workers and time.monotonic() < deadline:
            time.sleep(0.05)
        with httpx.Client(timeout=10) as http:
            too_big = http.post(gw.url + "/v1/chat/completions", json=chat("plain")).status_code
        text = gw.text()
    assert alive
    assert statuses == [200] * 4
    lines = [line for line in text.splitlines() if "was not reloaded" in line]
    assert len(lines) == 3, text[-3000:]  # the main process checks: one line each, not one a worker
    assert "nowhere" in lines[0] and "grace_seconds" in lines[1] and "TOML" in lines[2], lines
    assert too_big == 413


# -- the main process killed ----------------------------------------------------------------------


def test_workers_exit_when_the_main_process_is_killed(
    upstreams: tuple[LoopbackServer, LoopbackServer],
) -> None:
    gw = GatewayProcess([{"name": "a", "base_url": upstreams[0].base_url}], server={"workers": 2}).start()
    pids: set[int] = set()
    try:
        assert gw.proc is not None
        pids = health_pids(gw.url, 2)
        gw.proc.kill()
        gw.proc.wait(5)
        deadline = time.monotonic() + 8
        while not all(exited(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [pid for pid in pids if not exited(pid)]
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        gw.stop()
        gw.dir.cleanup()
    assert left == [], f"workers {left} outlived the main process"
