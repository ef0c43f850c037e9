"""The engine under faults, on 127.0.0.1: results delivered as soon as they end, no hang when a
client is used again inside its own loop or from a second thread or loop, idleness judged after
reading, ``timeout`` bounding the wait in the queue, backpressure, and clear errors.

A threaded server in this file scripts each stream by its ``model``: ``long-N`` (N chunks 0.1 s
apart), ``gate-NAME`` (one chunk, then the rest once the test opens gate NAME), ``ping-N`` (N
keep-alive comments 0.1 s apart, then the answer), ``blank-N`` (no Content-Type, N bytes of LF,
then the answer), ``bighead`` (a 2 MiB header), ``many-N`` (N chunks as fast as the socket
takes them). Every wait is bounded: curl timeouts, socket timeouts and wall-clock bounds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

import fastsse
from _memory import traced_peak
from fastsse.client import aio

# every test here runs on both engine drivers (the compiled libcurl driver and pycurl)
pytestmark = pytest.mark.usefixtures("driver")

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def chunk(text: str | None = None, finish: str | None = None, role: bool = False) -> bytes:
    delta: dict[str, Any] = {}
    if role:
        delta["role"] = "assistant"
    if text is not None:
        delta["content"] = text
    body = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + orjson.dumps(body) + b"\n\n"


END = chunk(finish="stop") + b"data: [DONE]\n\n"


def answer(texts: list[str]) -> bytes:
    return chunk(texts[0], role=True) + b"".join(chunk(t) for t in texts[1:]) + END


class Scripted(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.gates: dict[str, threading.Event] = {}
        self.sent: dict[str, int] = {}  # model -> bytes written so far
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}/v1"

    def gate(self, name: str) -> threading.Event:
        return self.gates.setdefault(name, threading.Event())


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(10)
        server: Scripted = self.server  # type: ignore[assignment]
        data = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in data:
                more = conn.recv(65536)
                if not more:
                    return
                data += more
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                (
                    int(x.split(b":")[1])
                    for x in head.split(b"\r\n")
                    if x.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(body) < length:
                body += conn.recv(65536)
            model = orjson.loads(body)["model"]
            kind, _, arg = model.partition("-")
            if kind == "long":
                conn.sendall(SSE_HEAD + chunk("a", role=True))
                for _ in range(int(arg)):
                    time.sleep(0.1)
                    conn.sendall(chunk("a"))
                conn.sendall(END)
            elif kind == "gate":
                conn.sendall(SSE_HEAD + chunk("one", role=True))
                server.gate(arg).wait(10)
                conn.sendall(chunk(" two") + END)
            elif kind == "ping":
                conn.sendall(SSE_HEAD)
                for _ in range(int(arg)):
                    conn.sendall(b": ping\n\n")
                    time.sleep(0.1)
                conn.sendall(answer(["pong"]))
            elif kind == "blank":
                conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
                block = b"\n" * 65536
                for _ in range(int(arg) // len(block)):
                    conn.sendall(block)
                conn.sendall(answer(["after the blanks"]))
            elif kind == "bighead":
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (2 << 20) + b"\r\n" + SSE_HEAD[17:])
                conn.sendall(answer(["never"]))
            elif kind == "many":
                conn.sendall(SSE_HEAD + chunk("w0", role=True))
                count = 0
                for i in range(1, int(arg)):
                    piece = chunk(f" w{i}")
                    conn.sendall(piece)
                    count += len(piece)
                    server.sent[model] = count
                conn.sendall(END)
                server.sent[model] = -1  # all written
            conn.shutdown(socket.SHUT_WR)
            with contextlib.suppress(OSError):
                while conn.recv(65536):
                    pass


@pytest.fixture(scope="module")
def srv() -> Iterator[Scripted]:
    server = Scripted()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        for gate in server.gates.values():
            gate.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Callable[[Any], Any]:
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return lambda coro: uvloop.run(coro)
    return asyncio.run


def req(model: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}]}


def text(result: dict[str, Any]) -> str:
    return str(result["choices"][0]["message"]["content"])


_names = iter(range(1_000_000))


def fresh(prefix: str = "g") -> str:
    return f"{prefix}{next(_names)}"


# 1. a finished transfer is collected at once


def test_async_result_is_delivered_when_it_ends_not_when_another_does(
    srv: Scripted, stream_backend: Any, run: Any
) -> None:
    # S ends in the same curl action that starts N: the running count stays the same, and the
    # result used to wait for the 4 s stream's end.
    gate = fresh()

    async def main() -> float:
        async with fastsse.AsyncClient(base_url=srv.base_url, api_key="x", timeout=10) as client:
            slow = asyncio.create_task(client.create_stream(req("long-40")))
            short = asyncio.create_task(client.create_stream(req(f"gate-{gate}")))
            await asyncio.sleep(0.3)
            new = asyncio.create_task(client.create_stream(req("long-40")))
            await asyncio.sleep(0)  # the new transfer is added; curl's timer is due at once
            srv.gate(gate).set()
            time.sleep(0.1)  # the short answer's end is in its socket before the loop looks
            start = time.monotonic()
            result = await asyncio.wait_for(short, 8)
            took = time.monotonic() - start
            assert text(result) == "one two"
            assert result["verdict"]["complete"] is True
            for task in (slow, new):
                task.cancel()
            return took

    assert run(main()) < 2.0  # not the other stream's end, 3.6 s away (slack for a loaded machine)


# 2. Client.as_completed used again from inside its own loop


def bounded(fn: Callable[[], Any], limit: float = 15.0) -> Any:
    """Run ``fn`` on a thread; fail (not hang) if it has not returned after ``limit`` seconds."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"still running after {limit} s (hung)"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_create_stream_inside_as_completed_does_not_hang(srv: Scripted, stream_backend: Any) -> None:
    def work() -> list[Any]:
        seen = []
        with fastsse.Client(base_url=srv.base_url, api_key="x", timeout=10) as client:
            for index, outcome in client.as_completed([req("long-2"), req("long-8"), req("long-4")]):
                assert not isinstance(outcome, BaseException), outcome
                if index == 0:  # a follow-up while the other two run (and one of them ends)
                    seen.append(("follow-up", text(client.create_stream(req("long-6")))))
                seen.append(index)
        return seen

    assert bounded(work) == [("follow-up", "a" * 7), 0, 2, 1]


