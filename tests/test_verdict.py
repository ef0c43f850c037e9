"""One verdict (``_verdict.py``): the fields every API shares, chat's ``why`` beside Responses' and
Messages', and every way to a result carrying it."""

from __future__ import annotations

import dataclasses
import socket
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

import fastsse
from _raw_server import RawServer

SHARED = [
    "complete",
    "why",
    "usage",
    "error",
    "aborted",
    "too_large",
    "truncated",
    "skipped",
    "ignored",
    "malformed",
    "stop_reason",
]

FINISHED = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}\n\n'
OPEN = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
TWO = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{"content":"x"}}]}\n\n'


def test_every_verdict_type_has_the_shared_fields_first() -> None:
    assert [f.name for f in dataclasses.fields(fastsse.Verdict)] == SHARED
    for cls, extras in (
        (fastsse.ChatVerdict, ["done", "finish_reasons", "unknown_parts"]),
        (fastsse.FormatVerdict, ["terminal", "status", "departures"]),
    ):
        assert issubclass(cls, fastsse.Verdict)
        assert [f.name for f in dataclasses.fields(cls)] == SHARED + extras


@pytest.mark.parametrize(
    ("body", "close", "why"),
    [
        (FINISHED + b"data: [DONE]\n\n", True, None),
        (FINISHED, True, None),  # no [DONE], but the bytes ended cleanly: complete
        (FINISHED, False, "no [DONE] and the stream was not closed"),
        (b"", True, "no choice arrived"),
        (OPEN + b"data: [DONE]\n\n", True, "no finish_reason"),
        (TWO + b"data: [DONE]\n\n", True, "choice 1 has no finish_reason"),
        (FINISHED + b"data: {", True, "the stream was cut before [DONE]"),
        (OPEN + b"data: {", True, "the stream was cut (no finish_reason)"),
        (
            b'data: {"error":{"type":"overloaded_error","message":"busy"}}\n\n',
            True,
            "error: overloaded_error",
        ),
        (b'data: {"error":"busy"}\n\n', True, "error"),
    ],
)
def test_chat_says_why(stream_backend: SimpleNamespace, body: bytes, close: bool, why: str | None) -> None:
    stream = stream_backend.ChatStream()
    stream.write(body)
    if close:
        stream.close()
    verdict = stream.verdict
    assert isinstance(verdict, fastsse.Verdict)
    assert (verdict.why, verdict.complete) == (why, why is None)
    assert stream.result()["verdict"]["why"] == why


# The "verdict" of result() is built as data, not from the dataclass: the same keys in the same
# order, the same values of the same types, whatever the state.
DATA_CASES = [
    (FINISHED + b"data: [DONE]\n\n", True),
    (FINISHED, False),
    (b"", True),
    (OPEN + TWO + b"data: [DONE]\n\n", True),
    (FINISHED + b"data: {", True),
    (b'data: {"x_groq":{"usage":{"total_tokens":3}},' + FINISHED[7:] + b"data: [DONE]\n\ndata: {}\n\n", True),
    (b'data: {"choices":[{"index":0,"delta":{"content":[{"type":"image"}]}}]}\n\ndata: [1]\n\n', True),
    (b'data: {"error":{"code":"busy"}}\n\n', False),
]


@pytest.mark.parametrize(("body", "close"), DATA_CASES)
@pytest.mark.parametrize("kind", ["ChatStream", "Relay", "lean Relay", "aborted", "ChatAggregator"])
def test_the_result_verdict_is_the_verdict_as_data(
    stream_backend: SimpleNamespace, kind: str, body: bytes, close: bool
) -> None:
    if kind == "ChatAggregator":
        stream = stream_backend.ChatAggregator(keep_text=False)
        for event in stream_backend.Decoder().feed(body):
            stream.feed_event(event)
    else:
        stream = {
            "ChatStream": lambda: stream_backend.ChatStream(),
            "Relay": lambda: stream_backend.Relay(),
            "lean Relay": lambda: stream_backend.Relay(keep_text=False),
            "aborted": lambda: stream_backend.ChatStream(lambda chunk: False),
        }[kind]()
        stream.write(body)
    if close:
        stream.close()
    verdict = stream.verdict
    data = stream.result()["verdict"]
    want = {**{f.name: getattr(verdict, f.name) for f in dataclasses.fields(verdict)}}
    want["finish_reasons"] = list(verdict.finish_reasons)
    assert [(k, type(v), v) for k, v in data.items()] == [(k, type(v), v) for k, v in want.items()]
    assert data == fastsse.chat.verdict_dict(verdict)


def test_the_callers_stop_says_so(stream_backend: SimpleNamespace) -> None:
    stream = stream_backend.ChatStream(lambda chunk: False)
    stream.write(FINISHED)
    assert stream.verdict.why == "aborted by the caller"
    big = stream_backend.ChatStream(max_event_bytes=16)
    with pytest.raises(fastsse.EventTooLarge):
        big.write(FINISHED)
    assert big.verdict.why == "an event passed max_event_bytes"


