"""Garbage into ChatAggregator and ChatStream: never a crash, never an exception but SSEError.

Payloads that are not JSON, nest 10^5 deep or carry huge numbers are skipped and counted (lone
surrogate escapes become U+FFFD, see test_aggregator.py); a value of the wrong type at any position of an otherwise good chunk is dropped and counted
(``malformed``) while the rest is folded. Both backends must agree, and the fused ChatStream must
fold exactly what Decoder + ``ChatAggregator.feed_event`` folds.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

import fastsse
from _chat_helpers import bare

PY = fastsse.get_backend("python")

HEAD = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
ROLE = {**HEAD, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
TAIL = [
    {**HEAD, "choices": [{"index": 0, "delta": {"content": "z"}}]},
    {**HEAD, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
]

# A chunk using every field the fold knows; each position gets every wrong value below.
TEMPLATE: dict[str, Any] = {
    "id": "c",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "m",
    "system_fingerprint": "fp",
    "service_tier": "default",
    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    "choices": [
        {
            "index": 0,
            "finish_reason": None,
            "logprobs": {
                "content": [{"token": "a", "logprob": -0.1, "bytes": [97], "top_logprobs": []}],
                "refusal": None,
            },
            "delta": {
                "role": "assistant",
                "content": "a",
                "reasoning_content": "r",
                "reasoning": "r2",
                "refusal": "no",
                "annotations": [{"type": "url_citation"}],
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
                "function_call": {"name": "g", "arguments": "{"},
                "audio": {"id": "a1", "data": "AA", "transcript": "t", "expires_at": 1},
            },
        }
    ],
}
WRONG: list[Any] = [5, -1, 1.5, "a", "", True, None, [], [1, "x"], {}, {"a": 1}, 2**63, -(2**63), 1e308]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every position (dict key or list index) in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield (*prefix, i)
            yield from paths(item, (*prefix, i))


def replaced(template: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(template)
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return out


def sse(payloads: list[Any]) -> bytes:
    out = []
    for p in payloads:
        data = p if isinstance(p, bytes) else orjson.dumps(p)
        out.append(b"data: " + data + b"\n\n")
    return b"".join(out)


def fold_all(backend: Any, payloads: list[Any], *, dump: bool = True) -> dict[str, Any]:
    """Fold the payloads four ways on one backend; they must agree. Returns what they agreed on."""
    stream_bytes = sse(payloads)
    by_dict = backend.ChatAggregator()
    by_data = backend.ChatAggregator()
    by_event = backend.ChatAggregator()
    for p in payloads:
        if isinstance(p, dict):
            by_dict.feed(copy.deepcopy(p))
        by_data.feed_data(p if isinstance(p, bytes) else orjson.dumps(p))
    for event in backend.Decoder().feed(stream_bytes):
        by_event.feed_event(event)
    seen: list[Any] = []
    stream = backend.ChatStream(seen.append)
    for i in range(0, len(stream_bytes), 7):  # small writes: every split point kind
        assert stream.write(stream_bytes[i : i + 7]) in (None, 0)
    stream.close()
    fused = stream.result()
    verdict = fused.pop("verdict")
    assert bare(by_data.result()) == bare(by_event.result()) == fused
    if all(isinstance(p, dict) for p in payloads):
        assert bare(by_dict.result()) == fused
    counts = (by_data.skipped, by_data.malformed, by_data.ignored)
    assert counts == (stream.aggregator.skipped, stream.aggregator.malformed, stream.aggregator.ignored)
    if dump:
        orjson.dumps(fused)  # the result is plain JSON data
    return {"result": fused, "verdict": verdict, "counts": counts, "seen": len(seen)}


def both(payloads: list[Any], *, dump: bool = True) -> dict[str, Any]:
    c = fold_all(fastsse.get_backend(fastsse.BACKEND), payloads, dump=dump)
    p = fold_all(PY, payloads, dump=dump)
    assert c == p
    return c


POSITIONS = list(paths(TEMPLATE))


@pytest.mark.parametrize("path", POSITIONS, ids=["/".join(map(str, p)) for p in POSITIONS])
def test_wrong_type_at_every_position(path: tuple[Any, ...]) -> None:
    for value in WRONG:
        out = both([ROLE, replaced(TEMPLATE, path, value), *TAIL, b"[DONE]"])
        choice0 = next(c for c in out["result"]["choices"] if c["index"] == 0)
        # The chunks after the bad one are still folded.
        assert (choice0["message"]["content"] or "").endswith("z"), (path, value)
        assert choice0["finish_reason"] == "stop", (path, value)
        assert out["counts"][0] == 0  # valid JSON objects are never skipped whole


# The examples and the other fields whose type the fold relies on: dropped and counted.
TYPED = [
    (("choices",), 5),
    (("choices",), {}),
    (("choices", 0), "x"),
    (("choices", 0, "delta"), []),
    (("choices", 0, "delta"), "text"),
    (("choices", 0, "index"), "a"),
    (("choices", 0, "index"), 1.5),
    (("choices", 0, "delta", "tool_calls"), {}),
    (("choices", 0, "delta", "tool_calls", 0), 5),
    (("choices", 0, "delta", "tool_calls", 0, "index"), "a"),
    (("choices", 0, "delta", "tool_calls", 0, "function"), "f"),
    (("choices", 0, "delta", "tool_calls", 0, "function", "arguments"), 7),
    (("choices", 0, "delta", "tool_calls", 0, "function", "name"), ["f"]),
    (("choices", 0, "delta", "content"), 5),
    (("choices", 0, "delta", "content"), {"text": "a"}),
    (("choices", 0, "delta", "role"), 1),
    (("choices", 0, "finish_reason"), ["stop"]),
    (("choices", 0, "delta", "function_call"), "g"),
    (("choices", 0, "delta", "function_call", "arguments"), 7),
    (("choices", 0, "logprobs"), 5),
    (("choices", 0, "delta", "audio"), []),
    (("choices", 0, "delta", "audio", "data"), 5),
]


@pytest.mark.parametrize(("path", "value"), TYPED, ids=[f"{'/'.join(map(str, p))}={v!r}" for p, v in TYPED])
def test_wrong_types_are_counted(path: tuple[Any, ...], value: Any) -> None:
    good = both([ROLE, TEMPLATE, *TAIL, b"[DONE]"])
    bad = both([ROLE, replaced(TEMPLATE, path, value), *TAIL, b"[DONE]"])
    assert good["counts"] == (0, 0, 0)
    assert bad["counts"][1] >= 1, (path, value, bad["counts"])
    assert bad["verdict"]["malformed"] == bad["counts"][1]


GARBAGE: list[bytes] = [
    b"",
    b" ",
    b"{",
    b"}",
    b"[1, 2",
    b'{"choices": [',
    b'{"choices": [{"delta": {"content": "a"}}]} trailing',
    b"null",
    b"true",
    b"123",
    b'"a string"',
    b"[]",
    b"[{}]",
    b"NaN",
    b"Infinity",
    b'{"a": NaN}',
    b"{'single': 'quotes'}",
    b'{"a": 1,}',
    b"\xef\xbb\xbf{}",
    b'{"a": "\x00"}',
    b"\x00\x01\x02",
    b"\xff\xfe\xfd",
    b'{"choices": [{"index": 1e400, "delta": {"content": "a"}}]}',  # infinity
    b'{"usage": {"total_tokens": -1e999}}',
    b'{"choices": [{"index": 0, "delta": {"content": "a"' + b" " * 100_000,
    b"[" * 100_000 + b"]" * 100_000,
    b"{" * 100_000,
    b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    b'{"choices": [{"index": 0, "delta": {"content": "a", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}]}",
    b"[DONE",
    b"DONE",
    b"[done]",
]


@pytest.mark.parametrize("payload", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_payloads_are_skipped_and_counted(payload: bytes) -> None:
    out = both([ROLE, payload, *TAIL, b"[DONE]"])
    skipped, _malformed, ignored = out["counts"]
    assert skipped == 1, out["counts"]
    assert ignored == 0
    assert out["result"]["choices"][0]["message"]["content"] == "z"
    assert out["verdict"]["done"] is True


HUGE: list[tuple[str, bytes]] = [
    ("index-2**63-1", b'{"choices": [{"index": 9223372036854775807, "delta": {"content": "a"}}]}'),
    ("index-2**64", b'{"choices": [{"index": 18446744073709551616, "delta": {"content": "a"}}]}'),
    ("index-negative", b'{"choices": [{"index": -9223372036854775808, "delta": {"content": "a"}}]}'),
    ("index-1e300", b'{"choices": [{"index": 1e300, "delta": {"content": "a"}}]}'),
    ("index-huge-int", b'{"choices": [{"index": 1' + b"0" * 400 + b', "delta": {"content": "a"}}]}'),
    (
        "tool-index-huge",
        b'{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1' + b"0" * 30 + b"}]}}]}",
    ),
    (
        "tool-index-2**63-1",
        b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":9223372036854775807}]}}]}',
    ),
    ("created-huge", b'{"created": 1' + b"0" * 400 + b"}"),
    ("usage-huge", b'{"choices": [], "usage": {"prompt_tokens": 1' + b"0" * 400 + b"}}"),
    ("float-tiny", b'{"usage": {"total_tokens": 1e-400}}'),
    ("float-neg-zero", b'{"usage": {"total_tokens": -0.0}}'),
]


@pytest.mark.parametrize("payload", [h[1] for h in HUGE], ids=[h[0] for h in HUGE])
def test_huge_numbers(payload: bytes) -> None:
    out = both([ROLE, payload, *TAIL, b"[DONE]"])
    assert out["result"]["choices"][0]["index"] in (0, -(2**63))
    assert any(c["index"] == 0 and c["message"]["content"].endswith("z") for c in out["result"]["choices"])


def test_many_choice_and_tool_indexes_stay_cheap() -> None:
    # 10^4 distinct, scattered indexes: past 127 each is dropped and counted (no state at all);
    # the 128 in bounds cost one small object each, and the result lists them in ascending order.
    payloads: list[Any] = [ROLE]
    for i in range(10_000):
        idx = (i * 7919) % 10_007 * 10**12
        payloads.append(
            {"choices": [{"index": idx, "delta": {"tool_calls": [{"index": idx, "id": f"c{i}"}]}}]}
        )
    for i in range(127, -1, -1):
        payloads.append({"choices": [{"index": i, "delta": {"tool_calls": [{"index": i, "id": f"d{i}"}]}}]})
    out = both([*payloads, *TAIL, b"[DONE]"])
    indexes = [c["index"] for c in out["result"]["choices"]]
    assert indexes == list(range(128))
    assert out["verdict"]["malformed"] == 9_999  # i = 0 gives index 0, in bounds


def test_deep_but_parseable_values_are_carried_whole() -> None:
    # orjson parses up to depth 1024 (deeper is skipped: GARBAGE above); a provider field holding
    # a deep value is kept and result() must not recurse into it. 800, not 1000: the test's own
    # == on the results recurses in Python. (orjson.dumps stops at depth 255, so this result cannot
    # be re-serialised by orjson: the caller's business, not a fold error.)
    deep = b"[" * 800 + b"]" * 800
    chunk = (
        b'{"provider": '
        + deep
        + b', "choices": [{"index": 0, "delta": {"content": "a", "x": '
        + deep
        + b"}}]}"
    )
    out = both([ROLE, chunk, *TAIL, b"[DONE]"], dump=False)
    assert out["counts"] == (0, 0, 0)
    assert out["result"]["choices"][0]["message"]["content"] == "az"


def test_dicts_with_lone_surrogates_and_odd_keys_fold() -> None:
    # feed(dict) takes Python objects that no JSON parser would make: lone surrogates, non-str keys.
    for backend in (fastsse.get_backend(fastsse.BACKEND), PY):
        agg = backend.ChatAggregator()
        agg.feed(ROLE)
        agg.feed({"choices": [{"index": 0, "delta": {"content": "\ud83d"}}]})
        agg.feed({"choices": [{"index": 0, "delta": {"content": "\ude00", 5: "odd key", None: 1}}], 7: 8})
        agg.feed({"choices": [{"index": 0, "delta": {"content": "\x00"}}], (1, 2): "tuple key"})
        agg.feed(TAIL[0])
        result = agg.result()
        assert result["choices"][0]["message"]["content"] == "\ud83d\ude00\x00z"


@pytest.mark.parametrize("bad", [5, None, "x", b"x", [1], ("a",), 1.5, object()], ids=repr)
def test_feed_of_non_dicts_is_skipped(bad: Any) -> None:
    for backend in (fastsse.get_backend(fastsse.BACKEND), PY):
        agg = backend.ChatAggregator()
        agg.feed(bad)
        assert agg.skipped == 1


@pytest.mark.parametrize("bad", [5, None, [b"x"], 1.5, object()], ids=repr)
def test_feed_data_of_non_text_is_a_type_error(bad: Any) -> None:
    # The documented exception for a caller's mistake (not the server's): TypeError, stream usable.
    for backend in (fastsse.get_backend(fastsse.BACKEND), PY):
        agg = backend.ChatAggregator()
        with pytest.raises(TypeError):
            agg.feed_data(bad)
        agg.feed_data(orjson.dumps(TAIL[0]))
        assert agg.result()["choices"][0]["message"]["content"] == "z"


def test_error_events_of_every_shape() -> None:
    shapes = [
        b"",
        b"x",
        b"null",
        b"5",
        b"[]",
        b'"text"',
        b'{"error": null}',
        b'{"error": 5}',
        b'{"message": "m"}',
    ]
    for data in shapes:
        stream_bytes = sse([ROLE]) + b"event: error\ndata: " + data + b"\n\n" + sse(TAIL)
        results = []
        for backend in (fastsse.get_backend(fastsse.BACKEND), PY):
            stream = backend.ChatStream()
            stream.write(stream_bytes)
            stream.close()
            agg = backend.ChatAggregator()
            for event in backend.Decoder().feed(stream_bytes):
                agg.feed_event(event)
            fused = stream.result()
            fused.pop("verdict")
            assert fused == bare(agg.result())
            assert fused["error"] is not None, data
            results.append(fused)
        assert results[0] == results[1]


INVALID_UTF8 = [
    # A server that cuts a multi-byte character between two chunks (byte-level tokens) sends
    # invalid UTF-8 in each; the Decoder's rule is U+FFFD, the fused path drops both chunks whole.
    [
        b'{"choices":[{"index":0,"delta":{"content":"caf\xc3"}}]}',
        b'{"choices":[{"index":0,"delta":{"content":"\xa9!"},"finish_reason":"stop"}]}',
    ],
    # A UTF-16 surrogate encoded as UTF-8 bytes (CESU-8 style), which UTF-8 forbids.
    [b'{"choices": [{"index": 0, "delta": {"content": "\xed\xa0\x80"}}]}'],
]


@pytest.mark.parametrize("payloads", INVALID_UTF8, ids=["split-character", "cesu-surrogate"])
def test_invalid_utf8_payload_fused_equals_unfused(payloads: list[bytes]) -> None:
    stream_bytes = sse([ROLE, *payloads])
    for backend in (fastsse.get_backend(fastsse.BACKEND), PY):
        agg = backend.ChatAggregator()
        for event in backend.Decoder().feed(stream_bytes):
            agg.feed_event(event)
        stream = backend.ChatStream()
        stream.write(stream_bytes)
        fused = stream.result()
        fused.pop("verdict")
        assert fused == bare(agg.result())
