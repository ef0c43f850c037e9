"""``load --ray local --workers 2``: two Ray actors, each with its own AsyncClient on its own event
loop, one central schedule, every record back on one clock, the same summary as one process.

Marked ``ray`` (it starts a local Ray cluster, about 10 s here). Ray is not in the test extra (240 MB
for this one module): ``pip install '.[test,ray]'`` brings it, as CI's compiled build does; without
it the module skips, saying so. The schedule is constant arrivals at 20/s, so request ``i`` (of either actor) is due
``(i + 1) * 50 ms`` after the agreed start: the actors' records, merged, must show that one stream.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from fastsse import load
from fastsse.load import _ray as _load_ray
from fastsse.testing import spawn_scripted_server

# ray is imported by the run, inside the test (not at collection), where its own deprecation
# notices, which differ between Python versions, are not this project's to fail on
pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(scope="module", autouse=True)
def ray() -> Any:
    """ray, imported when the module's test is set up (not at collection, which every run pays for);
    without it the module skips with the reason."""
    return pytest.importorskip(
        "ray", reason="ray is not installed: pip install '.[test,ray]' runs the Ray mode's test"
    )


SLACK_NS = 40_000_000  # two actors' clocks, each mapped onto the run's through one anchor pair
LOADED_NS = 2_000_000_000  # how late a loaded two-core machine may wake an actor


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with spawn_scripted_server(ttft_ms=50, itl_ms=10, chunks=6, loop="asyncio") as srv:
        yield srv


def test_two_ray_actors_return_every_record_on_one_clock(server: Any) -> None:
    options: dict[str, Any] = {
        "url": server.base_url,
        "model": "m",
        "rate": 20.0,
        "arrival": "constant",
        "requests": 10,
        "loop": "asyncio",
        "workers": 2,
    }
    try:
        doc = load.run(load.Config(ray="local", **options))
    finally:
        _load_ray.shutdown()
    s = doc["summary"]
    assert s["requests"] == 10 and s["outcomes"] == {"complete": 10}
    assert sorted(r["index"] for r in doc["requests"]) == list(range(10))
    # two actors, neither of them this process, each a worker of the run
    workers = doc["workers"]
    assert [w["runner"] for w in workers] == ["ray", "ray"]
    assert len({w["pid"] for w in workers} | {os.getpid()}) == 3
    assert {r["worker"] for r in doc["requests"]} == {0, 1}
    # one schedule dealt out: even indexes to actor 0, odd to actor 1, each due (i + 1) x 50 ms
    # after the agreed start, on the run's one clock
    for r in doc["requests"]:
        assert r["worker"] == r["index"] % 2
        assert -SLACK_NS <= r["queued"] - (r["index"] + 1) * 50_000_000 <= LOADED_NS, r["index"]
        assert r["started"] >= r["queued"] - SLACK_NS
        assert r["end"] > r["first_token"] > r["started"]
        assert r["first_token"] - r["started"] >= 50_000_000  # the server is never early
    assert s["output_tokens"] == 10 * 6
    # the same summary schema as one process gives
    single = load.run(load.Config(**{**options, "workers": 1, "requests": 2}))
    assert set(single["summary"]) == set(s)
    assert set(single["workers"][0]) == set(workers[0])
    assert "Ray actors" in load.format_summary(doc)
