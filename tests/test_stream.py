"""create_stream over real pycurl against the loopback server on 127.0.0.1, on both backends;
iter_events / aiter_events / iter_chunks with httpx against the same server; the demo command."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pycurl
import pytest

import fastsse
import fastsse.client.sync
from fastsse.testing.server import expected_completion, serve_in_thread

# with the library's default retries (conftest.default_retries)
pytestmark = pytest.mark.default_retries

KEY = "sk-test-loopback"


@pytest.fixture(scope="module")
def locked_server() -> Iterator[Any]:
    with serve_in_thread(port=0, api_key=KEY) as srv:
        yield srv


def request(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], **extra}


def call(server: Any, model: str, on_chunk: Any = None, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("timeout", 20)
    return fastsse.create_stream(request(model), on_chunk, base_url=server.base_url, api_key="x", **kwargs)


def messages(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """Each choice's message with null fields dropped (the fold lists ``refusal: null`` as OpenAI does)."""
    return [{k: v for k, v in c["message"].items() if v is not None} for c in completion["choices"]]


@pytest.mark.parametrize("model", ["plain", "tools", "reasoning", "refusal", "n2", "crlf"])
def test_scenarios_fold_to_the_non_streaming_answer(server: Any, stream_backend: Any, model: str) -> None:
    seen: list[dict[str, Any]] = []
    result = call(server, model, seen.append)
    want = expected_completion(request(model))
    assert messages(result) == messages(want)
    assert [c["finish_reason"] for c in result["choices"]] == [c["finish_reason"] for c in want["choices"]]
    assert result["id"] == want["id"] and result["model"] == want["model"]
    assert seen and all(isinstance(c, dict) for c in seen)
    assert result["verdict"]["complete"] is True


def test_usage_and_verdict(server: Any, stream_backend: Any) -> None:
    result = fastsse.create_stream(
        request("plain", stream_options={"include_usage": True}),
        base_url=server.base_url,
        api_key="x",
        timeout=20,
    )
    assert (
        result["usage"]
        == expected_completion(request("plain", stream_options={"include_usage": True}))["usage"]
    )
    assert result["verdict"]["usage"] is True and result["verdict"]["done"] is True


def test_tool_call_arguments_are_exact(server: Any, stream_backend: Any) -> None:
    result = call(server, "tools")
    calls = result["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("call_weather_paris", "get_weather", '{"city": "Paris", "unit": "celsius"}'),
        ("call_time_paris", "get_time", '{"tz": "Europe/Paris"}'),
    ]
    assert result["choices"][0]["finish_reason"] == "tool_calls"


def test_abort_after_k_chunks_returns_the_partial_fold(server: Any, stream_backend: Any) -> None:
    seen: list[dict[str, Any]] = []

    def on_chunk(chunk: dict[str, Any]) -> bool:
        seen.append(chunk)
        return len(seen) < 4

    result = call(server, "long-500", on_chunk)
    assert len(seen) == 4
    delivered = "".join(c["choices"][0]["delta"].get("content") or "" for c in seen if c["choices"])
    assert result["choices"][0]["message"]["content"] == delivered
    assert result["verdict"]["complete"] is False


def test_error_mid_stream_is_forwarded_then_stops(server: Any, stream_backend: Any) -> None:
    seen: list[dict[str, Any]] = []
    result = call(server, "error", seen.append)
    assert "error" in seen[-1]
    assert sum("error" in c for c in seen) == 1
    assert result["error"] == seen[-1]["error"]
    folded = "".join(c["choices"][0]["delta"].get("content") or "" for c in seen[:-1] if c.get("choices"))
    assert result["choices"][0]["message"]["content"] == folded


def test_exception_in_on_chunk_propagates_unchanged(server: Any, stream_backend: Any) -> None:
    boom = KeyError("from on_chunk")
    calls = 0

    def on_chunk(chunk: dict[str, Any]) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise boom

    with pytest.raises(KeyError) as info:
        call(server, "long-200", on_chunk)
    assert info.value is boom
    assert calls == 3


def test_http_401_and_500(locked_server: Any, server: Any, stream_backend: Any) -> None:
    denied = fastsse.create_stream(
        request("plain"), base_url=locked_server.base_url, api_key="wrong", timeout=20
    )
    assert denied["http"]["status"] == 401 and isinstance(denied["http"]["error"], dict)
    allowed = fastsse.create_stream(
        request("plain"), base_url=locked_server.base_url, api_key=KEY, timeout=20
    )
    assert allowed["verdict"]["complete"] is True
    failed = call(server, "http-500")
    assert failed["http"]["status"] == 500 and failed["http"]["error"]["type"]


