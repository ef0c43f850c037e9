"""The gateway's ``[[route]]``, ``[[key]]`` and new ``[[upstream]]`` / ``[server]`` fields
(``fastsse.gateway._config``) and the ``Router`` (``fastsse.gateway._router``): which route a model
takes and the order a route's upstreams are tried in (balancing, ejection, probes, fallbacks)."""

from __future__ import annotations

import collections
import os
import pathlib
import random
import subprocess
import sys
import time
from typing import Any

import pytest

from _gateway_process import SRC, GatewayProcess, toml
from fastsse.gateway import ConfigError, config_from, load_config
from fastsse.gateway._config import Key, Route
from fastsse.gateway._router import CACHE_NAME_CHARS, CACHE_SIZE, LATENCY_STALE_S, Router


def up(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "base_url": "http://127.0.0.1:9/v1", **fields}


UPS = [up("a"), up("b"), up("c"), up("d"), up("e")]
NOW = 1_000_000.0


def router(
    routes: list[dict[str, Any]], upstreams: list[dict[str, Any]] | None = None, seed: int = 7
) -> Router:
    return Router(config_from({"upstream": upstreams or UPS, "route": routes}, {}), rng=random.Random(seed))


def names(plan: list[tuple[Any, bool]]) -> list[tuple[str, bool]]:
    return [(u.name, probe) for u, probe in plan]


# --- the configuration ------------------------------------------------------------------------


def test_every_new_field_is_read(tmp_path: pathlib.Path) -> None:
    server = {
        "redis_url": "redis://:secret@127.0.0.1:6379/0",
        "limits_without_redis": "closed",
        "keepalive_seconds": 15,
        "resumable": True,
        "resume_max_bytes": 1000,
        "resume_ttl_seconds": 60,
    }
    upstreams = [up("a", weight=2.5, eject_after=0, cooldown_seconds=5), up("b", weight=0)]
    routes = [
        {
            "model": "claude-*",
            "upstreams": ["a", "b"],
            "balance": "latency",
            "upstream_model": "claude-sonnet-4",
            "fallbacks": ["c"],
        },
        {"model": "gpt-4o", "upstreams": ["c"]},
    ]
    keys = [
        {"name": "team-a", "key": "sk-a", "rpm": 10, "tpm": 1000, "max_streams": 2, "models": ["gpt-*"]},
        {"name": "team-b", "key_env": "TEAM_B_KEY"},
    ]
    path = tmp_path / "gateway.toml"
    path.write_text(toml(server, [*upstreams, up("c")], routes, keys))
    config = load_config(path, {"TEAM_B_KEY": "sk-b"})
    s = config.server
    assert (s.redis_url, s.limits_without_redis, s.keepalive_seconds, s.resumable) == (
        "redis://:secret@127.0.0.1:6379/0",
        "closed",
        15.0,
        True,
    )
    assert (s.resume_max_bytes, s.resume_ttl_seconds) == (1000, 60.0)
    assert "secret" not in repr(s)  # a Redis password never shows in a repr
    a, b, _ = config.upstreams
    assert (a.weight, a.eject_after, a.cooldown_seconds, b.weight) == (2.5, 0, 5.0, 0.0)
    assert config.routes == (
        Route("claude-*", ("a", "b"), "latency", "claude-sonnet-4", ("c",)),
        Route("gpt-4o", ("c",)),
    )
    first, second = config.keys
    assert (first.name, first.key, first.rpm, first.tpm, first.max_streams) == ("team-a", "sk-a", 10, 1000, 2)
    assert (second.name, second.key, second.rpm, second.models) == ("team-b", "sk-b", None, ())
    assert "sk-a" not in repr(first) and "sk-b" not in repr(second)
    assert config.warnings == ()


def test_the_defaults_of_the_new_fields() -> None:
    config = config_from({"upstream": [up("a")]}, {})
    s, a = config.server, config.upstreams[0]
    assert (s.redis_url, s.limits_without_redis, s.keepalive_seconds, s.resumable) == (
        None,
        "open",
        0.0,
        False,
    )
    assert (s.resume_max_bytes, s.resume_ttl_seconds) == (64 << 20, 300.0)
    assert (a.weight, a.eject_after, a.cooldown_seconds) == (1.0, 3, 30.0)
    assert (config.routes, config.keys, config.warnings) == ((), (), ())


R = {"model": "m", "upstreams": ["a"]}
K = {"name": "k", "key": "sk-1"}


