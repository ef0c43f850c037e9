"""``python -m fastsse gateway`` end to end: the loopback server's broken models upstream, the
gateway as a real process on 127.0.0.1 (AsyncClient + Relay under uvicorn), the openai SDK
downstream; the gateway's JSON log gives the record of each answer."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
pytest.importorskip("pycurl")

from _gateway_process import GatewayProcess  # noqa: E402
from fastsse.testing.server import expected_completion, serve_in_thread  # noqa: E402

MESSAGES = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[Any]:
    with serve_in_thread(port=0) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(upstream: Any) -> Iterator[Any]:
    upstreams = [{"name": "loopback", "base_url": upstream.base_url, "api_key": "upstream-key"}]
    with GatewayProcess(upstreams) as process:
        yield process, process.url + "/v1"


def logged(process: Any, before: int) -> dict[str, Any]:
    """The one record after ``before``; the gateway writes it after the last byte went out."""
    return process.record(before)  # type: ignore[no-any-return]


@pytest.fixture
def sdk(gateway: Any) -> Iterator[Any]:
    client = openai.OpenAI(base_url=gateway[1], api_key="x", max_retries=0, timeout=20)
    yield client
    client.close()


def test_localai_stream_reaches_the_sdk_compliant_and_is_logged(gateway: Any, sdk: Any) -> None:
    app = gateway[0]
    before = len(app.records())
    chunks = list(sdk.chat.completions.create(model="localai", messages=MESSAGES, stream=True))
    entry = logged(app, before)
    expected = expected_completion({"model": "localai", "messages": MESSAGES})
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == expected["choices"][0]["message"]["content"]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}  # never "" on the way
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content is None
    assert chunks[-1].choices == [] and chunks[-1].usage is not None  # usage once, at the end
    assert all(c.usage is None for c in chunks[:-1])
    assert "content" not in entry  # no answer text is kept for the log
    assert entry["outcome"] == "complete" and entry["status"] == 200 and entry["level"] == "info"
    usage = chunks[-1].usage
    assert (entry["tokens_in"], entry["tokens_out"]) == (usage.prompt_tokens, usage.completion_tokens)
    assert entry["model"] == "localai" and entry["api"] == "chat->chat" and entry["upstream"] == "loopback"
    assert entry["bytes"] > len(text) and entry["ttft_ms"] > 0 and entry["duration_ms"] >= entry["ttft_ms"]


def test_localai_tools_reach_the_sdk_accumulator_whole(gateway: Any, sdk: Any) -> None:
    with sdk.chat.completions.stream(model="localai-tools", messages=MESSAGES) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    expected = expected_completion({"model": "localai-tools", "messages": MESSAGES})
    calls = final.choices[0].message.tool_calls
    want = expected["choices"][0]["message"]["tool_calls"]
    assert [(c.function.name, c.function.arguments) for c in calls] == [
        (w["function"]["name"], w["function"]["arguments"]) for w in want
    ]
    assert final.choices[0].finish_reason == "tool_calls"


def test_compliant_stream_passes_through(gateway: Any, sdk: Any) -> None:
    request = {"model": "tools", "messages": MESSAGES, "stream_options": {"include_usage": True}}
    with sdk.chat.completions.stream(
        model="tools", messages=MESSAGES, stream_options={"include_usage": True}
    ) as stream:
        final = stream.get_final_completion()
    expected = expected_completion(request)
    assert [(c.id, c.function.name, c.function.arguments) for c in final.choices[0].message.tool_calls] == [
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in expected["choices"][0]["message"]["tool_calls"]
    ]
    assert final.usage is not None and final.usage.total_tokens == expected["usage"]["total_tokens"]


def test_cut_upstream_reaches_the_sdk_cut(gateway: Any, sdk: Any) -> None:
    app = gateway[0]
    before = len(app.records())
    got: list[Any] = []
    with pytest.raises(openai.APIError):
        for chunk in sdk.chat.completions.create(model="disconnect", messages=MESSAGES, stream=True):
            got.append(chunk)
    assert all(c.choices[0].finish_reason is None for c in got if c.choices)  # no invented "stop"
    entry = logged(app, before)
    assert entry["outcome"] == "cut" and "curl error" in entry["why"] and entry["level"] == "warning"


def test_error_payload_reaches_the_sdk_as_an_error(gateway: Any, sdk: Any) -> None:
    with pytest.raises(openai.APIError) as info:
        for _ in sdk.chat.completions.create(model="error", messages=MESSAGES, stream=True):
            pass
    assert "error" in str(info.value).lower() or info.value.message


@pytest.mark.parametrize("status", [401, 429, 503])
def test_upstream_http_errors_keep_their_status(gateway: Any, sdk: Any, status: int) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        sdk.chat.completions.create(model=f"http-{status}", messages=MESSAGES, stream=True)
    assert info.value.status_code == status
    if status in (429, 503):  # the upstream's Retry-After comes back with it, for the SDK's retry
        assert info.value.response.headers["retry-after"] == "1"
    assert info.value.response.headers["x-request-id"]


def test_non_stream_requests_get_the_whole_answer(gateway: Any, sdk: Any) -> None:
    # streamed from the upstream and folded: the chat.completion the upstream's stream stands for
    completion = sdk.chat.completions.create(model="plain", messages=MESSAGES)
    expected = expected_completion({"model": "plain", "messages": MESSAGES})
    assert completion.choices[0].message.content == expected["choices"][0]["message"]["content"]
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens == expected["usage"]["total_tokens"]


def test_caller_leaving_mid_answer_stops_the_upstream_transfer(gateway: Any) -> None:
    import httpx

    app, base_url = gateway
    before = len(app.records())
    body = {"model": "slow-200", "messages": MESSAGES, "stream": True}
    with (
        httpx.Client(timeout=20) as http,
        http.stream("POST", base_url + "/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        first = next(response.iter_raw())
        assert first.startswith(b"data: ")
    entry = logged(app, before)  # well before the 200 ms-per-token answer could have ended
    assert entry["outcome"] == "caller_left" and entry["status"] == 499 and entry["duration_ms"] < 1500


def test_the_example_mounts_the_gateway_beside_a_route_of_its_own(upstream: Any, tmp_path: Any) -> None:
    """``uvicorn --app-dir examples --factory gateway:create_app`` as examples/gateway.py writes it:
    the gateway's routes and the example's own ``/summarize`` (a relayed stream, a kept 429)."""
    import os
    import pathlib
    import socket
    import subprocess
    import sys
    import time

    httpx = pytest.importorskip("httpx")
    pytest.importorskip("starlette")
    examples = pathlib.Path(__file__).resolve().parents[1] / "examples"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "FASTSSE_UPSTREAM": upstream.base_url, "FASTSSE_UPSTREAM_API": "chat"}
    env["PYTHONPATH"] = os.pathsep.join([str(examples.parent / "src"), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "uvicorn", "--app-dir", str(examples), "--factory", "gateway:create_app"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    with open(tmp_path / "stderr.txt", "wb") as sink:
        proc = subprocess.Popen(argv, env=env, stdout=sink, stderr=sink)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(url + "/health", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, (
                    tmp_path / "stderr.txt"
                ).read_text()
                time.sleep(0.05)
        with httpx.Client(timeout=20) as http:
            chat = http.post(
                url + "/v1/chat/completions", json={"model": "plain", "messages": MESSAGES, "stream": True}
            )
            summary = http.post(url + "/summarize", json={"text": "a long text", "model": "plain"})
            limited = http.post(url + "/summarize", json={"text": "x", "model": "http-429"})
    finally:
        proc.terminate()
        proc.wait(10)
    assert chat.status_code == 200 and chat.text.endswith("data: [DONE]\n\n")
    assert summary.status_code == 200 and summary.text.endswith("data: [DONE]\n\n")
    assert limited.status_code == 429 and limited.headers["retry-after"] == "1"


def test_the_gateway_app_under_granian(upstream: Any, tmp_path: Any) -> None:
    """The parts use only the ASGI callables: under granian (whose awaitables are Rust iterators,
    not coroutines) a stream relays, a 429 keeps its status, and a caller leaving is seen."""
    import os
    import pathlib
    import socket
    import subprocess
    import time

    httpx = pytest.importorskip("httpx")
    granian = pytest.importorskip("granian")  # noqa: F841
    app = tmp_path / "granian_app.py"
    app.write_text(
        "import os\nfrom fastsse.gateway import Gateway, config_from\n"
        "app = Gateway(config_from({'upstream': [{'name': 'u', 'base_url': os.environ['UPSTREAM']}]}))\n"
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    src = pathlib.Path(__file__).resolve().parents[1] / "src"
    env = {
        **os.environ,
        "UPSTREAM": upstream.base_url,
        "PYTHONPATH": os.pathsep.join([str(src), str(tmp_path)]),
    }
    argv = [
        sys.executable,
        "-m",
        "granian",
        "--interface",
        "asgi",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with open(tmp_path / "log.txt", "wb") as sink:
        proc = subprocess.Popen(
            [*argv, "--no-access-log", "granian_app:app"], env=env, stdout=sink, stderr=sink
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(url[:-3] + "/health", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "log.txt").read_text()
                time.sleep(0.1)
        with httpx.Client(timeout=20) as http:
            chat = http.post(
                url + "/chat/completions", json={"model": "plain", "messages": MESSAGES, "stream": True}
            )
            limited = http.post(
                url + "/chat/completions", json={"model": "http-429", "messages": MESSAGES, "stream": True}
            )
            with http.stream(
                "POST",
                url + "/chat/completions",
                json={"model": "slow-200", "messages": MESSAGES, "stream": True},
            ) as r:
                next(r.iter_raw())
        time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(10)
    assert chat.status_code == 200 and chat.text.endswith("data: [DONE]\n\n")
    assert limited.status_code == 429 and limited.headers["retry-after"] == "1"
    log = (tmp_path / "log.txt").read_text()
    assert "caller_left" in log and log.count("caller_left") == 1