def test_two_as_completed_iterators_taken_in_turn(srv: Scripted, stream_backend: Any) -> None:
    def work() -> tuple[list[int], list[int]]:
        with fastsse.Client(base_url=srv.base_url, api_key="x", timeout=10) as client:
            # the first's second request ends while the second iterator drives the engine
            first = client.as_completed([req("long-1"), req("long-3")])
            second = client.as_completed([req("long-5"), req("long-7")])
            a, b = [], []
            for one, two in zip(first, second, strict=True):
                a.append(one[0])
                b.append(two[0])
        return a, b

    assert bounded(work) == ([0, 1], [0, 1])


def test_the_client_inside_its_own_on_chunk_is_a_clear_error(srv: Scripted, stream_backend: Any) -> None:
    with fastsse.Client(base_url=srv.base_url, api_key="x", timeout=10) as client:

        def again(chunk: Any) -> None:
            client.create_stream(req("long-1"))

        with pytest.raises(RuntimeError, match="from inside its own on_chunk"):
            client.create_stream(req("long-1"), again)
        assert text(client.create_stream(req("long-1"))) == "aa"  # still usable


# 3. idle_timeout judged after reading


def test_idle_timeout_survives_a_stalled_loop_sync(srv: Scripted, stream_backend: Any) -> None:
    # The stall comes once both streams flow: the second chunk of request 0, 0.3 s in.
    gate = fresh()
    seen = []

    def slow(index: int, chunk: Any) -> None:
        if index == 0:
            seen.append(chunk)
            if len(seen) == 2:
                time.sleep(1.0)

    opener = threading.Timer(0.3, srv.gate(gate).set)
    opener.start()
    with fastsse.Client(base_url=srv.base_url, api_key="x", timeout=10, idle_timeout=0.5) as client:
        out = client.run([req(f"gate-{gate}"), req("ping-15")], slow)
    opener.join()
    assert not isinstance(out[1], BaseException), out[1]
    assert text(out[1]) == "pong"


