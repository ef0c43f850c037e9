"""The gateway's control plane end to end (``python -m fastsse gateway`` as a real process on
127.0.0.1 over scripted upstreams and raw sockets): routes by model with the name sent upstream,
balancing, ejection of a dead upstream and its probe, every upstream out at once, per-key limits
and model globs, the legacy completions API, time to first byte beside time to first content,
``/v1/models`` from the routes and within its timeouts, and SSE keep-alive comments."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("pycurl")

from _gateway_process import GatewayProcess  # noqa: E402
from _raw_server import RawServer, clear_proxies  # noqa: E402
from fastsse.load import scripted_text, serve_scripted_in_thread  # noqa: E402

KEY = "sk-control-test"
AUTH = {"Authorization": f"Bearer {KEY}"}
FAST = "ttft_ms=0,itl_ms=0,chunks=3,usage=final"  # a script: 3 token chunks at once, then usage


def chat(model: str, stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream, **extra}


@pytest.fixture(scope="module")
def scripted() -> Iterator[list[Any]]:
    with serve_scripted_in_thread() as one, serve_scripted_in_thread() as two:
        yield [one, two]


def silent_script(conn: socket.socket) -> None:
    """Accept the request and never answer (the connection stays open until the test ends)."""
    time.sleep(30)


@contextlib.contextmanager
def silent_upstream() -> Iterator[RawServer]:
    server = RawServer(silent_script, threaded=True, backlog=64)
    server.thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.sock.close()


def post(url: str, body: dict[str, Any], path: str = "/v1/chat/completions", **kw: Any) -> httpx.Response:
    return httpx.post(url + path, json=body, headers=kw.pop("headers", None) or AUTH, timeout=30, **kw)


def test_routes_pick_upstreams_by_model_and_rename_the_model(scripted: list[Any]) -> None:
    upstreams = [
        {"name": "one", "base_url": scripted[0].base_url},
        {"name": "two", "base_url": scripted[1].base_url},
    ]
    routes = [
        {"model": "fast", "upstreams": ["one"], "upstream_model": FAST},
        {"model": "claude-*", "upstreams": ["two"], "upstream_model": "ttft_ms=0,itl_ms=0,chunks=2"},
    ]
    with GatewayProcess(upstreams, server={"keys": [KEY]}, routes=routes) as gw:
        before = len(gw.records())
        answer = post(gw.url, chat("fast", stream=False))
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == scripted_text(0, 3)
        assert answer.json()["model"] == FAST  # the name the upstream was sent
        entry = gw.record(before)
        assert (entry["upstream"], entry["model"], entry["upstream_model"]) == ("one", "fast", FAST)

        before = len(gw.records())
        answer = post(gw.url, chat("claude-sonnet", stream=False))
        assert answer.json()["choices"][0]["message"]["content"] == scripted_text(0, 2)
        assert gw.record(before)["upstream"] == "two"

        # an unrouted model: 404 in the caller's API's shape, for chat and for Messages
        missing = post(gw.url, chat("gpt-4o"))
        assert missing.status_code == 404 and "gpt-4o" in missing.json()["error"]["message"]
        body = {"model": "gpt-4o", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        missing = post(gw.url, body, "/v1/messages")
        assert missing.status_code == 404 and missing.json()["type"] == "error"

        # /v1/models: the routes' exact names only (a glob is no model)
        models = httpx.get(gw.url + "/v1/models", headers=AUTH, timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["fast"]


def test_weighted_route_spreads_and_least_busy_balances(scripted: list[Any]) -> None:
    upstreams = [
        {"name": "one", "base_url": scripted[0].base_url, "weight": 1},
        {"name": "two", "base_url": scripted[1].base_url, "weight": 3},
    ]
    routes = [{"model": "m", "upstreams": ["one", "two"], "upstream_model": FAST}]
    with GatewayProcess(upstreams, routes=routes) as gw:
        before = len(gw.records())
        for _ in range(80):
            assert post(gw.url, chat("m", stream=False)).status_code == 200
        chosen = [r["upstream"] for r in gw.records()[before:]]
        # weights 1:3 -> about 20 and 60 of 80; a generous band (binomial sd ~3.9)
        assert 5 <= chosen.count("one") <= 38, chosen


def test_a_silent_upstream_is_ejected_probed_and_reported() -> None:
    with silent_upstream() as dead, serve_scripted_in_thread() as good:
        upstreams = [
            {
                "name": "dead",
                "base_url": dead.base_url,
                "first_byte_timeout": 0.5,
                "eject_after": 2,
                "cooldown_seconds": 2,
            },
            {"name": "good", "base_url": good.base_url},
        ]
        routes = [
            {"model": "m", "upstreams": ["dead", "good"], "balance": "least_busy", "upstream_model": FAST}
        ]
        with GatewayProcess(upstreams, routes=routes) as gw:
            # least_busy with nothing in flight picks either; each request that meets "dead" waits
            # its first-byte timeout, then goes on to "good": the answer still arrives
            for _ in range(12):
                assert post(gw.url, chat("m", stream=False)).status_code == 200
                health = httpx.get(gw.url + "/health", timeout=5).json()
                if health["upstreams"]["dead"]["state"] == "ejected":
                    break
            else:
                pytest.fail("the silent upstream was never ejected")
            tried = dead.connections
            took = []
            for _ in range(5):
                start = time.monotonic()
                assert post(gw.url, chat("m", stream=False)).status_code == 200
                took.append(time.monotonic() - start)
            assert dead.connections == tried  # out of rotation: not tried at all
            assert max(took) < 0.45, took  # no first-byte timeout paid (bound: the timeout itself)
            # after the cooldown, one request probes it (fails: ejected again), the rest go on
            time.sleep(2.2)
            for _ in range(3):
                assert post(gw.url, chat("m", stream=False)).status_code == 200
            deadline = time.monotonic() + 5
            while dead.connections == tried and time.monotonic() < deadline:
                time.sleep(0.05)
            assert dead.connections == tried + 1  # exactly one probe
            metrics = httpx.get(gw.url + "/metrics", timeout=5).text
            assert 'fastsse_gateway_upstream_ejections_total{upstream="dead"}' in metrics


def test_every_upstream_out_answers_503_with_the_soonest_cooldown() -> None:
    with silent_upstream() as dead:
        upstreams = [
            {
                "name": "dead",
                "base_url": dead.base_url,
                "first_byte_timeout": 0.3,
                "eject_after": 1,
                "cooldown_seconds": 20,
            }
        ]
        with GatewayProcess(upstreams) as gw:
            first = post(gw.url, chat("m"))
            assert first.status_code == 504
            deadline = time.monotonic() + 5
            while True:
                answer = post(gw.url, chat("m"))
                if answer.status_code == 503 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert answer.status_code == 503, answer.text
            assert 1 <= int(answer.headers["retry-after"]) <= 20
            assert "out of rotation" in answer.json()["error"]["message"]


def test_key_limits_models_and_names(scripted: list[Any]) -> None:
    upstreams = [{"name": "one", "base_url": scripted[0].base_url}]
    routes = [{"model": "*", "upstreams": ["one"], "upstream_model": FAST}]
    keys = [
        {"name": "team-a", "key": "sk-team-a", "rpm": 3},
        {"name": "team-b", "key": "sk-team-b", "models": ["allowed-*"]},
    ]
    with GatewayProcess(upstreams, routes=routes, keys=keys) as gw:
        a = {"Authorization": "Bearer sk-team-a"}
        codes = [post(gw.url, chat("x", stream=False), headers=a).status_code for _ in range(5)]
        assert codes == [200, 200, 200, 429, 429]
        refused = post(gw.url, chat("x", stream=False), headers=a)
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert refused.json()["error"]["type"] == "rate_limit_error"
        b = {"x-api-key": "sk-team-b"}
        assert post(gw.url, chat("allowed-1", stream=False), headers=b).status_code == 200
        assert post(gw.url, chat("other", stream=False), headers=b).status_code == 403
        assert (
            post(gw.url, chat("x", stream=False), headers={"Authorization": "Bearer nope"}).status_code == 401
        )
        records = gw.records()
        assert {r.get("key") for r in records} >= {"team-a", "team-b"}
        assert not any("sk-team" in json.dumps(r) for r in records)  # the name, never the key
        metrics = httpx.get(gw.url + "/metrics", timeout=5).text
        assert 'fastsse_gateway_limited_total{key="team-a",limit="rpm"} 3' in metrics


def test_ttfb_and_ttft_are_two_figures(scripted: list[Any]) -> None:
    upstreams = [{"name": "one", "base_url": scripted[0].base_url}]
    with GatewayProcess(upstreams) as gw:
        before = len(gw.records())
        with httpx.stream(
            "POST", gw.url + "/v1/chat/completions", json=chat("ttft_ms=1000,itl_ms=0,chunks=2"), timeout=30
        ) as answer:
            assert answer.status_code == 200
            answer.read()
        entry = gw.record(before)
        assert entry["ttfb_ms"] < 800  # the role chunk goes out at once
        assert entry["ttft_ms"] >= 1000
        metrics = httpx.get(gw.url + "/metrics", timeout=5).text
        assert "fastsse_gateway_time_to_first_byte_seconds_bucket" in metrics
        assert "gen_ai_server_time_to_first_token_seconds_bucket" in metrics


def late_script(conn: socket.socket) -> None:
    """Wait 0.25 s after the request, then answer a whole chat stream and close."""
    time.sleep(0.25)
    events = [
        {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}
        for choice in (
            {"index": 0, "delta": {"role": "assistant", "content": "late"}, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": "stop"},
        )
    ]
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
    conn.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def test_latency_learns_from_streamed_answers(scripted: list[Any]) -> None:
    # a streamed answer's time to first byte is the gateway's own stamps (no timing record is
    # kept per upstream read), and the latency balance must still learn from it
    late = RawServer(late_script, threaded=True, backlog=64)
    late.thread.start()
    try:
        upstreams = [
            {"name": "late", "base_url": late.base_url},
            {"name": "soon", "base_url": scripted[0].base_url},
        ]
        routes = [{"model": "m", "upstreams": ["late", "soon"], "balance": "latency", "upstream_model": FAST}]
        with GatewayProcess(upstreams, routes=routes) as gw:
            before = len(gw.records())
            for _ in range(12):
                response = post(gw.url, chat("m"))
                assert response.status_code == 200
                assert response.text.endswith("data: [DONE]\n\n")
            chosen = [r["upstream"] for r in gw.records()[before:]]
            # no sample is best, so each is tried once; then the one 250 ms late loses every pair
            assert chosen.count("late") <= 2, chosen
    finally:
        late.stop.set()
        late.sock.close()


def test_legacy_completions_pass_through_to_chat_upstreams(scripted: list[Any]) -> None:
    upstreams = [{"name": "one", "base_url": scripted[0].base_url}]
    with GatewayProcess(upstreams) as gw:
        sdk = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0, timeout=20)
        try:
            chunks = list(
                sdk.completions.create(model="ttft_ms=0,itl_ms=0,chunks=4", prompt="say it", stream=True)
            )
            assert "".join(c.choices[0].text for c in chunks if c.choices) == scripted_text(0, 4)
            whole = sdk.completions.create(model="ttft_ms=0,itl_ms=0,chunks=3", prompt="say it")
            assert whole.choices[0].text == scripted_text(0, 3)
            assert whole.object == "text_completion"
        finally:
            sdk.close()


def test_legacy_completions_without_a_chat_upstream_is_404(scripted: list[Any]) -> None:
    upstreams = [{"name": "msg", "base_url": scripted[0].base_url, "api": "messages"}]
    with GatewayProcess(upstreams) as gw:
        answer = post(gw.url, {"model": "m", "prompt": "hi", "stream": True}, "/v1/completions")
        assert answer.status_code == 404


def test_models_of_a_silent_upstream_answer_within_its_timeouts() -> None:
    with silent_upstream() as dead:
        upstreams = [
            {"name": "dead", "base_url": dead.base_url, "connect_timeout": 1, "first_byte_timeout": 1}
        ]
        with GatewayProcess(upstreams) as gw:
            start = time.monotonic()
            answer = httpx.get(gw.url + "/v1/models", timeout=30)
            took = time.monotonic() - start
            assert answer.status_code == 502
            assert took < 6, took  # its timeouts are 2 s in all; slack for a loaded machine


def test_keepalive_comments_while_the_upstream_is_silent(scripted: list[Any]) -> None:
    upstreams = [{"name": "one", "base_url": scripted[0].base_url}]
    with GatewayProcess(upstreams, server={"keepalive_seconds": 0.2}) as gw:
        seen: list[tuple[float, bytes]] = []
        start = time.monotonic()
        with httpx.stream(
            "POST", gw.url + "/v1/chat/completions", json=chat("ttft_ms=1500,itl_ms=0,chunks=2"), timeout=30
        ) as answer:
            assert answer.status_code == 200
            for line in answer.iter_lines():
                seen.append((time.monotonic() - start, line.encode()))
        comments = [at for at, line in seen if line.startswith(b":")]
        assert len(comments) >= 3, seen  # 1.5 s of silence, a comment every 0.2 s
        assert seen[-1][1] == b"data: [DONE]" or any(line == b"data: [DONE]" for _, line in seen)


def test_keepalive_then_upstream_error_arrives_as_the_apis_error_event() -> None:
    def late_503(conn: socket.socket) -> None:
        time.sleep(0.8)
        body = b'{"error":{"message":"overloaded","type":"server_error"}}'
        conn.sendall(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )

    server = RawServer(late_503, threaded=True, backlog=16)
    server.thread.start()
    try:
        upstreams = [{"name": "late", "base_url": server.base_url, "eject_after": 0}]
        with GatewayProcess(upstreams, server={"keepalive_seconds": 0.2}) as gw:
            sdk = openai.OpenAI(base_url=gw.url + "/v1", api_key="x", max_retries=0, timeout=20)
            try:
                with pytest.raises(openai.APIError) as caught:
                    list(
                        sdk.chat.completions.create(
                            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                        )
                    )
                assert "overloaded" in str(caught.value)
            finally:
                sdk.close()
    finally:
        server.stop.set()
        server.sock.close()


def test_concurrent_streams_do_not_share_a_probe() -> None:
    """Many callers at once while an upstream's cooldown ends: one probe, not a stampede."""
    with silent_upstream() as dead, serve_scripted_in_thread() as good:
        upstreams = [
            {
                "name": "dead",
                "base_url": dead.base_url,
                "first_byte_timeout": 0.5,
                "eject_after": 1,
                "cooldown_seconds": 1,
            },
            {"name": "good", "base_url": good.base_url},
        ]
        with GatewayProcess(upstreams) as gw:
            assert post(gw.url, chat(FAST, stream=False)).status_code == 200  # dead fails once: out
            time.sleep(1.3)
            tried = dead.connections
            results: list[int] = []

            def one() -> None:
                results.append(post(gw.url, chat(FAST, stream=False)).status_code)

            threads = [threading.Thread(target=one) for _ in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert results == [200] * 16
            assert dead.connections - tried == 1


def reset_script(conn: socket.socket) -> None:
    """Reset the connection (RST, not FIN) once the request was read."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def busy_script(conn: socket.socket) -> None:
    """503 forever, with a JSON error."""
    body = b'{"error":{"message":"busy","type":"server_error"}}'
    conn.sendall(
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
    )


@pytest.mark.parametrize("script", [reset_script, busy_script], ids=["resets", "503-forever"])
def test_a_failing_upstream_goes_out_and_the_fallback_answers(script: Any) -> None:
    bad = RawServer(script, threaded=True, backlog=64)
    bad.thread.start()
    try:
        with serve_scripted_in_thread() as good:
            upstreams = [
                {"name": "bad", "base_url": bad.base_url, "eject_after": 2, "cooldown_seconds": 30},
                {"name": "good", "base_url": good.base_url},
            ]
            routes = [{"model": "m", "upstreams": ["bad"], "fallbacks": ["good"], "upstream_model": FAST}]
            with GatewayProcess(upstreams, routes=routes) as gw:
                for _ in range(6):
                    answer = post(gw.url, chat("m", stream=False))
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["choices"][0]["message"]["content"] == scripted_text(0, 3)
                deadline = time.monotonic() + 5
                while bad.connections > 2 and time.monotonic() < deadline:
                    time.sleep(0.05)  # pragma: no cover - a slow machine
                assert bad.connections == 2  # out after its second failure in a row
                records = gw.records()
                assert [r["upstream"] for r in records[-4:]] == ["good"] * 4
                health = httpx.get(gw.url + "/health", timeout=5).json()
                assert health["upstreams"]["bad"]["state"] == "ejected"
                assert health["upstreams"]["good"]["state"] == "up"
    finally:
        bad.stop.set()
        bad.sock.close()


def test_every_upstream_out_is_a_503_in_the_messages_shape_too() -> None:
    bad = RawServer(busy_script, threaded=True, backlog=64)
    bad.thread.start()
    try:
        upstreams = [
            {"name": "one", "base_url": bad.base_url, "eject_after": 1, "cooldown_seconds": 7},
            {"name": "two", "base_url": bad.base_url, "eject_after": 1, "cooldown_seconds": 12},
        ]
        with GatewayProcess(upstreams) as gw:
            body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
            first = post(gw.url, body, "/v1/messages")
            # the upstream's own 503, as a Messages caller gets it (Anthropic's overloaded: 529)
            assert first.status_code == 529 and first.json()["type"] == "error"
            deadline = time.monotonic() + 5
            while True:
                answer = post(gw.url, body, "/v1/messages")
                if "out of rotation" in answer.text or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert answer.status_code == 503
            error = answer.json()
            assert error["type"] == "error" and error["error"]["type"] == "overloaded_error"
            assert 1 <= int(answer.headers["retry-after"]) <= 7  # the soonest cooldown, not 12
    finally:
        bad.stop.set()
        bad.sock.close()


@pytest.mark.parametrize("caller", ["responses", "chat"])
def test_a_length_limited_responses_answer_is_whole_not_cut(scripted: list[Any], caller: str) -> None:
    # A Responses upstream that stops at max_output_tokens ends with response.incomplete: the
    # answer ended as that API ends answers (chat's finish_reason "length", Messages' max_tokens).
    # The gateway must end the caller's body (the chunked terminator) and log it complete.
    upstreams = [{"name": "resp", "base_url": scripted[0].base_url, "api": "responses"}]
    with GatewayProcess(upstreams, server={"keys": [KEY]}) as gw:
        before = len(gw.records())
        with openai.OpenAI(base_url=gw.url + "/v1", api_key=KEY, max_retries=0, timeout=30) as client:
            if caller == "responses":
                # (the SDK's responses.stream() helper wants response.completed: read the events)
                events = list(
                    client.responses.create(
                        model="ttft_ms=0,itl_ms=0,chunks=none", input="hi", max_output_tokens=3, stream=True
                    )
                )
                assert events[-1].type == "response.incomplete"
                final = events[-1].response
                assert final.status == "incomplete"
                assert final.incomplete_details is not None
                assert final.incomplete_details.reason == "max_output_tokens"
                assert final.output_text == scripted_text(0, 3)
            else:
                parts = client.chat.completions.create(
                    model="ttft_ms=0,itl_ms=0,chunks=none",
                    messages=[{"role": "user", "content": "hi"}],
                    max_tokens=3,
                    stream=True,
                )
                chunks = list(parts)
                assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                assert text == scripted_text(0, 3)
        entry = gw.record(before)
        assert entry["outcome"] == "complete", entry


# issue 44, point 5: /v1/models goes through each upstream's own client (its proxy, its CA, its
# timeouts, the engine's framing), and a cut or oversized list is never served (nor kept) as good


def models_of(upstreams: list[dict[str, Any]], times: int = 1) -> list[tuple[int, bytes]]:
    """``GET /v1/models`` of an in-process gateway over ``upstreams``, ``times`` in a row."""
    import asyncio

    from fastsse.gateway import Gateway, config_from

    gateway = Gateway(config_from({"upstream": upstreams}))
    out: list[tuple[int, bytes]] = []

    async def run() -> None:
        async def receive() -> dict[str, Any]:
            await asyncio.sleep(30)
            return {"type": "http.disconnect"}

        try:
            for _ in range(times):
                sent: list[dict[str, Any]] = []

                async def send(message: dict[str, Any], sent: list[dict[str, Any]] = sent) -> None:
                    sent.append(message)

                scope = {"type": "http", "method": "GET", "path": "/v1/models", "headers": []}
                await gateway(scope, receive, send)
                out.append((sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])))
        finally:
            await gateway.shutdown()

    asyncio.run(run())
    return out


MODEL_LIST = b'{"object":"list","data":[{"id":"m1","object":"model","created":0,"owned_by":"x"}]}'


def answering(status: int, body: bytes) -> Any:
    def script(conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (status, len(body), body)
        )

    return script


def test_models_go_through_the_upstreams_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_proxies(monkeypatch)
    with RawServer(answering(200, MODEL_LIST)) as proxy:
        upstream = {
            "name": "behind",
            "base_url": "http://upstream.invalid/v1",
            "api_key": "sk-up",
            "proxy": f"http://127.0.0.1:{proxy.port}",
        }
        assert models_of([upstream]) == [(200, MODEL_LIST)]
    assert proxy.requests[0].startswith(b"GET http://upstream.invalid/v1/models HTTP/1.1\r\n")
    assert dict(proxy.headers())["authorization"] == "Bearer sk-up"


def test_an_oversized_model_list_is_a_502_and_is_not_kept() -> None:
    huge = b'{"object":"list","data":[' + b'{"id":"m"},' * 500_000 + b'{"id":"m"}]}'  # past 4 MiB
    with RawServer(answering(200, huge)) as raw:
        answers = models_of([{"name": "big", "base_url": raw.base_url}], times=2)
    assert [status for status, _ in answers] == [502, 502]
    assert b"max_body_bytes" in answers[0][1]
    assert raw.connections == 2  # asked again: the failure was not kept


def test_models_keep_an_upstreams_4xx_and_skip_its_5xx() -> None:
    missing = b'{"error":{"message":"no such path","type":"not_found"}}'
    with RawServer(answering(404, missing)) as raw:
        assert models_of([{"name": "a", "base_url": raw.base_url}]) == [(404, missing)]
    broken = b'{"error":{"message":"down","type":"server_error"}}'
    with RawServer(answering(500, broken)) as bad, RawServer(answering(200, MODEL_LIST)) as good:
        upstreams = [{"name": "bad", "base_url": bad.base_url}, {"name": "good", "base_url": good.base_url}]
        # the first upstream's 500 passes to the next; its 200 is kept for MODELS_TTL
        assert models_of(upstreams, times=2) == [(200, MODEL_LIST), (200, MODEL_LIST)]
        assert (bad.connections, good.connections) == (1, 1)
    with RawServer(answering(500, broken)) as bad:
        assert models_of([{"name": "bad", "base_url": bad.base_url}], times=2) == [(500, broken)] * 2
        assert bad.connections == 2


def test_models_of_an_upstream_behind_a_private_ca(tmp_path: Any) -> None:
    from _pki import make_pki, tls_server

    pki = make_pki(tmp_path)
    with tls_server(pki, answering(200, MODEL_LIST)) as raw:
        upstream = {
            "name": "private",
            "base_url": f"https://127.0.0.1:{raw.port}/v1",
            "ca_bundle": str(pki["ca.pem"]),
            "client_cert": str(pki["client-both.pem"]),
        }
        assert models_of([upstream]) == [(200, MODEL_LIST)]
    assert raw.peer_certs == [{"CN": "client"}]
