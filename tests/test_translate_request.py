"""Request bodies between chat completions, Responses and Messages (``request``): hand-written
requests from the three APIs' references, translated to what each reference says the other API
takes (expected bodies written out by hand), round trips A -> B -> A equal to the original or to
its documented normalisation (docs/translation.md), what a target cannot express (an error naming
the field, or with lossy=True dropped and listed), and hostile bodies. Pure Python: no backend."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from fastsse.translate import Translated, Untranslatable, request
from fastsse.translate._request import through_chat

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

# -- the two-turn tool conversation, as each API's reference writes it --------------------------

MESSAGES_TOOL_TURN = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": "You answer in one sentence.",
    "tools": [{"name": "get_weather", "description": "Current weather", "input_schema": WEATHER_SCHEMA}],
    "messages": [
        {"role": "user", "content": "What is the weather in Paris and in Oslo?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I will look both up."},
                {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18 C, sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01B",
                    "content": [{"type": "text", "text": "4 C"}],
                },
            ],
        },
    ],
    "stream": True,
}

# what the chat reference takes for it, written out by hand
CHAT_TOOL_TURN = {
    "messages": [
        {"role": "system", "content": "You answer in one sentence."},
        {"role": "user", "content": "What is the weather in Paris and in Oslo?"},
        {
            "role": "assistant",
            "content": "I will look both up.",
            "tool_calls": [
                {
                    "id": "toolu_01A",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "toolu_01B",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_01A", "content": "18 C, sunny"},
        {"role": "tool", "tool_call_id": "toolu_01B", "content": [{"type": "text", "text": "4 C"}]},
    ],
    "model": "claude-sonnet-4-5",
    "max_completion_tokens": 1024,
    "stream": True,
    "stream_options": {"include_usage": True},
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather",
                "parameters": WEATHER_SCHEMA,
            },
        }
    ],
}

RESPONSES_TOOL_TURN = {
    "model": "gpt-5-mini",
    "input": [
        {"role": "system", "content": "You answer in one sentence."},
        {"role": "user", "content": "What is the weather in Paris and in Oslo?"},
        {"role": "assistant", "content": "I will look both up."},
        {
            "type": "function_call",
            "call_id": "call_A",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {
            "type": "function_call",
            "call_id": "call_B",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
        },
        {"type": "function_call_output", "call_id": "call_A", "output": "18 C, sunny"},
        {
            "type": "function_call_output",
            "call_id": "call_B",
            "output": [{"type": "input_text", "text": "4 C"}],
        },
    ],
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather",
            "parameters": WEATHER_SCHEMA,
            "strict": False,
        }
    ],
    "max_output_tokens": 1024,
    "stream": True,
}

CHAT_FROM_RESPONSES_TOOL_TURN = {
    "messages": [
        {"role": "system", "content": "You answer in one sentence."},
        {"role": "user", "content": "What is the weather in Paris and in Oslo?"},
        {
            "role": "assistant",
            "content": "I will look both up.",
            "tool_calls": [
                {
                    "id": "call_A",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_B",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_A", "content": "18 C, sunny"},
        {"role": "tool", "tool_call_id": "call_B", "content": [{"type": "text", "text": "4 C"}]},
    ],
    "model": "gpt-5-mini",
    "stream": True,
    "max_completion_tokens": 1024,
    "stream_options": {"include_usage": True},
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather",
                "parameters": WEATHER_SCHEMA,
            },
        }
    ],
}


def test_messages_tool_turn_to_chat_is_what_the_chat_reference_takes() -> None:
    out = request(MESSAGES_TOOL_TURN, "messages", "chat")
    assert out == CHAT_TOOL_TURN
    assert isinstance(out, Translated) and out.dropped == []


def test_responses_tool_turn_to_chat_is_what_the_chat_reference_takes() -> None:
    out = request(RESPONSES_TOOL_TURN, "responses", "chat")
    assert out == CHAT_FROM_RESPONSES_TOOL_TURN
    assert out.dropped == []


def test_chat_tool_turn_to_messages_and_responses() -> None:
    assert request(CHAT_TOOL_TURN, "chat", "messages") == MESSAGES_TOOL_TURN
    expected = {
        "input": [
            {"role": "system", "content": "You answer in one sentence."},
            {"role": "user", "content": "What is the weather in Paris and in Oslo?"},
            {"role": "assistant", "content": "I will look both up."},
            {
                "type": "function_call",
                "call_id": "toolu_01A",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "toolu_01B",
                "name": "get_weather",
                "arguments": '{"city":"Oslo"}',
            },
            {"type": "function_call_output", "call_id": "toolu_01A", "output": "18 C, sunny"},
            {
                "type": "function_call_output",
                "call_id": "toolu_01B",
                "output": [{"type": "input_text", "text": "4 C"}],
            },
        ],
        "model": "claude-sonnet-4-5",
        "stream": True,
        "max_output_tokens": 1024,
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather",
                "parameters": WEATHER_SCHEMA,
                "strict": False,
            }
        ],
    }
    assert request(CHAT_TOOL_TURN, "chat", "responses") == expected


def test_messages_to_responses_and_back_through_chat() -> None:
    out = request(MESSAGES_TOOL_TURN, "messages", "responses")
    assert out["input"][3] == {
        "type": "function_call",
        "call_id": "toolu_01A",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    assert out["input"][6] == {
        "type": "function_call_output",
        "call_id": "toolu_01B",
        "output": [{"type": "input_text", "text": "4 C"}],
    }
    assert request(out, "responses", "messages") == MESSAGES_TOOL_TURN


# -- the corpus: requests that go to each other API and come back unchanged ----------------------

CHAT_CORPUS: dict[str, dict[str, Any]] = {
    "plain": {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello"},
        ],
        "max_completion_tokens": 256,
        "temperature": 0.7,
        "top_p": 0.9,
        "stream": True,
        "stream_options": {"include_usage": True},
    },
    "tools": CHAT_TOOL_TURN,
    "images": {
        "model": "gpt-4o",
        "max_completion_tokens": 300,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these images?"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ],
            }
        ],
    },
    "text-beside-tool-call-then-user": {
        "model": "m",
        "max_completion_tokens": 50,
        "messages": [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "w", "arguments": '{"city":"Rome"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "warm"},
            {"role": "user", "content": "And tomorrow?"},
        ],
        "tools": [{"type": "function", "function": {"name": "w", "parameters": WEATHER_SCHEMA}}],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "user": "user-1234",
    },
    "named-tool": {
        "model": "m",
        "max_completion_tokens": 10,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [
            {"type": "function", "function": {"name": "w", "parameters": WEATHER_SCHEMA, "strict": True}}
        ],
        "tool_choice": {"type": "function", "function": {"name": "w"}},
        "stream": False,
    },
    "no-tools-allowed": {
        "model": "m",
        "max_completion_tokens": 10,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"type": "function", "function": {"name": "w", "parameters": WEATHER_SCHEMA}}],
        "tool_choice": "none",
    },
}

# chat requests only one of the two other APIs can carry
CHAT_TO_MESSAGES_ONLY: dict[str, dict[str, Any]] = {
    "stop-and-signed-thinking": {
        "model": "anthropic/claude-sonnet-4.5",
        "max_completion_tokens": 2000,
        "stop": ["\n\nHuman:"],
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "toolu_9",
                        "type": "function",
                        "function": {"name": "calc", "arguments": '{"x":"2+2"}'},
                    }
                ],
                "reasoning_details": [
                    {
                        "type": "reasoning.text",
                        "text": "Use the calculator.",
                        "signature": "EqQBCkgIARABGAIiQ",
                        "format": "anthropic-claude-v1",
                        "index": 0,
                    },
                    {
                        "type": "reasoning.encrypted",
                        "data": "EmwKAhgBEgy3",
                        "format": "anthropic-claude-v1",
                        "index": 1,
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_9", "content": "4"},
        ],
        "tools": [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}],
    },
}
CHAT_TO_RESPONSES_ONLY: dict[str, dict[str, Any]] = {
    "developer-reasoning-format": {
        "model": "o4-mini",
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Answer in JSON."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Describe it"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://example.com/a.png", "detail": "high"},
                    },
                    {"type": "file", "file": {"file_id": "file-abc"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "reasoning_details": [
                    {
                        "type": "reasoning.summary",
                        "summary": "Looked at it.",
                        "id": "rs_1",
                        "format": "openai-responses-v1",
                        "index": 0,
                    },
                    {
                        "type": "reasoning.encrypted",
                        "data": "gAAAAB",
                        "id": "rs_1",
                        "format": "openai-responses-v1",
                        "index": 1,
                    },
                ],
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "{"}, {"type": "refusal", "refusal": "no"}],
            },
        ],
        "max_completion_tokens": 500,
        "reasoning_effort": "low",
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True},
        },
        "verbosity": "low",
        "metadata": {"session": "s1"},
        "store": False,
        "service_tier": "flex",
        "safety_identifier": "hash-1",
        "prompt_cache_key": "k1",
        "tools": [{"type": "function", "function": {"name": "look", "description": "Look"}}],
    },
}

MESSAGES_CORPUS: dict[str, dict[str, Any]] = {
    "tools": MESSAGES_TOOL_TURN,
    "system-blocks-images-stop": {
        "model": "claude-haiku-4-5",
        "max_tokens": 512,
        "system": [
            {"type": "text", "text": "You are a careful assistant."},
            {"type": "text", "text": "Be brief."},
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Compare these."},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/b.jpg"}},
                ],
            },
            {"role": "assistant", "content": "They differ."},
            {"role": "user", "content": [{"type": "text", "text": "How?"}]},
        ],
        "temperature": 0.2,
        "top_p": 0.95,
        "metadata": {"user_id": "u-42"},
        "stream": False,
    },
    "named-tool-no-parallel": {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "weather in Rome"}],
        "tools": [{"name": "get_weather", "input_schema": WEATHER_SCHEMA, "strict": True}],
        "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
    },
    "any-tool": {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "weather in Rome"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_X", "name": "get_weather", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_X", "content": "mild"},
                    {"type": "text", "text": "thanks, and Milan?"},
                ],
            },
        ],
        "tools": [{"name": "get_weather", "input_schema": WEATHER_SCHEMA}],
        "tool_choice": {"type": "any"},
    },
    "none-tool": {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "get_weather", "input_schema": WEATHER_SCHEMA}],
        "tool_choice": {"type": "none"},
    },
}
MESSAGES_TO_CHAT_ONLY: dict[str, dict[str, Any]] = {
    "stop-sequences": {
        "model": "claude-haiku-4-5",
        "max_tokens": 512,
        "messages": [{"role": "user", "content": "Count to ten."}],
        "stop_sequences": ["5", "END"],
    },
    "thinking-with-signature": {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4000,
        "messages": [
            {"role": "user", "content": "Is 97 prime?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": "Check divisors up to 9.",
                        "signature": "WaUjzkypQ2mUEVM36O2T",
                    },
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                    {"type": "text", "text": "I will verify."},
                    {"type": "tool_use", "id": "toolu_P", "name": "is_prime", "input": {"n": 97}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_P", "content": "true"}],
            },
        ],
        "tools": [
            {"name": "is_prime", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}
        ],
    },
}

# through Messages the arguments come back as compact JSON (they cross as an object)
COMPACT_RESPONSES_TOOL_TURN = copy.deepcopy(RESPONSES_TOOL_TURN)
for _item in COMPACT_RESPONSES_TOOL_TURN["input"]:
    if _item.get("type") == "function_call":
        _item["arguments"] = _item["arguments"].replace(" ", "")

RESPONSES_CORPUS: dict[str, dict[str, Any]] = {
    "tools": COMPACT_RESPONSES_TOOL_TURN,
    "plain": {
        "model": "gpt-5",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "max_output_tokens": 64,
        "temperature": 1,
        "top_p": 1,
        "tool_choice": "auto",
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": False}],
    },
    "named-tool": {
        "model": "gpt-5",
        "input": [{"role": "user", "content": "go"}],
        "max_output_tokens": 64,
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}],
        "tool_choice": {"type": "function", "name": "f"},
        "parallel_tool_calls": False,
        "user": "u-7",
    },
}
RESPONSES_TO_CHAT_ONLY: dict[str, dict[str, Any]] = {
    "tools-spaced-arguments": RESPONSES_TOOL_TURN,
    "reasoning-items-images-settings": {
        "model": "o4-mini",
        "input": [
            {"role": "developer", "content": "Answer in JSON."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Describe"},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "low"},
                    {"type": "input_file", "file_id": "file-1", "filename": "a.pdf"},
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_68a",
                "summary": [
                    {"type": "summary_text", "text": "Step one."},
                    {"type": "summary_text", "text": "Two."},
                ],
                "encrypted_content": "gAAAAABo",
            },
            {"type": "function_call", "call_id": "call_Z", "name": "look", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_Z", "output": "a dog"},
            {"type": "reasoning", "id": "rs_68b", "summary": []},
            {
                "role": "assistant",
                "content": [{"type": "output_text", "text": "{}"}, {"type": "refusal", "refusal": "x"}],
            },
            {"role": "user", "content": "more"},
        ],
        "reasoning": {"effort": "high"},
        "text": {
            "format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}, "strict": True}
        },
        "metadata": {"k": "v"},
        "store": True,
        "max_output_tokens": 999,
        "stream": False,
    },
}


def _cases(corpus: dict[str, dict[str, Any]], source: str, targets: tuple[str, ...]) -> list[Any]:
    return [
        pytest.param(source, target, body, id=f"{source}-{name}-via-{target}")
        for name, body in corpus.items()
        for target in targets
    ]


ROUND_TRIPS = (
    _cases(CHAT_CORPUS, "chat", ("messages", "responses"))
    + _cases(CHAT_TO_MESSAGES_ONLY, "chat", ("messages",))
    + _cases(CHAT_TO_RESPONSES_ONLY, "chat", ("responses",))
    + _cases(MESSAGES_CORPUS, "messages", ("chat", "responses"))
    + _cases(MESSAGES_TO_CHAT_ONLY, "messages", ("chat",))
    + _cases(RESPONSES_CORPUS, "responses", ("chat", "messages"))
    + _cases(RESPONSES_TO_CHAT_ONLY, "responses", ("chat",))
)


@pytest.mark.parametrize(("source", "target", "body"), ROUND_TRIPS)
def test_round_trip_gives_the_original_back(source: str, target: str, body: dict[str, Any]) -> None:
    kept = copy.deepcopy(body)
    there = request(body, source, target)
    assert there.dropped == []
    json.dumps(there)  # plain JSON types only
    back = request(there, target, source)
    assert back == body
    assert back.dropped == []
    assert body == kept  # the input is not modified


# -- documented normalisations: what a round trip may change, each written out -------------------


def _through(body: dict[str, Any], source: str, target: str) -> dict[str, Any]:
    return request(request(body, source, target), target, source)


BASE = {"model": "m", "max_completion_tokens": 5}


def test_developer_becomes_system_in_messages() -> None:
    body = {**BASE, "messages": [{"role": "developer", "content": "rules"}, {"role": "user", "content": "q"}]}
    assert request(body, "chat", "messages")["system"] == "rules"
    assert _through(body, "chat", "messages")["messages"][0] == {"role": "system", "content": "rules"}


def test_several_system_messages_become_one_of_parts() -> None:
    body = {
        **BASE,
        "messages": [
            {"role": "system", "content": "a"},
            {"role": "system", "content": [{"type": "text", "text": "b"}]},
            {"role": "user", "content": "q"},
        ],
    }
    assert request(body, "chat", "messages")["system"] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]
    assert _through(body, "chat", "messages")["messages"][0] == {
        "role": "system",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }


def test_stop_string_becomes_a_list_and_tool_without_parameters_gets_an_empty_schema() -> None:
    body = {
        **BASE,
        "messages": [{"role": "user", "content": "q"}],
        "stop": "END",
        "tools": [{"type": "function", "function": {"name": "now"}}],
        "parallel_tool_calls": True,
    }
    out = request(body, "chat", "messages")
    assert out["stop_sequences"] == ["END"]
    assert out["tools"] == [{"name": "now", "input_schema": {"type": "object", "properties": {}}}]
    assert "tool_choice" not in out  # parallel calls are Messages' default
    back = request(out, "messages", "chat")
    assert back["stop"] == ["END"]
    assert back["tools"] == [
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
    ]
    # through Responses a tool keeps having no parameters (null there)
    assert request(body | {"stop": None}, "chat", "responses")["tools"][0]["parameters"] is None


def test_arguments_come_back_compact_through_messages() -> None:
    body = {
        **BASE,
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}],
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{ "x" : 1 }'}}
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "r"},
            {"role": "user", "content": [{"type": "text", "text": "and?"}]},
        ],
    }
    back = _through(body, "chat", "messages")
    assert back["messages"][0] == {
        "role": "assistant",
        "content": "ok",
        "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}],
    }
    assert back["messages"][2] == {"role": "user", "content": "and?"}


def test_stream_without_include_usage_comes_back_asking_for_usage() -> None:
    body = {**BASE, "messages": [{"role": "user", "content": "q"}], "stream": True}
    for via in ("messages", "responses"):
        assert _through(body, "chat", via)["stream_options"] == {"include_usage": True}
    body["stream_options"] = {"include_usage": False}
    assert "stream_options" not in request(body, "chat", "messages")


def test_refusal_in_history_is_text_in_messages() -> None:
    body = {
        **BASE,
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "refusal": "I can't."},
        ],
    }
    assert request(body, "chat", "messages")["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "I can't."}],
    }


def test_responses_instructions_and_string_input() -> None:
    body = {"model": "m", "instructions": "Be kind.", "input": "Hi"}
    chat = request(body, "responses", "chat")
    assert chat == {
        "messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}],
        "model": "m",
    }
    assert request(chat, "chat", "responses") == {
        "input": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}],
        "model": "m",
    }


def test_responses_item_type_id_and_status_are_left_out() -> None:
    body = {
        "model": "m",
        "input": [
            {"type": "message", "role": "user", "content": "q"},
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "a", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "status": "completed",
                "call_id": "c",
                "name": "f",
                "arguments": "{}",
            },
        ],
    }
    assert _through(body, "responses", "chat")["input"] == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
    ]


def test_responses_strict_default_and_image_detail_auto() -> None:
    body = {
        "model": "m",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_image", "image_url": "https://example.com/x.png", "detail": "auto"}
                ],
            }
        ],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
    }
    chat = request(body, "responses", "chat")
    assert chat["messages"][0]["content"] == [
        {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}
    ]
    assert chat["tools"] == [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": True}}
    ]
    assert request(chat, "chat", "responses")["tools"][0]["strict"] is True


def test_thinking_in_history_crosses_messages_chat_with_its_signature() -> None:
    body = MESSAGES_TO_CHAT_ONLY["thinking-with-signature"]
    chat = request(body, "messages", "chat")
    assert chat["messages"][1]["reasoning_details"] == [
        {
            "type": "reasoning.text",
            "text": "Check divisors up to 9.",
            "signature": "WaUjzkypQ2mUEVM36O2T",
            "format": "anthropic-claude-v1",
            "index": 0,
        },
        {
            "type": "reasoning.encrypted",
            "data": "EmwKAhgBEgy3va3pzix",
            "format": "anthropic-claude-v1",
            "index": 1,
        },
    ]
    assert chat["max_completion_tokens"] == 4000


# -- what a target cannot express: an error naming the field, or dropped and listed --------------

LOSSES = [
    ("chat", "messages", {"seed": 7}, "seed"),
    ("chat", "messages", {"metadata": {"a": "b"}}, "metadata"),
    ("chat", "messages", {"temperature": 1.5}, "temperature"),
    ("chat", "messages", {"n": 2}, "n"),
    ("chat", "messages", {"response_format": {"type": "json_object"}}, "response_format"),
    ("chat", "responses", {"stop": ["x"]}, "stop"),
    ("chat", "responses", {"logit_bias": {"1": 2}}, "logit_bias"),
    ("messages", "chat", {"top_k": 5}, "top_k"),
    ("messages", "chat", {"thinking": {"type": "enabled", "budget_tokens": 2000}}, "thinking"),
    ("messages", "chat", {"metadata": {"user_id": "u", "tenant": "t"}}, "metadata.tenant", {"user": "u"}),
    ("messages", "responses", {"stop_sequences": ["x"]}, "stop_sequences"),
    ("messages", "responses", {"top_k": 5}, "top_k"),
    ("responses", "chat", {"previous_response_id": "resp_1"}, "previous_response_id"),
    (
        "responses",
        "chat",
        {"reasoning": {"effort": "low", "summary": "auto"}},
        "reasoning.summary",
        {"reasoning_effort": "low"},
    ),
    ("responses", "messages", {"metadata": {"a": "b"}}, "metadata"),
    ("responses", "messages", {"reasoning": {"effort": "low"}}, "reasoning.effort"),
]
MINIMAL = {
    "chat": {"model": "m", "max_completion_tokens": 5, "messages": [{"role": "user", "content": "q"}]},
    "messages": {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "q"}]},
    "responses": {"model": "m", "max_output_tokens": 5, "input": "q"},
}


@pytest.mark.parametrize("loss", LOSSES)
def test_what_the_target_cannot_express_is_named(loss: tuple[Any, ...]) -> None:
    source, target, extra, field = loss[:4]
    kept = loss[4] if len(loss) > 4 else {}
    body = MINIMAL[source] | extra
    with pytest.raises(Untranslatable) as caught:
        request(body, source, target)
    assert caught.value.field == field
    assert str(caught.value).startswith(field + ":")
    assert isinstance(caught.value, ValueError)
    out = request(body, source, target, lossy=True)
    assert out.dropped == [field]
    assert out == request(MINIMAL[source], source, target) | kept


BLOCK_LOSSES = [
    (
        "messages",
        "chat",
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}],
            }
        ],
        "messages[0].content[0].cache_control",
    ),
    (
        "messages",
        "chat",
        [
            {
                "role": "user",
                "content": [{"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}}],
            }
        ],
        "messages[0].content[0]",
    ),
    (
        "messages",
        "chat",
        [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "boom", "is_error": True}],
            },
        ],
        "messages[1].content[0].is_error",
    ),
    (
        "chat",
        "messages",
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "high"}}],
            }
        ],
        "messages[0].content[0].image_url.detail",
    ),
    (
        "chat",
        "messages",
        [
            {
                "role": "user",
                "content": [{"type": "input_audio", "input_audio": {"data": "AAA", "format": "wav"}}],
            }
        ],
        "messages[0].content[0]",
    ),
    (
        "chat",
        "messages",
        [{"role": "user", "content": "q", "name": "alice"}],
        "messages[0].name",
    ),
    (
        "chat",
        "messages",
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "hmm"}],
        "messages[1].reasoning_content",
    ),
    (
        "chat",
        "messages",
        [{"role": "user", "content": "q"}, {"role": "system", "content": "late"}],
        "messages[1]",
    ),
    (
        "messages",
        "responses",
        [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "text", "text": "a"},
                ],
            },
        ],
        "messages[1].content[0]",
    ),
]


@pytest.mark.parametrize(("source", "target", "turns", "field"), BLOCK_LOSSES)
def test_turn_content_the_target_cannot_express(
    source: str, target: str, turns: list[Any], field: str
) -> None:
    body = {**MINIMAL[source], "messages": turns}
    with pytest.raises(Untranslatable) as caught:
        request(body, source, target)
    assert caught.value.field == field
    assert request(body, source, target, lossy=True).dropped == [field]


def test_lossy_keeps_the_rest_of_the_turn() -> None:
    body = {
        **MINIMAL["messages"],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see", "cache_control": {"type": "ephemeral"}},
                    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}},
                    {"type": "text", "text": "this"},
                ],
            }
        ],
        "top_k": 3,
    }
    out = request(body, "messages", "chat", lossy=True)
    assert out["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "text", "text": "this"}]}
    ]
    assert out.dropped == ["messages[0].content[0].cache_control", "messages[0].content[1]", "top_k"]


def test_server_and_builtin_tools_are_named() -> None:
    body = {
        **MINIMAL["messages"],
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}],
    }
    with pytest.raises(Untranslatable, match=r"^tools\[0\]:"):
        request(body, "messages", "chat")
    body = {**MINIMAL["responses"], "tools": [{"type": "web_search"}]}
    assert request(body, "responses", "chat", lossy=True).dropped == ["tools[0]"]


# -- hostile bodies: a typed error naming the field, whatever the mode ---------------------------

HOSTILE = [
    ("chat", {"model": "m", "max_tokens": 5, "messages": "hi"}, "messages"),
    (
        "chat",
        {"model": "m", "max_tokens": 5, "messages": [{"role": "wizard", "content": "x"}]},
        "messages[0].role",
    ),
    ("chat", {"model": "m", "max_tokens": 5, "messages": [{"role": None}]}, "messages[0].role"),
    ("chat", {"model": "m", "max_tokens": 5, "messages": ["hi"]}, "messages[0]"),
    (
        "chat",
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": 42}]},
        "messages[0].content",
    ),
    ("chat", {"model": "m", "max_tokens": "5", "messages": []}, "max_tokens"),
    ("chat", {"model": "m", "max_tokens": 5, "max_completion_tokens": 6, "messages": []}, "max_tokens"),
    ("chat", {"model": "m", "max_tokens": 5, "temperature": "hot", "messages": []}, "temperature"),
    ("chat", {"model": "m", "max_tokens": 5, "temperature": True, "messages": []}, "temperature"),
    ("chat", {"model": "m", "messages": []}, "max_tokens"),  # Messages requires it
    (
        "chat",
        {
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}],
        },
        "messages[0].tool_call_id",
    ),
    (
        "chat",
        {"model": "m", "max_tokens": 5, "messages": [{"role": "tool", "tool_call_id": 7, "content": "x"}]},
        "messages[0].tool_call_id",
    ),
    (
        "chat",
        {
            "model": "m",
            "max_tokens": 5,
            "messages": [
                {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "function": "f"}]}
            ],
        },
        "messages[0].tool_calls[0].function",
    ),
    (
        "messages",
        {"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]},
        "messages[0].role",
    ),
    (
        "messages",
        {
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}],
        },
        "messages[0].content[0].tool_use_id",
    ),
    (
        "messages",
        {
            "model": "m",
            "max_tokens": 5,
            "messages": [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}
            ],
        },
        "messages[0].content[0].input",
    ),
    (
        "messages",
        {"model": "m", "max_tokens": 5, "messages": [], "tool_choice": {"type": "sometimes"}},
        "tool_choice.type",
    ),
    (
        "messages",
        {"model": "m", "max_tokens": 5, "messages": [], "system": [{"type": "image"}]},
        "system[0].type",
    ),
    ("responses", {"model": "m", "input": 5}, "input"),
    ("responses", {"model": "m", "input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
    (
        "responses",
        {"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
        "input[0].call_id",
    ),
    ("responses", {"model": "m", "input": [{"type": "reasoning", "summary": []}]}, "input[0].id"),
]


@pytest.mark.parametrize(("source", "body", "field"), HOSTILE)
@pytest.mark.parametrize("lossy", [False, True])
def test_hostile_bodies_name_the_field(source: str, body: dict[str, Any], field: str, lossy: bool) -> None:
    target = "messages" if source == "chat" else "chat"
    with pytest.raises(Untranslatable) as caught:
        request(body, source, target, lossy=lossy)
    assert caught.value.field == field


def test_a_tool_result_before_its_call_is_an_orphan() -> None:
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "tool", "tool_call_id": "a", "content": "early"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
        ],
    }
    for target in ("messages", "responses"):
        with pytest.raises(Untranslatable, match="no earlier assistant tool call"):
            request(body, "chat", target, lossy=True)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="not list"):
        request([], "chat", "messages")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown API"):
        request({}, "chat", "gemini")
    with pytest.raises(ValueError, match="nothing to translate"):
        request({}, "chat", "chat")


def test_arguments_that_are_not_a_json_object() -> None:
    for raw in ("{not json", "[1, 2]"):
        body = {
            **MINIMAL["chat"],
            "messages": [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "a", "type": "function", "function": {"name": "f", "arguments": raw}}
                    ],
                }
            ],
        }
        with pytest.raises(Untranslatable) as caught:
            request(body, "chat", "messages")
        assert caught.value.field == "messages[0].tool_calls[0].function.arguments"
        out = request(body, "chat", "messages", lossy=True)
        assert out.dropped == ["messages[0].tool_calls[0].function.arguments"]
        assert out["messages"] == [{"role": "assistant", "content": []}]


def test_absurd_sizes_pass_through_without_copies() -> None:
    huge = "x" * (32 << 20)
    deep: dict[str, Any] = {"type": "object"}
    node = deep
    for _ in range(50_000):  # deeper than any recursion limit: schemas are carried, not walked
        node["items"] = {"type": "array"}
        node = node["items"]
    turns = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}] * 25_000
    body = {
        "model": "m",
        "max_completion_tokens": 5,
        "messages": [*turns, {"role": "user", "content": huge}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": deep}}],
    }
    for target in ("messages", "responses"):
        out = request(body, "chat", target)
        turns_out = out["messages"] if target == "messages" else out["input"]
        assert len(turns_out) == 50_001
        assert turns_out[-1]["content"] is huge
        schema = out["tools"][0]["input_schema" if target == "messages" else "parameters"]
        assert schema is deep


# -- Messages <-> Responses in one walk is the two halves through chat ---------------------------


def _every_body() -> list[Any]:
    out = []
    for corpus, api in (
        (MESSAGES_CORPUS, "messages"),
        (MESSAGES_TO_CHAT_ONLY, "messages"),
        (RESPONSES_CORPUS, "responses"),
        (RESPONSES_TO_CHAT_ONLY, "responses"),
    ):
        out += [pytest.param(api, body, id=f"{api}-{name}") for name, body in corpus.items()]
    for source, target, extra, *_ in LOSSES:
        if {source, target} == {"messages", "responses"}:
            out.append(pytest.param(source, MINIMAL[source] | extra, id=f"{source}-loss-{next(iter(extra))}"))
    for source, target, turns, field in BLOCK_LOSSES:
        if source in ("messages", "responses") and target != "chat":
            out.append(pytest.param(source, {**MINIMAL[source], "messages": turns}, id=f"{source}-{field}"))
    for source, chat_body in (("messages", CHAT_TO_MESSAGES_ONLY), ("responses", CHAT_TO_RESPONSES_ONLY)):
        for name, body in chat_body.items():
            there = request(body, "chat", source)
            out.append(pytest.param(source, there, id=f"{source}-from-chat-{name}"))
    return out


@pytest.mark.parametrize(("source", "body"), _every_body())
@pytest.mark.parametrize("lossy", [True, False])
def test_one_walk_equals_the_two_halves_through_chat(source: str, body: dict[str, Any], lossy: bool) -> None:
    target = "responses" if source == "messages" else "messages"
    if "max_output_tokens" not in body and source == "responses":
        body = body | {"max_output_tokens": 64}
    try:
        expected: Any = through_chat(body, source, target, lossy=lossy)
    except Untranslatable as exc:
        expected = exc
    try:
        got: Any = request(body, source, target, lossy=lossy)
    except Untranslatable as exc:
        got = exc
    if isinstance(expected, Untranslatable):
        assert isinstance(got, Untranslatable), got
    else:
        assert got == expected
        # the same fields are left out; one walk names them in the source (one per reasoning
        # item where chat had one per detail)
        assert {_root(p) for p in got.dropped} == {_root(p) for p in expected.dropped}


def _root(path: str) -> str:
    return path.split(" (")[0].split(".")[0]


# -- any body: a translation or a named error, nothing else ----------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
CORPUS = [
    (api, body)
    for api, corpus in (
        ("chat", CHAT_CORPUS),
        ("chat", CHAT_TO_RESPONSES_ONLY),
        ("messages", MESSAGES_CORPUS),
        ("messages", MESSAGES_TO_CHAT_ONLY),
        ("responses", RESPONSES_CORPUS),
        ("responses", RESPONSES_TO_CHAT_ONLY),
    )
    for body in corpus.values()
]


def _mutate(value: Any, path: list[Any], replacement: Any) -> Any:
    """``value`` with the node at ``path`` (keys and indexes, wrapped around) replaced."""
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
    st.sampled_from(CORPUS),
    st.lists(st.integers(0, 50), max_size=6),
    JSON,
    st.sampled_from(["chat", "messages", "responses"]),
    st.booleans(),
)
def test_a_mangled_request_translates_or_names_the_field(
    case: tuple[str, dict[str, Any]], path: list[int], replacement: Any, target: str, lossy: bool
) -> None:
    source, body = case
    if target == source:
        return
    mangled = _mutate(body, path, replacement)
    if not isinstance(mangled, dict):
        with pytest.raises(TypeError):
            request(mangled, source, target)  # type: ignore[arg-type]
        return
    try:
        out = request(mangled, source, target, lossy=lossy)
    except Untranslatable as exc:
        assert isinstance(exc.field, str) and str(exc).startswith(exc.field + ":")
        return
    json.dumps(out)  # plain JSON types, whatever came in
