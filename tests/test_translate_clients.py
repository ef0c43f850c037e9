"""Real clients read what fastsse translates: the openai SDK's ``responses.stream`` and the anthropic
SDK's ``messages.stream`` against the loopback server's /v1/responses and /v1/messages, whose streams
are translated from the chat scenarios. Their final objects must equal fastsse's fold of the same
chat upstream, mapped field by field as docs/translation.md says. The broken models must break them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import anthropic
import httpx
import openai
import pytest

import fastsse._backend
import fastsse.translate
from fastsse import check_stream
from fastsse.testing.server import LoopbackServer, expected_completion
from fastsse.translate import translator

TIMEOUT = 20.0
PROMPT = "Say hello to the test suite"  # six words: six prompt tokens


@pytest.fixture
def oai(server: LoopbackServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=TIMEOUT) as c:
        yield c


@pytest.fixture
def ant(server: LoopbackServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=TIMEOUT) as c:
        yield c


def upstream_fold(server: LoopbackServer, model: str, target: str) -> dict[str, Any]:
    """fastsse's fold of the chat upstream, read through the translator that serves ``target``."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t = translator("chat", target)
    with (
        httpx.Client(timeout=TIMEOUT) as http,
        http.stream("POST", server.base_url + "/chat/completions", json=body) as r,
    ):
        for piece in r.iter_raw():
            t.write(piece)
    t.close()
    assert isinstance(t, fastsse._backend.current.ChatToMessages | fastsse._backend.current.ChatToResponses)
    return t.result()


def as_messages(fold: dict[str, Any]) -> dict[str, Any]:
    """The Messages object a chat fold stands for (docs/translation.md)."""
    message = fold["choices"][0]["message"]
    content: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        content.append({"type": "thinking", "thinking": message["reasoning_content"], "signature": ""})
    text = (message.get("content") or "") + (message.get("refusal") or "")
    if text:
        content.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or []:
        content.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": call["function"]["name"],
                "input": json.loads(call["function"]["arguments"]),
            }
        )
    stop = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}[
        fold["choices"][0]["finish_reason"]
    ]
    usage = fold["usage"]
    return {
        "id": fold["id"],
        "model": fold["model"],
        "content": content,
        "stop_reason": stop,
        "input_tokens": usage["prompt_tokens"],
        "output_tokens": usage["completion_tokens"],
    }


def as_responses(fold: dict[str, Any]) -> dict[str, Any]:
    """The Responses object a chat fold stands for (docs/translation.md)."""
    message = fold["choices"][0]["message"]
    output: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        output.append({"type": "reasoning", "summary": [message["reasoning_content"]]})
    parts = []
    if message.get("content"):
        parts.append(("output_text", message["content"]))
    if message.get("refusal"):
        parts.append(("refusal", message["refusal"]))
    if parts:
        output.append({"type": "message", "content": parts})
    for call in message.get("tool_calls") or []:
        output.append(
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
            }
        )
    usage = fold["usage"]
    return {
        "id": fold["id"],
        "model": fold["model"],
        "status": "completed",
        "output": output,
        "usage": (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]),
    }


def sdk_messages(msg: Any) -> dict[str, Any]:
    content = []
    for block in msg.content:
        if block.type == "thinking":
            content.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        elif block.type == "text":
            content.append({"type": "text", "text": block.text})
        else:
            content.append({"type": block.type, "id": block.id, "name": block.name, "input": block.input})
    return {
        "id": msg.id,
        "model": msg.model,
        "content": content,
        "stop_reason": msg.stop_reason,
        "input_tokens": msg.usage.input_tokens,
        "output_tokens": msg.usage.output_tokens,
    }


def sdk_responses(response: Any) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    for item in response.output:
        if item.type == "reasoning":
            output.append({"type": "reasoning", "summary": [s.text for s in item.summary]})
        elif item.type == "message":
            parts = [(p.type, p.text if p.type == "output_text" else p.refusal) for p in item.content]
            output.append({"type": "message", "content": parts})
        else:
            output.append(
                {"type": item.type, "call_id": item.call_id, "name": item.name, "arguments": item.arguments}
            )
    usage = response.usage
    return {
        "id": response.id,
        "model": response.model,
        "status": response.status,
        "output": output,
        "usage": (usage.input_tokens, usage.output_tokens, usage.total_tokens),
    }


SCENARIOS = ["plain", "reasoning", "demo", "tools", "refusal", "crlf", "slow-1", "long-200"]


