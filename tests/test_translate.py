"""Stream translation chat <-> Messages <-> Responses, on both backends: events, truncation, errors,
chunk invariance and round trips that preserve the fold."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastsse._backend
import fastsse.translate
from fastsse import ChatChunkEncoder, check_stream, get_backend
from fastsse.translate import translator

CREATED = 1_700_000_000


@pytest.fixture
def tb(backend: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Point the translators at one backend's fused streams."""
    monkeypatch.setattr(fastsse._backend, "current", backend)
    return backend


def chat(
    *deltas: dict[str, Any],
    finish: str | None = "stop",
    usage: dict[str, int] | None = None,
    done: bool = True,
) -> bytes:
    """A chat upstream: a role chunk, one chunk per delta dict, the finish chunk, usage, [DONE]."""
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": CREATED, "model": "m"}
    out = [
        b"data: "
        + orjson.dumps(
            {**head, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
        )
        + b"\n\n"
    ]
    for delta in deltas:
        out.append(
            b"data: "
            + orjson.dumps({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            + b"\n\n"
        )
    if finish is not None:
        out.append(
            b"data: "
            + orjson.dumps({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            + b"\n\n"
        )
    if usage is not None:
        out.append(b"data: " + orjson.dumps({**head, "choices": [], "usage": usage}) + b"\n\n")
    if done:
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    decoder = get_backend("python").Decoder()
    return [(e.event, orjson.loads(e.data)) for e in decoder.feed(body) + decoder.close()]


def run(t: Any, body: bytes, size: int = 0) -> bytes:
    if size <= 0:
        return t.write(body) + t.close()
    return b"".join(t.write(body[i : i + size]) for i in range(0, len(body), size)) + t.close()


USAGE = {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}
CALL0 = {
    "index": 0,
    "id": "call_a",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":'},
}
CALL1 = {"index": 1, "id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": ""}}
TOOLS = chat(
    {"content": "Let me check.", "tool_calls": [CALL0]},  # text and a tool call in one chunk
    {"tool_calls": [CALL1]},
    {"tool_calls": [{"index": 0, "function": {"arguments": ' "Paris"}'}}]},
    {"tool_calls": [{"index": 1, "function": {"arguments": '{"tz": "CET"}'}}]},
    finish="tool_calls",
    usage=USAGE,
)
MIXED = chat(
    {"reasoning_content": "Think"},
    {"reasoning_content": " more", "content": "Hel"},  # reasoning and content in one chunk
    {"content": "lo"},
    usage=USAGE,
)


# chat -> Messages


def test_chat_to_messages_carries_everything(tb: SimpleNamespace) -> None:
    out = run(tb.ChatToMessages(), MIXED)
    assert events(out) == [
        ("message_start", {"type": "message_start", "message": {"id": "chatcmpl-1", "type": "message", "role": "assistant", "content": [], "model": "m", "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Think"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": " more"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hel"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "lo"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"input_tokens": 7, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    assert check_stream(out, api="messages") == []


def test_chat_to_messages_tools_keep_names_and_input(tb: SimpleNamespace) -> None:
    out = run(tb.ChatToMessages(), TOOLS)
    got = events(out)
    starts = [p["content_block"] for t, p in got if t == "content_block_start"]
    assert starts == [
        {"type": "text", "text": ""},
        {"type": "tool_use", "id": "call_a", "name": "get_weather", "input": {}},
        {"type": "tool_use", "id": "call_b", "name": "get_time", "input": {}},
    ]
    pieces: dict[int, str] = {}
    for t, p in got:
        if t == "content_block_delta" and p["delta"]["type"] == "input_json_delta":
            pieces[p["index"]] = pieces.get(p["index"], "") + p["delta"]["partial_json"]
    assert pieces == {1: '{"city": "Paris"}', 2: '{"tz": "CET"}'}
    assert got[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert check_stream(out, api="messages") == []


def test_output_starts_with_the_first_upstream_chunk(tb: SimpleNamespace) -> None:
    for t, first in (
        (tb.ChatToMessages(), b"event: message_start\n"),
        (tb.ChatToResponses(), b"event: response.created\n"),
    ):
        cut = MIXED.index(b"data:", 10)
        assert t.write(MIXED[:cut]).startswith(first)  # the role chunk alone
        second = MIXED.index(b"data:", cut + 10)
        assert b"Think" in t.write(MIXED[cut:second])  # the thinking is not held back


@pytest.mark.parametrize("make", ["ChatToMessages", "ChatToResponses"])
@pytest.mark.parametrize(
    "body",
    [
        chat({"content": "Hel"}, {"content": "lo"}, finish=None, done=False),  # cut after a delta
        chat({"content": "Hel"}, finish=None, done=True),  # [DONE] but no finish_reason
        chat({"content": "Hello"}, usage=USAGE)[:-9],  # cut inside [DONE]
    ],
)
def test_a_truncated_upstream_stays_truncated(tb: SimpleNamespace, make: str, body: bytes) -> None:
    t = getattr(tb, make)()
    out = run(t, body, 5)
    kinds = [k for k, _ in events(out)]
    assert not {
        "message_stop",
        "message_delta",
        "response.completed",
        "response.incomplete",
        "response.failed",
    } & set(kinds)
    assert "Hel" in out.decode()
    assert t.verdict.complete is False


@pytest.mark.parametrize("make", ["ChatToMessages", "ChatToResponses"])
def test_a_finished_upstream_without_done_ends_whole(tb: SimpleNamespace, make: str) -> None:
    # every choice finished and the bytes ended cleanly: the answer is whole (the verdict's rule),
    # so the target's terminal event is sent; a broken transfer at the same point is not
    body = chat({"content": "Hel"}, finish="stop", usage=USAGE, done=False)
    t = getattr(tb, make)()
    kinds = {k for k, _ in events(run(t, body, 5))}
    assert {"message_stop", "response.completed"} & kinds and t.verdict.complete
    cut = getattr(tb, make)()
    out = cut.write(body) + cut.close(truncated=True)
    assert not {"message_stop", "response.completed"} & {k for k, _ in events(out)}
    assert cut.verdict.complete is False


TERMINALS = (b"event: message_stop\n", b"event: response.completed\n", b"event: response.incomplete\n")


@pytest.mark.parametrize("make", ["ChatToMessages", "ChatToResponses"])
@pytest.mark.parametrize("finish", ["stop", "length"])
def test_complete_turns_true_with_the_write_that_sends_the_terminal_event(
    tb: SimpleNamespace, make: str, finish: str
) -> None:
    """``complete`` is False until the write whose output holds the terminal event (at the chat
    ``[DONE]``, after choice 0 finished), True from then on; the close adds nothing after it."""
    t = getattr(tb, make)()
    body = chat({"content": "Hel"}, {"content": "lo"}, finish=finish, usage=USAGE)
    out = b""
    for i in range(0, len(body), 7):
        piece = t.write(body[i : i + 7])
        out += piece
        ended = any(terminal in out for terminal in TERMINALS)
        assert t.complete is ended, (i, out[-200:])
    assert t.complete and t.close() == b""
    assert t.complete


@pytest.mark.parametrize("make", ["ChatToMessages", "ChatToResponses"])
def test_complete_is_false_for_a_cut_an_error_or_no_finish(tb: SimpleNamespace, make: str) -> None:
    # a clean end after the finish without [DONE] is whole: close() sends the terminal event
    clean = getattr(tb, make)()
    clean.write(chat({"content": "Hel"}, usage=USAGE, done=False))
    assert not clean.complete
    tail = clean.close()
    assert any(terminal in tail for terminal in TERMINALS) and clean.complete
    # the same bytes with the transfer broken, [DONE] without a finish, an upstream error
    cut = getattr(tb, make)()
    cut.write(chat({"content": "Hel"}, usage=USAGE, done=False))
    cut.close(truncated=True)
    unfinished = getattr(tb, make)()
    run(unfinished, chat({"content": "Hel"}, finish=None, done=True))
    failed = getattr(tb, make)()
    error = {"message": "overloaded", "type": "server_error"}
    run(
        failed,
        chat({"content": "Hi"}, finish=None, done=False)
        + b"data: "
        + orjson.dumps({"error": error})
        + b"\n\n",
    )
    assert (cut.complete, unfinished.complete, failed.complete) == (False, False, False)


def test_error_mid_stream(tb: SimpleNamespace) -> None:
    error = {"message": "overloaded", "type": "server_error", "code": "busy"}
    body = (
        chat({"content": "Hi"}, finish=None, done=False)
        + b"data: "
        + orjson.dumps({"error": error})
        + b"\n\n"
    )
    body += chat({"content": "never"})  # nothing after the error may come out
    m = events(run(tb.ChatToMessages(), body, 3))
    assert m[-1] == ("error", {"type": "error", "error": {"type": "server_error", "message": "overloaded"}})
    r = events(run(tb.ChatToResponses(), body, 3))
    assert r[-1][0] == "response.failed"
    assert r[-1][1]["response"]["error"] == {"code": "busy", "message": "overloaded"}
    assert r[-1][1]["response"]["output"][0]["content"][0]["text"] == "Hi"
    assert all("never" not in orjson.dumps(p).decode() for _, p in m + r)


def test_finish_reasons_map(tb: SimpleNamespace) -> None:
    for finish, stop, terminal in (
        ("length", "max_tokens", ("response.incomplete", "max_output_tokens")),
        ("content_filter", "refusal", ("response.incomplete", "content_filter")),
        ("stop", "end_turn", ("response.completed", None)),
    ):
        body = chat({"content": "x"}, finish=finish, usage=USAGE)
        assert events(run(tb.ChatToMessages(), body))[-2][1]["delta"]["stop_reason"] == stop
        kind, payload = events(run(tb.ChatToResponses(), body))[-1]
        details = payload["response"]["incomplete_details"]
        assert (kind, details and details["reason"]) == terminal


def test_chat_to_responses_tools_and_usage(tb: SimpleNamespace) -> None:
    out = run(tb.ChatToResponses(), TOOLS, 4)
    final = events(out)[-1][1]["response"]
    assert final["status"] == "completed"
    assert [(o["type"], o.get("name"), o.get("call_id"), o.get("arguments")) for o in final["output"]] == [
        ("message", None, None, None),
        ("function_call", "get_weather", "call_a", '{"city": "Paris"}'),
        ("function_call", "get_time", "call_b", '{"tz": "CET"}'),
    ]
    assert final["output"][0]["content"][0]["text"] == "Let me check."
    assert final["usage"] == {"input_tokens": 7, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12}  # fmt: skip
    seqs = [p["sequence_number"] for _, p in events(out)]
    assert seqs == list(range(len(seqs)))
    assert check_stream(out, api="responses") == []


def test_the_fold_comes_from_the_same_pass(tb: SimpleNamespace) -> None:
    t = tb.ChatToMessages()
    run(t, TOOLS, 7)
    result = t.result()
    assert result["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"] == '{"tz": "CET"}'
    assert result["verdict"]["complete"] is True
    assert t.verdict.complete


def test_other_choices_are_dropped_and_counted(tb: SimpleNamespace) -> None:
    enc = ChatChunkEncoder(id="c", model="m", created=CREATED)
    body = enc.role() + enc.role(index=1) + enc.content("a") + enc.content("b", index=1)
    body += enc.finish() + enc.finish(index=1) + enc.done()
    t = tb.ChatToResponses()
    out = run(t, body)
    assert events(out)[-1][1]["response"]["output"][0]["content"][0]["text"] == "a"
    assert t.dropped == 3  # choice 1's role, content and finish chunks


# chunk invariance


UPSTREAMS = [
    MIXED,
    TOOLS,
    chat({"refusal": "No."}, usage=USAGE),
    chat({"content": "héllo 🌍"}, finish="length"),
]


@pytest.mark.parametrize("body", UPSTREAMS)
@pytest.mark.parametrize("target", ["messages", "responses"])
def test_any_chunking_gives_the_same_bytes(tb: SimpleNamespace, body: bytes, target: str) -> None:
    whole = run(translator("chat", target), body)
    for size in (1, 2, 3, 7, 64):
        assert run(translator("chat", target), body, size) == whole
    back = run(translator(target, "chat", created=CREATED), whole)
    for size in (1, 5, 33):
        assert run(translator(target, "chat", created=CREATED), whole, size) == back


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(TOOLS)), max_size=12))
def test_random_cuts(tb: SimpleNamespace, cuts: list[int]) -> None:
    points = sorted({0, len(TOOLS), *cuts})
    pieces = [TOOLS[a:b] for a, b in itertools.pairwise(points)]
    for target in ("messages", "responses"):
        t = translator("chat", target)
        assert b"".join(t.write(p) for p in pieces) + t.close() == run(translator("chat", target), TOOLS)


# round trips


def fold(body: bytes) -> dict[str, Any]:
    agg = get_backend("python").ChatAggregator()
    decoder = get_backend("python").Decoder()
    for e in decoder.feed(body) + decoder.close():
        agg.feed_event(e)
    out = agg.result()
    del out["verdict"]  # compared with hand-written completions
    return out


ROUND = [MIXED, TOOLS, chat({"content": "a"}, {"content": "b"}, finish="length", usage=USAGE)]


@pytest.mark.parametrize("body", ROUND)
@pytest.mark.parametrize("via", ["messages", "responses"])
def test_round_trip_preserves_the_fold(tb: SimpleNamespace, body: bytes, via: str) -> None:
    there = run(translator("chat", via), body, 11)
    back = run(translator(via, "chat", created=CREATED), there, 13)
    got = fold(back)
    message = got["choices"][0]["message"]
    details = message.pop("reasoning_details", None)
    assert got == fold(body)
    if via == "messages" and message.get("reasoning_content"):
        # through Messages the thinking also comes back as the reasoning_details part of its block
        # (block 0), the place a signature would have gone
        assert details == [
            {
                "index": 0,
                "type": "reasoning.text",
                "text": message["reasoning_content"],
                "format": "anthropic-claude-v1",
            }
        ]
    else:
        assert details is None
    assert check_stream(back, expect_usage=True) == []


def test_refusal_round_trip_through_responses(tb: SimpleNamespace) -> None:
    body = chat({"refusal": "I can't."}, usage=USAGE)
    back = run(tb.ResponsesToChat(created=CREATED), run(tb.ChatToResponses(), body))
    assert fold(back) == fold(body)
    # Messages has no refusal field: the text arrives as content
    via_messages = run(tb.MessagesToChat(created=CREATED), run(tb.ChatToMessages(), body))
    assert fold(via_messages)["choices"][0]["message"]["content"] == "I can't."


# Messages / Responses upstreams


def test_messages_to_chat(tb: SimpleNamespace) -> None:
    def e(name: str, payload: dict[str, Any]) -> bytes:
        return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    body = b"".join(
        [
            e("message_start", {"type": "message_start", "message": {"id": "msg_9", "model": "claude", "usage": {"input_tokens": 3, "cache_read_input_tokens": 2, "output_tokens": 1}}}),
            e("ping", {"type": "ping"}),
            e("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            e("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
            e("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s"}}),
            e("content_block_stop", {"type": "content_block_stop", "index": 0}),
            e("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
            e("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            e("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"a": 1}'}}),
            e("content_block_stop", {"type": "content_block_stop", "index": 1}),
            e("content_block_start", {"type": "content_block_start", "index": 2, "content_block": {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"q": "x"}}}),
            e("content_block_stop", {"type": "content_block_stop", "index": 2}),
            e("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 8}}),
            e("message_stop", {"type": "message_stop"}),
        ]
    )  # fmt: skip
    t = tb.MessagesToChat(created=CREATED)
    out = run(t, body, 9)
    assert fold(out) == {
        "id": "msg_9",
        "object": "chat.completion",
        "created": CREATED,
        "model": "claude",
        "system_fingerprint": None,
        "service_tier": None,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "reasoning_content": "hmm",
                    # the thinking and its signature under the block's index, for the client to send back
                    "reasoning_details": [{"index": 0, "type": "reasoning.text", "text": "hmm", "format": "anthropic-claude-v1", "signature": "s"}],
                    "tool_calls": [
                        {"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
                        {"id": "srv_1", "type": "function", "function": {"name": "web_search", "arguments": '{"q":"x"}'}},
                    ],
                },
                "logprobs": None,
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 8, "total_tokens": 13, "prompt_tokens_details": {"cached_tokens": 2}},
    }  # fmt: skip
    assert t.complete and t.dropped == 0
    assert check_stream(out, expect_usage=True) == []


def test_messages_to_chat_error_and_truncation(tb: SimpleNamespace) -> None:
    start = b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    block = b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    delta = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n'
    error = (
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )
    t = tb.MessagesToChat(created=CREATED)
    out = run(t, start + block + delta + error + delta)
    assert out.endswith(b'data: {"error":{"type":"overloaded_error","message":"Overloaded"}}\n\n')
    assert out.count(b'"Hi"') == 1 and t.error == {"type": "overloaded_error", "message": "Overloaded"}
    t = tb.MessagesToChat(created=CREATED)
    out = run(t, start + block + delta + delta[:20], 4)
    assert b"[DONE]" not in out and b'finish_reason":"' not in out and not t.complete


def test_responses_to_chat_tolerates_what_servers_do(tb: SimpleNamespace) -> None:
    def e(payload: dict[str, Any], named: bool = True) -> bytes:
        head = b"event: " + payload["type"].encode() + b"\n" if named else b""
        return head + b"data: " + orjson.dumps(payload) + b"\n\n"

    body = b"".join(
        [
            e({"type": "response.created", "response": {"id": "resp_1", "model": "gpt", "created_at": 5}}),
            # an orphan text delta: no output_item.added, no content_part.added
            e({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Hi"}, named=False),
            # a function call whose arguments only the done item carries
            e({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ""}}),
            e({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"a"'}),
            e({"type": "response.output_item.done", "output_index": 1, "item": {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 2}'}}),
            e({"type": "response.reasoning_text.delta", "output_index": 2, "content_index": 0, "delta": "r"}),
            e({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "usage": {"input_tokens": 4, "output_tokens": 6, "total_tokens": 10}}}),
        ]
    )  # fmt: skip
    t = tb.ResponsesToChat()
    out = run(t, body, 6)
    result = fold(out)
    message = result["choices"][0]["message"]
    assert (result["id"], result["created"], message["content"], message["reasoning_content"]) == (
        "resp_1",
        5,
        "Hi",
        "r",
    )
    assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"a": 2}'}
    assert result["choices"][0]["finish_reason"] == "tool_calls"
    assert result["usage"] == {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}
    assert t.complete


def test_responses_to_chat_failures(tb: SimpleNamespace) -> None:
    created = b'data: {"type":"response.created","response":{"id":"r","model":"g"}}\n\n'
    failed = b'event: response.failed\ndata: {"type":"response.failed","response":{"id":"r","status":"failed","error":{"code":"server_error","message":"boom"}}}\n\n'
    t = tb.ResponsesToChat(created=CREATED)
    assert run(t, created + failed).endswith(b'data: {"error":{"code":"server_error","message":"boom"}}\n\n')
    plain_error = (
        b'event: error\ndata: {"type":"error","code":"rate_limit","message":"slow down","param":null}\n\n'
    )
    t = tb.ResponsesToChat(created=CREATED)
    run(t, created + plain_error)
    assert t.error == {"code": "rate_limit", "message": "slow down", "param": None}
    t = tb.ResponsesToChat(created=CREATED)
    assert b"[DONE]" not in run(t, created + b'data: {"type":"response.output_text.delta","delta":"x"}\n\n')


def test_messages_and_responses_through_chat(tb: SimpleNamespace) -> None:
    messages = run(tb.ChatToMessages(), TOOLS)
    responses = run(translator("messages", "responses"), messages, 5)
    assert check_stream(responses, api="responses") == []
    final = events(responses)[-1][1]["response"]
    assert [o.get("name") for o in final["output"]] == [None, "get_weather", "get_time"]
    chain = translator("messages", "responses")
    body = messages[: messages.index(b"event: message_stop")]
    chain.write(body)  # up to the upstream's terminal event
    assert not chain.complete
    assert b"event: response.completed" in chain.write(messages[len(body) :]) and chain.complete
    again = run(translator("responses", "messages"), responses, 7)
    assert check_stream(again, api="messages") == []
    assert fold(run(tb.MessagesToChat(created=CREATED), again)) == fold(
        run(tb.MessagesToChat(created=CREATED), messages)
    )


def test_translator_arguments(tb: SimpleNamespace) -> None:
    with pytest.raises(ValueError, match="unknown API"):
        translator("chat", "gemini")
    with pytest.raises(ValueError, match="nothing to translate"):
        translator("chat", "chat")
    with pytest.raises(TypeError):
        translator("chat", "messages", created=1)
    with pytest.raises(TypeError):
        tb.ChatToMessages().write("text")  # type: ignore[arg-type]


@pytest.mark.parametrize("source", ["chat", "messages", "responses"])
def test_an_oversized_upstream_event_raises_and_nothing_is_invented(tb: SimpleNamespace, source: str) -> None:
    from fastsse import EventTooLarge

    body = MIXED if source == "chat" else run(translator("chat", source), MIXED)
    big = body.replace(b"Hel", b"H" + b"e" * 5000, 1)
    t = translator(source, "chat" if source != "chat" else "messages", max_event_bytes=1000)
    out = b""
    with pytest.raises(EventTooLarge):
        for i in range(0, len(big), 100):
            out += t.write(big[i : i + 100])
    assert b"[DONE]" not in out and b"message_stop" not in out
    with pytest.raises(TypeError):
        translator(source, "chat" if source != "chat" else "responses").write("text")  # type: ignore[arg-type]


# hostile upstreams: whatever arrives, a translator returns bytes and never raises


_junk = st.one_of(st.none(), st.integers(-2, 3), st.text(max_size=4), st.lists(st.integers(0, 2), max_size=2))
_MESSAGES_TYPES = ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop", "ping", "error", "other"]  # fmt: skip
_RESPONSES_TYPES = ["response.created", "response.output_item.added", "response.output_text.delta", "response.refusal.delta", "response.reasoning_summary_text.delta", "response.function_call_arguments.delta", "response.output_item.done", "response.completed", "response.incomplete", "response.failed", "error"]  # fmt: skip
_CHAT_DELTAS = st.fixed_dictionaries(
    {},
    optional={
        "content": _junk,
        "reasoning_content": _junk,
        "refusal": _junk,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "index": _junk,
                    "id": _junk,
                    "function": st.fixed_dictionaries({}, optional={"name": _junk, "arguments": _junk}),
                },
            ),
            max_size=2,
        ),
    },
)


def _payload(kind: str) -> Any:
    inner = st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(
                [
                    "text",
                    "thinking",
                    "tool_use",
                    "function_call",
                    "message",
                    "text_delta",
                    "thinking_delta",
                    "input_json_delta",
                    "signature_delta",
                ]
            ),
            "text": _junk,
            "thinking": _junk,
            "partial_json": _junk,
            "id": _junk,
            "name": _junk,
            "call_id": _junk,
            "arguments": _junk,
            "input": st.one_of(
                st.none(), st.dictionaries(st.text(max_size=2), st.integers(-9, 9), max_size=2)
            ),
            "stop_reason": _junk,
        },
    )
    return st.fixed_dictionaries(
        {"type": st.just(kind)},
        optional={
            "index": _junk,
            "output_index": _junk,
            "delta": st.one_of(_junk, inner),
            "content_block": inner,
            "item": inner,
            "message": inner,
            "response": inner,
            "usage": st.one_of(
                _junk, st.dictionaries(st.sampled_from(["input_tokens", "output_tokens"]), _junk)
            ),
            "error": _junk,
        },
    )


def _frame(payloads: list[Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_upstreams_never_raise(tb: SimpleNamespace, data: st.DataObject) -> None:
    source = data.draw(st.sampled_from(["chat", "messages", "responses"]))
    if source == "chat":
        chunks = data.draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "choices": st.lists(
                            st.fixed_dictionaries(
                                {"index": _junk, "delta": _CHAT_DELTAS, "finish_reason": _junk}
                            ),
                            max_size=2,
                        )
                    },
                    optional={"usage": _junk, "id": _junk, "error": st.none()},
                ),
                max_size=8,
            )
        )
        body = _frame(chunks) + data.draw(st.sampled_from([b"", b"data: [DONE]\n\n"]))
    else:
        kinds = _MESSAGES_TYPES if source == "messages" else _RESPONSES_TYPES
        events = data.draw(st.lists(st.sampled_from(kinds).flatmap(_payload), max_size=10))
        body = _frame(events)
    size = data.draw(st.integers(1, 64))
    for target in [t for t in ("chat", "messages", "responses") if t != source]:
        out = run(translator(source, target), body, size)
        assert isinstance(out, bytes)
        assert "invalid-json" not in {f.code for f in check_stream(out, api=target)}


def test_url_citations_round_trip_through_responses(tb: SimpleNamespace) -> None:
    note = {"type": "url_citation", "url_citation": {"url": "https://x.test/a", "title": "A", "start_index": 0, "end_index": 2}}  # fmt: skip
    body = chat({"content": "Hi"}, {"content": "!", "annotations": [note]}, usage=USAGE)
    responses = run(tb.ChatToResponses(), body, 9)
    final = events(responses)[-1][1]["response"]
    assert final["output"][0]["content"][0]["annotations"] == [
        {"type": "url_citation", "url": "https://x.test/a", "title": "A", "start_index": 0, "end_index": 2}
    ]
    assert check_stream(responses, api="responses") == []
    back = run(tb.ResponsesToChat(created=CREATED), responses, 5)
    assert fold(back) == fold(body)
    t = tb.ChatToMessages()
    run(t, body)
    assert t.dropped == 1  # Messages has no place for a chat url_citation


# signatures and redacted thinking: chat carries them as OpenRouter's reasoning_details

SIGNATURE = "Et0BCkgIChACGAIqQA2s7h7t=="
OPENROUTER = chat(
    {"content": "", "reasoning": "This", "reasoning_details": [{"type": "reasoning.text", "text": "This", "format": "anthropic-claude-v1", "index": 0}]},
    {"content": "", "reasoning": " is 4.", "reasoning_details": [{"type": "reasoning.text", "text": " is 4.", "format": "anthropic-claude-v1", "index": 0}]},
    {"content": "", "reasoning": "", "reasoning_details": [{"type": "reasoning.text", "signature": SIGNATURE, "format": "anthropic-claude-v1", "index": 0}]},
    {"reasoning_details": [{"type": "reasoning.encrypted", "data": "opaque-1", "format": "anthropic-claude-v1", "index": 1}]},
    {"content": "4"},
    usage=USAGE,
)  # fmt: skip


def test_a_chat_signature_becomes_the_thinking_blocks_signature(tb: SimpleNamespace) -> None:
    kinds = [
        (k, p.get("content_block", p.get("delta", {})).get("type"))
        for k, p in events(run(tb.ChatToMessages(), OPENROUTER, 7))
        if k.startswith("content_block")
    ]
    assert kinds == [
        ("content_block_start", "thinking"),
        ("content_block_delta", "thinking_delta"),
        ("content_block_delta", "thinking_delta"),
        ("content_block_delta", "signature_delta"),
        ("content_block_stop", None),
        ("content_block_start", "redacted_thinking"),
        ("content_block_stop", None),
        ("content_block_start", "text"),
        ("content_block_delta", "text_delta"),
        ("content_block_stop", None),
    ]
    out = events(run(tb.ChatToMessages(), OPENROUTER))
    assert ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": SIGNATURE}}) in out  # fmt: skip
    assert ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "opaque-1"}}) in out  # fmt: skip
    # Responses has no place for either: counted, not invented
    t = tb.ChatToResponses()
    assert b"Et0B" not in run(t, OPENROUTER) and t.dropped == 2


def test_messages_signatures_reach_chat_and_come_back(tb: SimpleNamespace) -> None:
    messages = run(tb.ChatToMessages(), OPENROUTER)
    back = tb.MessagesToChat(created=CREATED)
    chat_body = run(back, messages, 5)
    assert back.dropped == 0
    message = fold(chat_body)["choices"][0]["message"]
    assert message["reasoning_content"] == "This is 4." and message["content"] == "4"
    assert message["reasoning_details"] == [
        {"type": "reasoning.text", "text": "This is 4.", "signature": SIGNATURE, "format": "anthropic-claude-v1", "index": 0},
        {"type": "reasoning.encrypted", "data": "opaque-1", "format": "anthropic-claude-v1", "index": 1},
    ]  # fmt: skip
    # and once more to Messages: the same thinking, signature and redacted block
    again = tb.MessagesToChat(created=CREATED)
    run(again, run(tb.ChatToMessages(), chat_body))
    blocks = again.result()["content"]
    assert [(b["type"], b.get("thinking"), b.get("signature"), b.get("data")) for b in blocks] == [
        ("thinking", "This is 4.", SIGNATURE, None),
        ("redacted_thinking", None, None, "opaque-1"),
        ("text", None, None, None),
    ]
