"""The scripted load-test server: its schedule, its stamps, its shapes, and thousands of streams at once.

Expected values come from the script (the module doc of ``fastsse.load._server``): token
chunk ``k`` is due ``ttft_ms + k * itl_ms`` after the response starts, token ``i`` is `` w<i>``.
"""

from __future__ import annotations

import asyncio
import http.client
import resource
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

import fastsse
from fastsse.testing import (
    STAMP_FIELD,
    Script,
    scripted_text,
    serve_scripted_in_thread,
    spawn_scripted_server,
)

# The server writes a chunk when its due time has passed, never before; how late depends on the
# event loop's timer (whole milliseconds with epoll) and on what else the machine runs: this server
# is a thread of the test process, and on a loaded two-core box it was seen hundreds of ms late. The
# lower bound (never early) is exact; the upper one only catches a schedule read in the wrong unit.
LATE_NS = 1_000_000_000
MESSAGES = [{"role": "user", "content": "one two three"}]


@pytest.fixture(scope="module")
def scripted() -> Iterator[Any]:
    with serve_scripted_in_thread(ttft_ms=5, itl_ms=1, chunks=8) as server:
        yield server


def raw(server: Any, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """POST ``body``; return the status, the headers and the whole body (http.client undoes the chunking)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    try:
        conn.request("POST", "/v1/chat/completions", orjson.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def payloads(body: bytes) -> list[Any]:
    """The data of each event, parsed (``[DONE]`` kept as the string)."""
    out: list[Any] = []
    for event in body.split(b"\n\n"):
        if event.startswith(b"data: "):
            data = event[6:]
            out.append("[DONE]" if data == b"[DONE]" else orjson.loads(data))
    return out


def stream(server: Any, **fields: Any) -> tuple[dict[str, str], list[Any]]:
    status, headers, body = raw(server, {"model": "m", "messages": MESSAGES, "stream": True, **fields})
    assert status == 200
    return headers, payloads(body)


def token_chunks(chunks: list[Any]) -> list[dict[str, Any]]:
    return [
        c
        for c in chunks
        if isinstance(c, dict)
        and c.get("choices")
        and ({"content", "reasoning_content"} & set(c["choices"][0]["delta"]))
    ]


# the script and where it comes from


def test_script_precedence_defaults_then_model_then_body() -> None:
    defaults = Script(ttft_ms=1, itl_ms=2, chunks=3)
    assert Script.from_request({"model": "plain"}, defaults) == defaults
    by_model = Script.from_request({"model": "itl_ms=7,tokens_per_chunk=2"}, defaults)
    assert (by_model.ttft_ms, by_model.itl_ms, by_model.tokens_per_chunk, by_model.chunks) == (1, 7, 2, 3)
    both = Script.from_request(
        {"model": "itl_ms=7", "fastsse_script": {"itl_ms": 9, "logprobs": True}}, defaults
    )
    assert (both.itl_ms, both.logprobs) == (9, True)


@pytest.mark.parametrize(
    "request_",
    [
        {"model": "nonsense=1"},
        {"model": "chunks=many"},
        {"fastsse_script": {"chunks": 2.5}},
        {"fastsse_script": {"usage": "sometimes"}},
        {"fastsse_script": {"status": 200}},
        {"fastsse_script": {"itl_ms": -1}},
        {"fastsse_script": {"stamp": "maybe"}},
    ],
)
def test_bad_script_is_a_value_error_and_a_400(scripted: Any, request_: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Script.from_request(request_)
    status, _, body = raw(scripted, {"messages": MESSAGES, "stream": True, **request_})
    assert status == 400
    assert orjson.loads(body)["error"]["type"] == "invalid_request_error"


# the schedule, read from the send stamps


def test_first_token_and_spacing_follow_the_script(scripted: Any) -> None:
    headers, chunks = stream(scripted, fastsse_script={"ttft_ms": 40, "itl_ms": 15, "chunks": 6})
    start = int(headers["X-Fastsse-Clock"].split()[0])
    tokens = token_chunks(chunks)
    assert len(tokens) == 6
    for k, chunk in enumerate(tokens):
        due = start + 40_000_000 + k * 15_000_000
        assert 0 <= chunk[STAMP_FIELD] - due < LATE_NS, k
    role = chunks[0]
    assert role["choices"][0]["delta"] == {"role": "assistant"}
    assert 0 <= role[STAMP_FIELD] - start < LATE_NS  # the role goes out at once, before the first token
    assert role[STAMP_FIELD] <= tokens[0][STAMP_FIELD]


def test_events_per_write_share_one_write_and_one_stamp(scripted: Any) -> None:
    headers, chunks = stream(scripted, fastsse_script={"chunks": 5, "events_per_write": 3, "itl_ms": 10})
    start = int(headers["X-Fastsse-Clock"].split()[0])
    stamps = [c[STAMP_FIELD] for c in chunks if isinstance(c, dict)]
    # role + 5 tokens + finish = 7 chunks: writes of [role, w0, w1], [w2, w3, w4], then the finish
    # goes with the last write
    assert len(stamps) == 7
    assert stamps[0] == stamps[1] == stamps[2]
    assert stamps[3] == stamps[4] == stamps[5] == stamps[6]
    # a group goes when its last event is due, never before: w1 at 5 + 10 ms, w4 at 5 + 40 ms
    assert stamps[0] - start >= 15_000_000
    assert stamps[3] - start >= 45_000_000


def test_stamp_off_sends_no_stamp_and_clients_ignore_it_when_on(scripted: Any) -> None:
    _, chunks = stream(scripted, fastsse_script={"stamp": False, "chunks": 2})
    assert all(STAMP_FIELD not in c for c in chunks if isinstance(c, dict))
    assert chunks[-1] == "[DONE]"


# the shapes a load generator counts from


def test_multi_token_chunks_with_max_tokens_and_continuous_usage(scripted: Any) -> None:
    _, chunks = stream(
        scripted,
        max_tokens=10,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
        fastsse_script={"tokens_per_chunk": 3, "chunks": None},
    )
    tokens = token_chunks(chunks)
    assert [c["choices"][0]["delta"]["content"] for c in tokens] == [
        " w0 w1 w2",
        " w3 w4 w5",
        " w6 w7 w8",
        " w9",
    ]
    assert [c["usage"]["completion_tokens"] for c in tokens] == [3, 6, 9, 10]
    assert chunks[0]["usage"]["completion_tokens"] == 0  # the role chunk: counting starts at 0
    assert all(c["usage"]["prompt_tokens"] == 3 for c in tokens)
    finish, usage, done = chunks[-3:]
    assert finish["choices"][0]["finish_reason"] == "length"
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 10
    assert done == "[DONE]"


def test_logprobs_give_one_entry_per_token_and_reasoning_comes_first(scripted: Any) -> None:
    _, chunks = stream(
        scripted, logprobs=True, fastsse_script={"tokens_per_chunk": 2, "chunks": 3, "reasoning_chunks": 1}
    )
    tokens = token_chunks(chunks)
    assert tokens[0]["choices"][0]["delta"] == {"reasoning_content": " w0 w1"}
    assert tokens[1]["choices"][0]["delta"] == {"content": " w2 w3"}
    assert [[e["token"] for e in c["choices"][0]["logprobs"]["content"]] for c in tokens] == [
        [" w0", " w1"],
        [" w2", " w3"],
        [" w4", " w5"],
    ]
    assert all("usage" not in c for c in chunks if isinstance(c, dict))  # usage not asked for


def test_fold_of_the_stream_is_the_non_streamed_answer(
    scripted: Any, stream_backend: SimpleNamespace
) -> None:
    request = {
        "model": "reasoning_chunks=2,tokens_per_chunk=2,chunks=none",
        "messages": MESSAGES,
        "max_tokens": 9,
    }
    result = fastsse.create_stream(request, base_url=scripted.base_url, api_key="x", timeout=20)
    assert result["verdict"]["complete"] is True
    message = result["choices"][0]["message"]
    assert message["reasoning_content"] == scripted_text(0, 4)
    assert message["content"] == scripted_text(4, 5)
    assert result["choices"][0]["finish_reason"] == "length"
    status, _, body = raw(scripted, request)
    assert status == 200
    complete = orjson.loads(body)
    assert complete["choices"][0]["message"]["content"] == message["content"]
    assert complete["usage"]["completion_tokens"] == 9


def test_truncated_stream_is_cut_and_never_complete(scripted: Any, stream_backend: SimpleNamespace) -> None:
    request = {"model": "truncate_after=3", "messages": MESSAGES}
    with pytest.raises(fastsse.TransportError) as info:
        fastsse.create_stream(request, base_url=scripted.base_url, api_key="x", timeout=20)
    partial = info.value.result
    assert partial["choices"][0]["message"]["content"] == scripted_text(0, 3)
    assert partial["verdict"]["complete"] is False
    assert partial["verdict"]["done"] is False


def test_error_after_ends_with_an_error_and_no_done(scripted: Any, stream_backend: SimpleNamespace) -> None:
    request = {"model": "m", "messages": MESSAGES, "fastsse_script": {"error_after": 2}}
    result = fastsse.create_stream(request, base_url=scripted.base_url, api_key="x", timeout=20)
    assert result["verdict"]["complete"] is False
    assert result["verdict"]["error"] is True
    assert result["choices"][0]["message"]["content"] == scripted_text(0, 2)


def test_status_answers_an_openai_error_object(scripted: Any) -> None:
    status, _, body = raw(scripted, {"model": "status=429", "messages": MESSAGES, "stream": True})
    assert status == 429
    assert orjson.loads(body)["error"]["code"] == "http_429"


# many streams at once, the server in its own process as in a benchmark


async def _read_stream(port: int, body: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    data = await reader.read()  # until the server closes (Connection: close)
    writer.close()
    return data


def _raise_fd_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"2,000 streams need {need} file descriptors; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))  # the server child inherits it


def test_two_thousand_concurrent_streams_on_one_process() -> None:
    _raise_fd_limit(4200)
    body = orjson.dumps({"model": "m", "messages": MESSAGES, "stream": True})
    with spawn_scripted_server(ttft_ms=200, itl_ms=10, chunks=5) as server:
        port = int(server.base_url.split(":")[2].split("/")[0])

        async def main() -> list[bytes]:
            return await asyncio.gather(*(_read_stream(port, body) for _ in range(2000)))

        answers = asyncio.run(main())
        stats = server.stats()
    assert len(answers) == 2000
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
        assert answer.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")
        assert answer.count(b'"content":" w') == 5
    assert stats["streams_total"] == 2000
    assert stats["streams_active"] == 0
    assert stats["chunks_written"] == 2000 * 8  # role, 5 tokens, finish, [DONE]


def _post(server: Any, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    try:
        conn.request("POST", path, orjson.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("path", "api", "body"),
    [
        ("/v1/messages", "messages", {"model": "reasoning_chunks=3", "max_tokens": 64, "messages": MESSAGES}),
        ("/v1/responses", "responses", {"model": "reasoning_chunks=3", "input": "one two three"}),
    ],
)
def test_responses_and_messages_are_the_script_translated_and_stamped(
    scripted: Any, path: str, api: str, body: dict[str, Any]
) -> None:
    status, data = _post(scripted, path, {**body, "stream": True})
    assert status == 200
    assert fastsse.check_stream(data, api=api) == []
    events = [orjson.loads(e.data) for e in fastsse.get_backend("python").Decoder().feed(data)]
    # every event closes with the send stamp (the translation's own bytes before it)
    assert all(type(e[STAMP_FIELD]) is int for e in events)
    stream = (fastsse.get_backend("python").MessagesStream if api == "messages" else fastsse.get_backend("python").ResponsesStream)()  # fmt: skip
    stream.write(data)
    stream.close()
    result = stream.result()
    assert result["verdict"]["complete"] is True
    if api == "messages":
        kinds = [(b["type"], b.get("thinking") or b.get("text")) for b in result["content"]]
        assert kinds == [("thinking", scripted_text(0, 3)), ("text", scripted_text(3, 5))]
        assert result["usage"]["output_tokens"] == 8 and result["usage"]["input_tokens"] == 3
    else:
        assert [item["type"] for item in result["output"]] == ["reasoning", "message"]
        assert result["output"][1]["content"][0]["text"] == scripted_text(3, 5)
        assert result["usage"]["output_tokens"] == 8
    # only streams: a whole answer in these formats is not scripted
    status, data = _post(scripted, path, body)
    assert status == 400 and b"stream" in data


# issue 35: the legacy /v1/completions stream


def test_completions_stream_the_script_as_text_chunks(scripted: Any, stream_backend: SimpleNamespace) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", scripted.port, timeout=20)
    request = {
        "model": "reasoning_chunks=2,chunks=none",
        "prompt": "one two three",
        "max_tokens": 5,
        "stream": True,
    }
    try:
        body = orjson.dumps({**request, "stream_options": {"include_usage": True}})
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200
        chunks = payloads(response.read())
    finally:
        conn.close()
    assert chunks[-1] == "[DONE]"
    texts = [c for c in chunks[:-1] if c["choices"]]
    assert all(c["object"] == "text_completion" and c["id"].startswith("cmpl-") for c in texts)
    assert all(isinstance(c[STAMP_FIELD], int) for c in chunks[:-1])  # one stamp each, where it was
    # the reasoning tokens have no place in a text completion: the content ones follow
    assert "".join(c["choices"][0]["text"] for c in texts) == scripted_text(2, 3)
    assert texts[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-2]["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    # the chat fold reads them (a choice's text, as chat's legacy field)
    again = {**request, "model": "chunks=none"}
    result = fastsse.create_stream(
        again, base_url=scripted.base_url, path="/completions", api_key="x", timeout=20
    )
    assert result["verdict"]["complete"] is True
    assert result["choices"][0]["text"] == scripted_text(0, 5)
