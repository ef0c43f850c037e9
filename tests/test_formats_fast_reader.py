"""The compiled Responses and Messages folds read their hot delta events straight from the bytes.
That path must only ever do what the orjson path does: every payload here is folded both ways
(``feed_data`` of bytes takes the reader when it can, ``feed`` of the parsed dict never does) and
against the Python twin, and the results, verdicts and counters must agree."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastsse
from _formats_helpers import load_vectors, payload_text, recorded_dir

try:
    CY = fastsse.get_backend("cython")
except ImportError:  # pragma: no cover - the compiled backend is required unless --no-c-extensions
    CY = None  # every test below then fails (they are deselected under --no-c-extensions)
PY = fastsse.get_backend("python")

pytestmark = pytest.mark.c_extension

MESSAGES_SETUP = [
    {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}},
    },
]
RESPONSES_SETUP = [
    {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg"}},
    {
        "type": "response.content_part.added",
        "output_index": 0,
        "content_index": 0,
        "part": {"type": "output_text", "text": ""},
    },
    {"type": "response.output_item.added", "output_index": 1, "item": {"type": "reasoning", "id": "rs"}},
    {
        "type": "response.reasoning_summary_part.added",
        "output_index": 1,
        "summary_index": 0,
        "part": {"type": "summary_text"},
    },
    {"type": "response.output_item.added", "output_index": 2, "item": {"type": "function_call", "id": "fc"}},
]


def fold(
    ns: Any, api: str, payloads: list[bytes], *, as_dicts: bool = False
) -> tuple[Any, Any, tuple[int, ...]]:
    agg = ns.ResponsesAggregator() if api == "responses" else ns.MessagesAggregator()
    setup = RESPONSES_SETUP if api == "responses" else MESSAGES_SETUP
    for event in setup:
        agg.feed(event)
    for p in payloads:
        if as_dicts:
            try:
                value = orjson.loads(p)
            except orjson.JSONDecodeError:  # the fold's own fallback mends it
                agg.feed_data(p)
                continue
            agg.feed(value) if isinstance(value, dict) else agg.feed_data(p)
        else:
            agg.feed_data(p)
    return agg.result(), agg.verdict, (agg.skipped, agg.malformed, agg.deltas)


def agree(api: str, payloads: list[bytes]) -> int:
    """Fold every way; return how many payloads the compiled reader took."""
    assert CY is not None
    fast = fold(CY, api, payloads)
    assert fast == fold(CY, api, payloads, as_dicts=True)
    assert fast == fold(PY, api, payloads)
    agg = CY.ResponsesAggregator() if api == "responses" else CY.MessagesAggregator()
    for event in RESPONSES_SETUP if api == "responses" else MESSAGES_SETUP:
        agg.feed(event)
    for p in payloads:
        agg.feed_data(p)
    return int(agg._fast_folds)


NEAR_MISSES_MESSAGES = [
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"plain"}}',
    b' {"type" : "content_block_delta" , "index" : 0 , "delta" : { "type" : "text_delta" , "text" : "ws" } } \n',
    b'{"index":0,"delta":{"text":"reordered","type":"text_delta"},"type":"content_block_delta"}',
    b'{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"a\\": \\"b\\\\n\\""}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"esc \\n\\t\\r\\b\\f\\/\\\\ \\u00e9 \\ud83d\\ude00"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lone \\ud83d end"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"low \\ude00"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bad \\x escape"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"short \\u12"}}',
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"utf8 \u00e9\u6570\U0001f642"}}'.encode(),
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bad utf8 \xff\xfe"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ctrl \x01"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"trailing"}} x',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"unclosed"}',
    b'{"type":"content_block_delta","index":0,"index":1,"delta":{"type":"text_delta","text":"dup"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x","extra":1}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","thinking":"wrong field"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"t"}}',
    b'{"type":"content_block_delta","index":7,"delta":{"type":"text_delta","text":"no block"}}',
    b'{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"neg"}}',
    b'{"type":"content_block_delta","index":0.0,"delta":{"type":"text_delta","text":"float"}}',
    b'{"type":"content_block_delta","index":1e0,"delta":{"type":"text_delta","text":"exp"}}',
    b'{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"octal"}}',
    b'{"type":"content_block_delta","index":99999999999999999999999,"delta":{"type":"text_delta","text":"huge"}}',
    b'{"type":"content_block_delta","index":true,"delta":{"type":"text_delta","text":"bool"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":null}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}',
    b'{"type":"content_block_delta","index":0,"delta":"text"}',
    b'{"t\\u0079pe":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"escaped key"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"comma",}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"after"},}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}',
    b'{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"}"}}',
    # Escaped fragments longer than the reader's stack buffer.
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"'
    + b"\\n\\u00e9x" * 200
    + b'"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"'
    + b"\\ty" * 300
    + b'\\udc00"}}',
]

NEAR_MISSES_RESPONSES = [
    b'{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg","output_index":0,"content_index":0,"delta":"Hi","logprobs":[],"obfuscation":"abc"}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"min"}',
    b'{ "delta" : "ws" , "content_index" : 0 , "output_index" : 0 , "type" : "response.output_text.delta" }',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"lp","logprobs":[ ]}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"lp","logprobs":[{"token":"x"}]}',
    b'{"type":"response.output_text.delta","output_index":0,"delta":"no content index"}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":3,"delta":"new part"}',
    b'{"type":"response.output_text.delta","output_index":9,"content_index":0,"delta":"new item"}',
    b'{"type":"response.output_text.delta","item_id":"msg","content_index":0,"delta":"by id"}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"summary_index":0,"delta":"both"}',
    b'{"type":"response.refusal.delta","output_index":0,"content_index":0,"delta":"refusal into text part"}',
    b'{"type":"response.reasoning_summary_text.delta","output_index":1,"summary_index":0,"delta":"sum"}',
    b'{"type":"response.reasoning_summary_text.delta","output_index":1,"content_index":0,"delta":"wrong index key"}',
    b'{"type":"response.reasoning_text.delta","output_index":1,"content_index":0,"delta":"no such part"}',
    b'{"type":"response.function_call_arguments.delta","item_id":"fc","output_index":2,"delta":"{\\"a\\":1}"}',
    b'{"type":"response.function_call_arguments.delta","output_index":2,"content_index":0,"delta":"ci"}',
    b'{"type":"response.function_call_arguments.delta","output_index":0,"delta":"args on a message"}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"lone \\udc00"}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"\\u00e9\\ud83d\\ude00"}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"bad \xc3"}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"x","item_id":"m\\u0073g"}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"x","obfuscation":"\xc3\xa9"}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"dup","delta":"dup2"}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"x","sequence_number":-1}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"x","sequence_number":1.5}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"x","extra":null}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":null}',
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"x"}]',
    b'{"type":"response.output_text.done","output_index":0,"content_index":0,"text":"Hi"}',
    b'{"type":"response.unknown.delta","output_index":0,"content_index":0,"delta":"?"}',
]


@pytest.mark.parametrize("payload", NEAR_MISSES_MESSAGES)
def test_messages_near_misses(payload: bytes) -> None:
    agree("messages", [payload])


@pytest.mark.parametrize("payload", NEAR_MISSES_RESPONSES)
def test_responses_near_misses(payload: bytes) -> None:
    agree("responses", [payload])


def test_reader_takes_the_common_shapes() -> None:
    assert agree("messages", NEAR_MISSES_MESSAGES[:5]) == 5
    assert agree("responses", NEAR_MISSES_RESPONSES[:4]) == 4


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_vectors_agree(api: str) -> None:
    for vector in load_vectors(api):
        payloads = [payload_text(e).encode() for e in vector["events"]]
        a = CY.ResponsesAggregator() if api == "responses" else CY.MessagesAggregator()
        b = CY.ResponsesAggregator() if api == "responses" else CY.MessagesAggregator()
        for p, event in zip(payloads, vector["events"], strict=True):
            a.feed_data(p)
            if isinstance(event, dict):
                b.feed(event)
            else:
                b.feed_data(p)
        assert a.result() == b.result() == vector["result"]


def test_recorded_corpus_takes_the_reader() -> None:
    corpus = recorded_dir()
    taken = deltas = 0
    for path in sorted(corpus.glob("*/*.sse")):
        cls = CY.ResponsesStream if path.parent.name == "responses" else CY.MessagesStream
        data = path.read_bytes()
        fast, slow = cls(timing=True), cls(lambda event: None, timing=True)  # on_chunk: every event a dict
        fast.write(data)
        slow.write(data)
        assert fast.result() == slow.result(), path.name
        assert fast._timing_arrays()[1:4] == slow._timing_arrays()[1:4], path.name  # the same tokens
        taken += fast.aggregator._fast_folds
        deltas += fast.aggregator.deltas
    assert taken > 0.9 * deltas


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=5), st.booleans())
def test_any_text_reads_alike(texts: list[str], ascii_only: bool) -> None:
    messages = [
        json.dumps(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
            ensure_ascii=ascii_only,
        ).encode("utf-8", "surrogatepass")
        for t in texts
    ]
    agree("messages", messages)
    responses = [
        json.dumps(
            {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": t},
            ensure_ascii=ascii_only,
        ).encode("utf-8", "surrogatepass")
        for t in texts
    ]
    agree("responses", responses)


def _mutate(raw: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    out = bytearray(raw)
    for at, drop, insert in edits:
        at %= len(out) + 1
        out[at : at + drop] = insert
    return bytes(out)


INSERTS = st.sampled_from(
    [
        b"",
        b'"',
        b"\\",
        b"\\u",
        b"\\ud83d",
        b"0",
        b"-1",
        b"1e9",
        b",",
        b"}",
        b"{",
        b"[]",
        b"\n\n",
        b"\xff",
        b"\xc3",
        b" ",
        b"null",
        b'"type":',
        b"\x00",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_streams_fold_alike_on_both_backends(data: st.DataObject) -> None:
    api = data.draw(st.sampled_from(["responses", "messages"]))
    vector = data.draw(st.sampled_from(load_vectors(api)))
    raw = b"".join(b"data: " + payload_text(e).encode() + b"\n\n" for e in vector["events"])
    edits = data.draw(st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 3), INSERTS), max_size=6))
    mutated = _mutate(raw, edits)
    outcomes = []
    for ns in (CY, PY):
        stream = ns.ResponsesStream() if api == "responses" else ns.MessagesStream()
        stream.write(mutated)
        stream.close()
        outcomes.append((stream.result(), stream.aggregator.deltas))
    assert outcomes[0] == outcomes[1]
