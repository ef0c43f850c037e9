"""The gateway's configuration (``fastsse.gateway.load_config``) and the command's start: a config
that cannot work stops ``python -m fastsse gateway`` at once with one line and exit 2, never at
the first request."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time
from typing import Any

import pytest

from _gateway_process import SRC, toml
from fastsse.gateway import ConfigError, config_from, load_config

UP = {"name": "primary", "base_url": "http://127.0.0.1:8000/v1"}


def write(tmp_path: pathlib.Path, server: dict[str, Any], upstreams: list[dict[str, Any]]) -> pathlib.Path:
    path = tmp_path / "gateway.toml"
    path.write_text(toml(server, upstreams))
    return path


def test_an_upstream_has_the_clients_defaults_but_the_listed_ones() -> None:
    # The client's table is where defaults are written; the gateway differs only where it says so,
    # and each listed default really differs (a stale entry would hide a copy).
    import dataclasses

    from fastsse.client import OPTIONS
    from fastsse.gateway._config import UPSTREAM_DEFAULTS, Upstream

    client = {option.name: option.default for option in OPTIONS}
    compared = 0
    for field in dataclasses.fields(Upstream):
        if field.name not in client or field.default is dataclasses.MISSING:
            continue
        compared += 1
        if field.name in UPSTREAM_DEFAULTS:
            assert field.default == UPSTREAM_DEFAULTS[field.name] != client[field.name], field.name
        else:
            assert field.default == client[field.name], field.name
    assert compared >= 9 and set(UPSTREAM_DEFAULTS) <= set(client)
    assert UPSTREAM_DEFAULTS["max_retries"] == 0 and UPSTREAM_DEFAULTS["max_connections"] == 1024


def test_every_field_is_read(tmp_path: pathlib.Path) -> None:
    server = {
        "host": "0.0.0.0",
        "port": 9000,
        "keys": ["k1"],
        "keys_env": "GW_KEYS",
        "max_body_bytes": 1000,
        "max_event_bytes": 2000,
        "max_tokens": 100,
        "forward_headers": ["X-Team"],
        "workers": 2,
        "grace_seconds": 5,
        "keep_alive_seconds": 2,
        "log": "text",
        "loop": "asyncio",
    }
    upstreams = [
        {
            **UP,
            "api": "messages",
            "api_key_env": "UP_KEY",
            "connect_timeout": 1,
            "first_byte_timeout": 2.5,
            "idle_timeout": 3,
            "timeout": 60,
            "max_retries": 1,
            "max_connections": 10,
            "first_chunk_gate": True,
            "http2": True,
            "headers": {"X-Env": "prod"},
        },
        {"name": "backup", "base_url": "https://example.invalid/v1", "api_key": "inline"},
    ]
    config = load_config(write(tmp_path, server, upstreams), {"GW_KEYS": "k2, k3", "UP_KEY": "secret"})
    assert config.server.keys == ("k1", "k2", "k3") and config.server.forward_headers == ("x-team",)
    assert (config.server.port, config.server.workers, config.server.grace_seconds) == (9000, 2, 5.0)
    first, second = config.upstreams
    assert (first.api, first.api_key, first.first_byte_timeout, first.headers) == (
        "messages",
        "secret",
        2.5,
        {"X-Env": "prod"},
    )
    assert (second.api, second.api_key, second.idle_timeout) == ("chat", "inline", 300.0)
    assert "secret" not in repr(first)  # a key never shows in a repr (or a traceback)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"server": {"prot": 1}, "upstream": [UP]}, "unknown field server.prot"),
        ({"upstream": [{**UP, "apikey": "x"}]}, "unknown field upstream[0].apikey"),
        ({"servers": {}, "upstream": [UP]}, "unknown table [servers]"),
        ({"upstream": [{**UP, "api_key_env": "NOT_SET_ANYWHERE"}]}, "NOT_SET_ANYWHERE is not set"),
        ({"server": {"keys_env": "NOT_SET_ANYWHERE"}, "upstream": [UP]}, "NOT_SET_ANYWHERE is not set"),
        ({"upstream": [{**UP, "api_key": "a", "api_key_env": "B"}]}, "not both"),
        ({"upstream": [{**UP, "api": "gemini"}]}, "upstream[0].api must be one of"),
        ({"upstream": [{**UP, "base_url": "ftp://x"}]}, "http:// or https://"),
        ({"upstream": [{"name": "x"}]}, "upstream[0].base_url is missing"),
        ({"upstream": [UP, UP]}, "two upstreams are named 'primary'"),
        ({"upstream": []}, "no [[upstream]]"),
        ({"server": {"port": 70000}, "upstream": [UP]}, "server.port must be 0 to 65535"),
        ({"server": {"max_body_bytes": 0}, "upstream": [UP]}, "server.max_body_bytes must be above 0"),
        ({"server": {"workers": True}, "upstream": [UP]}, "server.workers must be an integer"),
        ({"upstream": [{**UP, "idle_timeout": "5"}]}, "upstream[0].idle_timeout must be a number"),
        ({"upstream": [{**UP, "headers": {"X-A": "a\r\nb"}}]}, "CR/LF"),
        ({"server": {"forward_headers": ["bad header"]}, "upstream": [UP]}, "not a header name"),
    ],
)
def test_a_bad_config_names_its_field(data: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from(data, {})
    assert words in str(info.value)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **(env or {}), "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "fastsse", "gateway", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("server", "upstream", "words"),
    [
        ({"colour": "blue"}, UP, "unknown field server.colour"),
        ({}, {**UP, "api_key_env": "FASTSSE_TEST_MISSING_KEY"}, "FASTSSE_TEST_MISSING_KEY is not set"),
    ],
    ids=["unknown-field", "missing-key-variable"],
)
def test_the_command_stops_at_start_with_one_line(
    tmp_path: pathlib.Path, server: Any, upstream: Any, words: str
) -> None:
    out = _run("--config", str(write(tmp_path, server, [upstream])))
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and words in out.stderr, out.stderr
    assert out.stderr.startswith("fastsse gateway: ")


def test_a_config_that_is_not_toml_or_not_there(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[server\nport = 1\n")
    for path, words in ((bad, "is not valid TOML"), (tmp_path / "missing.toml", "cannot read")):
        out = _run("--config", str(path))
        assert out.returncode == 2 and words in out.stderr and out.stderr.strip().count("\n") == 0


def test_flags_need_an_upstream_or_a_config() -> None:
    out = _run()
    assert out.returncode == 2 and "give --config FILE or --upstream URL" in out.stderr
    out = _run("--upstream", "http://127.0.0.1:1/v1", "--keys-env", "FASTSSE_TEST_MISSING_KEYS")
    assert out.returncode == 2 and "FASTSSE_TEST_MISSING_KEYS is not set" in out.stderr


def test_otel_spans_one_per_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    # server.otel: one SERVER span per answer with the GenAI attributes, through the API's tracer
    trace = pytest.importorskip("opentelemetry.trace")
    from fastsse.gateway import Gateway

    spans: list[dict[str, Any]] = []

    class Span:
        def __init__(self, name: str, **kwargs: Any) -> None:
            self.entry = {"name": name, **kwargs}
            spans.append(self.entry)

        def set_attribute(self, key: str, value: Any) -> None:
            self.entry["attributes"][key] = value

        def set_status(self, status: Any) -> None:
            self.entry["status"] = status.status_code.name

        def end(self) -> None:
            self.entry["ended"] = True

    class Tracer:
        def start_span(self, name: str, **kwargs: Any) -> Span:
            return Span(name, **kwargs)

    monkeypatch.setattr(trace, "get_tracer", lambda *a, **k: Tracer())
    gateway = Gateway(config_from({"server": {"otel": True}, "upstream": [UP]}, {}))
    record = {"rid": "r1", "route": "messages", "upstream": "primary", "model": "m", "status": 429}
    gateway._done({**record, "outcome": "error", "why": "HTTP 429"}, time.monotonic_ns())
    gateway._done(
        {**record, "status": 200, "outcome": "complete", "tokens_in": 3, "tokens_out": 5}, time.monotonic_ns()
    )
    first, second = spans
    assert first["name"] == "chat m" and first["kind"] == trace.SpanKind.SERVER and first["ended"]
    assert first["attributes"]["http.response.status_code"] == 429 and first["status"] == "ERROR"
    assert first["attributes"]["error.type"] == "error"
    assert second["attributes"]["gen_ai.usage.output_tokens"] == 5 and "status" not in second


def test_an_upstreams_transport_picks_the_event_loop_or_libcurl() -> None:
    # "auto" (the default): plain http:// streams on the event loop (a LoopLeg over the client);
    # "curl": every request through libcurl; any other value stops the start
    import asyncio

    from fastsse.client import AsyncClient, LoopLeg
    from fastsse.gateway import Gateway

    config = config_from({"upstream": [UP, {**UP, "name": "second", "transport": "curl"}]}, {})
    assert [up.transport for up in config.upstreams] == ["auto", "curl"]
    gateway = Gateway(config)
    asyncio.run(gateway.startup())
    try:
        clients = gateway._plane.clients
        assert type(clients["primary"]) is LoopLeg and type(clients["second"]) is AsyncClient
    finally:
        asyncio.run(gateway.shutdown())
    with pytest.raises(ConfigError, match=r"^upstream\[0\]\.transport must be one of auto, curl, not 'uv'"):
        config_from({"upstream": [{**UP, "transport": "uv"}]}, {})


def test_an_upstream_takes_every_client_option_with_the_clients_checks(tmp_path: pathlib.Path) -> None:
    # proxy, ca_bundle, client_cert, path, driver...: what the library lets a client set, an
    # [[upstream]] sets too, checked by the same option table; the gateway's client gets them
    import asyncio

    from fastsse.gateway import Gateway

    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    up = {**UP, "proxy": "http://127.0.0.1:3128", "ca_bundle": str(bundle), "path": "/chat/completions"}
    config = config_from({"upstream": [up]}, {})
    (upstream,) = config.upstreams
    assert upstream.client == {
        "proxy": "http://127.0.0.1:3128",
        "ca_bundle": str(bundle),
        "path": "/chat/completions",
    }
    gateway = Gateway(config)
    asyncio.run(gateway.startup())
    try:
        client = gateway._plane.clients["primary"]
        defaults = client._engine.defaults
        assert (defaults.proxy, defaults.ca_bundle) == ("http://127.0.0.1:3128", str(bundle))
    finally:
        asyncio.run(gateway.shutdown())
    for bad, words in (
        ({"proxy": "ftp://p:1"}, "proxy"),
        ({"proxy": 3}, "proxy"),
        ({"driver": "libuv"}, "driver"),
    ):
        with pytest.raises(ConfigError, match=r"^upstream\[0\]") as info:
            config_from({"upstream": [{**UP, **bad}]}, {})
        assert words in str(info.value), info.value
    # what the gateway sets itself stays its own
    with pytest.raises(ConfigError, match="unknown field upstream"):
        config_from({"upstream": [{**UP, "raise_for_status": False}]}, {})


def test_the_server_field_http_picks_the_commands_server_or_uvicorn() -> None:
    assert config_from({"upstream": [UP]}, {}).server.http == "fastsse"
    assert config_from({"server": {"http": "uvicorn"}, "upstream": [UP]}, {}).server.http == "uvicorn"
    with pytest.raises(ConfigError, match=r"^server\.http must be one of fastsse, uvicorn, not 'h11'"):
        config_from({"server": {"http": "h11"}, "upstream": [UP]}, {})


@pytest.mark.parametrize("http", ["fastsse", "uvicorn"])
def test_both_servers_give_the_same_answers(http: str) -> None:
    # the same requests through the command's own server and through uvicorn: the same status,
    # head fields and events, and the record logged
    pytest.importorskip("pycurl")
    if http == "uvicorn":
        pytest.importorskip("uvicorn")
    import httpx

    from _gateway_process import GatewayProcess
    from fastsse.testing.server import serve_in_thread

    body = {"model": "long-5", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with (
        serve_in_thread(port=0) as upstream,
        GatewayProcess([{"name": "loopback", "base_url": upstream.base_url}], server={"http": http}) as gw,
        httpx.Client(timeout=10) as client,
    ):
        answer = client.post(gw.url + "/v1/chat/completions", json=body)
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert answer.headers["transfer-encoding"] == "chunked" and "server" not in answer.headers
        lines = [line for line in answer.text.split("\n") if line.startswith("data: ")]
        assert len(lines) == 8 and lines[-1] == "data: [DONE]"  # role, 5 words, finish, [DONE]
        missing = client.post(gw.url + "/v1/nothing", json=body)
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
        health = client.get(gw.url + "/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        record = gw.record(0, lambda r: r.get("model") == "long-5")
        assert (record["status"], record["outcome"]) == (200, "complete")
        # nothing went to the loop's exception handler (a callback that raised logs an error)
        assert '"level":"error"' not in gw.log.read_text(), gw.log.read_text()