def test_environment_defaults(
    locked_server: Any, stream_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", locked_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert fastsse.create_stream(request("plain"), timeout=20)["verdict"]["complete"] is True


def test_connection_refused(stream_backend: Any) -> None:
    with socket_port() as port:
        pass  # the port is free again: nothing listens on it
    with pytest.raises(fastsse.TransportError) as info:
        fastsse.create_stream(
            request("plain"), base_url=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=5
        )
    assert info.value.code == pycurl.E_COULDNT_CONNECT
    # the network's fault, not the data's: under the root, and never a ValueError
    assert isinstance(info.value, fastsse.FastSSEError) and not isinstance(info.value, ValueError)


def test_disconnect_mid_event_carries_the_partial_result(server: Any, stream_backend: Any) -> None:
    seen: list[dict[str, Any]] = []
    with pytest.raises(fastsse.TransportError) as info:
        call(server, "disconnect", seen.append)
    partial = info.value.result
    assert seen, "chunks before the cut were delivered"
    folded = "".join(c["choices"][0]["delta"].get("content") or "" for c in seen if c.get("choices"))
    assert partial["choices"][0]["message"]["content"] == folded
    assert partial["verdict"]["complete"] is False


def test_stall_past_the_timeout(server: Any, stream_backend: Any) -> None:
    with pytest.raises(fastsse.TransportError) as info:
        call(server, "slow-400", timeout=0.5)
    assert info.value.code == pycurl.E_OPERATION_TIMEDOUT


def test_html_instead_of_sse(server: Any, stream_backend: Any) -> None:
    result = call(server, "html")
    assert result["http"]["status"] == 200 and "<html>" in result["http"]["error"]


def test_huge_event(server: Any, stream_backend: Any) -> None:
    result = call(server, "huge-3000000")
    assert len(result["choices"][0]["message"]["content"]) == 3_000_000


def test_reused_curl_handle_keeps_the_connection(server: Any, stream_backend: Any) -> None:
    curl = pycurl.Curl()
    try:
        first = call(server, "plain", curl=curl)
        second = call(server, "tools", curl=curl)
        assert curl.getinfo(pycurl.NUM_CONNECTS) == 0  # the second request reused the connection
    finally:
        curl.close()
    assert first["choices"][0]["finish_reason"] == "stop"
    assert second["choices"][0]["finish_reason"] == "tool_calls"


def test_iter_events_with_httpx(server: Any, stream_backend: Any) -> None:
    with (
        httpx.Client(timeout=20) as client,
        client.stream(
            "POST", f"{server.base_url}/chat/completions", json=request("crlf", stream=True)
        ) as response,
    ):
        events = list(fastsse.iter_events(response.iter_bytes()))
    assert events[-1].data == "[DONE]"
    aggregator = stream_backend.ChatAggregator()
    for event in events:
        aggregator.feed_event(event)
    assert messages(aggregator.result()) == messages(expected_completion(request("crlf")))


def test_aiter_events_and_aiter_chunks_with_httpx(server: Any, stream_backend: Any) -> None:
    async def go() -> tuple[list[Any], dict[str, Any], int]:
        async with httpx.AsyncClient(timeout=20) as client:
            url = f"{server.base_url}/chat/completions"
            async with client.stream("POST", url, json=request("tools", stream=True)) as response:
                events = [e async for e in fastsse.aiter_events(response.aiter_bytes())]
            async with client.stream("POST", url, json=request("tools", stream=True)) as response:
                chunks = fastsse.aiter_chunks(response.aiter_bytes())
                count = 0
                async for _ in chunks:
                    count += 1
                return events, chunks.result(), count

    events, result, count = asyncio.run(go())
    assert events[-1].data == "[DONE]" and count == len(events) - 1
    assert messages(result) == messages(expected_completion(request("tools")))


def test_iter_chunks_with_httpx(server: Any, stream_backend: Any) -> None:
    with (
        httpx.Client(timeout=20) as client,
        client.stream(
            "POST", f"{server.base_url}/chat/completions", json=request("n2", stream=True)
        ) as response,
    ):
        chunks = fastsse.iter_chunks(response.iter_bytes())
        seen = list(chunks)
    assert seen and messages(chunks.result()) == messages(expected_completion(request("n2")))


def test_demo_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fastsse", "demo"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "Final aggregated response" in proc.stdout
    assert '"finish_reason": "stop"' in proc.stdout


class socket_port:
    """A port number that was free a moment ago (bind to 0, read it, release it)."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def test_a_cut_read_from_the_openai_sdks_bytes_says_cut(server: Any, stream_backend: Any) -> None:
    # the SDK's own transport read the bytes and broke mid-answer (the loopback "disconnect"
    # scenario closes the connection after a few chunks): its exception reaches the caller, and
    # the fold of what arrived says the stream was cut, as a fastsse transfer's would
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    with client.chat.completions.with_streaming_response.create(
        model="disconnect", messages=[{"role": "user", "content": "Hi"}], stream=True
    ) as response:
        chunks = fastsse.iter_chunks(response.iter_bytes())
        with pytest.raises(Exception) as info:  # the SDK's httpx (its own copy in new releases)
            for _ in chunks:
                pass
        assert type(info.value).__name__ == "RemoteProtocolError"
    verdict = chunks.result()["verdict"]
    assert (verdict["complete"], verdict["truncated"]) == (False, True)
    assert "cut" in verdict["why"]
    client.close()