def test_idle_timeout_survives_a_stalled_loop_async(srv: Scripted, stream_backend: Any, run: Any) -> None:
    # The loop runs one callback for a whole second; on uvloop its timers run before its reads.
    gate = fresh()

    async def main() -> dict[str, Any]:
        async with fastsse.AsyncClient(base_url=srv.base_url, api_key="x", timeout=10) as client:
            seen = []

            def slow(chunk: Any) -> None:
                seen.append(chunk)
                if len(seen) == 2:
                    time.sleep(1.0)

            pinged = asyncio.create_task(client.create_stream(req("ping-15"), idle_timeout=0.5))
            stalling = asyncio.create_task(client.create_stream(req(f"gate-{gate}"), slow))
            await asyncio.sleep(0.3)
            srv.gate(gate).set()
            await stalling
            return await pinged

    assert text(run(main())) == "pong"


# 6. blank bytes before an untyped body


def test_megabytes_of_blank_lines_before_an_untyped_body_cost_linear_time(
    srv: Scripted, stream_backend: Any
) -> None:
    start = time.monotonic()
    result = fastsse.create_stream(req(f"blank-{16 << 20}"), base_url=srv.base_url, api_key="x", timeout=20)
    took = time.monotonic() - start
    assert text(result) == "after the blanks"
    assert took < 3.0, f"{took:.1f} s for 16 MiB of blank lines"


def test_megabytes_of_blank_lines_before_an_untyped_body_take_no_memory(
    srv: Scripted, stream_backend: Any
) -> None:
    # What the body's head keeps is squeezed to two bytes past 64 KiB, so 16 MiB of blank lines
    # cost a few read buffers, with max_event_bytes set or not. (A whole process's RSS grows some
    # 10 MB on its first request, 64 KiB of blanks or 16 MiB alike: pycurl and libcurl starting.)
    options = {"base_url": srv.base_url, "api_key": "x", "timeout": 20}
    fastsse.create_stream(req("blank-65536"), **options)
    for limit in (None, 1 << 20):
        with traced_peak() as peak:
            result = fastsse.create_stream(req(f"blank-{16 << 20}"), **options, max_event_bytes=limit)
        assert text(result) == "after the blanks"
        assert peak.bytes < 1 << 20, (limit, peak.bytes)


# risks: threads, loops, aclose, queue time, messages


_TWO_THREADS = """
import sys, threading, fastsse
base = sys.argv[1]
req = {"model": "long-5", "messages": []}
client = fastsse.Client(base_url=base, api_key="x", timeout=10)
out, barrier = [], threading.Barrier(2)
def work():
    barrier.wait()
    try:
        res = client.run([req, req, req])
        out.append("ok" if all(not isinstance(r, BaseException) for r in res) else repr(res))
    except RuntimeError as exc:
        out.append("refused" if "another thread" in str(exc) else repr(exc))
    except BaseException as exc:
        out.append(repr(exc))
threads = [threading.Thread(target=work) for _ in range(2)]
[t.start() for t in threads]
[t.join(20) for t in threads]
print(sorted(out))
"""


