"""The gateway's state shared through a real ``redis-server`` (tests/_redis.py) on 127.0.0.1: two
gateway processes of two workers each enforce one key's ``rpm`` exactly, keep serving when Redis
is killed (limits fail open, or closed) and enforce again once it is back; a resumable stream
whose caller left is read to its end and resumed from the other instance."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("redis")
httpx = pytest.importorskip("httpx")
pytest.importorskip("pycurl")

from _gateway_process import GatewayProcess  # noqa: E402
from _redis import RedisServer, redis_server  # noqa: E402
from fastsse.load import scripted_text, serve_scripted_in_thread  # noqa: E402

FAST = "ttft_ms=0,itl_ms=0,chunks=2,usage=final"


@pytest.fixture(scope="module")
def upstream() -> Iterator[Any]:
    with serve_scripted_in_thread() as server:
        yield server


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


def chat(model: str = FAST, stream: bool = False) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}


async def burst(urls: list[str], key: str, count: int) -> list[int]:
    """``count`` requests at once (250 connections), spread over ``urls``: their statuses. aiohttp,
    not httpx: httpx's pool takes ~40 s to schedule 1,000 waiters on this machine."""
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=250)) as session:

        async def one(i: int) -> int:
            async with session.post(
                urls[i % len(urls)] + "/v1/chat/completions",
                json=chat(),
                headers={"Authorization": f"Bearer {key}"},
                timeout=aiohttp.ClientTimeout(total=60),
            ) as answer:
                await answer.read()
                return answer.status

        return list(await asyncio.gather(*(one(i) for i in range(count))))


def test_rpm_is_exact_across_two_instances_of_two_workers(upstream: Any, redis: RedisServer) -> None:
    server = {"redis_url": redis.url, "workers": 2}
    upstreams = [{"name": "one", "base_url": upstream.base_url}]
    keys = [{"name": "shared", "key": "sk-shared", "rpm": 10}]
    with (
        GatewayProcess(upstreams, server=server, keys=keys) as a,
        GatewayProcess(upstreams, server=server, keys=keys) as b,
    ):
        statuses = asyncio.run(burst([a.url, b.url], "sk-shared", 1000))
    assert statuses.count(200) == 10, sorted(set(statuses))
    assert statuses.count(429) == 990


@pytest.mark.parametrize("mode", ["open", "closed"])
def test_redis_killed_and_restarted(upstream: Any, redis: RedisServer, mode: str) -> None:
    server = {"redis_url": redis.url, "limits_without_redis": mode}
    upstreams = [{"name": "one", "base_url": upstream.base_url}]
    keys = [{"name": "k", "key": "sk-k", "rpm": 3}]
    auth = {"Authorization": "Bearer sk-k"}
    with GatewayProcess(upstreams, server=server, keys=keys) as gw:
        url = gw.url + "/v1/chat/completions"
        assert [httpx.post(url, json=chat(), headers=auth, timeout=30).status_code for _ in range(4)] == [
            200,
            200,
            200,
            429,
        ]
        redis.stop()
        during = [httpx.post(url, json=chat(), headers=auth, timeout=30).status_code for _ in range(4)]
        assert during == ([200] * 4 if mode == "open" else [429] * 4)
        text = gw.text()
        assert text.count("unreachable") == 1, text[-2000:]  # once per outage, not per request
        redis.start()
        deadline = time.monotonic() + 15
        statuses: list[int] = []
        while time.monotonic() < deadline:
            statuses = [httpx.post(url, json=chat(), headers=auth, timeout=30).status_code for _ in range(5)]
            if statuses.count(200) <= 3 and 429 in statuses:
                break
            time.sleep(0.5)
        assert 429 in statuses and statuses.count(200) <= 3, statuses  # the fresh Redis enforces again


def events(raw: bytes) -> list[dict[str, str]]:
    out = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        fields: dict[str, str] = {}
        for line in block.decode().split("\n"):
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
        if fields:
            out.append(fields)
    return out


def test_a_resumable_stream_survives_its_caller_and_resumes_elsewhere(
    upstream: Any, redis: RedisServer
) -> None:
    server = {"redis_url": redis.url, "resumable": True, "keys": ["sk-r", "sk-other"]}
    upstreams = [{"name": "one", "base_url": upstream.base_url}]
    auth = {"Authorization": "Bearer sk-r"}
    model = "ttft_ms=0,itl_ms=40,chunks=30,usage=final"
    with GatewayProcess(upstreams, server=server) as a, GatewayProcess(upstreams, server=server) as b:
        seen = b""
        with httpx.stream(
            "POST", a.url + "/v1/chat/completions", json=chat(model, stream=True), headers=auth, timeout=30
        ) as answer:
            assert answer.status_code == 200
            stream_id = answer.headers["x-fastsse-stream"]
            for piece in answer.iter_raw():
                seen += piece
                if seen.count(b"\n\n") >= 6:
                    break  # the caller leaves mid-answer (a page reload)
        got = events(seen)
        last = [e["id"] for e in got if "id" in e][-1]
        assert last.startswith(stream_id + ":")
        time.sleep(0.2)
        # another instance, same key: every later event once, in order, then the end
        with httpx.stream(
            "GET", b.url + f"/v1/streams/{stream_id}", headers={**auth, "Last-Event-ID": last}, timeout=30
        ) as rest:
            assert rest.status_code == 200
            later = events(rest.read())
        numbers = [int(e["id"].rsplit(":", 1)[1]) for e in later]
        assert numbers == list(range(int(last.rsplit(":", 1)[1]) + 1, numbers[-1] + 1))
        assert later[-1]["data"] == "[DONE]"
        text = "".join(
            (c["choices"][0]["delta"].get("content") or "")
            for e in got + later
            if e.get("data", "").startswith("{")
            for c in [json.loads(e["data"])]
            if c.get("choices")
        )
        assert text == scripted_text(0, 30)
        # the first instance read the answer to its end after its caller left
        entry = a.record(0, lambda r: r.get("stream_id") == stream_id and r.get("route") == "chat")
        assert (entry["outcome"], entry["status"], entry["kept"]) == ("caller_left", 499, True)
        resumed = b.record(0, lambda r: r.get("route") == "resume")
        assert (resumed["outcome"], resumed["status"]) == ("complete", 200)
        # another key, a forged id: 404 alike
        other = httpx.get(
            b.url + f"/v1/streams/{stream_id}",
            headers={"Authorization": "Bearer sk-other", "Last-Event-ID": last},
            timeout=10,
        )
        assert other.status_code == 404
        forged = httpx.get(b.url + "/v1/streams/AAAAAAAAAAAAAAAAAAAAAA", headers=auth, timeout=10)
        assert forged.status_code == 404
