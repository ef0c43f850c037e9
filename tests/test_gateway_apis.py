"""``python -m fastsse gateway`` (a real process on 127.0.0.1) serving the three APIs over one
upstream of each API: the real anthropic SDK (``messages.create`` / ``messages.stream``) and openai
SDK (``responses.create`` / ``responses.stream``, ``chat.completions``) run a two-turn tool-use
conversation (the model asks for two tools, the client sends the results, the model answers),
streamed and not, on both backends (the gateway process runs the pure-Python one under
``FASTSSE_NO_EXTENSIONS=1``); what each SDK parsed equals what the upstream said (the loopback
server's scenario: text, tool names and arguments, stop reason, usage). The exact chat request the
gateway sent for a Messages and a Responses request with tool results is asserted, and the
gateway's own failure handling (a cut upstream, an upstream HTTP error, the log) through the new
routes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
httpx = pytest.importorskip("httpx")
pytest.importorskip("pycurl")

from _gateway_process import GatewayProcess  # noqa: E402
from fastsse.testing import _translated  # noqa: E402
from fastsse.testing.server import TOOLS, LoopbackServer, expected_completion, serve_in_thread  # noqa: E402

TIMEOUT = 20.0
QUESTION = "What is the weather and the time in Paris?"
RESULTS = {"call_weather_paris": "18 C and sunny", "call_time_paris": "14:05"}
WEATHER = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "schema": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}},
}
CLOCK = {
    "name": "get_time",
    "description": "Local time in a time zone",
    "schema": {"type": "object", "properties": {"tz": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackServer]:
    with serve_in_thread(port=0) as server:
        yield server


@pytest.fixture(scope="module")
def gateways(upstream: LoopbackServer) -> Iterator[Callable[..., tuple[GatewayProcess, str]]]:
    """``start(api, base_url=None, backend="cython")``: the gateway process over ``base_url`` (the
    loopback server's by default) speaking ``api``, on ``backend``, started once per triple."""
    running: dict[tuple[str, str, str], GatewayProcess] = {}

    def start(api: str, base_url: str | None = None, backend: str = "cython") -> tuple[GatewayProcess, str]:
        where = (api, base_url or upstream.base_url, backend)
        if where not in running:
            env = {"FASTSSE_NO_EXTENSIONS": "1"} if backend == "python" else {"FASTSSE_NO_EXTENSIONS": ""}
            upstreams = [{"name": f"{api}-up", "base_url": where[1], "api": api, "api_key": "upstream-key"}]
            # the SDKs' conversations go through a route (every model, one balanced pool)
            routes = [{"model": "*", "upstreams": [f"{api}-up"], "balance": "least_busy"}]
            running[where] = GatewayProcess(upstreams, env=env, routes=routes).start()
        process = running[where]
        return process, process.url

    yield start
    for process in running.values():
        process.stop()
        process.dir.cleanup()


@pytest.fixture
def on_backend(backend: Any) -> str:
    """The backend the gateway process runs (its relay, translators and folds)."""
    return str(backend.name)


def said(upstream: LoopbackServer, api: str) -> dict[str, Any]:
    """The chat.completion the upstream's last answer stands for: the loopback scenario of the
    request it received (for Messages and Responses, that request as the chat one it stands for)."""
    path, body = upstream.received[-1]
    assert (
        path
        == {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}[api]
    )
    if api != "chat":
        body = _translated.chat_request(api, body, body["model"])
    return expected_completion(body)


def calls_of(expected: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in expected["choices"][0]["message"]["tool_calls"]
    ]


def text_of(expected: dict[str, Any]) -> str:
    content: str = expected["choices"][0]["message"]["content"]
    return content


WANTED_CALLS = [(name, json.loads("".join(parts))) for _, name, parts in TOOLS]

# -- the anthropic SDK --------------------------------------------------------------------------


def _anthropic_turns(client: Any, stream: bool, upstream: LoopbackServer, api: str) -> None:
    tools = [
        {"name": t["name"], "description": t["description"], "input_schema": t["schema"]}
        for t in (WEATHER, CLOCK)
    ]
    history: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]

    def ask(model: str) -> Any:
        kwargs = {
            "model": model,
            "max_tokens": 256,
            "messages": history,
            "tools": tools,
            "system": "Be brief.",
        }
        if not stream:
            return client.messages.create(**kwargs)
        with client.messages.stream(**kwargs) as s:
            for _ in s:
                pass
            return s.get_final_message()

    first = ask("tools")
    expected = said(upstream, api)
    uses = [b for b in first.content if b.type == "tool_use"]
    assert [(b.name, b.input) for b in uses] == WANTED_CALLS == calls_of(expected)
    assert [b.id for b in uses] == [t[0] for t in TOOLS]
    assert first.stop_reason == "tool_use"
    assert first.usage.output_tokens == expected["usage"]["completion_tokens"]
    assert first.usage.input_tokens == expected["usage"]["prompt_tokens"]
    history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]})
    history.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": b.id, "content": RESULTS[b.id]} for b in uses],
        }
    )
    second = ask("plain")
    expected = said(upstream, api)
    assert [b.type for b in second.content] == ["text"]
    assert second.content[0].text == text_of(expected)
    assert second.stop_reason == "end_turn"
    assert second.usage.output_tokens == expected["usage"]["completion_tokens"]


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "create"])
def test_anthropic_sdk_tool_conversation(
    on_backend: str, gateways: Any, upstream: LoopbackServer, api: str, stream: bool
) -> None:
    _, url = gateways(api, backend=on_backend)
    with anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=TIMEOUT) as client:
        _anthropic_turns(client, stream, upstream, api)