@pytest.mark.parametrize("model", SCENARIOS)
def test_anthropic_sdk_reads_the_translation(
    ant: anthropic.Anthropic, server: LoopbackServer, model: str
) -> None:
    with ant.messages.stream(
        model=model, max_tokens=64, messages=[{"role": "user", "content": PROMPT}]
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert sdk_messages(final) == as_messages(upstream_fold(server, model, "messages"))


@pytest.mark.parametrize("model", SCENARIOS)
def test_openai_sdk_reads_the_translation(oai: openai.OpenAI, server: LoopbackServer, model: str) -> None:
    with oai.responses.stream(model=model, input=PROMPT) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert sdk_responses(final) == as_responses(upstream_fold(server, model, "responses"))


def test_hand_written_expectations(ant: anthropic.Anthropic, oai: openai.OpenAI) -> None:
    """One case spelled out by hand from the tools scenario, so the mapping helpers are checked too."""
    with ant.messages.stream(
        model="tools", max_tokens=64, messages=[{"role": "user", "content": PROMPT}]
    ) as stream:
        msg = stream.get_final_message()
    assert [(b.type, b.id, b.name, b.input) for b in msg.content] == [  # type: ignore[union-attr]
        ("tool_use", "call_weather_paris", "get_weather", {"city": "Paris", "unit": "celsius"}),
        ("tool_use", "call_time_paris", "get_time", {"tz": "Europe/Paris"}),
    ]
    assert (msg.stop_reason, msg.usage.input_tokens, msg.usage.output_tokens) == ("tool_use", 6, 9)
    with oai.responses.stream(model="reasoning", input=PROMPT) as stream:
        response = stream.get_final_response()
    assert response.output_text == "Hello! Nice to meet you."
    assert response.output[0].summary[0].text == "The user greets me; a short friendly reply fits — ok."  # type: ignore[union-attr]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (6, 11)  # type: ignore[union-attr]


def test_mid_stream_error_reaches_both_clients(ant: anthropic.Anthropic, oai: openai.OpenAI) -> None:
    seen: list[str] = []
    with (
        pytest.raises(anthropic.APIStatusError, match=r"simulated mid-stream failure"),
        ant.messages.stream(
            model="error", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream,
    ):
        for event in stream:
            if event.type == "text":
                seen.append(event.text)
    assert "".join(seen) == "Hello! Streaming from the fastsse"
    with oai.responses.stream(model="error", input="hi") as rstream:
        kinds = [event.type for event in rstream]
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            rstream.get_final_response()
    assert kinds[-1] == "response.failed"


def test_truncation_stays_truncated(ant: anthropic.Anthropic, oai: openai.OpenAI) -> None:
    kinds: list[str] = []
    # the SDKs surface their transport's error (httpx's RemoteProtocolError) as the body ends early
    with (
        pytest.raises(Exception, match=r"incomplete chunked read|peer closed|Connection error"),
        ant.messages.stream(
            model="disconnect", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream,
    ):
        for event in stream:
            kinds.append(event.type)
    assert "message_stop" not in kinds and "content_block_delta" in kinds
    rkinds: list[str] = []
    with (
        pytest.raises(Exception, match=r"incomplete chunked read|peer closed|Connection error"),
        oai.responses.stream(model="disconnect", input="hi") as rstream,
    ):
        for revent in rstream:
            rkinds.append(revent.type)
    assert "response.completed" not in rkinds and "response.output_text.delta" in rkinds


# the broken models: each reproduces a reported gateway bug, and each is visible to the linter


def raw(server: LoopbackServer, api: str, model: str) -> bytes:
    body = {
        "model": model,
        "stream": True,
        "input": "hi",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with httpx.Client(timeout=TIMEOUT) as http:
        response = http.post(f"{server.base_url}/{api}", json=body)
        assert response.status_code == 200
        return response.content


@pytest.mark.parametrize("api", ["responses", "messages"])
@pytest.mark.parametrize("model", ["plain", "reasoning", "tools", "refusal", "demo", "n2"])
def test_compliant_translations_are_lint_clean(server: LoopbackServer, api: str, model: str) -> None:
    assert check_stream(raw(server, api, model), api=api) == []


BROKEN = [
    ("responses", "orphan-delta", ["missing-output-item-added"]),
    ("responses", "no-text-done", ["missing-output-text-done"]),
    ("responses", "swallowed", ["text-done-mismatch", "missing-terminal"]),
    ("responses", "error-swallowed", ["missing-output-item-done", "missing-usage"]),
    ("responses", "bad-sequence", ["sequence-number"]),
    ("responses", "no-item-done", ["missing-output-item-done", "missing-output-item-done"]),
    ("messages", "zero-usage", ["zero-usage"]),
    ("messages", "tool-text-delta", ["delta-type-mismatch", "delta-type-mismatch"]),
    ("messages", "empty-input-json", ["tool-input-empty", "tool-input-empty"]),
    ("messages", "no-tool-name", ["tool-use-incomplete", "tool-use-incomplete"]),
    ("messages", "no-block-stop", ["missing-content-block-stop", "missing-content-block-stop"]),
    ("messages", "index-order", ["block-index-order", "block-index-order"]),
    ("messages", "no-message-stop", ["missing-message-stop"]),
    ("messages", "error-swallowed", ["missing-content-block-stop", "zero-usage"]),
]


@pytest.mark.parametrize(("api", "model", "codes"), BROKEN)
def test_broken_models_are_reported(server: LoopbackServer, api: str, model: str, codes: list[str]) -> None:
    assert [f.code for f in check_stream(raw(server, api, model), api=api)] == codes


def test_broken_models_break_the_openai_sdk(oai: openai.OpenAI) -> None:
    with (
        pytest.raises(RuntimeError, match="before receiving its output item"),
        oai.responses.stream(model="orphan-delta", input="hi") as s,
    ):
        list(s)
    with oai.responses.stream(model="swallowed", input="hi") as s:
        list(s)
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            s.get_final_response()
    with oai.responses.stream(model="error-swallowed", input="hi") as s:
        final = s.get_final_response()  # the failure passes for a success: nothing raises
    assert final.status == "completed" and final.error is None


def test_broken_models_break_the_anthropic_sdk(ant: anthropic.Anthropic) -> None:
    def final(model: str) -> Any:
        with ant.messages.stream(
            model=model, max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        ) as s:
            return s.get_final_message()

    assert [b.input for b in final("tool-text-delta").content] == [{}, {}]  # the tool input is lost
    assert [b.name for b in final("no-tool-name").content] == ["", ""]
    assert final("zero-usage").usage.input_tokens == 0
    assert final("error-swallowed").stop_reason == "end_turn"  # no exception: the error is lost
    with pytest.raises(IndexError):
        final("index-order")


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_routes_refuse_what_they_do_not_serve(server: LoopbackServer, api: str) -> None:
    with httpx.Client(timeout=TIMEOUT) as http:
        assert http.post(f"{server.base_url}/{api}", json={"model": "plain"}).status_code == 400
        assert (
            http.post(f"{server.base_url}/{api}", json={"model": "html", "stream": True}).status_code == 400
        )


def test_translators_on_both_backends_agree(
    backend: SimpleNamespace, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fastsse._backend, "current", backend)
    fold = upstream_fold(server, "tools", "messages")
    assert fold["verdict"]["complete"] is True
    assert [c["function"]["name"] for c in fold["choices"][0]["message"]["tool_calls"]] == [
        "get_weather",
        "get_time",
    ]


# the SDKs' final objects against fastsse's own folds of the same translated bytes (both backends)


def fold_format(backend: SimpleNamespace, api: str, body: bytes) -> dict[str, Any]:
    stream = (backend.MessagesStream if api == "messages" else backend.ResponsesStream)()
    for i in range(0, len(body), 97):
        stream.write(body[i : i + 97])
    stream.close()
    result: dict[str, Any] = stream.result()
    assert result.pop("verdict")["complete"] is True
    return result


def same_keys(sdk: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """The SDK object restricted to the keys fastsse's fold has, recursively through lists."""
    out: dict[str, Any] = {}
    for key, value in ours.items():
        mine = sdk.get(key)
        if isinstance(value, dict) and isinstance(mine, dict):
            out[key] = same_keys(mine, value)
        elif isinstance(value, list) and isinstance(mine, list) and len(value) == len(mine):
            out[key] = [
                same_keys(a, b) if isinstance(a, dict) and isinstance(b, dict) else a
                for a, b in zip(mine, value, strict=True)
            ]
        else:
            out[key] = mine
    return out


@pytest.mark.parametrize("model", ["plain", "reasoning", "tools", "refusal", "demo"])
def test_sdk_final_objects_equal_fastsse_folds(
    backend: SimpleNamespace, server: LoopbackServer, ant: anthropic.Anthropic, oai: openai.OpenAI, model: str
) -> None:
    ours = fold_format(backend, "messages", raw(server, "messages", model))
    with ant.messages.stream(model=model, max_tokens=8, messages=[{"role": "user", "content": "hi"}]) as s:
        theirs = s.get_final_message().model_dump()
    assert same_keys(theirs, ours) == ours
    ours = fold_format(backend, "responses", raw(server, "responses", model))
    with oai.responses.stream(model=model, input="hi") as r:
        rtheirs = r.get_final_response().model_dump()
    assert same_keys(rtheirs, ours) == ours


# the other way: the openai chat SDK reads chat streams that went through Messages or Responses


@pytest.mark.parametrize("via", ["messages", "responses"])
@pytest.mark.parametrize("model", ["plain", "reasoning", "tools", "slow-1"])
def test_openai_chat_sdk_reads_translated_back_streams(oai: openai.OpenAI, via: str, model: str) -> None:
    messages: Any = [{"role": "user", "content": PROMPT}]
    with oai.chat.completions.stream(
        model=f"via-{via}/{model}", messages=messages, stream_options={"include_usage": True}
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    want = expected_completion({"model": model, "messages": messages})
    got, expected = final.choices[0], want["choices"][0]
    assert (final.id, final.created, final.model) == (want["id"], want["created"], model)
    assert got.message.content == expected["message"]["content"]
    assert getattr(got.message, "reasoning_content", None) == expected["message"].get("reasoning_content")
    assert [(c.id, c.function.name, c.function.arguments) for c in got.message.tool_calls or []] == [  # type: ignore[union-attr]
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in expected["message"].get("tool_calls", [])
    ]
    assert got.finish_reason == expected["finish_reason"]
    assert final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (
        want["usage"]["prompt_tokens"],
        want["usage"]["completion_tokens"],
    )


@pytest.mark.parametrize("via", ["messages", "responses"])
def test_openai_chat_sdk_raises_an_error_carried_back(oai: openai.OpenAI, via: str) -> None:
    seen = []
    with pytest.raises(openai.APIError, match=r"simulated mid-stream failure"):
        for chunk in oai.chat.completions.create(
            model=f"via-{via}/error", messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            seen.append(chunk.choices[0].delta.content or "")
    assert "".join(seen) == "Hello! Streaming from the fastsse"


def test_serve_help_names_every_broken_model() -> None:
    from fastsse.testing import server as module
    from fastsse.testing._translated import BROKEN

    doc = module.__doc__ or ""
    for api, models in BROKEN.items():
        line = " ".join(doc.split(f"\n  {api}")[1].split("\nOn ")[0].split("\n  messages")[0].split())
        assert sorted(m.strip(",") for m in line.split()) == sorted(models), api


def test_the_anthropic_sdk_gets_the_signature_and_the_redacted_block(backend: SimpleNamespace) -> None:
    """An OpenRouter-shaped chat upstream (reasoning with its signature and an encrypted part in
    reasoning_details), translated to Messages and served as it is: the anthropic SDK's final
    message holds the thinking with its signature and the redacted block, what a client must send
    back to go on after a tool call."""
    from _raw_server import RawServer
    from test_translate import OPENROUTER, SIGNATURE

    t = backend.ChatToMessages()
    body = t.write(OPENROUTER) + t.close()

    def answer(conn: Any) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )

    with (
        RawServer(answer) as raw,
        anthropic.Anthropic(
            base_url=raw.base_url[: -len("/v1")], api_key="x", max_retries=0, timeout=TIMEOUT
        ) as c,
        c.messages.stream(model="m", max_tokens=64, messages=[{"role": "user", "content": PROMPT}]) as stream,
    ):
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "redacted_thinking", "text"]
    thinking, redacted, text = final.content
    assert (thinking.thinking, thinking.signature) == ("This is 4.", SIGNATURE)  # type: ignore[union-attr]
    assert redacted.data == "opaque-1"  # type: ignore[union-attr]
    assert text.text == "4"  # type: ignore[union-attr]


def test_engine_translates_while_it_streams(
    backend: SimpleNamespace, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``create_stream(request, send, format="to-messages" | "to-responses" | "to-chat")`` on the
    many-streams engine: send gets the request's API translated, the result is the upstream's fold;
    a cut upstream stays cut and raises; the request's own API is refused as a target."""
    pytest.importorskip("pycurl")
    monkeypatch.setattr(fastsse._backend, "current", backend)

    with fastsse.Client(base_url=server.base_url, timeout=TIMEOUT) as client:
        body = {
            "model": "tools",
            "messages": [{"role": "user", "content": PROMPT}],
            "stream": True,
            "stream_options": {"include_usage": True},  # what Messages reports at its end
        }
        for target in ("messages", "responses"):
            sent: list[bytes] = []
            result = client.create_stream(body, sent.append, format=f"to-{target}")
            out = b"".join(sent)
            assert check_stream(out, api=target) == []
            assert result["verdict"]["complete"] is True
            assert [c["function"]["name"] for c in result["choices"][0]["message"]["tool_calls"]] == [
                "get_weather",
                "get_time",
            ]
        # a Messages upstream read back as chat
        sent = []
        result = client.create_stream(
            {"model": "reasoning", "max_tokens": 64, "messages": [{"role": "user", "content": PROMPT}]},
            sent.append,
            api="messages",
            format="to-chat",
        )
        assert check_stream(b"".join(sent), expect_usage=True) == []
        assert result["verdict"]["complete"] is True and result["content"][0]["type"] == "thinking"
        cut: list[bytes] = []
        with pytest.raises(fastsse.TransportError):
            client.create_stream({**body, "model": "disconnect"}, cut.append, format="to-messages")
        assert cut and b"message_stop" not in b"".join(cut)
        with pytest.raises(ValueError, match="already"):
            client.create_stream(body, sent.append, format="to-chat")
