"""encode_event and ChatChunkEncoder: exact bytes, the errors they promise, and round-trips through the decoder."""

from __future__ import annotations

import re

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsse import ChatChunkEncoder, check_stream, encode_event

# encode_event


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"data": "hello"}, b"data: hello\n\n"),
        ({"data": "a\nb"}, b"data: a\ndata: b\n\n"),
        ({"data": "a\r\nb\rc"}, b"data: a\ndata: b\ndata: c\n\n"),
        ({"data": ""}, b"data:\n\n"),
        ({"data": "\n"}, b"data:\ndata:\n\n"),
        ({"data": " lead"}, b"data:  lead\n\n"),
        ({"data": b"caf\xc3\xa9"}, "data: café\n\n".encode()),
        (
            {"data": "x", "event": "delta", "id": "7", "retry": 1500},
            b"event: delta\nid: 7\nretry: 1500\ndata: x\n\n",
        ),
        ({"data": "x", "id": ""}, b"id:\ndata: x\n\n"),
        ({"comment": "ping"}, b": ping\n\n"),
        ({"comment": ""}, b":\n\n"),
        ({"comment": "a\nb"}, b": a\n: b\n\n"),
        ({"retry": 0}, b"retry: 0\n\n"),
        ({"data": "x", "comment": "c"}, b": c\ndata: x\n\n"),
    ],
)
def test_encode_event_bytes(kwargs: dict[str, object], expected: bytes) -> None:
    data = kwargs.pop("data", None)
    assert encode_event(data, **kwargs) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"event": "a\nb"}, "event"),
        ({"event": "a\rb"}, "event"),
        ({"id": "1\n"}, "id"),
        ({"id": "\r"}, "id"),
        ({"id": "a\0b"}, "id"),
        ({"retry": -1}, "retry"),
    ],
)
def test_encode_event_rejects_bad_fields(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        encode_event("x", **kwargs)  # type: ignore[arg-type]


def test_encode_event_type_errors() -> None:
    with pytest.raises(TypeError, match="retry"):
        encode_event("x", retry="5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="retry"):
        encode_event("x", retry=True)
    with pytest.raises(TypeError, match="data"):
        encode_event(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="event"):
        encode_event("x", event=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="None"):
        encode_event()


# Every text a str can hold except lone surrogates, which UTF-8 cannot carry.
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)
single_line = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\r\n"), max_size=20)


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            texts,
            st.none() | single_line,
            st.none() | single_line.filter(lambda s: "\0" not in s),
            st.none() | st.integers(0, 10**12),
            st.none() | texts,
        ),
        min_size=1,
        max_size=5,
    ),
    cut=st.integers(1, 7),
)
def test_round_trip_through_decoder(backend, events, cut: int) -> None:
    """encode_event -> Decoder gives back data (CR and CRLF as LF), type, id and retry, however it is chunked."""
    stream = b"".join(encode_event(d, event=e, id=i, retry=r, comment=c) for d, e, i, r, c in events)
    decoder = backend.Decoder()
    got = []
    for k in range(0, len(stream), cut):
        got += decoder.feed(stream[k : k + cut])
    assert decoder.close() == []
    assert len(got) == len(events)
    last_id, last_retry = "", None
    for ev, (data, etype, ident, retry, _) in zip(got, events, strict=False):
        last_id = last_id if ident is None else ident
        last_retry = last_retry if retry is None else retry
        assert ev.data == re.sub(r"\r\n|\r", "\n", data)
        assert ev.event == (etype or "message")
        assert ev.id == last_id
        assert ev.retry == last_retry


def test_keep_alive_dispatches_nothing(backend) -> None:
    decoder = backend.Decoder()
    assert decoder.feed(encode_event(comment="ping") + encode_event("x") + encode_event(comment="ping")) == [
        backend.Event("x")
    ]


# ChatChunkEncoder