# -- the openai SDK: Responses -------------------------------------------------------------------


def _responses_turns(client: Any, stream: bool, upstream: LoopbackServer, api: str) -> None:
    tools = [
        {
            "type": "function",
            "name": t["name"],
            "description": t["description"],
            "parameters": t["schema"],
            "strict": False,
        }
        for t in (WEATHER, CLOCK)
    ]
    history: list[Any] = [{"role": "user", "content": QUESTION}]

    def ask(model: str) -> Any:
        kwargs = {
            "model": model,
            "input": history,
            "tools": tools,
            "instructions": "Be brief.",
            "max_output_tokens": 256,
        }
        if not stream:
            return client.responses.create(**kwargs)
        with client.responses.stream(**kwargs) as s:
            for _ in s:
                pass
            return s.get_final_response()

    first = ask("tools")
    expected = said(upstream, api)
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == WANTED_CALLS == calls_of(expected)
    assert [c.call_id for c in calls] == [t[0] for t in TOOLS]
    assert first.status == "completed"
    assert first.usage.output_tokens == expected["usage"]["completion_tokens"]
    assert first.usage.input_tokens == expected["usage"]["prompt_tokens"]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history += [
        {"type": "function_call_output", "call_id": c.call_id, "output": RESULTS[c.call_id]} for c in calls
    ]
    second = ask("plain")
    expected = said(upstream, api)
    assert second.output_text == text_of(expected)
    assert [item.type for item in second.output] == ["message"]
    assert second.status == "completed"
    assert second.usage.output_tokens == expected["usage"]["completion_tokens"]


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "create"])
def test_openai_responses_tool_conversation(
    on_backend: str, gateways: Any, upstream: LoopbackServer, api: str, stream: bool
) -> None:
    _, url = gateways(api, backend=on_backend)
    with openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=TIMEOUT) as client:
        _responses_turns(client, stream, upstream, api)


# -- the openai SDK: chat completions ------------------------------------------------------------


def _chat_turns(client: Any, stream: bool, upstream: LoopbackServer, api: str) -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["schema"]},
        }
        for t in (WEATHER, CLOCK)
    ]
    history: list[Any] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]

    def ask(model: str) -> Any:
        kwargs = {"model": model, "messages": history, "tools": tools, "max_completion_tokens": 256}
        if not stream:
            return client.chat.completions.create(**kwargs)
        with client.chat.completions.stream(**kwargs, stream_options={"include_usage": True}) as s:
            for _ in s:
                pass
            return s.get_final_completion()

    first = ask("tools")
    expected = said(upstream, api)
    message = first.choices[0].message
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == WANTED_CALLS
    assert [c.id for c in message.tool_calls] == [t[0] for t in TOOLS]
    assert first.choices[0].finish_reason == "tool_calls"
    assert first.usage.completion_tokens == expected["usage"]["completion_tokens"]
    assert first.usage.prompt_tokens == expected["usage"]["prompt_tokens"]
    history.append(message.model_dump(exclude_none=True))
    history += [{"role": "tool", "tool_call_id": c.id, "content": RESULTS[c.id]} for c in message.tool_calls]
    second = ask("plain")
    expected = said(upstream, api)
    assert second.choices[0].message.content == text_of(expected)
    assert second.choices[0].finish_reason == "stop"
    assert second.usage.completion_tokens == expected["usage"]["completion_tokens"]


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "create"])
def test_openai_chat_tool_conversation(
    on_backend: str, gateways: Any, upstream: LoopbackServer, api: str, stream: bool
) -> None:
    _, url = gateways(api, backend=on_backend)
    with openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=TIMEOUT) as client:
        _chat_turns(client, stream, upstream, api)