@pytest.mark.parametrize(
    ("data", "words"),
    [
        # [[route]]
        ({"route": [{"upstreams": ["a"]}]}, "route[0].model is missing"),
        ({"route": [{"model": "m"}]}, "route[0].upstreams is missing"),
        ({"route": [{**R, "upstreams": []}]}, "route[0] (model 'm').upstreams is empty"),
        (
            {"route": [{**R, "upstreams": ["a", "nope"]}]},
            "route[0] (model 'm').upstreams: no [[upstream]] is named 'nope'",
        ),
        (
            {"route": [R, {**R, "fallbacks": ["gone"]}]},
            "route[1] (model 'm').fallbacks: no [[upstream]] is named 'gone'",
        ),
        ({"route": [{**R, "upstreams": ["a", "a"]}]}, "'a' is named twice"),
        ({"route": [{**R, "fallbacks": ["a"]}]}, "'a' is named twice"),
        ({"route": [{**R, "balance": "random"}]}, "route[0] (model 'm').balance must be one of"),
        ({"route": [{**R, "model": ""}]}, "route[0].model must not be empty"),
        ({"route": [{**R, "model": 4}]}, "route[0].model must be a string"),
        ({"route": [{**R, "upstream_model": ""}]}, "route[0].upstream_model must not be empty"),
        ({"route": [{**R, "upstreams": "a"}]}, "route[0].upstreams must be a list"),
        ({"route": [{**R, "fallback": ["b"]}]}, "unknown field route[0].fallback"),
        ({"route": R}, "routes are an array of tables: [[route]]"),
        # weights
        ({"upstream": [up("a", weight=-1)]}, "upstream[0].weight must be 0 or more"),
        ({"upstream": [up("a", weight="2")]}, "upstream[0].weight must be a number"),
        ({"upstream": [up("a", weight=float("nan"))]}, "upstream[0].weight must be 0 or more"),
        (
            {"upstream": [up("a", weight=0), up("b", weight=0)], "route": [{**R, "upstreams": ["a", "b"]}]},
            "every one has weight 0",
        ),
        (
            {"upstream": [up("a", weight=0)], "route": [{**R, "balance": "least_busy"}]},
            "every one has weight 0",
        ),
        ({"upstream": [up("a", weight=0)]}, "every [[upstream]] has weight 0"),
        ({"upstream": [up("a", eject_after=-1)]}, "upstream[0].eject_after must be 0 or more"),
        ({"upstream": [up("a", eject_after=1.5)]}, "upstream[0].eject_after must be an integer"),
        ({"upstream": [up("a", cooldown_seconds=0)]}, "upstream[0].cooldown_seconds must be above 0"),
        # [[key]]
        ({"key": [{"key": "sk"}]}, "key[0].name is missing"),
        ({"key": [{"name": "k"}]}, "key[0]: give key or key_env"),
        ({"key": [{**K, "key_env": "X"}]}, "key[0]: give key or key_env"),
        ({"key": [{**K, "key": ""}]}, "key[0].key: the key is empty"),
        ({"key": [{**K, "key": "sk 1"}]}, "key[0].key: the key is empty or has a space"),
        (
            {"key": [{"name": "k", "key_env": "FASTSSE_TEST_UNSET"}]},
            "key[0].key_env: the environment variable",
        ),
        ({"key": [{**K, "name": "a b"}]}, "key[0].name 'a b'"),
        ({"key": [K, {**K, "key": "sk-2"}]}, "key[1].name: key[0] is named 'k' too"),
        ({"key": [K, {**K, "name": "k2"}]}, "key[1]: the same key as key[0]"),
        ({"server": {"keys": ["sk-1"]}, "key": [K]}, "key[0]: the same key is in server.keys"),
        ({"key": [{**K, "rpm": 0}]}, "key[0].rpm must be above 0"),
        ({"key": [{**K, "tpm": -5}]}, "key[0].tpm must be above 0"),
        ({"key": [{**K, "max_streams": "2"}]}, "key[0].max_streams must be an integer"),
        ({"key": [{**K, "models": "gpt-*"}]}, "key[0].models must be a list"),
        ({"key": [{**K, "limit": 1}]}, "unknown field key[0].limit"),
        # [server]
        ({"server": {"redis_url": "http://127.0.0.1:6379"}}, "server.redis_url must start with redis://"),
        (
            {"server": {"limits_without_redis": "maybe"}},
            "server.limits_without_redis must be 'open' or 'closed'",
        ),
        ({"server": {"keepalive_seconds": -1}}, "server.keepalive_seconds must be 0 or more"),
        ({"server": {"keepalive_seconds": float("inf")}}, "server.keepalive_seconds must be 0 or more"),
        ({"server": {"resumable": True}}, "server.resumable needs server.redis_url"),
        ({"server": {"resumable": "yes"}}, "server.resumable must be true or false"),
        ({"server": {"resume_max_bytes": 0}}, "server.resume_max_bytes must be above 0"),
        ({"server": {"resume_ttl_seconds": 0}}, "server.resume_ttl_seconds must be above 0"),
        ({"routes": []}, "unknown table [routes]"),
    ],
)
def test_a_bad_field_is_named(data: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from({"upstream": [up("a"), up("b")], **data}, {})
    assert words in str(info.value)
    assert "sk-1" not in str(info.value)  # a key's value is never in a message


def test_a_redis_url_is_not_repeated_in_its_error() -> None:
    with pytest.raises(ConfigError) as info:
        config_from({"server": {"redis_url": "tcp://:hunter2@db:6379"}, "upstream": [up("a")]}, {})
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6379/0", "rediss://cache.example:6380", "unix:///run/redis.sock"]
)
def test_the_redis_schemes(url: str) -> None:
    config = config_from({"server": {"redis_url": url, "resumable": True}, "upstream": [up("a")]}, {})
    assert config.server.redis_url == url and config.server.resumable


