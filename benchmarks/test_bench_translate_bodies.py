"""Whole bodies: a request and a non-streaming answer translated between chat, Responses and
Messages. Group ``translate-body:<body>:<source>-><target>``. The floor is what a gateway that
does not translate spends on the body anyway: ``orjson.loads`` of its bytes and ``orjson.dumps``
of the result (``loads+dumps``); the issue's target is a translation that costs less than that.
The bodies are built in the module from a fixed seed and translated once in setup to the other
two APIs: ``agent`` (a coding agent's request: an 8 KiB system prompt, 12 tools with schemas, 40
turns of text, tool calls and tool results of 0.2-2 KiB), ``answer`` (a whole answer: 2 KiB of
text, reasoning, two tool calls, usage with cached tokens)."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from fastsse.translate import request, response

APIS = ("chat", "messages", "responses")
DIRECTIONS = [(s, t) for s in APIS for t in APIS if s != t]


def _words(rng: random.Random, n: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(n):
        w = "".join(rng.choice(letters) for _ in range(rng.randint(1, 8)))
        out.append(w + "é" if rng.random() < 0.08 else w)
    return " ".join(out)


def _agent_chat() -> dict[str, Any]:
    rng = random.Random(26)
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": _words(rng, 30),
                "parameters": {
                    "type": "object",
                    "properties": {
                        f"arg_{k}": {"type": "string", "description": _words(rng, 8)} for k in range(5)
                    },
                    "required": ["arg_0"],
                },
            },
        }
        for i in range(12)
    ]
    messages: list[dict[str, Any]] = [{"role": "system", "content": _words(rng, 1400)}]
    for turn in range(10):
        messages.append({"role": "user", "content": _words(rng, 60)})
        call = f"call_{turn}"
        args = orjson.dumps({"arg_0": _words(rng, 6), "arg_1": _words(rng, 3)}).decode()
        messages.append(
            {
                "role": "assistant",
                "content": _words(rng, 25),
                "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": "tool_3", "arguments": args}}
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call, "content": _words(rng, rng.randint(40, 350))})
        messages.append({"role": "assistant", "content": _words(rng, 80)})
    return {
        "model": "agent-model",
        "messages": messages,
        "tools": tools,
        "tool_choice": "auto",
        "max_completion_tokens": 8192,
        "temperature": 0.5,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def _answer_chat() -> dict[str, Any]:
    rng = random.Random(62)
    calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "tool_3", "arguments": orjson.dumps({"arg_0": _words(rng, 20)}).decode()},
        }
        for i in range(2)
    ]
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1_767_225_600,
        "model": "agent-model",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": _words(rng, 350),
                    "refusal": None,
                    "reasoning_content": _words(rng, 150),
                    "tool_calls": calls,
                },
                "finish_reason": "tool_calls",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": 9000,
            "completion_tokens": 700,
            "total_tokens": 9700,
            "prompt_tokens_details": {"cached_tokens": 8000},
        },
    }


def _bodies() -> dict[tuple[str, str], dict[str, Any]]:
    agent, answer = _agent_chat(), _answer_chat()
    out: dict[tuple[str, str], dict[str, Any]] = {("agent", "chat"): agent, ("answer", "chat"): answer}
    for api in ("messages", "responses"):
        out[("agent", api)] = dict(request(agent, "chat", api))
        out[("answer", api)] = dict(response(answer, "chat", api, lossy=True))
    return out


BODIES = _bodies()


def _floor(raw: bytes) -> int:
    return len(orjson.dumps(orjson.loads(raw)))


@pytest.mark.parametrize("name", ["loads+dumps", "translate"])
@pytest.mark.parametrize(("source", "target"), DIRECTIONS, ids=[f"{s}-{t}" for s, t in DIRECTIONS])
@pytest.mark.parametrize("body", ["agent", "answer"])
def test_translate_body(benchmark: Any, body: str, source: str, target: str, name: str) -> None:
    data = BODIES[(body, source)]
    raw = orjson.dumps(data)
    benchmark.group = f"translate-body:{body}:{source}->{target}"
    benchmark.extra_info.update(contender=name, bytes=len(raw))
    if name == "loads+dumps":
        assert benchmark(_floor, raw) == len(raw)
        return
    if body == "agent":
        expected = request(data, source, target, lossy=True)
        out = benchmark(request, data, source, target, lossy=True)
    else:  # created: the chat timestamp a Messages answer lacks, fixed so that runs compare
        expected = response(data, source, target, lossy=True, created=1)
        out = benchmark(response, data, source, target, lossy=True, created=1)
    assert out == expected