# -- what the gateway sent upstream --------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CHAT_SENT = {
    "model": "plain",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
    ],
    "max_completion_tokens": 100,
    "stream": True,
    "stream_options": {"include_usage": True},
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}],
}


def test_the_chat_request_sent_for_a_messages_request(gateways: Any, upstream: LoopbackServer) -> None:
    _, url = gateways("chat")
    body = {
        "model": "plain",
        "max_tokens": 100,
        "system": "Be brief.",
        "stream": True,
        "tools": [{"name": "get_weather", "input_schema": SCHEMA}],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "18 C"}],
            },
        ],
    }
    with httpx.Client(timeout=TIMEOUT) as http:
        r = http.post(url + "/v1/messages", json=body)
    assert r.status_code == 200
    assert upstream.received[-1] == ("/v1/chat/completions", CHAT_SENT)


def test_the_chat_request_sent_for_a_responses_request(gateways: Any, upstream: LoopbackServer) -> None:
    _, url = gateways("chat")
    body = {
        "model": "plain",
        "instructions": "Be brief.",
        "max_output_tokens": 100,
        "stream": True,
        "tools": [{"type": "function", "name": "get_weather", "parameters": SCHEMA, "strict": False}],
        "input": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
        ],
    }
    with httpx.Client(timeout=TIMEOUT) as http:
        r = http.post(url + "/v1/responses", json=body)
    assert r.status_code == 200
    assert upstream.received[-1] == ("/v1/chat/completions", CHAT_SENT)


def test_a_messages_upstream_gets_max_tokens_and_what_it_cannot_take_is_logged(
    gateways: Any, upstream: LoopbackServer
) -> None:
    app, url = gateways("messages")
    before = len(app.records())
    body = {"model": "plain", "messages": [{"role": "user", "content": "hi"}], "seed": 7, "stream": True}
    with httpx.Client(timeout=TIMEOUT) as http:
        r = http.post(url + "/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.text.endswith("data: [DONE]\n\n")
    path, sent = upstream.received[-1]
    assert path == "/v1/messages"
    assert sent == {
        "model": "plain",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4096,
        "stream": True,
    }
    entry = _logged(app, before)
    assert entry["dropped"] == ["seed"] and entry["outcome"] == "complete"


def test_a_coding_agents_messages_request_over_chat(gateways: Any, upstream: LoopbackServer) -> None:
    """What a coding agent sends to /v1/messages (cached system blocks, extended thinking, a user
    id, a cached tool): the chat upstream gets what it can take, the rest is listed in the log."""
    app, url = gateways("chat")
    before = len(app.records())
    body = {
        "model": "plain",
        "max_tokens": 32000,
        "system": [
            {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Work in /repo."},
        ],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "metadata": {"user_id": "user_abc"},
        "tools": [{"name": "Bash", "input_schema": SCHEMA, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "List the files."}]}],
        "stream": True,
    }
    with httpx.Client(timeout=TIMEOUT) as http:
        r = http.post(url + "/v1/messages", json=body)
    assert r.status_code == 200 and "event: message_stop" in r.text
    assert upstream.received[-1] == (
        "/v1/chat/completions",
        {
            "model": "plain",
            "messages": [
                {
                    "role": "system",
                    "content": [
                        {"type": "text", "text": "You are a coding agent."},
                        {"type": "text", "text": "Work in /repo."},
                    ],
                },
                {"role": "user", "content": [{"type": "text", "text": "List the files."}]},
            ],
            "max_completion_tokens": 32000,
            "stream": True,
            "stream_options": {"include_usage": True},
            "user": "user_abc",
            "tools": [{"type": "function", "function": {"name": "Bash", "parameters": SCHEMA}}],
        },
    )
    entry = _logged(app, before)
    assert entry["dropped"] == ["system[0].cache_control", "thinking", "tools[0].cache_control"]


