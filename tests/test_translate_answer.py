"""Whole answers (``response``) and HTTP error bodies (``error``) between chat completions,
Responses and Messages: hand-written answers from the three references translated to what the
other reference writes (expected objects written out by hand, and parsed by the real SDKs' own
models), round trips A -> B -> A, every recorded stream of ../shared/recorded folded to its whole
answer and sent through each other API and back (what a client acts on survives: text, reasoning,
tool calls, the stop, usage), what a target cannot express, and hostile bodies. Pure Python."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from _recorded import shared_dir
from fastsse import get_backend
from fastsse.translate import MESSAGE_LIMIT, Untranslatable, error, response

CREATED = 1_767_225_600

# -- hand-written answers, one per reference -----------------------------------------------------

CHAT_TOOL = {
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "object": "chat.completion",
    "created": CREATED,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Checking both.",
                "refusal": None,
                "tool_calls": [
                    {
                        "id": "call_Paris",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_Oslo",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    },
                ],
            },
            "finish_reason": "tool_calls",
            "logprobs": None,
        }
    ],
    "usage": {
        "prompt_tokens": 82,
        "completion_tokens": 17,
        "total_tokens": 99,
        "prompt_tokens_details": {"cached_tokens": 64},
    },
}
MESSAGE_FROM_CHAT_TOOL = {
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "type": "message",
    "role": "assistant",
    "model": "gpt-4o-2024-08-06",
    "content": [
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "call_Paris", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "call_Oslo", "name": "get_weather", "input": {"city": "Oslo"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    # Anthropic's input_tokens leave the cache reads out: 82 - 64
    "usage": {
        "input_tokens": 18,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 64,
        "output_tokens": 17,
    },
}
RESPONSE_FROM_CHAT_TOOL = {
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "object": "response",
    "created_at": CREATED,
    "status": "completed",
    "error": None,
    "incomplete_details": None,
    "model": "gpt-4o-2024-08-06",
    "output": [
        {
            "id": "msg_0_chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking both.", "annotations": []}],
        },
        {
            "id": "fc_1_chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "type": "function_call",
            "status": "completed",
            "arguments": '{"city":"Paris"}',
            "call_id": "call_Paris",
            "name": "get_weather",
        },
        {
            "id": "fc_2_chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "type": "function_call",
            "status": "completed",
            "arguments": '{"city":"Oslo"}',
            "call_id": "call_Oslo",
            "name": "get_weather",
        },
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 82,
        "input_tokens_details": {"cached_tokens": 64},
        "output_tokens": 17,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 99,
    },
}

MESSAGE_THINKING = {
    "id": "msg_01AbCdEf",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {
            "type": "thinking",
            "thinking": "The user wants Paris.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h",
        },
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "text", "text": "Let me look."},
        {
            "type": "tool_use",
            "id": "toolu_01T1x",
            "name": "get_weather",
            "input": {"city": "Paris", "unit": "c"},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 40,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 1200,
        "output_tokens": 90,
    },
}
CHAT_FROM_MESSAGE_THINKING = {
    "id": "msg_01AbCdEf",
    "object": "chat.completion",
    "created": CREATED,
    "model": "claude-sonnet-4-5-20250929",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Let me look.",
                "refusal": None,
                "reasoning_content": "The user wants Paris.",
                "reasoning_details": [
                    {
                        "type": "reasoning.text",
                        "text": "The user wants Paris.",
                        "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h",
                        "format": "anthropic-claude-v1",
                        "index": 0,
                    },
                    {
                        "type": "reasoning.encrypted",
                        "data": "EmwKAhgBEgy3va3pzix",
                        "format": "anthropic-claude-v1",
                        "index": 1,
                    },
                ],
                "tool_calls": [
                    {
                        "id": "toolu_01T1x",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris","unit":"c"}'},
                    }
                ],
            },
            "finish_reason": "tool_calls",
            "logprobs": None,
        }
    ],
    # chat's prompt counts the cache reads: 40 + 1200
    "usage": {
        "prompt_tokens": 1240,
        "completion_tokens": 90,
        "total_tokens": 1330,
        "prompt_tokens_details": {"cached_tokens": 1200},
    },
}

RESPONSE_REASONING = {
    "id": "resp_67ccd3a9da748190",
    "object": "response",
    "created_at": CREATED,
    "status": "completed",
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "max_output_tokens": None,
    "model": "o4-mini-2025-04-16",
    "output": [
        {
            "id": "rs_67ccd3",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Need the weather."}],
        },
        {
            "id": "msg_67ccd3",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "One moment.", "annotations": []}],
        },
        {
            "id": "fc_67ccd3",
            "type": "function_call",
            "status": "completed",
            "arguments": '{"city":"Paris"}',
            "call_id": "call_12345xyz",
            "name": "get_weather",
        },
    ],
    "parallel_tool_calls": True,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": True,
    "temperature": 1.0,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": True}],
    "top_p": 1.0,
    "truncation": "disabled",
    "usage": {
        "input_tokens": 36,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 87,
        "output_tokens_details": {"reasoning_tokens": 64},
        "total_tokens": 123,
    },
    "user": None,
    "metadata": {},
}
CHAT_FROM_RESPONSE_REASONING = {
    "id": "resp_67ccd3a9da748190",
    "object": "chat.completion",
    "created": CREATED,
    "model": "o4-mini-2025-04-16",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "One moment.",
                "refusal": None,
                "reasoning_content": "Need the weather.",
                "tool_calls": [
                    {
                        "id": "call_12345xyz",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            "finish_reason": "tool_calls",
            "logprobs": None,
        }
    ],
    "usage": {
        "prompt_tokens": 36,
        "completion_tokens": 87,
        "total_tokens": 123,
        "completion_tokens_details": {"reasoning_tokens": 64},
    },
}


def test_chat_answer_to_messages_and_responses() -> None:
    out = response(CHAT_TOOL, "chat", "messages")
    assert out == MESSAGE_FROM_CHAT_TOOL and out.dropped == []
    assert response(CHAT_TOOL, "chat", "responses") == RESPONSE_FROM_CHAT_TOOL


def test_messages_answer_to_chat_keeps_thinking_and_its_signature() -> None:
    out = response(MESSAGE_THINKING, "messages", "chat", created=CREATED)
    assert out == CHAT_FROM_MESSAGE_THINKING and out.dropped == []


def test_responses_answer_to_chat() -> None:
    out = response(RESPONSE_REASONING, "responses", "chat")
    assert out == CHAT_FROM_RESPONSE_REASONING and out.dropped == []


def test_a_signature_towards_responses_is_named() -> None:
    with pytest.raises(Untranslatable) as caught:
        response(CHAT_FROM_MESSAGE_THINKING, "chat", "responses")
    assert caught.value.field == "choices[0].message.reasoning_details[0].signature"
    out = response(CHAT_FROM_MESSAGE_THINKING, "chat", "responses", lossy=True)
    assert out.dropped == [
        "choices[0].message.reasoning_details[0].signature",
        "choices[0].message.reasoning_details[1]",
    ]
    assert out["output"][0]["summary"] == [{"type": "summary_text", "text": "The user wants Paris."}]


def test_messages_answer_to_responses_through_chat() -> None:
    out = response(MESSAGE_THINKING, "messages", "responses", lossy=True, created=CREATED)
    # the signature and the redacted block have no Responses place (OpenAI's encrypted_content is its own)
    assert out.dropped == ["content[0].signature", "content[1]"]
    assert [item["type"] for item in out["output"]] == ["reasoning", "message", "function_call"]
    assert out["output"][0]["summary"] == [{"type": "summary_text", "text": "The user wants Paris."}]
    assert out["output"][2]["arguments"] == '{"city":"Paris","unit":"c"}'
    assert out["usage"]["input_tokens"] == 1240 and out["usage"]["input_tokens_details"] == {
        "cached_tokens": 1200
    }
    assert out["created_at"] == CREATED
    halves = response(
        response(MESSAGE_THINKING, "messages", "chat", created=CREATED), "chat", "responses", lossy=True
    )
    assert out == halves
    back = response(out, "responses", "messages")
    assert back == response(response(out, "responses", "chat"), "chat", "messages")
    assert back["content"][0] == {"type": "thinking", "thinking": "The user wants Paris.", "signature": ""}


@pytest.mark.parametrize(
    ("finish", "stop_reason", "status", "incomplete"),
    [
        ("stop", "end_turn", "completed", None),
        ("length", "max_tokens", "incomplete", {"reason": "max_output_tokens"}),
        ("content_filter", "refusal", "incomplete", {"reason": "content_filter"}),
        ("tool_calls", "tool_use", "completed", None),
    ],
)
def test_stop_reasons(finish: str, stop_reason: str, status: str, incomplete: Any) -> None:
    body = copy.deepcopy(CHAT_TOOL)
    body["choices"][0]["finish_reason"] = finish
    assert response(body, "chat", "messages")["stop_reason"] == stop_reason
    out = response(body, "chat", "responses")
    assert (out["status"], out["incomplete_details"]) == (status, incomplete)


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("pause_turn", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content_filter"),
        ("tool_use", "tool_calls"),
    ],
)
def test_messages_stop_reasons(stop_reason: str, finish: str) -> None:
    body = MESSAGE_THINKING | {"stop_reason": stop_reason}
    assert response(body, "messages", "chat")["choices"][0]["finish_reason"] == finish


def test_refusal() -> None:
    body = copy.deepcopy(CHAT_TOOL)
    message = body["choices"][0]["message"]
    message.update(content=None, refusal="I can't help with that.")
    del message["tool_calls"]
    body["choices"][0]["finish_reason"] = "content_filter"
    out = response(body, "chat", "messages")
    assert out["content"] == [{"type": "text", "text": "I can't help with that."}]
    assert out["stop_reason"] == "refusal"
    out = response(body, "chat", "responses")
    assert out["output"][0]["content"] == [{"type": "refusal", "refusal": "I can't help with that."}]
    back = response(out, "responses", "chat")
    assert back["choices"][0]["message"]["refusal"] == "I can't help with that."
    assert back["choices"][0]["finish_reason"] == "content_filter"


def test_responses_incomplete_and_citations() -> None:
    body = copy.deepcopy(RESPONSE_REASONING)
    body["status"] = "incomplete"
    body["incomplete_details"] = {"reason": "max_output_tokens"}
    body["output"][1]["content"][0]["annotations"] = [
        {
            "type": "url_citation",
            "url": "https://example.com/w",
            "title": "W",
            "start_index": 4,
            "end_index": 10,
        }
    ]
    out = response(body, "responses", "chat")
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["choices"][0]["message"]["annotations"] == [
        {
            "type": "url_citation",
            "url_citation": {"url": "https://example.com/w", "title": "W", "start_index": 4, "end_index": 10},
        }
    ]


def test_messages_web_citations_span_their_block() -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [
            {"type": "text", "text": "Per the site, "},
            {
                "type": "text",
                "text": "it rains.",
                "citations": [
                    {
                        "type": "web_search_result_location",
                        "url": "https://w.example",
                        "title": "Weather",
                        "cited_text": "rain",
                        "encrypted_index": "Eo8B",
                    }
                ],
            },
        ],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }
    out = response(body, "messages", "chat")
    assert out["choices"][0]["message"]["content"] == "Per the site, it rains."
    assert out["choices"][0]["message"]["annotations"] == [
        {
            "type": "url_citation",
            "url_citation": {
                "url": "https://w.example",
                "title": "Weather",
                "start_index": 14,
                "end_index": 23,
            },
        }
    ]


# -- round trips of the hand-written answers -----------------------------------------------------


def test_round_trips_exact() -> None:
    for via in ("messages", "responses"):
        assert response(response(CHAT_TOOL, "chat", via), via, "chat", created=CREATED) == CHAT_TOOL
    assert response(CHAT_FROM_MESSAGE_THINKING, "chat", "messages") == MESSAGE_THINKING
    assert response(response(MESSAGE_THINKING, "messages", "chat"), "chat", "messages") == MESSAGE_THINKING


def test_responses_round_trip_up_to_item_ids_and_the_request_echo() -> None:
    back = response(response(RESPONSE_REASONING, "responses", "chat"), "chat", "responses")
    expected = copy.deepcopy(RESPONSE_REASONING)
    for key in (
        "instructions",
        "max_output_tokens",
        "reasoning",
        "store",
        "temperature",
        "text",
        "top_p",
        "truncation",
        "user",
        "metadata",
    ):
        del expected[key]
    expected["tools"] = []
    for n, item in enumerate(expected["output"]):
        item["id"] = f"{item['id'][:2]}_{n}_resp_67ccd3a9da748190".replace("ms_", "msg_")
    assert back == expected


# -- the real SDKs' own models parse what comes out ----------------------------------------------


@pytest.mark.parametrize("answer", [CHAT_TOOL, CHAT_FROM_MESSAGE_THINKING, CHAT_FROM_RESPONSE_REASONING])
def test_sdk_models_parse_the_translations(answer: dict[str, Any]) -> None:
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    from openai._models import construct_type
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response

    message = anthropic.types.Message.model_validate(response(answer, "chat", "messages", lossy=True))
    parsed = ChatCompletion.model_validate(answer)
    assert [b.type for b in message.content if b.type == "tool_use"] == ["tool_use"] * len(
        parsed.choices[0].message.tool_calls or []
    )
    # openai-python builds a Response with construct_type (no validation), as here
    out = construct_type(type_=Response, value=response(answer, "chat", "responses", lossy=True))
    assert isinstance(out, Response)
    assert out.output_text == (parsed.choices[0].message.content or "")
    del openai


# -- what cannot be expressed --------------------------------------------------------------------


def test_losses_are_named_or_listed() -> None:
    body = copy.deepcopy(CHAT_TOOL)
    body["choices"].append(
        {"index": 1, "message": {"role": "assistant", "content": "other"}, "finish_reason": "stop"}
    )
    body["choices"][0]["logprobs"] = {"content": [{"token": "x", "logprob": -0.1}]}
    body["choices"][0]["message"]["annotations"] = [{"type": "url_citation", "url_citation": {"url": "u"}}]
    body["x_groq"] = {"id": "req_1"}
    with pytest.raises(Untranslatable) as caught:
        response(body, "chat", "messages")
    assert caught.value.field == "x_groq"
    out = response(body, "chat", "messages", lossy=True)
    assert sorted(out.dropped) == sorted(
        ["x_groq", "choices[1]", "choices[0].logprobs", "choices[0].message.annotations"]
    )
    assert out == MESSAGE_FROM_CHAT_TOOL
    # the metadata every chat answer has is a normalisation, not a loss
    plain = CHAT_TOOL | {"system_fingerprint": "fp_1", "service_tier": "default"}
    assert response(plain, "chat", "messages").dropped == []


def test_messages_losses() -> None:
    body = MESSAGE_THINKING | {
        "stop_reason": "stop_sequence",
        "stop_sequence": "###",
        "container": {"id": "c"},
    }
    with pytest.raises(Untranslatable):
        response(body, "messages", "chat")
    out = response(body, "messages", "chat", lossy=True)
    assert sorted(out.dropped) == ["container", "stop_sequence"]
    assert out["choices"][0]["finish_reason"] == "stop"
    body = copy.deepcopy(MESSAGE_THINKING)
    body["content"].append({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []})
    assert response(body, "messages", "chat", lossy=True).dropped == ["content[4]"]


def test_responses_losses() -> None:
    body = copy.deepcopy(RESPONSE_REASONING)
    body["output"][0]["encrypted_content"] = "gAAAA"
    body["output"].append({"type": "web_search_call", "id": "ws_1", "status": "completed"})
    out = response(body, "responses", "chat", lossy=True)
    assert out.dropped == ["output[0].encrypted_content", "output[3]"]
    with pytest.raises(Untranslatable, match=r"^output\[0\]\.encrypted_content:"):
        response(body, "responses", "chat")


def test_arguments_that_are_not_an_object_towards_messages() -> None:
    body = copy.deepcopy(CHAT_TOOL)
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"city": "Par'
    with pytest.raises(Untranslatable) as caught:
        response(body, "chat", "messages")
    assert caught.value.field == "choices[0].message.tool_calls[0].function.arguments"
    out = response(body, "chat", "messages", lossy=True)
    assert out["content"][1] == {"type": "tool_use", "id": "call_Paris", "name": "get_weather", "input": {}}


@pytest.mark.parametrize(
    ("source", "body", "field"),
    [
        ("chat", {"choices": []}, "choices"),
        ("chat", {"choices": "x"}, "choices"),
        ("chat", {"choices": [{"index": 0, "message": None}]}, "choices[0].message"),
        ("chat", {"choices": [{"message": {"content": 5}}]}, "choices[0].message.content"),
        (
            "chat",
            {"choices": [{"message": {"tool_calls": [{"function": {"name": 1}}]}}]},
            "choices[0].message.tool_calls[0].function.name",
        ),
        ("messages", {"content": [{"type": "text", "text": None}]}, "content[0].text"),
        ("messages", {"content": "hello"}, "content"),
        ("responses", {"output": [{"type": "message", "content": [7]}]}, "output[0].content[0]"),
        ("responses", {"status": "failed", "error": {"code": "server_error", "message": "x"}}, "error"),
    ],
)
def test_hostile_answers(source: str, body: dict[str, Any], field: str) -> None:
    target = "messages" if source == "chat" else "chat"
    with pytest.raises(Untranslatable) as caught:
        response(body, source, target, lossy=True)
    assert caught.value.field == field
    with pytest.raises(TypeError):
        response([], source, target)  # type: ignore[arg-type]


@pytest.mark.parametrize("fresh", [0, 7, None, "7", True])
@pytest.mark.parametrize("cached", [0, 1200, None, 3.5])
@pytest.mark.parametrize("written", [0, 30, None])
@pytest.mark.parametrize("output", [0, 90, None, [1]])
def test_messages_usage_to_responses_is_the_two_steps(
    fresh: Any, cached: Any, written: Any, output: Any
) -> None:
    from fastsse.responses.encode import chat_usage_to_responses
    from fastsse.translate._answer import _messages_usage_to_responses
    from fastsse.translate._rules import _messages_usage

    usage = {"input_tokens": fresh, "cache_read_input_tokens": cached, "cache_creation_input_tokens": written}
    usage["output_tokens"] = output
    usage = {k: v for k, v in usage.items() if v is not None}
    assert _messages_usage_to_responses(usage) == chat_usage_to_responses(_messages_usage(usage))


# -- HTTP errors ---------------------------------------------------------------------------------

ANTHROPIC_OVERLOADED = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
OPENAI_RATE = {
    "error": {
        "message": "Rate limit reached for gpt-4o",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}


def test_error_bodies() -> None:
    assert error(529, ANTHROPIC_OVERLOADED, "chat") == (
        503,
        {"error": {"message": "Overloaded", "type": "overloaded_error", "param": None, "code": None}},
    )
    assert error(529, ANTHROPIC_OVERLOADED, "messages") == (529, orjson.loads(ANTHROPIC_OVERLOADED))
    assert error(429, OPENAI_RATE, "messages") == (
        429,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limit reached for gpt-4o"}},
    )
    assert error(503, OPENAI_RATE, "messages")[0] == 529
    assert error(400, OPENAI_RATE, "responses") == (400, OPENAI_RATE)
    # servers that answer with text or FastAPI's {"detail": ...}
    assert error(502, b"<html>Bad Gateway</html>", "messages") == (
        502,
        {"type": "error", "error": {"type": "api_error", "message": "<html>Bad Gateway</html>"}},
    )
    assert error(404, {"detail": "Not Found"}, "chat")[1]["error"] == {
        "message": "Not Found",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    assert error(401, "", "messages")[1]["error"]["type"] == "authentication_error"


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe" * 100_000, b"[" * 100_000, b"x" * (8 << 20), [1, 2], None, 3.5, {"error": ["x"] * 10_000}],
)
def test_error_bodies_are_bounded(body: Any) -> None:
    for target in ("chat", "messages"):
        status, out = error(500, body, target)
        assert status == 500
        message = out["error"]["message"]
        assert isinstance(message, str) and len(message) <= MESSAGE_LIMIT


def test_error_arguments() -> None:
    with pytest.raises(ValueError, match="status"):
        error(200, b"", "chat")
    with pytest.raises(ValueError, match="unknown API"):
        error(500, b"", "gemini")


# -- the recorded streams, folded to whole answers, through each other API and back --------------


def _recorded() -> list[Any]:
    root = shared_dir()
    if root is None:
        return [pytest.param(None, None, marks=pytest.mark.skip(reason="../shared is not here"))]
    found = []
    for path in sorted((root / "recorded").rglob("*.sse")):
        parts = path.relative_to(root / "recorded").parts
        api = "messages" if "messages" in parts else "responses" if "responses" in parts else "chat"
        if parts[0] == "gateways" or (api == "chat" and "chat" not in parts):
            continue
        found.append(pytest.param(api, path, id="/".join(parts)))
    return found


def _fold(api: str, path: Path) -> dict[str, Any]:
    py = get_backend("python")
    fold = {
        "chat": py.ChatAggregator,
        "messages": py.MessagesAggregator,
        "responses": py.ResponsesAggregator,
    }[api]()
    decoder = py.Decoder()
    for event in decoder.feed(path.read_bytes()) + decoder.close():
        fold.feed_event(event)
    result: dict[str, Any] = fold.result()
    return result


def essence(answer: dict[str, Any], api: str) -> dict[str, Any]:
    """What a client acts on, read from each API's answer with each reference's field names."""
    if api == "chat":
        message = answer["choices"][0].get("message", {}) if answer.get("choices") else {}
        usage = answer.get("usage") or {}
        return {
            "text": message.get("content") or "",
            "refusal": message.get("refusal") or "",
            "reasoning": message.get("reasoning_content") or message.get("reasoning") or "",
            "calls": [
                (c.get("id"), c["function"]["name"], c["function"]["arguments"])
                for c in message.get("tool_calls") or []
            ],
            "prompt": usage.get("prompt_tokens"),
            "completion": usage.get("completion_tokens"),
        }
    if api == "messages":
        blocks = answer.get("content") or []
        usage = answer.get("usage") or {}
        keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        return {
            "text": "".join(b["text"] for b in blocks if b["type"] == "text"),
            "refusal": "",
            "reasoning": "".join(b["thinking"] for b in blocks if b["type"] == "thinking"),
            "calls": [
                (b["id"], b["name"], orjson.dumps(b.get("input", {})).decode())
                for b in blocks
                if b["type"] in ("tool_use", "server_tool_use")
            ],
            "prompt": sum(usage.get(k) or 0 for k in keys) if usage else None,
            "completion": usage.get("output_tokens"),
        }
    items = answer.get("output") or []
    usage = answer.get("usage") or {}
    parts = [p for i in items if i["type"] == "message" for p in i.get("content") or []]
    return {
        "text": "".join(p["text"] for p in parts if p["type"] == "output_text"),
        "refusal": "".join(p["refusal"] for p in parts if p["type"] == "refusal"),
        "reasoning": "".join(
            p["text"]
            for i in items
            if i["type"] == "reasoning"
            for k in ("summary", "content")
            for p in i.get(k) or []
        ),
        "calls": [
            (i["call_id"], i["name"], i.get("arguments") or "") for i in items if i["type"] == "function_call"
        ],
        "prompt": usage.get("input_tokens"),
        "completion": usage.get("output_tokens"),
    }


def _object(raw: str) -> Any:
    try:
        value = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError:
        return {}
    return value if type(value) is dict else {}


def _comparable(e: dict[str, Any], *apis: str) -> dict[str, Any]:
    """The essence up to the documented normalisations of a trip between ``apis``."""
    out = dict(e)
    if "messages" in apis:
        # arguments cross Messages as an object (those that are none become {}, listed in dropped),
        # a refusal is text there, and an answer without usage gets zero usage (Messages requires it)
        out["calls"] = [(i, n, _object(a)) for i, n, a in e["calls"]]
        out["text"] = e["text"] + e["refusal"]
        out["refusal"] = ""
        out["prompt"] = e["prompt"] or 0
        out["completion"] = e["completion"] or 0
    return out


@pytest.mark.parametrize(("api", "path"), _recorded())
def test_recorded_answers_survive_each_other_api(api: str, path: Path) -> None:
    answer = _fold(api, path)
    if api == "chat" and not answer.get("choices"):
        pytest.skip("the recording holds no choice (an error or an empty stream)")
    if api == "responses" and (answer.get("status") == "failed" or answer.get("error")):
        with pytest.raises(Untranslatable):
            response(answer, api, "chat", lossy=True)
        return
    if api == "chat" and answer.get("error") is not None:
        answer = {k: v for k, v in answer.items() if k != "error"}
    original = essence(answer, api)
    for via in ("chat", "messages", "responses"):
        if via == api:
            continue
        there = response(answer, api, via, lossy=True, created=CREATED)
        json.dumps(there)
        assert _comparable(essence(there, via), api, via) == _comparable(original, api, via)
        if "chat" not in (api, via) and answer.get("id"):  # one read and one write: the two halves
            halves = response(
                response(answer, api, "chat", lossy=True, created=CREATED), "chat", via, lossy=True
            )
            assert there == halves
        back = response(there, via, api, lossy=True, created=CREATED)
        assert _comparable(essence(back, api), api, via) == _comparable(original, api, via)


# -- any answer: a translation or a named error, nothing else --------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
ANSWERS = [
    ("chat", CHAT_TOOL),
    ("chat", CHAT_FROM_MESSAGE_THINKING),
    ("messages", MESSAGE_THINKING),
    ("messages", MESSAGE_FROM_CHAT_TOOL),
    ("responses", RESPONSE_REASONING),
    ("responses", RESPONSE_FROM_CHAT_TOOL),
]


def _mutate(value: Any, path: list[Any], replacement: Any) -> Any:
    if not path or not isinstance(value, (dict, list)) or not value:
        return replacement
    step, rest = path[0], path[1:]
    if isinstance(value, dict):
        key = list(value)[step % len(value)]
        return {**value, key: _mutate(value[key], rest, replacement)}
    index = step % len(value)
    return [*value[:index], _mutate(value[index], rest, replacement), *value[index + 1 :]]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(ANSWERS),
    st.lists(st.integers(0, 50), max_size=6),
    JSON,
    st.sampled_from(["chat", "messages", "responses"]),
    st.booleans(),
)
def test_a_mangled_answer_translates_or_names_the_field(
    case: tuple[str, dict[str, Any]], path: list[int], replacement: Any, target: str, lossy: bool
) -> None:
    source, body = case
    if target == source:
        return
    mangled = _mutate(body, path, replacement)
    if not isinstance(mangled, dict):
        with pytest.raises(TypeError):
            response(mangled, source, target)  # type: ignore[arg-type]
        return
    try:
        out = response(mangled, source, target, lossy=lossy, created=CREATED)
    except Untranslatable as exc:
        assert isinstance(exc.field, str) and str(exc).startswith(exc.field + ":")
        return
    json.dumps(out)


def test_absurd_answers_pass_through_without_copies() -> None:
    huge = "y" * (32 << 20)
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for i in range(20_000)
    ]
    body = copy.deepcopy(CHAT_TOOL)
    body["choices"][0]["message"].update(content=huge, tool_calls=calls)
    out = response(body, "chat", "responses")
    assert out["output"][0]["content"][0]["text"] is huge
    assert len(out["output"]) == 20_001
    out = response(body, "chat", "messages")
    assert out["content"][0]["text"] is huge and len(out["content"]) == 20_001
