"""The timing record of ChatStream(timing=True), on both backends, without a network.

Expected values come from the rules documented on ``fastsse.Timing``: a stamp per write, and per
token-bearing chunk the read it came in, its token count (usage growth when usage is continuous,
else logprobs.content entries, else 1) and its kind (1 content, 2 reasoning). Each case is run
with and without ``on_chunk``: the compiled backend folds most chunks with its fast reader only
when nobody asked for the chunk objects, so both of its paths are held to the same record.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest

import fastsse

# every test here runs on both engine drivers (the compiled libcurl driver and pycurl)
pytestmark = pytest.mark.usefixtures("driver")


def ev(choices: list[dict[str, Any]] | None = None, **top: Any) -> bytes:
    body: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body["choices"] = choices if choices is not None else []
    body.update(top)
    return b"data: " + orjson.dumps(body) + b"\n\n"


def delta(index: int = 0, finish: str | None = None, logprobs: Any = None, **fields: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": index, "delta": fields, "finish_reason": finish}
    if logprobs is not None:
        choice["logprobs"] = logprobs
    return choice


ROLE = ev([delta(role="assistant", content="")])
FINISH = ev([delta(finish="stop")])
DONE = b"data: [DONE]\n\n"


def record(stream_cls: Any, writes: list[bytes], with_on_chunk: bool) -> dict[str, Any]:
    seen: list[Any] = []
    stream = stream_cls(seen.append if with_on_chunk else None, timing=True)
    for data in writes:
        stream.write(data)
    stream.close()
    timing = stream.timing()
    assert timing is not None
    return timing


@pytest.fixture(params=[False, True], ids=["no-on_chunk", "on_chunk"])
def with_on_chunk(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def test_role_usage_empty_and_finish_chunks_are_not_tokens(backend: Any, with_on_chunk: bool) -> None:
    writes = [
        ROLE,
        ev([delta(content="Hel")]),
        ev([delta(content="")]),
        ev([delta(content="lo")]) + FINISH,
        ev([], usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}) + DONE,
    ]
    t = record(backend.ChatStream, writes, with_on_chunk)
    assert len(t["reads"]) == 5
    assert t["token_reads"] == [1, 3]
    assert t["tokens"] == [1, 1]
    assert t["token_kinds"] == [1, 1]
    assert t["first_byte"] == t["reads"][0]
    assert t["first_content"] == t["reads"][1]
    assert t["last_token"] == t["reads"][3]
    assert t["first_reasoning"] is None
    assert t["queued"] is None and t["started"] is None and t["sent"] is None and t["end"] is None


def test_reasoning_then_content_and_both_in_one_chunk(backend: Any, with_on_chunk: bool) -> None:
    writes = [
        ROLE + ev([delta(reasoning_content="think")]),
        ev([delta(reasoning="more")]),
        ev([delta(reasoning_content="a", content="b")]),
        ev([delta(content="answer")]) + FINISH + DONE,
    ]
    t = record(backend.ChatStream, writes, with_on_chunk)
    assert t["token_reads"] == [0, 1, 2, 3]
    assert t["token_kinds"] == [2, 2, 3, 1]
    assert t["first_reasoning"] == t["reads"][0]
    assert t["first_content"] == t["reads"][2]


def test_continuous_usage_gives_each_chunk_its_growth(backend: Any, with_on_chunk: bool) -> None:
    def usage(n: int) -> dict[str, int]:
        return {"prompt_tokens": 4, "completion_tokens": n, "total_tokens": 4 + n}

    writes = [
        ev([delta(role="assistant", content="")], usage=usage(0)),  # vLLM: the role chunk has usage 0
        ev([delta(content="one two three")], usage=usage(3)),
        ev([delta(content=" four")], usage=usage(4)),
        ev([delta(content=" x")], usage=usage(4)),  # usage did not grow: falls back to 1
        ev([delta(content=" five six")], usage=usage(6)) + ev([delta(finish="stop")], usage=usage(6)),
        ev([], usage=usage(6)) + DONE,
    ]
    t = record(backend.ChatStream, writes, with_on_chunk)
    assert t["token_reads"] == [1, 2, 3, 4]
    assert t["tokens"] == [3, 1, 1, 2]


def test_usage_only_at_the_end_is_not_continuous(backend: Any, with_on_chunk: bool) -> None:
    # A server that puts the final usage on its last content chunk: no earlier usage, so no growth.
    writes = [
        ROLE,
        ev([delta(content="a")]),
        ev([delta(content="b")], usage={"completion_tokens": 7}),
        DONE,
    ]
    t = record(backend.ChatStream, writes, with_on_chunk)
    assert t["tokens"] == [1, 1]


def test_logprobs_entries_count_tokens(backend: Any, with_on_chunk: bool) -> None:
    entry = {"token": "x", "logprob": -0.1, "bytes": [120], "top_logprobs": []}
    writes = [
        ROLE,
        ev([delta(content="xx", logprobs={"content": [entry, entry]})]),
        ev([delta(content="xxx", logprobs={"content": [entry, entry, entry]})]),
        ev([delta(content="y", logprobs={"content": []})]),  # no entries: 1
        FINISH + DONE,
    ]
    t = record(backend.ChatStream, writes, with_on_chunk)
    assert t["tokens"] == [2, 3, 1]


def test_tool_call_fragments_are_content_tokens(backend: Any, with_on_chunk: bool) -> None:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    writes = [
        ROLE,
        ev([delta(tool_calls=[call])]),
        ev([delta(tool_calls=[{"index": 0, "function": {"arguments": '{"a":'}}])]),
        ev([delta(tool_calls=[{"index": 0, "function": {"arguments": ""}}])]),
        ev([delta(tool_calls=[{"index": 0, "function": {"arguments": "1}"}}])]),
        ev([delta(finish="tool_calls")]) + DONE,
    ]
    t = record(backend.ChatStream, writes, with_on_chunk)
    assert t["token_reads"] == [1, 2, 4]
    assert t["token_kinds"] == [1, 1, 1]


def test_events_of_one_read_share_its_stamp(backend: Any, with_on_chunk: bool) -> None:
    body = ROLE + ev([delta(content="a")]) + ev([delta(content="b")]) + ev([delta(content="c")]) + DONE
    half = len(body) // 2
    t = record(backend.ChatStream, [body[:half], body[half:]], with_on_chunk)
    assert len(t["reads"]) == 2
    assert t["reads"][0] <= t["reads"][1]
    assert t["token_reads"] == sorted(t["token_reads"]) and set(t["token_reads"]) <= {0, 1}
    assert len(t["token_reads"]) == 3


def test_stamps_are_monotonic_ns_taken_at_the_write(backend: Any) -> None:
    stream = backend.ChatStream(timing=True)
    before = time.monotonic_ns()
    stream.write(ROLE)
    time.sleep(0.002)
    stream.write(ev([delta(content="a")]))
    after = time.monotonic_ns()
    t = stream.timing()
    assert before <= t["reads"][0] < t["reads"][1] <= after
    assert t["reads"][1] - t["reads"][0] >= 2_000_000
    mono, epoch = t["anchor"]
    assert abs(epoch - time.time_ns()) < 60 * 10**9 and mono <= before


def test_timing_is_off_by_default(backend: Any) -> None:
    stream = backend.ChatStream()
    stream.write(ROLE + ev([delta(content="a")]))
    assert stream.timing() is None
    assert "timing" not in stream.result()


def test_backends_agree_on_a_generated_stream() -> None:
    # The two backends and the two compiled paths give one record for the same bytes.
    entry = {"token": "x", "logprob": -0.5, "bytes": [120], "top_logprobs": []}
    writes = [ROLE]
    for i in range(30):
        fields: dict[str, Any] = {"reasoning_content": "r"} if i < 5 else {"content": f"t{i}"}
        lp = {"content": [entry] * (i % 3)} if i % 4 == 0 else None
        writes.append(ev([delta(logprobs=lp, **fields)]))
    writes.append(FINISH + DONE)
    records = []
    for name in ("cython", "python"):
        try:
            cls = fastsse.get_backend(name).ChatStream
        except ImportError:
            continue
        for with_cb in (False, True):
            t = record(cls, writes, with_cb)
            records.append((t["token_reads"], t["tokens"], t["token_kinds"]))
    assert records and all(r == records[0] for r in records)
    assert records[0][2] == [2] * 5 + [1] * 25