def test_an_untranslatable_request_is_a_400_in_the_callers_shape(gateways: Any) -> None:
    _, url = gateways("chat")
    body = {
        "model": "plain",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope"}]}],
    }
    with httpx.Client(timeout=TIMEOUT) as http:
        r = http.post(url + "/v1/messages", json=body)
    assert r.status_code == 400
    error = r.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith("messages[0].content[0].tool_use_id:")


# -- failures through the new routes -------------------------------------------------------------


def _logged(app: GatewayProcess, before: int) -> dict[str, Any]:
    return app.record(before)


@pytest.mark.parametrize("status", [401, 429, 503])
def test_upstream_http_errors_reach_anthropic_clients_in_their_shape(gateways: Any, status: int) -> None:
    _, url = gateways("chat")
    with (
        anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=TIMEOUT) as client,
        pytest.raises(anthropic.APIStatusError) as info,
    ):
        client.messages.create(
            model=f"http-{status}", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == (529 if status == 503 else status)
    assert info.value.body["type"] == "error"


def test_a_cut_upstream_cuts_the_anthropic_stream_and_logs_one_line(on_backend: str, gateways: Any) -> None:
    app, url = gateways("chat", backend=on_backend)
    before = len(app.records())
    with (
        anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=TIMEOUT) as client,
        pytest.raises(Exception) as info,
        client.messages.stream(
            model="disconnect", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ) as s,
    ):
        for _ in s:
            pass
        s.get_final_message()
    # the SDK lets the HTTP client's error for a response cut short out as it is
    assert isinstance(info.value, anthropic.APIError) or "incomplete chunked read" in str(info.value)
    entry = _logged(app, before)
    assert entry["outcome"] == "cut" and "curl error" in entry["why"] and entry["model"] == "disconnect"
    time.sleep(0.2)  # the server logs the aborted response after the client saw it end
    lines = [r for r in app.lines() if r.get("rid") == entry["rid"] or "exc" in r or r["level"] == "error"]
    assert lines == [entry]  # one line for the cut: no traceback, no line of the server's


UNFINISHED = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":"Hal"},"finish_reason":null}]}\n\n'
    b"data: [DONE]\n\n"
)


def test_an_unfinished_choice_after_done_ends_the_stream_abnormally(on_backend: str, gateways: Any) -> None:
    """[DONE] after a choice that never finished: the relay forwards what came, but the fold's
    verdict says the answer is not whole, so the caller's response is cut, not ended."""
    from _raw_server import RawServer

    def answer(conn: Any) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n" % len(UNFINISHED) + UNFINISHED
        )

    with RawServer(answer) as raw:
        app, url = gateways("chat", raw.base_url, backend=on_backend)
        before = len(app.records())
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        got = bytearray()
        with (
            httpx.Client(timeout=TIMEOUT) as http,
            http.stream("POST", url + "/v1/chat/completions", json=body) as r,
            pytest.raises(httpx.RemoteProtocolError),
        ):
            assert r.status_code == 200
            for piece in r.iter_raw():
                got += piece
        entry = _logged(app, before)
    assert b'"content":"Hal"' in got
    assert entry["outcome"] == "cut" and "finish_reason" in entry["why"]


def test_an_error_in_the_stream_reaches_the_anthropic_sdk_as_an_error(on_backend: str, gateways: Any) -> None:
    _, url = gateways("chat", backend=on_backend)
    with (
        anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=TIMEOUT) as client,
        pytest.raises(anthropic.APIStatusError) as info,
        client.messages.stream(
            model="error", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ) as s,
    ):
        for _ in s:
            pass
    assert "simulated mid-stream failure" in str(info.value)


def test_non_stream_answer_of_a_cut_upstream_is_a_502(gateways: Any) -> None:
    _, url = gateways("chat")
    with (
        anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=TIMEOUT) as client,
        pytest.raises(anthropic.APIStatusError) as info,
    ):
        client.messages.create(
            model="disconnect", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == 502


def test_models_are_passed_through(gateways: Any, upstream: LoopbackServer) -> None:
    _, url = gateways("chat")
    with httpx.Client(timeout=TIMEOUT) as http:
        mine = http.get(url + "/v1/models").json()
        theirs = http.get(upstream.base_url + "/models").json()
    assert mine == theirs and mine["data"]