def test_client_run_from_two_threads_refuses_the_second(srv: Scripted) -> None:
    for _ in range(3):  # the crash this replaces came in 2 of 4 runs
        proc = subprocess.run(
            [sys.executable, "-c", _TWO_THREADS, srv.base_url], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.strip() == "['ok', 'refused']", proc.stdout + proc.stderr[-2000:]


def test_an_async_client_reused_across_two_asyncio_runs_says_how_to_fix_it(
    srv: Scripted, stream_backend: Any
) -> None:
    # the first new user's mistake: a client made at module level, then asyncio.run() twice
    client = fastsse.AsyncClient(base_url=srv.base_url, api_key="x", timeout=5)
    assert text(asyncio.run(client.create_stream(req("long-2")))) == "aaa"
    with pytest.raises(fastsse.UsageError) as info:
        asyncio.run(client.create_stream(req("long-2")))
    words = str(info.value)
    assert "each asyncio.run() starts a new loop" in words
    assert "async with fastsse.AsyncClient(...) as client:" in words


def test_async_client_from_two_loops_at_once_refuses_one(
    srv: Scripted, stream_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = aio._check_loop

    def slow_check(loop: Any) -> None:  # widen the window the two threads race in
        time.sleep(0.2)
        check(loop)

    monkeypatch.setattr(aio, "_check_loop", slow_check)
    client = fastsse.AsyncClient(base_url=srv.base_url, api_key="x", timeout=5)
    out: list[str] = []
    barrier = threading.Barrier(2)

    def work() -> None:
        barrier.wait()
        try:
            result = asyncio.run(client.create_stream(req("long-2")))
            out.append("ok" if text(result) == "aaa" else repr(result))
        except RuntimeError as exc:
            out.append("refused" if "bound to the event loop" in str(exc) else repr(exc))

    threads = [threading.Thread(target=work, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert sorted(out) == ["ok", "refused"]


def test_aclose_tells_the_awaiters_the_client_was_closed(
    srv: Scripted, stream_backend: Any, run: Any
) -> None:
    # Three running, two queued; each awaiting task must learn why (under a TaskGroup a bare
    # CancelledError made the group end normally with no result).
    async def main() -> list[Any]:
        client = fastsse.AsyncClient(base_url=srv.base_url, api_key="x", timeout=10, max_connections=3)
        tasks = [asyncio.create_task(client.create_stream(req("long-30"))) for _ in range(5)]
        await asyncio.sleep(0.3)
        await client.aclose()
        done, _ = await asyncio.wait(tasks, timeout=5)
        assert len(done) == 5
        return [task.exception() if not task.cancelled() else "cancelled" for task in tasks]

    outcomes = run(main())
    assert all(isinstance(exc, aio.ClientClosed) for exc in outcomes), outcomes
    assert "closed" in str(outcomes[0])


def test_timeout_counts_the_wait_for_a_connection_async(srv: Scripted, stream_backend: Any, run: Any) -> None:
    async def main() -> tuple[BaseException | None, float]:
        async with fastsse.AsyncClient(base_url=srv.base_url, api_key="x", max_connections=1) as client:
            slow = asyncio.create_task(client.create_stream(req("long-40"), timeout=10))
            await asyncio.sleep(0.1)
            start = time.monotonic()
            try:
                await client.create_stream(req("long-1"), timeout=1)
            except fastsse.TransportError as exc:
                return exc, time.monotonic() - start
            finally:
                slow.cancel()
            return None, time.monotonic() - start

    exc, took = run(main())
    assert isinstance(exc, fastsse.TransportError) and exc.code == 28, exc
    assert "waiting for a free connection" in str(exc)
    assert 0.9 < took < 3.0  # the 1 s timeout, not 1 s after the 4 s stream frees the connection


def test_timeout_counts_the_wait_for_a_connection_sync(srv: Scripted, stream_backend: Any) -> None:
    with fastsse.Client(base_url=srv.base_url, api_key="x", max_connections=1, timeout=1) as client:
        start = time.monotonic()
        out = {}
        # concurrency 2 over 1 connection: the second request waits in the client's queue
        for index, outcome in client.as_completed([req("long-40"), req("long-1")], concurrency=2):
            out[index] = (outcome, time.monotonic() - start)
    queued, took = out[1]
    assert isinstance(queued, fastsse.TransportError) and queued.code == 28, queued
    assert took < 3.0  # the 1 s timeout, not 1 s after the 4 s stream frees the connection


def test_a_huge_response_header_is_said_in_words(srv: Scripted, stream_backend: Any) -> None:
    with pytest.raises(fastsse.TransportError) as info:
        fastsse.create_stream(req("bighead"), base_url=srv.base_url, api_key="x", timeout=10)
    message = str(info.value)
    assert "size limit" in message
    assert "(curl error 100 (curl error 100)" not in message and message.count("curl error") == 1


# 5. backpressure


def test_stream_buffer_is_bounded_for_a_slow_consumer(srv: Scripted, stream_backend: Any, run: Any) -> None:
    count = 4000

    async def main() -> tuple[int, str, int]:
        async with fastsse.AsyncClient(base_url=srv.base_url, api_key="x", timeout=30) as client:
            most = 0
            taken = 0
            async with client.stream(req(f"many-{count}")) as stream:
                async for _ in stream:
                    taken += 1
                    most = max(most, len(stream._pending))
                    if taken < 400:
                        await asyncio.sleep(0.002)
                result = stream.result()
            return most, text(result), taken

    most, content, _ = run(main())
    assert content == "w0" + "".join(f" w{i}" for i in range(1, count))
    # the bound plus what one 16 KiB read holds (each chunk is over 90 bytes)
    assert most <= aio.STREAM_BUFFER + 16384 // 90, most


def test_relay_on_chunk_holds_the_transfer_until_its_future_is_done(
    srv: Scripted, stream_backend: Any, run: Any
) -> None:
    count = 60000  # about 6 MB: past what the socket buffers hold (loopback's may reach 4 MB)

    async def main() -> tuple[int, int, bytes, dict[str, Any]]:
        loop = asyncio.get_running_loop()
        held = loop.create_future()
        pieces: list[bytes] = []

        def send(piece: bytes) -> Any:
            pieces.append(piece)
            return held if len(pieces) == 1 else None

        async with fastsse.AsyncClient(base_url=srv.base_url, api_key="x", timeout=30) as client:
            task = asyncio.create_task(client.create_stream(req(f"many-{count}"), send, format="relay"))
            await asyncio.sleep(0.6)
            during = len(pieces)
            server_done = srv.sent.get(f"many-{count}", 0)
            held.set_result(None)
            result = await asyncio.wait_for(task, 20)
            return during, server_done, b"".join(pieces), result

    during, server_done, out, result = run(main())
    assert during <= 2, f"{during} pieces arrived while the transfer was held"
    assert server_done != -1, "the server wrote everything while the client was not reading"
    assert out.endswith(b"data: [DONE]\n\n")
    assert result["verdict"]["complete"] is True
    assert text(result) == "w0" + "".join(f" w{i}" for i in range(1, count))


def test_relay_hold_with_the_blocking_client(srv: Scripted, stream_backend: Any) -> None:
    count = 20000
    held: concurrent.futures.Future[None] = concurrent.futures.Future()
    pieces: list[bytes] = []
    stamps: list[float] = []

    def send(piece: bytes) -> Any:
        pieces.append(piece)
        stamps.append(time.monotonic())
        return held if len(pieces) == 1 else None

    timer = threading.Timer(0.6, held.set_result, (None,))
    with fastsse.Client(base_url=srv.base_url, api_key="x", timeout=30) as client:
        start = time.monotonic()
        timer.start()
        result = client.create_stream(req(f"many-{count}"), send, format="relay")
    assert len(stamps) > 2 and stamps[1] - start >= 0.55, "a piece arrived while the transfer was held"
    assert result["verdict"]["complete"] is True
    assert text(result) == "w0" + "".join(f" w{i}" for i in range(1, count))


def test_a_held_transfer_is_not_idle_but_its_timeout_runs(
    srv: Scripted, stream_backend: Any, run: Any
) -> None:
    async def main() -> tuple[BaseException | None, float]:
        held = asyncio.get_running_loop().create_future()  # never done: the consumer never catches up
        async with fastsse.AsyncClient(
            base_url=srv.base_url, api_key="x", timeout=1, idle_timeout=0.3
        ) as client:
            start = time.monotonic()
            try:
                await client.create_stream(req("many-60000"), lambda piece: held, format="relay")
            except fastsse.TransportError as exc:
                return exc, time.monotonic() - start
            return None, time.monotonic() - start

    exc, took = run(main())
    assert isinstance(exc, fastsse.TransportError) and exc.code == 28, exc
    assert "idle_timeout" not in str(exc)
    assert 0.9 < took < 3.0  # the 1 s timeout, with slack for a loaded machine