def test_every_fold_and_byte_out_stream_has_why(stream_backend: SimpleNamespace) -> None:
    chat_bytes = FINISHED + b"data: [DONE]\n\n"
    for make in (
        lambda: stream_backend.ChatStream(),
        lambda: stream_backend.Relay(),
        lambda: stream_backend.ChatToMessages(),
        lambda: stream_backend.ChatToResponses(),
    ):
        stream = make()
        stream.write(chat_bytes)
        stream.close()
        assert stream.verdict.why is None and stream.result()["verdict"]["why"] is None
    for cls in (stream_backend.ResponsesStream, stream_backend.MessagesStream):
        stream = cls()
        stream.write(b"")
        stream.close()
        assert stream.verdict.why == "no terminal event" and isinstance(stream.verdict, fastsse.Verdict)


# A server that ignores "stream": its whole answer folds to the streamed shape, for every API.

ANSWERS = {
    "chat": {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    },
    "responses": {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "m",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
    },
    "messages": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [
            {"type": "text", "text": "Hi"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 2},
    },
}
BODIES = {
    "chat": {"model": "m", "messages": []},
    "responses": {"model": "m", "input": "x"},
    "messages": {"model": "m", "max_tokens": 5, "messages": []},
}


def _json(answer: dict[str, Any]) -> Any:
    body = orjson.dumps(answer)

    def script(conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        conn.sendall(body)

    return script


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_a_json_answer_has_the_streamed_shape(stream_backend: SimpleNamespace, api: str) -> None:
    answer = ANSWERS[api]
    seen: list[Any] = []
    with RawServer(_json(answer)) as raw:
        result = fastsse.create_stream(BODIES[api], seen.append, api=api, base_url=raw.base_url, api_key="x")
    verdict = result.pop("verdict")
    assert verdict["complete"] is True and verdict["why"] is None and verdict["usage"] is True
    assert seen, "on_chunk saw the answer's content"
    if api == "chat":
        (choice,) = result["choices"]
        want = answer["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        assert choice["message"]["tool_calls"] == want["message"]["tool_calls"]
        assert (result["id"], result["model"], result["usage"]) == ("chatcmpl-1", "m", answer["usage"])
    elif api == "responses":
        assert result["output"] == answer["output"] and result["status"] == "completed"
        assert verdict["departures"] == []  # a whole answer departs from nothing
    else:
        assert result["content"] == answer["content"] and result["stop_reason"] == "tool_use"
        assert verdict["departures"] == []


# stop_reason: why the model stopped, in its API's words, from the hand-written vectors' expected
# answers (tests/vectors/formats, written from the API references): Responses' incomplete_details
# reason, else its status; Messages' stop_reason. None while no terminal event said.
@pytest.mark.parametrize("api", ["responses", "messages"])
def test_stop_reason_is_the_apis_own_word(stream_backend: Any, api: str) -> None:
    from _formats_helpers import fold_stream, frame, load_vectors

    seen = set()
    for vector in load_vectors(api):
        _, verdict = fold_stream(stream_backend, api, frame(vector["events"], named=True), None)
        answer = vector["result"]
        if api == "messages":
            want = answer.get("stop_reason")
        elif verdict.terminal is None:
            want = None
        else:
            want = (answer.get("incomplete_details") or {}).get("reason") or answer.get("status")
        assert verdict.stop_reason == want, vector["name"]
        seen.add(want)
    # the vectors hold a limit's end and a normal end in each API
    assert (
        {"max_output_tokens", "completed"} <= seen
        if api == "responses"
        else {"max_tokens", "end_turn"} <= seen
    )


def test_a_length_limit_is_a_stop_reason_not_an_incomplete_answer(stream_backend: Any) -> None:
    limited = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
    stream = stream_backend.ChatStream()
    stream.write(limited)
    verdict = stream.verdict
    assert (verdict.complete, verdict.stop_reason, verdict.why) == (True, "length", None)
    early = stream_backend.ChatStream()
    early.write(OPEN)
    assert early.verdict.stop_reason is None
    assert early.result()["verdict"]["stop_reason"] is None


def test_the_result_types_name_the_fields_the_results_have(stream_backend: Any) -> None:
    # fastsse.results describes the dicts for type checkers; nothing else held it to the code
    import typing

    from fastsse import results
    from fastsse.client._request import prepare
    from fastsse.client._response import Response

    def keys(td: Any) -> set[str]:
        return set(typing.get_type_hints(td))

    assert keys(results.VerdictData) == {f.name for f in dataclasses.fields(fastsse.Verdict)}
    assert keys(results.ChatVerdictData) == {f.name for f in dataclasses.fields(fastsse.ChatVerdict)}
    assert keys(results.FormatVerdictData) == {f.name for f in dataclasses.fields(fastsse.FormatVerdict)}
    stream = stream_backend.ChatStream()
    stream.write(FINISHED + b"data: [DONE]\n\n")
    assert set(stream.result()["verdict"]) == keys(results.ChatVerdictData)
    spec = prepare({"model": "m", "messages": []}, base_url="http://127.0.0.1:9/v1", api_key="k")
    assert set(Response(spec, stream_backend.ChatStream()).http()) == keys(results.HttpData)