@pytest.mark.parametrize(
    ("models", "shadowed"),
    [
        (
            ["claude-*", "claude-3"],
            ["route[1] (model 'claude-3') is shadowed by route[0] (model 'claude-*')"],
        ),
        (["gpt-4o", "gpt-4o"], ["route[1] (model 'gpt-4o') is shadowed by route[0] (model 'gpt-4o')"]),
        (["gpt-?", "gpt-?"], ["route[1] (model 'gpt-?') is shadowed by route[0]"]),
        (["*", "claude-*"], ["route[1] (model 'claude-*') is shadowed by route[0] (model '*')"]),
        (  # one line per shadowed route, naming the first that shadows it
            ["claude-*", "gpt-4o", "claude-*", "claude-3"],
            [
                "route[2] (model 'claude-*') is shadowed by route[0]",
                "route[3] (model 'claude-3') is shadowed by route[0]",
            ],
        ),
        (["claude-3", "claude-*"], []),  # an exact name first: the glob still takes the others
        (["claude-?", "claude-*"], []),  # "claude-10" goes to the second
        (["claude-*", "gpt-4o"], []),
    ],
)
def test_a_shadowed_route_is_a_warning(models: list[str], shadowed: list[str]) -> None:
    config = config_from({"upstream": UPS, "route": [{"model": m, "upstreams": ["a"]} for m in models]}, {})
    assert len(config.warnings) == len(shadowed), config.warnings
    for line, start in zip(config.warnings, shadowed, strict=True):
        assert line.startswith(start), line


def test_limits_per_process_are_a_warning_with_workers() -> None:
    key = {"name": "k", "key": "sk", "rpm": 5}
    config = config_from({"server": {"workers": 2}, "upstream": [up("a")], "key": [key]}, {})
    assert any("per process" in line for line in config.warnings)
    shared = {"workers": 2, "redis_url": "redis://127.0.0.1:1"}
    assert config_from({"server": shared, "upstream": [up("a")], "key": [key]}, {}).warnings == ()


def test_overrides_are_set_over_the_server_table_and_checked(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(toml({"host": "0.0.0.0", "port": 9000, "keys": ["file-key"]}, [up("a")], [R]))
    config = load_config(path, {}, overrides={"port": 0, "host": None, "workers": 3, "log": "text"})
    s = config.server
    assert (s.host, s.port, s.workers, s.log, s.keys) == ("0.0.0.0", 0, 3, "text", ("file-key",))
    assert config.routes == (Route("m", ("a",)),)  # the tables beside [server] are kept
    env = {"GW_KEYS": "k1,k2"}
    config = load_config(path, env, overrides={"keys_env": "GW_KEYS", "keys": []})
    assert config.server.keys == ("k1", "k2")
    with pytest.raises(ConfigError, match=r"server\.port must be 0 to 65535"):
        load_config(path, {}, overrides={"port": 70000})
    with pytest.raises(ConfigError, match="FASTSSE_TEST_UNSET is not set"):
        load_config(path, {}, overrides={"keys_env": "FASTSSE_TEST_UNSET"})
    # without overrides, the file as it is (the positional call of before)
    assert load_config(path, {}).server.port == 9000


def test_keys_allow_their_models() -> None:
    key = Key("k", "sk", models=("gpt-*", "o3"))
    assert key.allows("gpt-4o") and key.allows("o3")
    assert not key.allows("o3-mini") and not key.allows("GPT-4o") and not key.allows(None)
    assert Key("k", "sk").allows("anything") and Key("k", "sk").allows(None)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fastsse", "gateway", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=60,
    )


