"""The relay's bounds, on both backends: indexes a client would read as another choice or call are
dropped and counted (and folded and linted the same way), what one chunk can make a relay keep
and send is bounded, and a chunk the relay cannot read leaves the answer incomplete.

Expected values are worked by hand from the rule: choice and tool-call indexes are 0..127
(``INDEX_LIMIT``); openai-python folds by list position, so ``index: -1`` would join the last
choice; a payload that starts with ``{`` but is no JSON object is a lost chunk.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest

import fastsse
from _memory import traced_peak

HEAD = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def frame(choices: list[Any]) -> bytes:
    return b"data: " + orjson.dumps({**HEAD, "choices": choices}) + b"\n\n"


def content(index: Any, text: str, role: bool = False) -> dict[str, Any]:
    delta: dict[str, Any] = {"content": text}
    if role:
        delta = {"role": "assistant", **delta}
    return {"index": index, "delta": delta, "finish_reason": None}


FINISH = frame([{"index": 0, "delta": {}, "finish_reason": "stop"}])
DONE = b"data: [DONE]\n\n"


def relay_all(backend: Any, data: bytes, **options: Any) -> tuple[bytes, Any]:
    relay = backend.Relay(**options)
    out = relay.write(data) + relay.close()
    return out, relay


def forwarded_choices(out: bytes) -> list[dict[str, Any]]:
    events = [e for e in out.split(b"\n\n") if e.startswith(b"data: {")]
    return [c for e in events for c in orjson.loads(e[6:])["choices"]]


INJECTED = frame([content(0, "Hello", role=True)]) + frame([content(-1, " INJECTED")]) + FINISH + DONE


def test_a_negative_choice_index_is_dropped_and_counted(backend: Any) -> None:
    out, relay = relay_all(backend, INJECTED)
    indexes = [c["index"] for c in forwarded_choices(out)]
    assert indexes == [0, 0], indexes  # the text chunk and the finish of choice 0 only
    assert b"INJECTED" not in out
    assert out.endswith(DONE)
    result = relay.result()
    assert [c["message"]["content"] for c in result["choices"]] == ["Hello"]
    assert result["verdict"]["malformed"] == 1
    assert result["verdict"]["complete"] is True


@pytest.mark.parametrize("index", [-1, 128, "huge", "0", 1.0, True])
def test_out_of_range_choice_indexes_fold_alike(backend: Any, index: Any) -> None:
    odd = frame([content(index, " x")])
    if index == "huge":  # past 64 bits, which orjson cannot write
        odd = odd.replace(b'"index":"huge"', b'"index":100000000000000000000')
    data = frame([content(0, "Hello", role=True)]) + odd + FINISH + DONE
    stream = backend.ChatStream()
    stream.write(data)
    stream.close()
    result = stream.result()
    assert [c["index"] for c in result["choices"]] == [0]
    assert result["choices"][0]["message"]["content"] == "Hello"
    assert result["verdict"]["malformed"] == 1
    out, relay = relay_all(backend, data)
    assert all(c["index"] == 0 for c in forwarded_choices(out))
    assert relay.result()["verdict"]["malformed"] == 1


def test_the_last_index_in_bounds_is_a_choice(backend: Any) -> None:
    last = [{"index": 127, "delta": {"role": "assistant", "content": "z"}, "finish_reason": "stop"}]
    data = frame([content(0, "a", role=True)]) + frame(last) + FINISH + DONE
    _, relay = relay_all(backend, data)
    result = relay.result()
    assert [c["index"] for c in result["choices"]] == [0, 127]
    assert result["verdict"]["malformed"] == 0 and result["verdict"]["complete"] is True


@pytest.mark.parametrize("index", [-1, 128, "a"])
def test_out_of_range_tool_call_indexes_are_dropped_and_counted(backend: Any, index: Any) -> None:
    good = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    bad = {"index": index, "id": "call_b", "type": "function", "function": {"name": "g", "arguments": "{}"}}
    data = (
        frame(
            [{"index": 0, "delta": {"role": "assistant", "tool_calls": [good, bad]}, "finish_reason": None}]
        )
        + frame([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])
        + DONE
    )
    out, relay = relay_all(backend, data)
    assert b"call_b" not in out
    result = relay.result()
    calls = result["choices"][0]["message"]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_a"]
    assert result["verdict"]["malformed"] == 1
    stream = backend.ChatStream()
    stream.write(data)
    stream.close()
    folded = stream.result()
    assert [c["id"] for c in folded["choices"][0]["message"]["tool_calls"]] == ["call_a"]
    assert folded["verdict"]["malformed"] == 1


def test_the_linter_reports_out_of_range_indexes() -> None:
    codes = [f.code for f in fastsse.check_stream(INJECTED)]
    assert codes == ["index-out-of-range"]


# amplification: one chunk under max_event_bytes


def many_finished(count: int) -> bytes:
    return frame([{"index": i, "delta": {"content": "hi"}, "finish_reason": "stop"} for i in range(count)])


def many_calls(count: int) -> bytes:
    calls = [
        {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for i in range(count)
    ]
    return frame([{"index": 0, "delta": {"role": "assistant", "tool_calls": calls}, "finish_reason": None}])


@pytest.mark.parametrize("make", [many_finished, many_calls], ids=["choices", "tool-calls"])
def test_one_huge_chunk_costs_a_few_times_its_size(backend: Any, make: Any) -> None:
    data = make(200_000 if make is many_finished else 150_000)  # 12-13 MiB, under the cap
    relay = backend.Relay(max_event_bytes=16 << 20)
    with traced_peak() as peak:
        start = time.process_time()
        out = relay.write(data)
        cpu = time.process_time() - start
    assert len(out) < 64 << 10, len(out)  # was 41.6 MiB for the choices
    assert peak.bytes < 3 * len(data), peak.bytes / len(data)  # was some 38 times the chunk
    assert cpu < 1.0, cpu
    relay.close()
    verdict = relay.verdict
    assert verdict.complete is False and verdict.skipped == 1  # dropped whole, and said so


@pytest.mark.parametrize("make", [many_finished, many_calls], ids=["choices", "tool-calls"])
@pytest.mark.parametrize("path", ["ChatStream", "feed_data"])
def test_the_plain_fold_drops_one_huge_chunk_before_parsing_it(backend: Any, make: Any, path: str) -> None:
    # The relay's pre-parse bound holds with no relay in front too: parsed, such a chunk cost
    # orjson some 20 times its size in small objects before the fold dropped its indexes.
    head = frame([content(0, "Hello", role=True)])
    data = make(200_000 if make is many_finished else 150_000)  # 12-13 MiB
    fold = backend.ChatStream(max_event_bytes=16 << 20) if path == "ChatStream" else backend.ChatAggregator()
    if path == "ChatStream":
        fold.write(head)
    else:
        fold.feed_data(head[6:-2])
    with traced_peak() as peak:
        if path == "ChatStream":
            fold.write(data)
        else:
            fold.feed_data(data[6:-2])
    assert peak.bytes < 3 * len(data), peak.bytes / len(data)
    if path == "ChatStream":
        fold.write(FINISH + DONE)
        fold.close()
    else:
        fold.feed_data(FINISH[6:-2])
        fold.feed_data(b"[DONE]")
    result = fold.result()
    assert result["choices"][0]["message"]["content"] == "Hello"
    assert result["verdict"]["skipped"] == 1  # counted as a payload the fold could not read


@pytest.mark.parametrize("make", [many_finished, many_calls], ids=["choices", "tool-calls"])
def test_a_chunk_under_the_scan_bound_keeps_128_and_counts_the_rest(backend: Any, make: Any) -> None:
    data = make(10_000)
    relay = backend.Relay(max_event_bytes=16 << 20)
    out = relay.write(data)
    kept = forwarded_choices(out)
    if make is many_finished:
        assert sorted({c["index"] for c in kept}) == list(range(128))
        assert sum(1 for c in kept if c["finish_reason"] == "stop") == 128
    else:
        calls = [call for c in kept for call in c["delta"].get("tool_calls", [])]
        assert [call["index"] for call in calls] == list(range(128))
    assert relay.verdict.malformed == 10_000 - 128


def test_gemini_style_new_calls_past_the_bound_are_dropped(backend: Any) -> None:
    # Every new call at index 0 (a new id and name each time): 128 are relayed, the rest dropped
    # with their later fragments.
    def call(i: int) -> dict[str, Any]:
        return {"index": 0, "id": f"call_{i}", "type": "function", "function": {"name": "f", "arguments": ""}}

    data = frame([{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}])
    for i in range(200):
        data += frame([{"index": 0, "delta": {"tool_calls": [call(i)]}, "finish_reason": None}])
        data += frame(
            [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]
        )
    _, relay = relay_all(backend, data)
    result = relay.result()
    calls = result["choices"][0]["message"]["tool_calls"]
    assert [c["id"] for c in calls] == [f"call_{i}" for i in range(128)]
    assert all(c["function"]["arguments"] == "{}" for c in calls)
    assert result["verdict"]["malformed"] == 2 * (200 - 128)


def _calls_past_the_bound(indexed_tail: bool) -> bytes:
    # 128 calls at indexes 0..127, then a 129th (past RELAY_CALLS) at index 0 with a new id, then
    # fragments of that 129th call without an index (the fold's rule: a fragment without index
    # continues the choice's most recent call): they must go with the dropped call, not onto the
    # last kept one, which is what a client would attach them to.
    def call(i: int, at: int | None) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "f", "arguments": "{}"},
        }
        return entry if at is None else {"index": at, **entry}

    data = frame([{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}])
    for i in range(128):
        data += frame([{"index": 0, "delta": {"tool_calls": [call(i, i)]}, "finish_reason": None}])
    data += frame([{"index": 0, "delta": {"tool_calls": [call(128, None if indexed_tail else 0)]}}])
    for piece in ('{"x":', " 1}"):
        fragment: dict[str, Any] = {"function": {"arguments": piece}}
        data += frame([{"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": None}])
    return data + frame([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]) + DONE


@pytest.mark.parametrize("start", ["indexed", "without-index"])
def test_fragments_without_an_index_after_a_dropped_call_are_dropped_with_it(
    backend: Any, start: str
) -> None:
    data = _calls_past_the_bound(indexed_tail=start == "without-index")
    out, relay = relay_all(backend, data)
    sent = [call for c in forwarded_choices(out) for call in c["delta"].get("tool_calls", [])]
    assert [c.get("id") for c in sent if c.get("id")] == [f"call_{i}" for i in range(128)]
    assert not any("x" in c.get("function", {}).get("arguments", "") for c in sent), sent[-3:]
    # what a client folds from the relayed bytes: 128 whole calls, the last one untouched
    client = backend.ChatStream()
    client.write(out)
    client.close()
    calls = client.result()["choices"][0]["message"]["tool_calls"]
    assert len(calls) == 128 and calls[-1]["function"]["arguments"] == "{}"
    result = relay.result()
    assert [c["function"]["arguments"] for c in result["choices"][0]["message"]["tool_calls"]][-1] == "{}"
    assert result["verdict"]["malformed"] == 3  # the dropped call and its two fragments


# a chunk that cannot be read


@pytest.mark.parametrize(
    "payload",
    [b"{" + b'"a":[' * 1100 + b"]" * 1100 + b"}", b'{"choices":[{"index":0,"delta":{"content":"a\x00b"}}]}'],
    ids=["too-deep", "raw-nul"],
)
def test_a_chunk_that_cannot_be_read_leaves_the_answer_incomplete(backend: Any, payload: bytes) -> None:
    data = frame([content(0, "Hello", role=True)]) + b"data: " + payload + b"\n\n" + FINISH + DONE
    out, relay = relay_all(backend, data)
    assert DONE not in out
    verdict = relay.verdict
    assert verdict.complete is False and verdict.skipped == 1


def test_a_keep_alive_line_is_still_simply_dropped(backend: Any) -> None:
    data = frame([content(0, "Hello", role=True)]) + b"data: keep-alive\n\n" + FINISH + DONE
    out, relay = relay_all(backend, data)
    assert out.endswith(DONE)
    assert relay.verdict.complete is True and relay.verdict.skipped == 1


@pytest.mark.parametrize("where", ["delta", "usage"])
@pytest.mark.parametrize("path", ["Relay", "ChatStream"])
def test_a_chunk_over_the_index_bound_is_lost_where_the_fast_reader_can_read_it(
    backend: Any, where: str, path: str
) -> None:
    # Past SCAN_FROM with more "index" keys than MAX_INDEXES (128 * 129), in a value the
    # compiled reader keeps whole: the chunk is dropped unread as any other such chunk, not
    # folded (and forwarded) by the compiled reader's fast path.
    head = frame([content(0, "Hello", role=True)])
    filler = [{"index": 0}] * 17_000
    if where == "delta":
        choice = {"index": 0, "delta": {"content": " more", "x_filler": filler}, "finish_reason": None}
        big = frame([choice])
    else:
        usage = {"total_tokens": 1, "x_filler": filler}
        big = b"data: " + orjson.dumps({**HEAD, "choices": [], "usage": usage}) + b"\n\n"
    if path == "Relay":
        out, fold = relay_all(backend, head + big + FINISH + DONE)
        assert out == head + FINISH  # a chunk was lost: no [DONE]
        assert not fold.verdict.complete
    else:
        fold = backend.ChatStream(max_event_bytes=16 << 20)
        fold.write(head + big + FINISH + DONE)
        fold.close()
    result = fold.result()
    assert result["verdict"]["skipped"] == 1
    assert result["choices"][0]["message"]["content"] == "Hello" and result["usage"] is None