def test_chat_stream_exact_shape() -> None:
    """The compliant shape of seed 000: role-only first chunk, null finish_reason, empty final delta, usage, [DONE]."""
    enc = ChatChunkEncoder(id="chatcmpl-1", model="m", created=1700000000, system_fingerprint="fp_1")
    head = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","system_fingerprint":"fp_1",'
    stream = [
        enc.role(),
        enc.content("Hello"),
        enc.content(" wörld"),
        enc.finish(),
        enc.usage({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
        enc.done(),
    ]
    expected = [
        head + '"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}',
        head + '"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}',
        head + '"choices":[{"index":0,"delta":{"content":" wörld"},"finish_reason":null}]}',
        head + '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
        head + '"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}',
        "[DONE]",
    ]
    assert stream == [f"data: {line}\n\n".encode() for line in expected]
    assert check_stream(b"".join(stream), expect_usage=True) == []


def test_chat_chunk_tool_calls_reasoning_refusal() -> None:
    enc = ChatChunkEncoder(id="c", model="m", created=1)
    role = enc.role()
    chunks = [
        enc.reasoning("think"),
        enc.tool_call(0, id="call_a", name="f", arguments='{"a"'),
        enc.tool_call(1, id="call_b", name="g"),
        enc.tool_call(0, arguments=": 1}"),
        enc.tool_call(1, arguments="{}"),
        enc.finish("tool_calls"),
    ]
    deltas = [orjson.loads(c[6:])["choices"][0] for c in chunks]
    assert deltas[0]["delta"] == {"reasoning_content": "think"}
    assert deltas[1]["delta"] == {
        "tool_calls": [
            {"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": '{"a"'}}
        ]
    }
    assert deltas[2]["delta"]["tool_calls"][0]["function"] == {"name": "g", "arguments": ""}
    assert deltas[3]["delta"] == {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}
    assert deltas[5] == {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
    assert check_stream(role + b"".join(chunks) + enc.done()) == []

    enc = ChatChunkEncoder(id="r", model="m", created=1)
    assert orjson.loads(enc.role()[6:])["created"] == 1
    assert orjson.loads(enc.refusal("no")[6:])["choices"][0]["delta"] == {"refusal": "no"}


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_chat_chunk_reasoning_key(backend, key: str) -> None:
    """vLLM 0.9+, OpenRouter and Ollama name the field ``reasoning``; both names are lint-clean and
    fold into the message under the name the stream used."""
    enc = ChatChunkEncoder(id="c", model="m", created=1, reasoning_key=key)
    stream = enc.role() + enc.reasoning("let me ") + enc.reasoning("think") + enc.content("ok")
    stream += enc.finish("stop") + enc.done()
    assert orjson.loads(stream.split(b"\n\n")[1][6:])["choices"][0]["delta"] == {key: "let me "}
    assert check_stream(stream) == []
    folded = backend.ChatStream()
    folded.write(stream)
    message = folded.result()["choices"][0]["message"]
    assert message[key] == "let me think" and message["content"] == "ok"


def test_chat_chunk_reasoning_key_must_be_known() -> None:
    with pytest.raises(ValueError, match="reasoning_key"):
        ChatChunkEncoder(id="c", model="m", reasoning_key="thoughts")


def test_chat_chunk_created_defaults_to_now() -> None:
    import time

    before = int(time.time())
    chunk = orjson.loads(ChatChunkEncoder(id="c", model="m").role()[6:])
    assert before <= chunk["created"] <= int(time.time())
    assert "system_fingerprint" not in chunk


def test_chat_chunk_several_choices() -> None:
    enc = ChatChunkEncoder(id="c", model="m", created=1)
    stream = [enc.role(index=0), enc.role(index=1), enc.content("a", 1), enc.content("b", 0)]
    with pytest.raises(ValueError, match=r"choice\(s\) \[0, 1\]"):
        enc.done()
    stream += [enc.finish("stop", 0), enc.finish(reason="length", index=1), enc.done()]
    assert check_stream(b"".join(stream)) == []


def _started() -> ChatChunkEncoder:
    enc = ChatChunkEncoder(id="c", model="m", created=1)
    enc.role()
    return enc


def _finished() -> ChatChunkEncoder:
    enc = _started()
    enc.content("x")
    enc.finish()
    return enc


def _done() -> ChatChunkEncoder:
    enc = _finished()
    enc.done()
    return enc


def _with_call() -> ChatChunkEncoder:
    enc = _started()
    enc.tool_call(0, id="call_a", name="f")
    return enc


@pytest.mark.parametrize(
    ("make", "call", "match"),
    [
        (lambda: ChatChunkEncoder(id="c", model="m"), lambda e: e.content("x"), "before role"),
        (_started, lambda e: e.role(), "twice"),
        (_started, lambda e: e.role(""), "non-empty"),
        (_started, lambda e: e.content(""), "empty content"),
        (_started, lambda e: e.reasoning(""), "empty reasoning"),
        (_started, lambda e: e.finish(""), "non-empty"),
        (_started, lambda e: e.finish("tool_calls"), "no tool call"),
        (_started, lambda e: e.usage({}), "no finish"),
        (_started, lambda e: e.done(), "no finish"),
        (_started, lambda e: e.tool_call(0, id="call_a"), "id and name"),
        (_started, lambda e: e.tool_call(1, id="call_a", name="f"), "skips 0"),
        (_with_call, lambda e: e.tool_call(0, id="call_a", arguments="{}"), "already has"),
        (_with_call, lambda e: e.tool_call(0, name="f", arguments="{}"), "already has"),
        (_with_call, lambda e: e.tool_call(0), "empty arguments"),
        (_with_call, lambda e: e.tool_call(1, id="call_a", name="g"), "already used"),
        (_finished, lambda e: e.content("more"), "after finish"),
        (_finished, lambda e: e.finish(), "after finish"),
        (_finished, lambda e: e.tool_call(0, id="x", name="f"), "after finish"),
        (_done, lambda e: e.content("x"), "after done"),
        (_done, lambda e: e.role(index=1), "after done"),
        (_done, lambda e: e.done(), "after done"),
        (_done, lambda e: e.usage({}), "after done"),
        (lambda: ChatChunkEncoder(id="c", model="m"), lambda e: e.done(), "before any choice"),
    ],
)
def test_chat_chunk_misuse_raises(make, call, match: str) -> None:
    enc = make()
    with pytest.raises(ValueError, match=match):
        call(enc)


def test_chat_chunk_after_usage() -> None:
    enc = _finished()
    enc.usage({"total_tokens": 1})
    with pytest.raises(ValueError, match="twice"):
        enc.usage({})
    with pytest.raises(ValueError, match="after usage"):
        enc.role(index=1)
    assert enc.done() == b"data: [DONE]\n\n"


tokens = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    plan=st.lists(st.lists(tokens, max_size=6), min_size=1, max_size=3),
    calls=st.lists(st.tuples(st.text(min_size=1, max_size=8), st.lists(tokens, max_size=3)), max_size=3),
    usage=st.booleans(),
)
def test_any_encoder_stream_is_lint_clean(plan, calls, usage: bool) -> None:
    """Whatever a server sends through ChatChunkEncoder, the linter finds nothing to report."""
    enc = ChatChunkEncoder(id="c", model="m", created=1)
    out = [enc.role(index=i) for i in range(len(plan))]
    for i, texts_ in enumerate(plan):
        out += [enc.content(t, i) for t in texts_]
    for k, (name, parts) in enumerate(calls):
        out.append(enc.tool_call(k, id=f"call_{k}", name=name))
        out += [enc.tool_call(k, arguments=p) for p in parts]
    out += [enc.finish("tool_calls" if calls and i == 0 else "stop", i) for i in range(len(plan))]
    if usage:
        out.append(enc.usage({"total_tokens": 1}))
    out.append(enc.done())
    assert check_stream(b"".join(out), expect_usage=usage) == []