def test_the_command_stops_on_a_route_to_an_unknown_upstream(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "gateway.toml"
    routes = [{"model": "gpt-*", "upstreams": ["a"]}, {"model": "claude-*", "upstreams": ["a", "anthropic"]}]
    path.write_text(toml({"port": 0}, [up("a")], routes))
    out = _run("--config", str(path), "--port", "0")
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().count("\n") == 0, out.stderr
    assert out.stderr.startswith("fastsse gateway: ")
    assert "route[1] (model 'claude-*').upstreams: no [[upstream]] is named 'anthropic'" in out.stderr


def test_the_command_starts_with_routes_keys_and_flags() -> None:
    # --config beside the flags the command sets over [server]; the new tables do not stop it
    import httpx

    routes = [
        {"model": "claude-*", "upstreams": ["a", "b"], "fallbacks": ["c"]},
        {"model": "gpt-4o", "upstreams": ["c"]},
    ]
    keys = [{"name": "team", "key": "sk-team", "rpm": 100}]
    upstreams = [up("a", weight=2), up("b", weight=0), up("c")]
    args = ["--host", "127.0.0.1", "--port", "0", "--log", "json", "--workers", "1"]
    with GatewayProcess(
        upstreams, server={"keepalive_seconds": 5}, routes=routes, keys=keys, args=args
    ) as gw:
        answer = httpx.get(f"{gw.url}/health", timeout=10)
        assert answer.status_code == 200


# --- the router: which route ------------------------------------------------------------------


def test_routes_match_first_in_order() -> None:
    r = router(
        [
            {"model": "gpt-4o", "upstreams": ["a"]},
            {"model": "claude-*", "upstreams": ["b"]},
            {"model": "claude-3-opus", "upstreams": ["c"]},  # shadowed: claude-* takes it
            {"model": "o[13]-*", "upstreams": ["d"]},
        ]
    )
    got = {
        m: (r.route(m) or Route("-", ("-",))).upstreams
        for m in ("gpt-4o", "claude-3-opus", "o1-mini", "o3-pro")
    }
    assert got == {"gpt-4o": ("a",), "claude-3-opus": ("b",), "o1-mini": ("d",), "o3-pro": ("d",)}
    # case-sensitive, no prefix match, no model at all: unrouted
    for model in ("GPT-4o", "gpt-4o-mini", "o2-mini", "", None):
        assert r.route(model) is None
    assert r.route("claude-x") is r.route("claude-x")  # the same Route object each time (cached)
    assert r.models() == ["gpt-4o", "claude-3-opus"]


def test_a_catch_all_takes_a_request_without_a_model() -> None:
    r = router([{"model": "gpt-4o", "upstreams": ["a"]}, {"model": "*", "upstreams": ["b"]}])
    for model in (None, "", "anything"):
        found = r.route(model)
        assert found is not None and found.upstreams == ("b",)
    assert r.models() == ["gpt-4o"]


def test_without_routes_every_model_takes_every_upstream_in_order() -> None:
    r = Router(config_from({"upstream": UPS}, {}))
    route = r.route("whatever")
    assert route is not None and route is r.route(None) and route.balance == "ordered"
    assert names(r.plan(route, {}, NOW)) == [(n, False) for n in "abcde"]
    assert r.models() == []


def test_the_exact_name_cache_is_bounded() -> None:
    r = router([{"model": "gpt-4o", "upstreams": ["a"]}, {"model": "claude-*", "upstreams": ["b"]}])
    cache = r._cache  # the bound is the point of this test
    for i in range(CACHE_SIZE * 3):
        name = f"claude-{i}" if i % 2 else f"unrouted-{i}"
        assert (r.route(name) is None) == (i % 2 == 0)
        assert len(cache) <= CACHE_SIZE
    assert len(cache) > 0
    long_name = "claude-" + "x" * CACHE_NAME_CHARS
    assert r.route(long_name) is not None and long_name not in cache  # never kept: it is looked up each time
    # the answers stay right across the cache starting again
    assert r.route("gpt-4o") is not None and r.route("claude-1") is not None and r.route("other") is None


# --- the router: the plan ---------------------------------------------------------------------


def test_weighted_picks_by_weight() -> None:
    weights = {"a": 1, "b": 2, "c": 7}
    r = router([{"model": "m", "upstreams": list(weights)}], [up(n, weight=w) for n, w in weights.items()])
    route = r.route("m")
    assert route is not None
    first: collections.Counter[str] = collections.Counter()
    second: collections.Counter[str] = collections.Counter()
    for _ in range(10_000):
        plan = names(r.plan(route, {}, NOW))
        assert sorted(plan) == [("a", False), ("b", False), ("c", False)]  # each once, every time
        first[plan[0][0]] += 1
        second[plan[1][0]] += 1
    # expected 1,000, 2,000 and 7,000 first (a standard deviation of 30 to 46): 300 of slack
    for name, weight in weights.items():
        assert abs(first[name] - weight * 1000) < 300, first
    # second, after the first pick: a is second when b or c came first, P = .2 * 1/8 + .7 * 1/3
    assert abs(second["a"] - 10_000 * (0.2 / 8 + 0.7 / 3)) < 300, second


def test_weighted_two_and_weight_zero() -> None:
    upstreams = [up("a", weight=1), up("b", weight=3), up("z", weight=0)]
    r = router([{"model": "m", "upstreams": ["z", "a", "b"], "fallbacks": ["c"]}], [*upstreams, up("c")])
    route = r.route("m")
    assert route is not None
    first: collections.Counter[str] = collections.Counter()
    for _ in range(10_000):
        plan = names(r.plan(route, {}, NOW))
        assert plan[2:] == [("z", False), ("c", False)]  # weight 0: after the weighted ones, never first
        first[plan[0][0]] += 1
    assert abs(first["b"] - 7500) < 300 and first["z"] == 0, first


def test_least_busy_picks_the_idle_one() -> None:
    r = router([{"model": "m", "upstreams": ["a", "b", "c"], "balance": "least_busy"}])
    route = r.route("m")
    assert route is not None
    for name in ("a", "a", "b"):
        r.started(name)
    for _ in range(100):
        assert names(r.plan(route, {}, NOW)) == [("c", False), ("b", False), ("a", False)]
    r.ended("a", 0.1)
    r.ended("a", None)
    r.started("c")
    r.started("c")
    assert (r.inflight("a"), r.inflight("b"), r.inflight("c")) == (0, 1, 2)
    for _ in range(100):
        assert names(r.plan(route, {}, NOW))[0] == ("a", False)
    r.ended("b", None)  # a tie between a and b: both come first, at random
    firsts = collections.Counter(names(r.plan(route, {}, NOW))[0][0] for _ in range(1000))
    assert firsts["c"] == 0 and firsts["a"] > 300 and firsts["b"] > 300, firsts
    r.ended("b", None)  # more ends than starts never go below 0
    assert r.inflight("b") == 0


def test_latency_prefers_the_faster_average() -> None:
    r = router([{"model": "m", "upstreams": ["a", "b", "c"], "balance": "latency"}])
    route = r.route("m")
    assert route is not None
    # no sample yet counts as best: an upstream not measured gets tried
    r.started("a")
    r.ended("a", 0.05)
    r.started("b")
    r.ended("b", 0.5)
    firsts = collections.Counter(names(r.plan(route, {}, NOW))[0][0] for _ in range(3000))
    assert firsts["b"] == 0 and firsts["c"] > firsts["a"] > 300, firsts
    for _ in range(20):
        r.ended("c", 2.0)
    assert r.ttfb("c") == pytest.approx(2.0)
    firsts = collections.Counter(names(r.plan(route, {}, NOW))[0][0] for _ in range(3000))
    # the power of two choices: the slowest is never first, the fastest wins 2 pairs of 3
    assert firsts["c"] == 0 and abs(firsts["a"] - 2000) < 250, firsts
    # the average decays toward new samples: b becomes the fastest
    for _ in range(10):
        r.ended("b", 0.001)
    assert r.ttfb("b") is not None and r.ttfb("b") < r.ttfb("a")  # type: ignore[operator]
    assert names(r.plan(route, {}, NOW))[-1] == ("c", False)  # the rest: fastest first


def test_a_stale_average_counts_as_none(monkeypatch: pytest.MonkeyPatch) -> None:
    r = router([{"model": "m", "upstreams": ["a", "b"], "balance": "latency"}])
    route = r.route("m")
    assert route is not None
    r.ended("a", 0.01)
    r.ended("b", 5.0)
    assert all(names(r.plan(route, {}, NOW))[0][0] == "a" for _ in range(100))
    later = time.time() + LATENCY_STALE_S + 1
    monkeypatch.setattr(time, "time", lambda: later)
    r.ended("a", 0.01)  # a measured again; b not since: b is tried again
    assert r.ttfb("b") is None
    assert all(names(r.plan(route, {}, NOW))[0][0] == "b" for _ in range(100))


def test_the_plan_with_ejected_upstreams_and_probes() -> None:
    upstreams = [up("a"), up("b"), up("z", weight=0), up("y", weight=0), up("d"), up("e"), up("f")]
    route_ = {
        "model": "m",
        "upstreams": ["a", "b", "z", "y"],
        "fallbacks": ["d", "e", "f"],
        "balance": "ordered",
    }
    r = router([route_], upstreams)
    route = r.route("m")
    assert route is not None
    ejected = {
        "a": NOW,  # cooled (the end is now): a probe, first
        "y": NOW + 10,  # cooling: left out
        "d": NOW - 1,  # cooled: a probe, in its place among the fallbacks
        "f": NOW + 5,  # cooling
    }
    assert names(r.plan(route, ejected, NOW)) == [
        ("a", True),
        ("b", False),
        ("z", False),
        ("d", True),
        ("e", False),
    ]
    assert r.soonest(route, ejected, NOW) == 0.0  # a's cooldown is over
    everything = {name: NOW + 30 - i for i, name in enumerate("abzydef")}  # all cooling: nothing to try
    assert r.plan(route, everything, NOW) == []
    assert r.soonest(route, everything, NOW) == pytest.approx(24.0)  # f's, the soonest
    assert r.soonest(route, {"c": NOW + 3}, NOW) == 0.0  # not one of the route's
    assert r.soonest(route, {}, NOW) == 0.0
    # an upstream of another route being ejected changes nothing here
    assert names(r.plan(route, {"c": NOW + 3}, NOW)) == [
        (n, False) for n in ("a", "b", "z", "y", "d", "e", "f")
    ]


def test_balancing_skips_the_ejected() -> None:
    for balance in ("weighted", "least_busy", "latency"):
        r = router([{"model": "m", "upstreams": ["a", "b", "c"], "balance": balance, "fallbacks": ["d"]}])
        route = r.route("m")
        assert route is not None
        for _ in range(200):
            plan = names(r.plan(route, {"b": NOW + 1, "c": NOW - 1}, NOW))
            assert plan[0] == ("c", True) and plan[1:] == [("a", False), ("d", False)], (balance, plan)


def test_a_route_of_another_config_is_planned() -> None:
    # after a reload, an answer may still hold a Route of the config before
    old = router([{"model": "m", "upstreams": ["b", "a"], "balance": "ordered"}])
    new = router([{"model": "m", "upstreams": ["a"]}])
    route = old.route("m")
    assert route is not None
    assert names(new.plan(route, {}, NOW)) == [("b", False), ("a", False)]


def test_the_default_route_with_weight_zero_and_ejections() -> None:
    r = Router(config_from({"upstream": [up("a", weight=0), up("b"), up("c")]}, {}))
    route = r.route("x")
    assert route is not None
    assert names(r.plan(route, {}, NOW)) == [("b", False), ("c", False), ("a", False)]
    assert names(r.plan(route, {"b": NOW - 1, "c": NOW + 1}, NOW)) == [("b", True), ("a", False)]


def test_a_reloaded_router_keeps_the_counts_of_the_one_before() -> None:
    old = router([{"model": "m", "upstreams": ["a", "b"], "balance": "least_busy"}])
    old.started("a")
    old.ended("b", 0.2)
    new = Router(
        config_from({"upstream": UPS, "route": [{"model": "m", "upstreams": ["a", "b"]}]}, {}), previous=old
    )
    assert new.inflight("a") == 1 and new.ttfb("b") == pytest.approx(0.2)
    old.ended("a", None)  # an answer of the old config ends: the new one sees it
    assert new.inflight("a") == 0
    assert Router(new.config).inflight("a") == 0 and Router(new.config).ttfb("b") is None
