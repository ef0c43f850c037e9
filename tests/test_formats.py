"""The Responses and Messages folds against their hand-written vectors, on both backends, through
every way in (the fused stream in several chunkings, ``feed_event``, ``feed_data``), with and
without ``event:`` lines; the fused streams' protocol; the API table."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastsse
from _formats_helpers import (
    CHUNKINGS,
    classes,
    fold_events,
    fold_payloads,
    fold_stream,
    frame,
    load_vectors,
    payload_text,
)
from fastsse._formats import API_FORMATS, CONTENT, REASONING, api_format
from fastsse.fold._base import FormatVerdict

VECTORS = [("responses", v) for v in load_vectors("responses")] + [
    ("messages", v) for v in load_vectors("messages")
]
IDS = [f"{api}-{v['name']}" for api, v in VECTORS]


def check_verdict(verdict: FormatVerdict, expected: dict[str, Any], *, skip: tuple[str, ...] = ()) -> None:
    assert isinstance(verdict, FormatVerdict)
    for key, value in expected.items():
        if key in skip:
            continue
        got = getattr(verdict, key)
        assert (list(got) if key == "departures" else got) == value, key


@pytest.mark.parametrize(("api", "vector"), VECTORS, ids=IDS)
@pytest.mark.parametrize("named", [True, False], ids=["named", "data-only"])
def test_vector_stream(backend: SimpleNamespace, api: str, vector: dict[str, Any], named: bool) -> None:
    data = frame(vector["events"], named=named)
    skip = ("ignored",) if vector.get("stream_stops") else ()
    for size in CHUNKINGS:
        result, verdict = fold_stream(backend, api, data, size)
        assert result == vector["result"], size
        check_verdict(verdict, vector["verdict"], skip=skip)


@pytest.mark.parametrize(("api", "vector"), VECTORS, ids=IDS)
def test_vector_feed_event_and_data(backend: SimpleNamespace, api: str, vector: dict[str, Any]) -> None:
    result, verdict = fold_events(backend, api, frame(vector["events"], named=True))
    assert result == vector["result"]
    check_verdict(verdict, vector["verdict"])
    result, verdict = fold_payloads(backend, api, [payload_text(e) for e in vector["events"]])
    assert result == vector["result"]
    check_verdict(verdict, vector["verdict"])


@pytest.mark.parametrize(("api", "vector"), VECTORS, ids=IDS)
def test_vector_feed_dicts(backend: SimpleNamespace, api: str, vector: dict[str, Any]) -> None:
    agg_cls, _ = classes(backend, api)
    agg = agg_cls()
    for event in vector["events"]:
        if isinstance(event, dict):
            agg.feed(event)
    assert agg.result() == vector["result"]


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_result_is_new_each_call(backend: SimpleNamespace, api: str) -> None:
    vector = next(v for a, v in VECTORS if a == api and v["name"] == "text_basic")
    agg_cls, _ = classes(backend, api)
    agg = agg_cls()
    for event in vector["events"]:
        agg.feed_data(payload_text(event))
    first = agg.result()
    items = first["output"] if api == "responses" else first["content"]
    items.clear()
    assert agg.result() == vector["result"]


def test_event_line_names_an_untyped_payload(backend: SimpleNamespace) -> None:
    # The type comes from the event: line when the payload has none (and from the payload when
    # both are present; a disagreement is a departure).
    data = (
        b'event: message_start\ndata: {"message": {"id": "m", "usage": {"input_tokens": 1}}}\n\n'
        b'event: content_block_delta\ndata: {"index": 0, "delta": {"type": "text_delta", "text": "hi"}}\n\n'
        b'event: ping\ndata: {"type": "message_stop"}\n\n'
    )
    result, verdict = fold_stream(backend, "messages", data, None)
    assert result["id"] == "m"
    assert result["content"] == [{"type": "text", "text": "hi"}]
    assert verdict.terminal == "message_stop"
    assert list(verdict.departures) == ["block_not_started", "type_mismatch", "block_not_stopped"]


def test_tool_input_parsed_once(backend: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    module = __import__(backend.MessagesAggregator.__module__, fromlist=["tool_input"])
    calls: list[str] = []
    real = module.tool_input

    def counting(raw: str) -> Any:
        calls.append(raw)
        return real(raw)

    monkeypatch.setattr(module, "tool_input", counting)
    agg = backend.MessagesAggregator()
    agg.feed(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}},
        }
    )
    pieces = ['{"xs": ['] + ["1, "] * 2000 + ["1]}"]
    for piece in pieces:
        agg.feed(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": piece},
            }
        )
    assert calls == []
    agg.feed({"type": "content_block_stop", "index": 0})
    assert len(calls) == 1
    assert agg.result()["content"][0]["input"] == {"xs": [1] * 2001}
    agg.result()
    assert len(calls) == 1


def test_arguments_joined_not_reparsed(backend: SimpleNamespace) -> None:
    agg = backend.ResponsesAggregator()
    agg.feed(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call", "id": "fc", "name": "f"},
        }
    )
    for _ in range(5000):
        agg.feed({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "ab"})
    assert agg.result()["output"][0]["arguments"] == "ab" * 5000
    assert agg.deltas == 5000


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_on_chunk_sees_events_and_can_abort(backend: SimpleNamespace, api: str) -> None:
    vector = next(v for a, v in VECTORS if a == api and v["name"] == "text_basic")
    data = frame(vector["events"], named=True)
    seen: list[Any] = []
    _, stream_cls = classes(backend, api)
    stream = stream_cls(seen.append)
    assert stream.write(data) is None
    assert [e["type"] for e in seen] == [e["type"] for e in vector["events"]]
    seen.clear()

    def stop_at_third(event: dict[str, Any]) -> bool:
        seen.append(event)
        return len(seen) < 3

    stream = stream_cls(stop_at_third)
    assert stream.write(data) == 0
    assert len(seen) == 3
    assert stream.write(b"data: {}\n\n") == 0
    assert stream.verdict.aborted
    assert stream.verdict.why == "aborted by the caller"
    assert not stream.verdict.complete


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_on_chunk_exception_propagates(backend: SimpleNamespace, api: str) -> None:
    _, stream_cls = classes(backend, api)

    def boom(event: dict[str, Any]) -> None:
        raise KeyError("boom")

    stream = stream_cls(boom)
    with pytest.raises(KeyError):
        stream.write(b'data: {"type": "ping"}\n\n')
    assert stream.write(b'data: {"type": "ping"}\n\n') == 0
    assert stream.verdict.aborted


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_max_event_bytes(backend: SimpleNamespace, api: str) -> None:
    _, stream_cls = classes(backend, api)
    stream = stream_cls(max_event_bytes=64)
    big = b'data: {"type": "ping", "pad": "' + b"x" * 200 + b'"}\n\n'
    with pytest.raises(fastsse.EventTooLarge):
        stream.write(b'data: {"type": "ping"}\n\n' + big)
    assert stream.verdict.too_large
    assert stream.write(b"data: {}\n\n") == 0


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_stream_protocol_errors(backend: SimpleNamespace, api: str) -> None:
    _, stream_cls = classes(backend, api)
    stream = stream_cls()
    with pytest.raises(TypeError):
        stream.write("text")  # type: ignore[arg-type]
    assert stream.write(b"data: {}\n\n") is None  # still usable

    def reenter(event: dict[str, Any]) -> None:
        holder.write(b"data: {}\n\n")

    holder = stream_cls(reenter)
    with pytest.raises(RuntimeError):
        holder.write(b'data: {"type": "ping"}\n\n')
    agg_cls, _ = classes(backend, api)
    with pytest.raises(TypeError):
        agg_cls().feed_data(5)


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_truncated_byte_stream(backend: SimpleNamespace, api: str) -> None:
    _, stream_cls = classes(backend, api)
    stream = stream_cls()
    stream.write(b'data: {"type": "ping"}\n\ndata: {"type": "pi')
    stream.close()
    assert stream.verdict.truncated
    assert stream.verdict.why == "the byte stream ended inside an event"
    assert stream.write(b'ng"}\n\n') == 0
    assert stream.result()["verdict"]["truncated"] is True


def test_messages_error_stops_stream(backend: SimpleNamespace) -> None:
    stream = backend.MessagesStream()
    data = b'event: error\ndata: {"type": "error", "error": {"type": "api_error", "message": "x"}}\n\n'
    assert stream.write(data + b'data: {"type": "message_stop"}\n\n') == 0
    assert stream.aggregator.error == {"type": "api_error", "message": "x"}
    assert stream.verdict.terminal is None


def test_responses_error_does_not_stop_stream(backend: SimpleNamespace) -> None:
    stream = backend.ResponsesStream()
    assert stream.write(b'data: {"type": "error", "code": "c", "message": "m"}\n\n') is None
    stream.write(
        b'data: {"type": "response.failed", "response": {"status": "failed", "error": {"code": "c"}}}\n\n'
    )
    assert stream.verdict.terminal == "response.failed"
    assert stream.aggregator.error == {"code": "c", "message": "m"}


# Hostile values, one event each, with what docs/formats.md says a fold makes of them: ``skipped``
# counts payloads that are not a JSON object, ``malformed`` the values of the wrong type it dropped,
# ``departures`` what it tolerated (``unknown_event``: a type the fold does not know, as the other
# API's events are; ``untyped_event``: nothing names a type), ``terminal`` the lifecycle event that
# ended the stream. A value outside its field's type is dropped, so every result keeps the API's
# shape (every output item and content block an object with a ``type``) and holds no text: none of
# these payloads carries a text string. Each row: payload, then (skipped, malformed, departures
# that must be there, terminal) for Responses and for Messages.
UNKNOWN = (0, 0, {"unknown_event"}, None)
NOT_AN_OBJECT = (1, 0, set(), None)
HOSTILE: list[tuple[str, bytes, dict[str, tuple[int, int, set[str], str | None]]]] = [
    (
        "type-not-a-string",
        b'{"type": 5}',
        dict.fromkeys(("responses", "messages"), (0, 1, {"untyped_event"}, None)),
    ),
    (  # an output_index and a content_index that are not indexes, a delta that is not a string
        "text-delta-bad-fields",
        b'{"type": "response.output_text.delta", "output_index": "x", "content_index": -1, "delta": 7}',
        {"responses": (0, 3, set(), None), "messages": UNKNOWN},
    ),
    (  # an output_index past any index (beyond 2**62), an item that is not an object
        "item-added-bad-fields",
        b'{"type": "response.output_item.added", "output_index": 99999999999999999999, "item": []}',
        {"responses": (0, 2, set(), None), "messages": UNKNOWN},
    ),
    (  # the terminal event; its output holds one item never streamed and two entries that are not items
        "completed-output-not-items",
        b'{"type": "response.completed", "response": {"output": [1, null, {"type": "message"}]}}',
        {"responses": (0, 2, {"item_only_in_terminal"}, "response.completed"), "messages": UNKNOWN},
    ),
    (  # an index that is a bool, a block that is not an object
        "block-start-bad-fields",
        b'{"type": "content_block_start", "index": true, "content_block": null}',
        {"responses": UNKNOWN, "messages": (0, 2, set(), None)},
    ),
    (  # 1e400 is no double: RFC 8259 section 9 lets a parser refuse it, and orjson does
        "number-out-of-range",
        b'{"type": "content_block_delta", "index": 1e400, "delta": {"type": "citations_delta"}}',
        dict.fromkeys(("responses", "messages"), NOT_AN_OBJECT),
    ),
    (
        "block-stop-null-index",
        b'{"type": "content_block_stop", "index": null}',
        {"responses": UNKNOWN, "messages": (0, 1, set(), None)},
    ),
    (  # usage that is not an object, content that holds no block
        "message-start-bad-fields",
        b'{"type": "message_start", "message": {"usage": 3, "content": [1]}}',
        {"responses": UNKNOWN, "messages": (0, 2, set(), None)},
    ),
    (
        "message-delta-bad-fields",
        b'{"type": "message_delta", "delta": [], "usage": []}',
        {"responses": UNKNOWN, "messages": (0, 2, set(), None)},
    ),
    (  # a refusal that is not a string, annotations that are not a list
        "part-done-bad-fields",
        b'{"type": "response.content_part.done", "part": {"type": "refusal", "refusal": 3, "annotations": 4}}',
        {"responses": (0, 2, set(), None), "messages": UNKNOWN},
    ),
    (  # a part that is not an object, for an item never announced (created as the event implies)
        "summary-part-not-an-object",
        b'{"type": "response.reasoning_summary_part.added", "summary_index": 2, "part": 1}',
        {"responses": (0, 1, {"item_not_announced"}, None), "messages": UNKNOWN},
    ),
    ("lone-surrogate-string", b'"\\ud83d"', dict.fromkeys(("responses", "messages"), NOT_AN_OBJECT)),
    ("invalid-utf8", b"\xff\xfe", dict.fromkeys(("responses", "messages"), NOT_AN_OBJECT)),
    # "data: " with nothing after it is an event whose data is empty (the WHATWG buffer holds a LF)
    ("empty", b"", dict.fromkeys(("responses", "messages"), NOT_AN_OBJECT)),
]


def _hostile_cases() -> list[Any]:
    return [
        pytest.param(api, payload, expected[api], id=f"{api}-{name}")
        for name, payload, expected in HOSTILE
        for api in ("responses", "messages")
    ]


def _texts(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [
            t
            for k, v in node.items()
            for t in ([v] if k in TEXT_FIELDS and isinstance(v, str) else _texts(v))
        ]
    if isinstance(node, list):
        return [t for v in node for t in _texts(v)]
    return []


TEXT_FIELDS = ("text", "refusal", "thinking", "arguments", "partial_json")


def _fold_hostile(backend: SimpleNamespace, api: str, payload: bytes, skipped: int) -> tuple[Any, Any, Any]:
    """The payload folded by the aggregator and by the fused stream: (aggregator, stream, result)."""
    agg_cls, stream_cls = classes(backend, api)
    agg = agg_cls()
    assert agg.feed_data(payload) is (skipped == 0)  # True if folded
    stream = stream_cls()
    assert stream.write(b"data: " + payload + b"\n\n") is None  # tolerated: the stream goes on
    stream.close()
    return agg, stream, agg.result()


# Each rule of the comment above is a test of its own, so a fold that breaks one is named by it.
@pytest.mark.parametrize(("api", "payload", "expected"), _hostile_cases())
def test_hostile_values_are_counted(
    backend: SimpleNamespace, api: str, payload: bytes, expected: tuple[int, int, set[str], str | None]
) -> None:
    skipped, malformed, _, _ = expected
    agg, stream, _ = _fold_hostile(backend, api, payload, skipped)
    for verdict in (agg.verdict, stream.verdict):
        assert (verdict.skipped, verdict.malformed, verdict.ignored) == (skipped, malformed, 0)


@pytest.mark.parametrize(("api", "payload", "expected"), _hostile_cases())
def test_hostile_values_are_tolerated_and_recorded(
    backend: SimpleNamespace, api: str, payload: bytes, expected: tuple[int, int, set[str], str | None]
) -> None:
    skipped, _, departures, terminal = expected
    agg, stream, result = _fold_hostile(backend, api, payload, skipped)
    for verdict in (agg.verdict, stream.verdict):
        assert departures <= set(verdict.departures)
        assert (verdict.terminal, verdict.complete) == (terminal, terminal is not None)
        assert verdict.why == (None if terminal else "no terminal event")
    assert {k: v for k, v in stream.result().items() if k != "verdict"} == result


@pytest.mark.parametrize(("api", "payload", "expected"), _hostile_cases())
def test_hostile_values_keep_the_apis_shape(
    backend: SimpleNamespace, api: str, payload: bytes, expected: tuple[int, int, set[str], str | None]
) -> None:
    _, _, result = _fold_hostile(backend, api, payload, expected[0])
    blocks = result["output"] if api == "responses" else result["content"]
    assert result["object" if api == "responses" else "type"] == (
        "response" if api == "responses" else "message"
    )
    assert [b for b in blocks if not (isinstance(b, dict) and isinstance(b.get("type"), str))] == []
    assert "".join(_texts(result)) == ""


def test_a_summary_part_implies_a_reasoning_item(backend: SimpleNamespace) -> None:
    payload = b'{"type": "response.reasoning_summary_part.added", "summary_index": 2, "part": 1}'
    _, _, result = _fold_hostile(backend, "responses", payload, 0)
    assert [b["type"] for b in result["output"]] == ["reasoning"]


def test_backends_expose_the_folds(backend: SimpleNamespace) -> None:
    # each backend's namespace holds its own twins, never the other's: the compiled module for
    # "cython", the Python one for "python"
    suffix = "_c" if backend.name == "cython" else "_py"
    for attr in ("ResponsesAggregator", "ResponsesStream", "MessagesAggregator", "MessagesStream"):
        module = getattr(backend, attr).__module__
        assert module.endswith("._fold" + suffix), (attr, module)
    assert fastsse.ResponsesAggregator is fastsse.get_backend(fastsse.BACKEND).ResponsesAggregator


def test_api_table() -> None:
    assert set(API_FORMATS) == {"chat", "responses", "messages"}
    assert api_format("chat").path == "/chat/completions"
    assert api_format("responses").path == "/responses"
    assert api_format("messages").path == "/messages"
    assert "Authorization: Bearer k" in api_format("responses").headers("k")
    messages = api_format("messages").headers("k")
    assert "x-api-key: k" in messages
    assert "anthropic-version: 2023-06-01" in messages
    assert not any(h.startswith("Authorization") for h in messages)
    assert orjson.loads(api_format("messages").body({"model": "m", "stream": False})) == {
        "model": "m",
        "stream": True,
    }
    with pytest.raises(ValueError):
        api_format("completions")


def test_one_stream_table_builds_every_format_on_the_switched_backend(
    stream_backend: SimpleNamespace,
) -> None:
    # every format the engine knows comes from the one table, on the backend the fixture chose
    from fastsse.client import _streams

    built = {
        name: _streams.new_stream(name, None, api="chat", max_event_bytes=None, timing=False)
        for name in _streams.FORMATS
        if name != "to-chat"
    }
    built["to-chat"] = _streams.new_stream(
        "to-chat", None, api="messages", max_event_bytes=None, timing=False
    )
    assert type(built["chat"]) is stream_backend.ChatStream
    assert type(built["responses"]) is stream_backend.ResponsesStream
    assert type(built["messages"]) is stream_backend.MessagesStream
    assert type(built["relay"].relay) is stream_backend.Relay
    assert type(built["to-messages"].translator) is stream_backend.ChatToMessages
    assert type(built["to-responses"].translator) is stream_backend.ChatToResponses
    assert type(built["to-chat"].translator) is stream_backend.MessagesToChat
    assert type(built["events"].decoder) is stream_backend.Decoder
    with pytest.raises(ValueError, match="unknown format"):
        _streams.new_stream("completions", None, api="chat", max_event_bytes=None, timing=False)


def test_token_kinds() -> None:
    responses = api_format("responses").token_kind
    assert responses({"type": "response.created", "response": {}}) == 0
    assert responses({"type": "response.output_text.delta", "delta": ""}) == 0
    assert responses({"type": "response.output_text.delta", "delta": "a"}) == CONTENT
    assert responses({"type": "response.reasoning_summary_text.delta", "delta": "x"}) == REASONING
    messages = api_format("messages").token_kind
    assert messages({"type": "message_start", "message": {}}) == 0
    assert (
        messages({"type": "content_block_delta", "delta": {"type": "signature_delta", "signature": "s"}}) == 0
    )
    assert (
        messages({"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "t"}})
        == REASONING
    )
    assert (
        messages({"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": "{"}})
        == CONTENT
    )
    chat = api_format("chat").token_kind
    assert chat({"choices": [{"delta": {"role": "assistant", "content": ""}}]}) == 0
    assert chat({"choices": [{"delta": {"content": "a", "reasoning_content": "r"}}]}) == CONTENT | REASONING


def test_folds_leave_nothing_behind(backend: SimpleNamespace) -> None:
    # Every vector (errors, fallbacks, departures included) through both folds, many times: what
    # tracemalloc still holds afterwards must not grow with the number of rounds.
    import gc
    import tracemalloc

    streams = [(api, frame(v["events"], named=True)) for api, v in VECTORS]

    def rounds(n: int) -> None:
        for _ in range(n):
            for api, data in streams:
                _, stream_cls = classes(backend, api)
                stream = stream_cls()
                stream.write(data)
                stream.close()
                stream.result()

    rounds(5)
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        rounds(100)
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_chunking_same_fold(backend: SimpleNamespace, data: st.DataObject) -> None:
    api, vector = data.draw(st.sampled_from(VECTORS))
    raw = frame(vector["events"], named=data.draw(st.booleans()))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    _, stream_cls = classes(backend, api)
    stream = stream_cls()
    last = 0
    for cut in [*cuts, len(raw)]:
        if stream.write(raw[last:cut]) == 0:
            break
        last = cut
    stream.close()
    result = stream.result()
    result.pop("verdict")
    assert result == vector["result"]


@pytest.mark.parametrize(
    ("api", "name", "kinds"),
    [
        # thinking "Let me ", "check." (reasoning); a signature and an empty input piece (no
        # token); two input pieces (content).
        ("messages", "thinking_then_tool_use", [2, 2, 1, 1]),
        # two summary deltas (reasoning), two refusal deltas (content).
        ("responses", "reasoning_summary_and_refusal", [2, 2, 1, 1]),
    ],
)
@pytest.mark.parametrize("with_on_chunk", [False, True])
def test_timing_arrays(
    backend: SimpleNamespace, api: str, name: str, kinds: list[int], with_on_chunk: bool
) -> None:
    vector = next(v for a, v in VECTORS if a == api and v["name"] == name)
    events = [frame([e], named=True) for e in vector["events"]]
    _, stream_cls = classes(backend, api)
    stream = stream_cls((lambda event: None) if with_on_chunk else None, timing=True)
    for data in events:  # one read per event
        stream.write(data)
    stream.close()
    reads, token_reads, tokens, token_kinds, anchor = stream._timing_arrays()
    assert len(reads) == len(events) and reads == sorted(reads)
    assert token_kinds == kinds
    assert tokens == [1] * len(kinds)
    token_events = [i for i, e in enumerate(vector["events"]) if api_format(api).token_kind(e)]
    assert token_reads == token_events
    assert len(anchor) == 2
    assert stream_cls()._timing_arrays() is None
