"""The loopback server, read by real clients (openai SDK, httpx-sse, pycurl) on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pycurl
import pytest
from httpx_sse import SSEError, connect_sse

from fastsse import check_stream
from fastsse.testing.server import (
    SCENARIOS,
    LoopbackServer,
    expected_completion,
    parse_model,
    serve_in_thread,
)

TIMEOUT = 20.0
MESSAGES = [{"role": "user", "content": "Say hello to the test suite"}]


@pytest.fixture
def client(server: LoopbackServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=TIMEOUT) as c:
        yield c


def raw_stream(server: LoopbackServer, model: str, **extra: Any) -> bytes:
    body = {"model": model, "messages": MESSAGES, "stream": True, **extra}
    with httpx.Client(timeout=TIMEOUT) as http:
        response = http.post(server.base_url + "/chat/completions", json=body)
        assert response.status_code == 200
        return response.content


def fold(chunks: list[Any]) -> dict[int, dict[str, Any]]:
    """A minimal fold of openai SDK chunks by choice index, for comparison with expected_completion."""
    choices: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            out = choices.setdefault(choice.index, {"content": None, "finish_reason": None, "tool_calls": {}})
            delta = choice.delta
            if delta.content:
                out["content"] = (out["content"] or "") + delta.content
            for call in delta.tool_calls or []:
                slot = out["tool_calls"].setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = call.id or slot["id"]
                if call.function:
                    slot["name"] += call.function.name or ""
                    slot["arguments"] += call.function.arguments or ""
            if choice.finish_reason:
                out["finish_reason"] = choice.finish_reason
    return choices


COMPLIANT = [
    "plain",
    "demo",
    "n2",
    "tools",
    "reasoning",
    "refusal",
    "long-300",
    "huge-100000",
    "slow-2",
    "crlf",
]


@pytest.mark.parametrize("model", COMPLIANT)
def test_openai_create_stream(client: openai.OpenAI, model: str) -> None:
    request = {"model": model, "messages": MESSAGES, "stream_options": {"include_usage": True}}
    expected = expected_completion(request)
    with client.chat.completions.create(stream=True, **request) as stream:  # type: ignore[call-overload]
        chunks = list(stream)
    got = fold(chunks)
    assert len(got) == len(expected["choices"])
    for choice in expected["choices"]:
        message = choice["message"]
        mine = got[choice["index"]]
        assert mine["content"] == message["content"]
        assert mine["finish_reason"] == choice["finish_reason"]
        calls = [
            {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in message.get("tool_calls", [])
        ]
        assert [mine["tool_calls"][k] for k in sorted(mine["tool_calls"])] == calls
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.model_dump() == {
        **expected["usage"],
        "completion_tokens_details": None,
        "prompt_tokens_details": None,
    }
    assert {c.id for c in chunks} == {expected["id"]}
    assert {c.model for c in chunks} == {model}


@pytest.mark.parametrize("model", ["plain", "n2", "tools", "reasoning", "refusal", "huge-5000"])
def test_openai_stream_helper_final_completion(client: openai.OpenAI, model: str) -> None:
    request = {"model": model, "messages": MESSAGES, "stream_options": {"include_usage": True}}
    with client.chat.completions.stream(**request) as stream:  # type: ignore[arg-type]
        final = stream.get_final_completion()
    got = final.model_dump(exclude_none=True)
    expected = expected_completion(request)
    assert got["id"] == expected["id"]
    assert got["usage"] == expected["usage"]
    for mine, theirs in zip(got["choices"], expected["choices"], strict=True):
        assert mine["finish_reason"] == theirs["finish_reason"]
        message = theirs["message"]
        assert mine["message"].get("content") == message["content"]
        assert mine["message"].get("refusal") == message.get("refusal")
        assert mine["message"]["role"] == "assistant"
        if "reasoning_content" in message:
            assert mine["message"]["reasoning_content"] == message["reasoning_content"]
        calls = [
            {"id": c["id"], "type": "function", "function": c["function"], "index": k}
            for k, c in enumerate(message.get("tool_calls", []))
        ]
        assert [
            {**c, "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
            for c in mine["message"].get("tool_calls", [])
        ] == calls


@pytest.mark.parametrize("model", ["plain", "tools", "reasoning", "n2", "long-50", "localai"])
def test_not_streamed_is_the_expected_completion(client: openai.OpenAI, model: str) -> None:
    request = {"model": model, "messages": MESSAGES, "n": 1}
    completion = client.chat.completions.create(**request)  # type: ignore[call-overload]
    expected = expected_completion(request)
    assert completion.model_dump(exclude_none=True) == {
        k: v for k, v in orjson.loads(orjson.dumps(completion.model_dump(exclude_none=True))).items()
    }
    got = completion.model_dump()
    assert got["id"] == expected["id"] and got["usage"]["total_tokens"] == expected["usage"]["total_tokens"]
    for mine, theirs in zip(got["choices"], expected["choices"], strict=True):
        assert mine["message"]["content"] == theirs["message"]["content"]
        assert mine["finish_reason"] == theirs["finish_reason"]


def test_request_n(client: openai.OpenAI) -> None:
    with client.chat.completions.create(model="plain", messages=MESSAGES, n=3, stream=True) as stream:  # type: ignore[arg-type]
        got = fold(list(stream))
    assert sorted(got) == [0, 1, 2]
    assert got[2]["content"].startswith("[2] Hello")


def test_httpx_sse(server: LoopbackServer) -> None:
    body = {
        "model": "reasoning",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with (
        httpx.Client(timeout=TIMEOUT) as http,
        connect_sse(http, "POST", server.base_url + "/chat/completions", json=body) as source,
    ):
        events = list(source.iter_sse())
    assert events[-1].data == "[DONE]"
    chunks = [orjson.loads(e.data) for e in events[:-1]]
    assert all(e.event == "message" for e in events)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content", "") for c in chunks if c["choices"])
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    expected = expected_completion(body)
    assert reasoning == expected["choices"][0]["message"]["reasoning_content"]
    assert content == expected["choices"][0]["message"]["content"]
    assert chunks[-1]["usage"] == expected["usage"]


def test_httpx_sse_refuses_html(server: LoopbackServer) -> None:
    body = {"model": "html", "messages": MESSAGES, "stream": True}
    with (
        httpx.Client(timeout=TIMEOUT) as http,
        connect_sse(http, "POST", server.base_url + "/chat/completions", json=body) as source,
        pytest.raises(SSEError, match="text/event-stream"),
    ):
        list(source.iter_sse())


def test_openai_reads_html_as_an_empty_stream(client: openai.OpenAI) -> None:
    with client.chat.completions.create(model="html", messages=MESSAGES, stream=True) as stream:  # type: ignore[arg-type]
        assert list(stream) == []


@pytest.mark.parametrize("model", [*COMPLIANT, "long-20:bulk", "plain:event", "tools:small"])
def test_compliant_scenarios_are_lint_clean(server: LoopbackServer, model: str) -> None:
    assert [f.code for f in check_stream(raw_stream(server, model))] == (
        ["crlf-line-endings"] if model == "crlf" else []
    )
    with_usage = raw_stream(server, model, stream_options={"include_usage": True})
    assert [f.code for f in check_stream(with_usage, expect_usage=True)] == (
        ["crlf-line-endings"] if model == "crlf" else []
    )


def test_localai_scenarios_reproduce_the_seed_bugs(server: LoopbackServer) -> None:
    assert [f.code for f in check_stream(raw_stream(server, "localai"))] == [
        "empty-initial-content",
        "empty-finish-reason",
        "final-delta-not-empty",
    ]
    assert [f.code for f in check_stream(raw_stream(server, "localai-tools"))] == [
        "empty-initial-content",
        "empty-finish-reason",
        "role-repeated",
        "tool-call-id-reused",
        "tool-call-repeated",
        "final-delta-not-empty",
    ]


def test_localai_tools_corrupt_the_openai_helper(client: openai.OpenAI) -> None:
    """Why the linter calls these errors: openai-python concatenates the resent id and role."""
    with client.chat.completions.stream(model="localai-tools", messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert message.role.startswith("assistantassistant")  # type: ignore[union-attr]
    assert message.tool_calls is not None and message.tool_calls[0].id.startswith(
        "chatcmpl-localai-toolschatcmpl-"
    )


def test_mid_stream_error(client: openai.OpenAI, server: LoopbackServer) -> None:
    seen: list[str] = []
    with (
        pytest.raises(openai.APIError, match="simulated mid-stream failure"),
        client.chat.completions.create(model="error", messages=MESSAGES, stream=True) as stream,  # type: ignore[arg-type]
    ):
        for chunk in stream:
            seen.append(chunk.choices[0].delta.content or "")
    assert "".join(seen) == expected_completion({"model": "error"})["choices"][0]["message"]["content"]
    raw = raw_stream(server, "error")
    assert b" never" in raw and b"[DONE]" not in raw
    assert [f.code for f in check_stream(raw)] == ["error-object", "missing-finish-reason", "missing-done"]
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="error", messages=MESSAGES)


def test_disconnect_mid_event(client: openai.OpenAI, server: LoopbackServer) -> None:
    body = {"model": "disconnect", "messages": MESSAGES, "stream": True}
    received = bytearray()
    with (
        httpx.Client(timeout=TIMEOUT) as http,
        http.stream("POST", server.base_url + "/chat/completions", json=body) as r,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        for piece in r.iter_bytes():
            received += piece
    assert not received.endswith(b"\n\n")
    assert [f.code for f in check_stream(bytes(received))][:1] == ["truncated"]
    with (
        pytest.raises(openai.APIConnectionError),
        client.chat.completions.create(**body) as stream,  # type: ignore[call-overload]
    ):
        list(stream)
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="disconnect", messages=MESSAGES)


def test_http_errors(server: LoopbackServer) -> None:
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=TIMEOUT) as client:
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model="http-500", messages=MESSAGES, stream=True)
        assert info.value.status_code == 500
        assert info.value.body == {  # type: ignore[comparison-overlap]
            "message": "Simulated HTTP 500 from the fastsse loopback server.",
            "type": "server_error",
            "param": None,
            "code": "http_500",
        }
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="http-429", messages=MESSAGES)
    with httpx.Client(timeout=TIMEOUT) as http:
        assert http.post(server.base_url + "/chat/completions", content=b"{nope").status_code == 400
        assert http.post(server.url + "/v2/chat", json={}).status_code == 404
        assert http.get(server.url + "/").status_code == 404


def test_api_key() -> None:
    with serve_in_thread(api_key="sk-secret", pause=0) as srv:
        with openai.OpenAI(base_url=srv.base_url, api_key="wrong", max_retries=0, timeout=TIMEOUT) as bad:
            with pytest.raises(openai.AuthenticationError) as info:
                bad.chat.completions.create(model="plain", messages=MESSAGES, stream=True)
            assert info.value.code == "invalid_api_key"
            with pytest.raises(openai.AuthenticationError):
                bad.models.list()
        with openai.OpenAI(
            base_url=srv.base_url, api_key="sk-secret", max_retries=0, timeout=TIMEOUT
        ) as good:
            assert [m.id for m in good.models.list()] == list(SCENARIOS)
            with good.chat.completions.create(model="plain", messages=MESSAGES, stream=True) as stream:  # type: ignore[arg-type]
                assert len(list(stream)) == 17


def test_models(client: openai.OpenAI) -> None:
    models = client.models.list()
    assert [m.id for m in models] == list(SCENARIOS)
    assert {m.owned_by for m in models} == {"fastsse"}


def test_long_chunk_count(server: LoopbackServer) -> None:
    raw = raw_stream(server, "long-2000")
    chunks = [orjson.loads(line[6:]) for line in raw.split(b"\n\n") if line.startswith(b"data: {")]
    content = [c for c in chunks if c["choices"] and "content" in c["choices"][0]["delta"]]
    assert len(content) == 2000
    assert len(chunks) == 2002  # role and final chunks around them


def test_huge_single_event(server: LoopbackServer) -> None:
    raw = raw_stream(server, "huge-3000000")
    events = raw.split(b"\n\n")
    big = max(events, key=len)
    assert len(orjson.loads(big[6:])["choices"][0]["delta"]["content"]) == 3_000_000


def _curl_pieces(server: LoopbackServer, model: str) -> list[bytes]:
    pieces: list[bytes] = []
    curl = pycurl.Curl()
    try:
        curl.setopt(pycurl.URL, server.base_url + "/chat/completions")
        curl.setopt(pycurl.POSTFIELDS, orjson.dumps({"model": model, "messages": MESSAGES, "stream": True}))
        curl.setopt(pycurl.HTTPHEADER, ["Content-Type: application/json"])
        curl.setopt(pycurl.WRITEFUNCTION, pieces.append)
        curl.setopt(pycurl.TIMEOUT, 30)
        curl.perform()
        assert curl.getinfo(pycurl.RESPONSE_CODE) == 200
    finally:
        curl.close()
    return pieces


def test_small_writes_split_lines_crlfs_and_utf8() -> None:
    """Reads end inside lines, between CR and LF, and inside UTF-8 sequences, as a client sees them."""
    with serve_in_thread(pause=0.002) as srv:
        pieces = _curl_pieces(srv, "crlf")
    stream = b"".join(pieces)
    assert check_stream(stream)[0].code == "crlf-line-endings"
    ends = set()
    pos = 0
    for piece in pieces[:-1]:
        pos += len(piece)
        ends.add(pos)
    assert len(pieces) > 100
    inside_line = [e for e in ends if stream[e - 1 : e] not in (b"\n", b"\r")]
    between_cr_lf = [e for e in ends if stream[e - 1 : e + 1] == b"\r\n"]
    inside_utf8 = [e for e in ends if 0x80 <= stream[e] < 0xC0]  # the next byte continues a sequence
    assert inside_line and between_cr_lf and inside_utf8


def test_write_modes(server: LoopbackServer) -> None:
    bulk = _curl_pieces(server, "long-3000:bulk")
    assert len(bulk) < 1000  # about 570 KB in 64 KiB writes; small pieces would be ~95,000 reads
    assert b"".join(bulk).replace(b"3000:bulk", b"3000:event") == raw_stream(server, "long-3000:event")
    with serve_in_thread(write="event", pause=0) as srv:
        assert b"".join(_curl_pieces(srv, "plain")) == raw_stream(server, "plain")
    with pytest.raises(ValueError, match="write"):
        LoopbackServer(write="tiny")


def test_slow_drip_with_pings(server: LoopbackServer) -> None:
    start = time.monotonic()
    raw = raw_stream(server, "slow-20")
    assert time.monotonic() - start >= 15 * 0.02
    assert raw.count(b": ping\n\n") == 15
    assert check_stream(raw) == []


def test_keep_alive_connection_reuse(server: LoopbackServer) -> None:
    with httpx.Client(timeout=TIMEOUT) as http:
        for _ in range(3):
            with http.stream(
                "POST", server.base_url + "/chat/completions", json={"model": "plain", "stream": True}
            ) as r:
                assert r.read().endswith(b"data: [DONE]\n\n")
        assert http.get(server.base_url + "/models").status_code == 200


def test_concurrent_streams(server: LoopbackServer) -> None:
    results: list[bytes] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(raw_stream(server, "tools"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not errors
    assert len(set(results)) == 1 and len(results) == 8


def test_close_ends_streams_in_progress() -> None:
    srv = serve_in_thread(pause=0)
    failure: list[BaseException] = []
    started = threading.Event()

    def reader() -> None:
        try:
            with httpx.Client(timeout=TIMEOUT) as http:
                body = {"model": "slow-5000", "stream": True}
                with http.stream("POST", srv.base_url + "/chat/completions", json=body) as r:
                    started.set()
                    for _ in r.iter_bytes():
                        pass
        except httpx.HTTPError as exc:
            failure.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    assert started.wait(TIMEOUT)
    begin = time.monotonic()
    srv.close()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    assert time.monotonic() - begin < 5
    assert failure and isinstance(failure[0], httpx.RemoteProtocolError)
    srv.close()  # twice is harmless


def test_serve_forever_on_the_calling_thread_stops_on_close() -> None:
    srv = LoopbackServer(pause=0)
    thread = threading.Thread(target=srv.serve_forever)
    thread.start()
    with httpx.Client(timeout=TIMEOUT) as http:
        assert http.get(srv.base_url + "/models").status_code == 200
    srv.close()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    LoopbackServer(pause=0).close()  # never started: closes at once


def test_parse_model() -> None:
    assert parse_model("long-20000") == ("long", 20000, None)
    assert parse_model("long-20000:bulk") == ("long", 20000, "bulk")
    assert parse_model("localai-tools") == ("localai-tools", None, None)
    assert parse_model("http-404") == ("http", 404, None)
    assert parse_model("gpt-4o-mini") == ("plain", None, None)
    assert parse_model("gpt-4-0613") == ("plain", None, None)
    assert parse_model("") == ("plain", None, None)
    assert parse_model("tools:event") == ("tools", None, "event")


def test_expected_completion_shape() -> None:
    completion = expected_completion({"model": "tools", "messages": MESSAGES})
    assert completion["object"] == "chat.completion"
    assert completion["choices"][0]["finish_reason"] == "tool_calls"
    assert completion["choices"][0]["message"]["tool_calls"][1] == {
        "id": "call_time_paris",
        "type": "function",
        "function": {"name": "get_time", "arguments": '{"tz": "Europe/Paris"}'},
    }
    assert completion["usage"] == {"prompt_tokens": 6, "completion_tokens": 9, "total_tokens": 15}


# python -m fastsse serve


def test_serve_help_lists_the_scenarios() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fastsse", "serve", "--help"], capture_output=True, timeout=60, text=True
    )
    assert result.returncode == 0
    for name in SCENARIOS:
        assert name in result.stdout
    assert "--port" in result.stdout and "long-N" in result.stdout


@pytest.mark.usefixtures("default_sigint")
def test_serve_command() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastsse", "serve", "--port", "0", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        base_url = line.split()[3]
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        with httpx.Client(timeout=TIMEOUT) as http:
            r = http.post(
                base_url + "/chat/completions", json={"model": "plain", "messages": MESSAGES, "stream": True}
            )
        assert r.status_code == 200 and check_stream(r.content) == []
        proc.send_signal(signal.SIGINT)
        assert proc.wait(TIMEOUT) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(TIMEOUT)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def test_serve_port_in_use(server: LoopbackServer) -> None:
    from fastsse.cli.serve import main

    assert main(["--port", str(server.port)]) == 2
