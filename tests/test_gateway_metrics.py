"""The gateway's figures: ``Metrics.snapshot`` / ``merge`` adding up the figures of several
processes, ``MetricsShare`` making one page of every worker's (live ones asked on their sockets,
exited ones from their last figures), and ``python -m fastsse gateway --workers 2`` as a real
process: every scrape shows every answer, a worker killed with SIGKILL is replaced without its
counts going back, and the in-flight gauge adds up across workers."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from fastsse.gateway import Metrics, MetricsShare

CHAT = {"model": "plain:event", "messages": [{"role": "user", "content": "hi"}], "stream": True}
ROUTE = (("route", "chat"), ("upstream", "a"))


def sample(page: bytes | str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    text = page.decode() if isinstance(page, bytes) else page
    total = 0.0
    for match in re.finditer(rf"^{re.escape(name)}(?:\{{(.*)\}})? (\S+)$", text, re.M):
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(1) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(match.group(2))
    return total


def figures(requests: int, in_flight: int = 0) -> Metrics:
    metrics = Metrics()
    for i in range(requests):
        metrics.requests.add((*ROUTE, ("status", "200")))
        metrics.duration.observe(ROUTE, 0.25 * (i % 2 + 1))  # values whose sums are exact
        metrics.ttfb.observe(ROUTE, 2**-7)
        metrics.gaps.merge(ROUTE, [0] * 20 + [3], 2**-8)
    metrics.limited.add((("key", "team-a"), ("limit", "rpm")))
    metrics.in_flight = in_flight
    return metrics


def test_snapshots_merge_into_the_sum_of_the_figures() -> None:
    one, two = figures(3, in_flight=2), figures(4, in_flight=1)
    total = Metrics()
    total.merge(one.snapshot())
    total.merge(two.snapshot())
    page = total.render()
    assert sample(page, "fastsse_gateway_requests_total", status="200") == 7
    assert sample(page, "gen_ai_server_request_duration_seconds_count") == 7
    assert sample(page, "fastsse_gateway_time_to_first_byte_seconds_bucket", le="0.01") == 7
    assert sample(page, "gen_ai_server_time_per_output_token_seconds_count") == 21
    assert sample(page, "fastsse_gateway_limited_total", key="team-a", limit="rpm") == 2
    assert sample(page, "fastsse_gateway_in_flight") == 3
    # a process that exited: its counts stay, its gauge does not; a family unknown here is left out
    gone = Metrics()
    gone.merge(
        {**two.snapshot(), "families": {**two.snapshot()["families"], "fastsse_new": [[[], 1]]}}, gauges=False
    )
    assert sample(gone.render(), "fastsse_gateway_in_flight") == 0
    assert sample(gone.render(), "fastsse_gateway_requests_total") == 4
    # the same page as one process counting them all (the snapshot survives JSON)
    alone = figures(7, in_flight=3)
    alone.limited.add((("key", "team-a"), ("limit", "rpm")))
    again = Metrics()
    again.merge(orjson.loads(orjson.dumps(alone.snapshot())))
    assert again.render() == page


def test_large_counts_are_written_in_full() -> None:
    metrics = Metrics()
    metrics.requests.add((("route", "chat"),), 1234567)
    metrics.tokens.observe((("route", "chat"),), 98765432)
    page = metrics.render().decode()
    assert 'fastsse_gateway_requests_total{route="chat"} 1234567\n' in page
    assert 'gen_ai_client_token_usage_sum{route="chat"} 98765432\n' in page


def test_a_share_pages_the_live_workers_and_keeps_the_figures_of_gone_ones(tmp_path: Path) -> None:
    """Three shares on one loop stand for three workers: a page shows all three; one closed (a
    worker that exited) keeps its last figures, without its gauge; one whose socket just stops
    answering (a worker killed) keeps the figures a page last showed of it, never fewer."""

    async def scenario() -> list[bytes]:
        one, two, three = figures(1, in_flight=1), figures(2, in_flight=1), figures(4, in_flight=1)
        shares = [MetricsShare(tmp_path, wait=0.5) for _ in range(3)]
        for share, metrics in zip(shares, (one, two, three), strict=True):
            await share.start(metrics)
        pages = [await shares[0].page(one), await shares[2].page(three)]
        shares[1].close(two)  # exits: its final figures
        two.requests.add((*ROUTE, ("status", "200")), 100)  # after its close: not counted
        server = shares[2]._server  # killed: the socket stops answering, nothing written
        assert server is not None
        server.close()
        three.requests.add((*ROUTE, ("status", "200")), 1000)  # after the last page: lost
        pages.append(await shares[0].page(one))
        shares[0].close(one)
        return pages

    first, second, third = asyncio.run(scenario())
    assert sample(first, "fastsse_gateway_requests_total") == 7
    assert sample(second, "fastsse_gateway_requests_total") == 7
    assert sample(first, "fastsse_gateway_in_flight") == 3
    assert sample(third, "fastsse_gateway_requests_total") == 7
    assert sample(third, "fastsse_gateway_in_flight") == 1
    names = sorted(os.listdir(tmp_path))  # no socket left (the killed one's found stale), 3 figures
    assert [n.rpartition(".")[2] for n in names] == ["json"] * 3, names


# -- the command, with workers -------------------------------------------------------------------

uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
pytest.importorskip("pycurl")

from _gateway_process import GatewayProcess  # noqa: E402
from fastsse.testing.server import LoopbackServer, serve_in_thread  # noqa: E402


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackServer]:
    with serve_in_thread(port=0) as server:
        yield server


def worker_of(rid: str) -> int:
    """The pid of the worker that answered, from its request id (``gw-<pid hex>-...``)."""
    return int(rid.split("-")[1], 16)


def answer(gw: GatewayProcess, n: int, model: str = "plain:event") -> set[int]:
    """``n`` answers, each on a new connection; the pids of the workers that gave them."""
    pids = set()
    for _ in range(n):
        with httpx.Client(timeout=10) as http:
            r = http.post(gw.url + "/v1/chat/completions", json={**CHAT, "model": model})
            assert r.status_code == 200
            pids.add(worker_of(r.headers["x-request-id"]))
    return pids


def scrape(gw: GatewayProcess) -> str:
    with httpx.Client(timeout=10) as http:  # a new connection: any worker
        r = http.get(gw.url + "/metrics")
        assert r.status_code == 200
        return r.text


def test_every_scrape_shows_every_workers_answers(upstream: LoopbackServer) -> None:
    with GatewayProcess([{"name": "a", "base_url": upstream.base_url}], server={"workers": 2}) as gw:
        pids = answer(gw, 30)
        gw.record(29)  # the last one's record is logged: its figures are counted
        pages = [scrape(gw) for _ in range(6)]
    assert len(pids) == 2  # both workers answered: neither alone has the 30
    for page in pages:
        assert sample(page, "fastsse_gateway_requests_total", status="200") == 30
        assert sample(page, "gen_ai_server_request_duration_seconds_count") == 30
        assert sample(page, "fastsse_gateway_time_to_first_byte_seconds_count") == 30
        assert sample(page, "fastsse_gateway_in_flight") == 0


def test_a_worker_killed_is_replaced_and_the_counts_do_not_go_back(upstream: LoopbackServer) -> None:
    with GatewayProcess([{"name": "a", "base_url": upstream.base_url}], server={"workers": 2}) as gw:
        pids = answer(gw, 20)
        gw.record(19)
        assert len(pids) == 2
        before = [sample(scrape(gw), "fastsse_gateway_requests_total") for _ in range(3)]
        victim = min(pids)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while f"worker {victim} exited" not in gw.text() and time.monotonic() < deadline:
            time.sleep(0.05)
        after = [sample(scrape(gw), "fastsse_gateway_requests_total") for _ in range(6)]
        newer = answer(gw, 20)  # the replacement serves too
        gw.record(39)
        last = [sample(scrape(gw), "fastsse_gateway_requests_total") for _ in range(6)]
        text = gw.text()
    assert before == [20] * 3
    assert f"worker {victim} exited (status -9); starting another" in text
    assert after == [20] * 6
    assert victim not in newer
    assert last == [40] * 6


def test_the_in_flight_gauge_adds_up_across_workers(upstream: LoopbackServer) -> None:
    """Slow streams (slow-300: 4.5 s each) on connections of their own, started one by one until
    both workers have some; every scrape counts them all."""
    with GatewayProcess([{"name": "a", "base_url": upstream.base_url}], server={"workers": 2}) as gw:

        async def scenario() -> tuple[list[int], list[float]]:
            ready: list[int] = []
            release = asyncio.Event()
            arrived = asyncio.Event()

            async def one() -> None:
                async with (
                    httpx.AsyncClient(timeout=30) as http,
                    http.stream(
                        "POST", gw.url + "/v1/chat/completions", json={**CHAT, "model": "slow-300"}
                    ) as r,
                ):
                    pieces = r.aiter_raw()  # kept: a dropped iterator would close the response
                    await pieces.__anext__()
                    ready.append(worker_of(r.headers["x-request-id"]))
                    arrived.set()
                    await release.wait()

            tasks = []
            while (len(ready) < 6 or len(set(ready)) < 2) and len(tasks) < 40:
                arrived.clear()
                tasks.append(asyncio.ensure_future(one()))
                await asyncio.wait_for(arrived.wait(), 10)
            gauges = [
                sample(await asyncio.to_thread(scrape, gw), "fastsse_gateway_in_flight") for _ in range(4)
            ]
            release.set()
            await asyncio.gather(*tasks)
            return ready, gauges

        ready, gauges = asyncio.run(scenario())
        deadline = time.monotonic() + 10
        while sample(scrape(gw), "fastsse_gateway_in_flight") and time.monotonic() < deadline:
            time.sleep(0.05)
        final = sample(scrape(gw), "fastsse_gateway_in_flight")
        text = gw.text()
    assert len(set(ready)) == 2, ready
    assert gauges == [len(ready)] * 4, (ready, text[-3000:])
    assert final == 0
