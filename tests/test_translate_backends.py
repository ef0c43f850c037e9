"""The compiled translators against their pure-Python twins: byte for byte, fold for fold.

The compiled chat -> Messages / Responses translators write the hot deltas from the payload's bytes
(their "sink"); everything else goes through the core both backends share. These tests generate chat
streams with every shape the sink has to recognise or leave (escapes spelled every way JSON allows,
parallel tool calls with and without ``index``, several choices, usage, annotations, errors, junk,
CRLF, truncation), cut them at random and demand the same output from every ``write`` and ``close``,
the same ``result()``, ``verdict`` and counters. The Messages / Responses upstreams for the other
direction are the pure translator's output for such streams, then mutated (events dropped, swapped,
injected, re-spelled, renumbered, cut). Expected values in the vector tests come from RFC 8259 and
orjson's documented output, written by hand.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastsse
import fastsse.chat.encode
import fastsse.responses.encode
import fastsse.translate._rules
from fastsse import EventTooLarge
from fastsse.translate import _Chain

C = pytest.param("cython", marks=pytest.mark.c_extension)
CREATED = 1_700_000_000
CLOCK = 1_800_000_000  # what the encoders read as the current time in these tests

# Each example draws a whole stream and its chunking: big inputs by Hypothesis's measure.
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=HEALTH)


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # An upstream without ``created`` makes the encoders read the clock; the two backends run one
    # after the other and must not straddle a second.
    clock = SimpleNamespace(time=lambda: float(CLOCK))
    for module in (fastsse.chat.encode, fastsse.responses.encode, fastsse.translate._rules):
        monkeypatch.setattr(module, "time", clock)


def _backends() -> tuple[SimpleNamespace, SimpleNamespace]:
    return fastsse.get_backend("cython"), fastsse.get_backend("python")


# JSON spelled every way RFC 8259 allows: the bytes differ, the str is the same


_SHORT = {
    '"': b'\\"',
    "\\": b"\\\\",
    "/": b"\\/",
    "\b": b"\\b",
    "\f": b"\\f",
    "\n": b"\\n",
    "\r": b"\\r",
    "\t": b"\\t",
}


def _u(cp: int, rng: random.Random) -> bytes:
    h = f"\\u{cp:04x}"
    return (h.upper().replace("\\U", "\\u") if rng.random() < 0.3 else h).encode()


def spell(s: str, rng: random.Random) -> bytes:
    """A JSON string literal for ``s``: orjson's own form half the time, else each character raw, as
    its short escape or as ``\\uXXXX`` (a surrogate pair above U+FFFF), chosen at random. A lone
    surrogate in ``s`` is always written as its escape (what some servers send)."""
    if rng.random() < 0.4 and not any(0xD800 <= ord(c) <= 0xDFFF for c in s):
        return orjson.dumps(s)
    out = [b'"']
    for ch in s:
        cp = ord(ch)
        r = rng.random()
        if ch in _SHORT and r < 0.5:
            out.append(_SHORT[ch])
        elif cp < 0x20 or ch in '"\\' or 0xD800 <= cp <= 0xDFFF or r < 0.3:
            if cp >= 0x10000:
                v = cp - 0x10000
                out.append(_u(0xD800 + (v >> 10), rng) + _u(0xDC00 + (v & 0x3FF), rng))
            else:
                out.append(_u(cp, rng))
        else:
            out.append(ch.encode())
    out.append(b'"')
    return b"".join(out)


def dump(
    value: Any, rng: random.Random, keys: bool = False, only: frozenset[str] | None = None, key: str = ""
) -> bytes:
    """JSON for ``value`` with every string value spelled by ``spell`` (keys too when ``keys``; only
    the values of the keys in ``only`` when given) and, now and then, blanks between tokens and
    the members of an object in another order."""
    sp = b" " if rng.random() < 0.05 else b""
    if isinstance(value, str):
        return spell(value, rng) if only is None or key in only else orjson.dumps(value)
    if isinstance(value, dict):
        items = [
            (spell(str(k), rng) if keys else orjson.dumps(str(k))) + b":" + sp + dump(v, rng, keys, only, k)
            for k, v in value.items()
        ]
        if rng.random() < 0.1:
            rng.shuffle(items)  # JSON objects are unordered: the readers must not care
        return b"{" + (b"," + sp).join(items) + b"}"
    if isinstance(value, list):
        return b"[" + (b"," + sp).join(dump(v, rng, keys, only, key) for v in value) + b"]"
    return orjson.dumps(value)


# the strings the fast paths towards chat copy: respelling only these keeps them on the fast path
DELTA_KEYS = frozenset({"text", "thinking", "partial_json", "delta", "signature"})


# chat streams


_CHARS = [
    "a",
    "b",
    " ",
    "é",
    "中",
    "😀",
    "\n",
    "\t",
    '"',
    "\\",
    "/",
    "\x01",
    "\x1f",
    "\x7f",
    "\u2028",
    "\x00",
    "\r",
]
TEXT = st.one_of(
    st.lists(st.sampled_from(_CHARS), min_size=1, max_size=6).map("".join),
    st.text(min_size=1, max_size=5),
)
MAYBE_TEXT = st.one_of(TEXT, TEXT, TEXT, st.just(""), st.none())
TEXT_FIELDS = ["content", "content", "content", "reasoning_content", "reasoning", "refusal"]
FINISH = st.sampled_from(["stop", "length", "tool_calls", "content_filter", "", None, "function_call"])
USAGE = {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}
NOTE = {
    "type": "url_citation",
    "url_citation": {"url": "https://x.test/a", "title": "A", "start_index": 0, "end_index": 1},
}


def _text_step() -> st.SearchStrategy[Any]:
    # a run of deltas of one field, as servers send them
    return st.tuples(
        st.just("delta"), st.sampled_from(TEXT_FIELDS), st.lists(MAYBE_TEXT, min_size=1, max_size=8)
    )


_CALL = st.tuples(
    st.just("call"),
    st.integers(0, 3),
    st.sampled_from(["call_a", "call_b", "", None]),
    st.sampled_from(["f", "get_weather", "", None]),
    st.one_of(st.none(), TEXT),
    st.booleans(),
)
_ARGS = st.tuples(
    st.just("args"),
    st.integers(0, 3),
    st.lists(TEXT, min_size=1, max_size=6),
    st.sampled_from([True, True, True, False]),
)
_RARE = st.one_of(
    st.tuples(
        st.just("multi"),
        st.dictionaries(st.sampled_from([*TEXT_FIELDS[2:], "content"]), MAYBE_TEXT, min_size=2),
    ),
    st.tuples(st.just("index_only"), st.integers(0, 3)),
    st.tuples(st.just("finish"), FINISH),
    st.tuples(st.just("other_choice"), TEXT),
    st.tuples(st.just("two_choices"), TEXT, TEXT),
    st.tuples(st.just("annotations"), st.integers(1, 2)),
    st.tuples(st.just("usage"), st.booleans()),
    st.tuples(st.just("comment"), st.just(None)),
    st.tuples(
        st.just("junk"),
        st.sampled_from(
            [
                b"{bad",
                b"null",
                b"[]",
                b'"s"',
                b"{}",
                b'{"choices":"x"}',
                b'{"choices":[{"index":0,"delta":{"content":"\\ud800"}}]}',
                b'{"choices":[{"delta":{"content":"\xff\xfe"}}]}',
                b"\x7f",
                b'{"choices":[{"index":0,"delta":{"content":"a\\u00"}}]}',
            ]
        ),
    ),
)
_ERROR = st.one_of(
    st.tuples(
        st.just("error"),
        st.sampled_from([{"message": "boom", "type": "server_error"}, "overloaded", {"code": 500}]),
    ),
    st.tuples(st.just("event_error"), st.booleans()),
)
# weighted: mostly runs of text and argument fragments (the sink's work), now and then the rest
# (one_of flattens nested one_ofs and weighs every branch alike: sampled_from keeps the weights)
_STEP = st.sampled_from([_text_step()] * 5 + [_ARGS, _ARGS, _CALL, _CALL, _RARE]).flatmap(lambda s: s)


_CLEAN_STEP = st.sampled_from(
    [
        _text_step(),
        _text_step(),
        st.tuples(
            st.just("call"),
            st.integers(0, 3),
            st.just("call_a"),
            st.just("f"),
            st.one_of(st.none(), TEXT),
            st.just(True),
        ),
        st.tuples(st.just("args"), st.integers(0, 3), st.lists(TEXT, min_size=1, max_size=6), st.just(True)),
    ]
).flatmap(lambda s: s)


@st.composite
def chat_bodies(draw: st.DrawFn, *, messy: bool = True) -> bytes:
    """A chat completions stream as bytes (see the module docstring)."""
    rng = draw(st.randoms(use_true_random=True))
    eol = draw(st.sampled_from([b"\n", b"\n", b"\r\n", b"\r"])) if messy else b"\n"
    head: dict[str, Any] = {
        "id": draw(st.sampled_from(["chatcmpl-1", "", "x\u00e9"])),
        "object": "chat.completion.chunk",
    }
    if draw(st.booleans()) or not messy:
        head["created"] = CREATED
    head["model"] = "m/1"
    every_usage = draw(st.booleans())
    with_index = draw(st.sampled_from([True, True, False]))
    keys = messy and draw(st.integers(0, 9)) == 0  # escapes in keys too (the fast reader gives up)
    step = _STEP if messy else _CLEAN_STEP
    steps = [draw(step) for _ in range(draw(st.integers(0, 10)))]
    if messy and draw(st.integers(0, 5)) == 0:  # an error ends the stream: once, anywhere
        steps.insert(draw(st.integers(0, len(steps))), draw(_ERROR))
    finish = draw(FINISH)
    end_usage = draw(st.booleans())
    done = draw(st.sampled_from([True, True, False]))
    frames: list[bytes] = []

    def frame(payload: bytes, event: bytes | None = None) -> None:
        colon = b"data: " if rng.random() < 0.8 else b"data:"
        frames.append((b"event: " + event + eol if event else b"") + colon + payload + eol + eol)

    def chunk(choices: list[Any], usage: Any = None, **extra: Any) -> None:
        body = {**head, **extra, "choices": choices}
        if every_usage or usage is not None:
            body["usage"] = usage
        frame(dump(body, rng, keys))

    def choice(delta: dict[str, Any], index: int | None = 0, reason: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = {} if index is None else {"index": index}
        out["delta"] = delta
        out["finish_reason"] = reason
        if rng.random() < 0.1:
            out["logprobs"] = None
        return out

    chunk([choice({"role": "assistant", "content": ""} if rng.random() < 0.5 else {"role": "assistant"})])
    for step in steps:
        kind = step[0]
        if kind == "delta":
            for text in step[2]:
                chunk([choice({step[1]: text}, 0 if with_index or not messy else None)])
        elif kind == "multi":
            chunk([choice(dict(step[1]))])
        elif kind == "call":
            _, index, ident, name, args, indexed = step
            fragment: dict[str, Any] = {"index": index} if indexed or not messy else {}
            if ident is not None:
                fragment["id"] = ident
            fragment["type"] = "function"
            function: dict[str, Any] = {} if name is None else {"name": name}
            if args is not None:
                function["arguments"] = args
            fragment["function"] = function
            chunk([choice({"tool_calls": [fragment]})])
        elif kind == "args":
            _, index, texts, indexed = step
            for text in texts:
                fragment = {"index": index} if indexed else {}
                fragment["function"] = {"arguments": text}
                # parallel calls: sometimes two fragments in one chunk
                calls = (
                    [fragment, {"index": (index + 1) % 4, "function": {"arguments": "1"}}]
                    if rng.random() < 0.1
                    else [fragment]
                )
                chunk([choice({"tool_calls": calls})])
        elif kind == "index_only":
            chunk([choice({"tool_calls": [{"index": step[1]}]})])
        elif kind == "finish":
            chunk([choice({}, reason=step[1])])
        elif kind == "other_choice":
            chunk([choice({"content": step[1]}, 1)])
        elif kind == "two_choices":
            chunk([choice({"content": step[1]}, 0), choice({"content": step[2]}, 1)])
        elif kind == "annotations":
            chunk([choice({"annotations": [NOTE] * step[1]})])
        elif kind == "usage":
            chunk([], USAGE if step[1] else None)
        elif kind == "error":
            frame(dump({"error": step[1]}, rng))
        elif kind == "event_error":
            frame(
                dump({"error": {"message": "bad \u00e9", "type": "x"}} if step[1] else {"message": "m"}, rng),
                b"error",
            )
        elif kind == "comment":
            frames.append(b": keep-alive" + eol + eol)
        else:
            frame(step[1])
    if finish is not None or not messy:
        chunk([choice({}, reason=finish if messy else finish or "stop")])
    if end_usage:
        chunk([], USAGE)
    if done or not messy:
        frames.append(b"data: [DONE]" + eol + eol)
    body = b"".join(frames)
    if messy and draw(st.integers(0, 7)) == 0:
        body = body[: draw(st.integers(0, len(body)))]
    return body


# Messages / Responses streams: the pure translator's output for a chat stream, then mutated


_INJECT: dict[str, list[dict[str, Any]]] = {
    "messages": [
        {"type": "ping"},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "c2ln"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {
                "type": "citations_delta",
                "citation": {
                    "type": "web_search_result_location",
                    "url": "https://x.test",
                    "title": "T\u00e9",
                },
            },
        },
        {
            "type": "content_block_start",
            "index": 7,
            "content_block": {
                "type": "server_tool_use",
                "id": "srv_1",
                "name": "web_search",
                "input": {"q": "a\u00e9"},
            },
        },
        {
            "type": "content_block_start",
            "index": 8,
            "content_block": {"type": "redacted_thinking", "data": "x"},
        },
        {
            "type": "content_block_delta",
            "index": 9,
            "delta": {"type": "text_delta", "text": "orphan \\ \U0001f600"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "\u0001hm"},
        },
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 3}},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        {"type": "unknown_event", "x": [1, 2]},
        {"index": 0},
    ],
    "responses": [
        {"type": "response.in_progress", "response": {"id": "r2", "model": "m2", "created_at": 5}},
        {"type": "response.reasoning_text.delta", "output_index": 0, "content_index": 0, "delta": "th\u00e9"},
        {
            "type": "response.output_text.annotation.added",
            "output_index": 0,
            "annotation": {
                "type": "url_citation",
                "url": "https://x.test",
                "title": "T",
                "start_index": 0,
                "end_index": 1,
            },
        },
        {
            "type": "response.output_text.annotation.added",
            "output_index": 0,
            "annotation": {"type": "file_citation", "file_id": "f"},
        },
        {
            "type": "response.output_item.done",
            "output_index": 5,
            "item": {
                "type": "function_call",
                "call_id": "c5",
                "name": "late",
                "arguments": '{"a":"\\u00e9"}',
            },
        },
        {"type": "response.function_call_arguments.delta", "output_index": 9, "delta": "{}"},
        {
            "type": "response.output_text.delta",
            "output_index": 4,
            "content_index": 0,
            "item_id": "nope",
            "delta": 'x\n"y"',
        },
        {"type": "response.failed", "response": {"error": {"code": "server_error", "message": "m"}}},
        {"type": "response.incomplete", "response": {"incomplete_details": {"reason": "content_filter"}}},
        {"type": "error", "code": "rate_limit", "message": "slow down"},
        {"type": "response.unknown", "sequence_number": 99},
        {"sequence_number": 1},
    ],
}
# payloads written as they are: lone surrogate escapes (mended to U+FFFD by the fold), escapes
# orjson would not write, junk
_RAW = {
    "messages": [
        r'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\ud83d"}}',
        r'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\ude00\ud83d\ude00"}}',
        r'{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"\u00e9\/\"\n"}}',
        r'{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\\u00"}}',
        r'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"},"index":1}',
        r'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x","text":"y"}}',
        r'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}',
        r'{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"x"}}',
        r'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}',
        "not json",
    ],
    "responses": [
        r'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"\ud83d"}',
        r'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"a\ude00b"}',
        r'{"type":"response.reasoning_summary_text.delta","output_index":0,"summary_index":0,"delta":"\u00e9\/"}',
        r'{"type":"response.function_call_arguments.delta","output_index":1,"delta":"\"\u0041\ud83d\ude00"}',
        r'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"x","delta":"y"}',
        r'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":null}',
        r'{"type":"response.output_text.delta","output_index":"0","content_index":0,"delta":"x"}',
        r'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"x"',
        "not json",
    ],
}
_FRAGILE = {"content_block_start", "response.output_item.added", "response.content_part.added"}


def _events(body: bytes) -> list[tuple[str, str]]:
    decoder = fastsse.get_backend("python").Decoder()
    return [(e.event, e.data) for e in decoder.feed(body) + decoder.close()]


@st.composite
def upstream_bodies(draw: st.DrawFn, source: str, *, mutate: bool = True) -> bytes:
    """A Messages or Responses stream: the pure translator's output for a generated chat stream,
    with its delta strings (or all strings) respelled and, when ``mutate``, up to four mutations
    and a cut."""
    chat = draw(chat_bodies(messy=mutate and draw(st.integers(0, 2)) == 0))
    py = fastsse.get_backend("python")
    t = py.ChatToMessages() if source == "messages" else py.ChatToResponses()
    events = _events(t.write(chat) + t.close())
    rng = draw(st.randoms(use_true_random=True))
    items: list[tuple[str, Any]] = []
    for name, data in events:
        try:
            items.append((name, orjson.loads(data)))
        except orjson.JSONDecodeError:
            items.append((name, data))
    for _ in range(draw(st.integers(0, 4)) if mutate else 0):
        what = draw(
            st.sampled_from(["drop", "drop_fragile", "swap", "inject", "inject", "raw", "renumber", "unseq"])
        )
        if what == "drop" and items:
            del items[draw(st.integers(0, len(items) - 1))]
        elif what == "drop_fragile":
            items = [
                it
                for it in items
                if not (isinstance(it[1], dict) and it[1].get("type") in _FRAGILE and rng.random() < 0.7)
            ]
        elif what == "swap" and len(items) > 1:
            i = draw(st.integers(0, len(items) - 2))
            items[i], items[i + 1] = items[i + 1], items[i]
        elif what == "inject":
            # a copy: the mutations below change payloads in place
            payload = orjson.loads(orjson.dumps(draw(st.sampled_from(_INJECT[source]))))
            items.insert(draw(st.integers(0, len(items))), (str(payload.get("type", "")), payload))
        elif what == "raw":
            items.insert(draw(st.integers(0, len(items))), ("", draw(st.sampled_from(_RAW[source]))))
        elif what == "renumber":
            step = draw(st.integers(0, 3))
            for n, (_, payload) in enumerate(items):
                if isinstance(payload, dict) and "sequence_number" in payload:
                    payload["sequence_number"] = n * step + rng.randint(0, 2)
        elif what == "unseq":
            for _, payload in items:
                if isinstance(payload, dict):
                    payload.pop("sequence_number", None)
    eol = draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))
    named = draw(st.booleans())
    out: list[bytes] = []
    spelling = draw(
        st.sampled_from(["orjson", "deltas", "deltas", "all"] if mutate else ["orjson", "deltas"])
    )
    for name, payload in items:
        if isinstance(payload, str):
            raw = payload.encode()
        elif spelling == "orjson":
            raw = orjson.dumps(payload)
        else:
            raw = dump(payload, rng, only=DELTA_KEYS if spelling == "deltas" else None)
        if mutate and rng.random() < 0.05:
            out.append(b": ping" + eol + eol)
        out.append(
            (b"event: " + name.encode() + eol if named and name else b"") + b"data: " + raw + eol + eol
        )
    if mutate and draw(st.integers(0, 5)) == 0:
        out.append(b"data: [DONE]" + eol + eol)
    body = b"".join(out)
    if mutate and draw(st.integers(0, 6)) == 0:
        body = body[: draw(st.integers(0, len(body)))]
    return body


# driving both backends


@st.composite
def chunkings(draw: st.DrawFn, body: bytes) -> list[bytes]:
    shape = draw(st.sampled_from(["whole", "bytes", "cuts", "cuts"]))
    if shape == "whole" or not body:
        return [body]
    if shape == "bytes":
        return [body[i : i + 1] for i in range(len(body))]
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(body) - 1)), max_size=16)))
    return [body[a:b] for a, b in itertools.pairwise([0, *cuts, len(body)])]


def drive(t: Any, chunks: list[bytes], truncated: bool, kinds: Iterator[type] | None = None) -> list[Any]:
    """What every write and the close returned (or ``("too-large", limit)``)."""
    trace: list[Any] = []
    for chunk in chunks:
        data = next(kinds)(chunk) if kinds is not None else chunk
        try:
            trace.append(t.write(data))
        except EventTooLarge as exc:
            trace.append(("too-large", exc.limit))
    try:
        trace.append(t.close(truncated=truncated))
    except EventTooLarge as exc:
        trace.append(("too-large", exc.limit))
    return trace


def state(t: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"result": t.result()}
    for name in ("verdict", "dropped", "complete", "error", "skipped"):
        if hasattr(t, name):
            out[name] = getattr(t, name)
    return out


def _make(backend: SimpleNamespace, source: str, target: str, **options: Any) -> Any:
    limit = {k: v for k, v in options.items() if k == "max_event_bytes"}
    if source == "chat":
        return (backend.ChatToMessages if target == "messages" else backend.ChatToResponses)(**limit)
    to_chat = (backend.MessagesToChat if source == "messages" else backend.ResponsesToChat)(
        **{"created": CREATED, **options}
    )
    if target == "chat":
        return to_chat
    return _Chain(
        to_chat, (backend.ChatToMessages if target == "messages" else backend.ChatToResponses)(**limit)
    )


def assert_same(
    source: str, target: str, body: bytes, chunks: list[bytes], truncated: bool, **options: Any
) -> Any:
    """Run both backends' translators on the same chunks; demand the same trace and state."""
    c, p = _backends()
    tc, tp = _make(c, source, target, **options), _make(p, source, target, **options)
    kinds = [bytes, bytearray, memoryview]
    trace_c = drive(tc, chunks, truncated, itertools.cycle(kinds))
    trace_p = drive(tp, chunks, truncated, itertools.cycle(kinds))
    out_c = b"".join(x for x in trace_c if isinstance(x, bytes))
    out_p = b"".join(x for x in trace_p if isinstance(x, bytes))
    where = f"{source} -> {target} on {body!r} in {len(chunks)} chunks, truncated={truncated}, {options}"
    assert out_c == out_p, where
    assert trace_c == trace_p, where
    assert state(tc) == state(tp), where
    return tc


@pytest.mark.c_extension
@pytest.mark.parametrize("target", ["messages", "responses"])
@SETTINGS
@given(data=st.data())
def test_chat_to_target_is_the_same_on_both_backends(target: str, data: st.DataObject) -> None:
    body = data.draw(chat_bodies())
    chunks = data.draw(chunkings(body))
    limit = data.draw(st.sampled_from([None, None, None, None, 90, 300]))
    assert_same("chat", target, body, chunks, data.draw(st.booleans()), max_event_bytes=limit)


@pytest.mark.c_extension
@pytest.mark.parametrize("target", ["messages", "responses"])
@settings(max_examples=60, deadline=None, suppress_health_check=HEALTH)
@given(data=st.data())
def test_well_formed_chat_takes_the_fast_path_and_agrees(target: str, data: st.DataObject) -> None:
    # Clean streams: the sink must write most deltas, and still agree with the twin.
    body = data.draw(chat_bodies(messy=False))
    chunks = data.draw(chunkings(body))
    t = assert_same("chat", target, body, chunks, False)
    assert t.verdict.complete


@pytest.mark.c_extension
@pytest.mark.parametrize("source", ["messages", "responses"])
@SETTINGS
@given(data=st.data())
def test_target_to_chat_is_the_same_on_both_backends(source: str, data: st.DataObject) -> None:
    body = data.draw(upstream_bodies(source))
    chunks = data.draw(chunkings(body))
    # created=None: Messages has no time of its own (the frozen clock), Responses has created_at
    options: dict[str, Any] = {
        "include_usage": data.draw(st.booleans()),
        "created": data.draw(st.sampled_from([CREATED, None])),
    }
    limit = data.draw(st.sampled_from([None, None, None, None, 120, 400]))
    if limit is not None:
        options["max_event_bytes"] = limit
    assert_same(source, "chat", body, chunks, data.draw(st.booleans()), **options)


@pytest.mark.c_extension
@pytest.mark.parametrize("source", ["messages", "responses"])
@settings(max_examples=60, deadline=None, suppress_health_check=HEALTH)
@given(data=st.data())
def test_well_formed_upstreams_take_the_fast_path_and_agree(source: str, data: st.DataObject) -> None:
    body = data.draw(upstream_bodies(source, mutate=False))
    chunks = data.draw(chunkings(body))
    t = assert_same(source, "chat", body, chunks, False)
    assert t.complete


@pytest.mark.c_extension
@pytest.mark.parametrize(("source", "target"), [("messages", "responses"), ("responses", "messages")])
@settings(max_examples=50, deadline=None, suppress_health_check=HEALTH)
@given(data=st.data())
def test_chained_translation_is_the_same_on_both_backends(
    source: str, target: str, data: st.DataObject
) -> None:
    body = data.draw(upstream_bodies(source))
    chunks = data.draw(chunkings(body))
    assert_same(source, target, body, chunks, data.draw(st.booleans()))


# hand-written vectors: what orjson writes for a str (RFC 8259 escapes decoded, orjson's form out)


def _chat_stream(*payloads: bytes) -> bytes:
    head = b'{"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":'
    body = [b"data: " + head + b'{"role":"assistant"},"finish_reason":null}]}\n\n']
    body += [b"data: " + head + p + b',"finish_reason":null}]}\n\n' for p in payloads]
    body.append(b"data: " + head + b'{},"finish_reason":"stop"}]}\n\n')
    body.append(b"data: [DONE]\n\n")
    return b"".join(body)


# "\u0041\/\n\u00e9\ud83d\ude00\u001f\"" spelled with escapes, and the same with a raw é and tab
SPELLED = rb'"\u0041\/\n\u00e9\ud83d\ude00\u001f\"\\\b\f\r\t\u007f\u00E9' + "é\x7f".encode() + rb'"'
# orjson: '/' plain, é / U+1F600 / DEL raw UTF-8, \n \" \\ \b \f \r \t short, \u001f lowercase
WRITTEN = (
    b'"A/\\n' + "é😀".encode() + b'\\u001f\\"\\\\\\b\\f\\r\\t' + "\x7fé".encode() + "é\x7f".encode() + b'"'
)


def _deltas(out: bytes, key: bytes) -> list[bytes]:
    # The raw JSON string after each ``key`` in the translated bytes (as written, not re-parsed).
    found = []
    at = out.find(key)
    while at >= 0:
        start = at + len(key)
        end = start + 1
        while out[end : end + 1] != b'"':
            end += 2 if out[end : end + 1] == b"\\" else 1
        found.append(out[start : end + 1])
        at = out.find(key, end)
    return found


def test_the_written_form_is_orjsons() -> None:
    # the expectation itself, checked against orjson (which the rest of the library writes with)
    assert orjson.loads(SPELLED) == 'A/\n\u00e9\U0001f600\x1f"\\\b\f\r\t\x7f\u00e9\u00e9\x7f'
    assert orjson.dumps(orjson.loads(SPELLED)) == WRITTEN


@pytest.mark.parametrize("name", [C, "python"])
@pytest.mark.parametrize(("target", "key"), [("messages", b'"text":'), ("responses", b'"delta":')])
@pytest.mark.parametrize("size", [0, 1, 7])
def test_escaped_deltas_come_out_as_orjson_writes_them(name: str, target: str, key: bytes, size: int) -> None:
    backend = fastsse.get_backend(name)
    body = _chat_stream(b'{"content":"x"}', b'{"content":' + SPELLED + b"}", b'{"content":' + SPELLED + b"}")
    t = backend.ChatToMessages() if target == "messages" else backend.ChatToResponses()
    chunks = [body] if size == 0 else [body[i : i + size] for i in range(0, len(body), size)]
    out = b"".join(t.write(c) for c in chunks) + t.close()
    deltas = [d for d in _deltas(out, key) if d != b'""']
    assert deltas == [b'"x"', WRITTEN, WRITTEN]
    if target == "responses":  # the .done events carry the joined text
        assert b'"text":"x' + WRITTEN[1:-1] + WRITTEN[1:-1] + b'"' in out
    assert t.verdict.complete


@pytest.mark.parametrize("name", [C, "python"])
@pytest.mark.parametrize("target", ["messages", "responses"])
def test_arguments_and_reasoning_spelled_with_escapes(name: str, target: str) -> None:
    backend = fastsse.get_backend(name)
    start = (
        b'{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}'
    )
    more = b'{"tool_calls":[{"index":0,"function":{"arguments":' + SPELLED + b"}}]}"
    body = _chat_stream(b'{"reasoning_content":' + SPELLED + b"}", start, more, more)
    t = backend.ChatToMessages() if target == "messages" else backend.ChatToResponses()
    out = t.write(body) + t.close()
    key = b'"partial_json":' if target == "messages" else b'"delta":'
    assert _deltas(out, key)[-2:] == [WRITTEN, WRITTEN]
    thinking = b'"thinking":' if target == "messages" else b'"delta":'
    assert WRITTEN in _deltas(out, thinking)


FFFD = "\ufffd".encode()
# each lone half becomes U+FFFD (the fold's documented mending, ``fastsse.sse.loads_replacing``)
LONE = [
    (rb'"\ud83d"', b'"' + FFFD + b'"'),
    (rb'"\ude00"', b'"' + FFFD + b'"'),
    (rb'"a\ud83dx"', b'"a' + FFFD + b'x"'),
    (rb'"\ud83d\u0041"', b'"' + FFFD + b'A"'),
    (rb'"\ud83d\ud83d"', b'"' + FFFD + FFFD + b'"'),
    (rb'"\ude00\ud83d\ude00"', b'"' + FFFD + "\U0001f600".encode() + b'"'),
    (rb'"\\ud83d"', rb'"\\ud83d"'),  # an escaped backslash, then text: no escape at all
]


@pytest.mark.parametrize("name", [C, "python"])
@pytest.mark.parametrize("target", ["messages", "responses"])
@pytest.mark.parametrize(("lone", "written"), LONE)
def test_a_lone_surrogate_escape_is_mended_not_a_crash(
    name: str, target: str, lone: bytes, written: bytes
) -> None:
    # orjson.loads refuses a lone surrogate (RFC 8259 leaves it undefined); the fold parses the
    # payload again with U+FFFD in its place, and the translation carries that.
    if lone != rb'"\\ud83d"':
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(lone)
    backend = fastsse.get_backend(name)
    t = backend.ChatToMessages() if target == "messages" else backend.ChatToResponses()
    body = _chat_stream(b'{"content":"a"}', b'{"content":' + lone + b"}", b'{"content":"b"}')
    out = t.write(body) + t.close()
    texts = [d for d in _deltas(out, b'"text":' if target == "messages" else b'"delta":') if d != b'""']
    assert texts == [b'"a"', written, b'"b"']
    assert t.verdict.skipped == 0
    assert t.verdict.complete


@pytest.mark.c_extension
@pytest.mark.parametrize("lone", [lone for lone, _ in LONE])
@pytest.mark.parametrize("where", ["content", "arguments"])
def test_lone_surrogates_agree_on_both_backends(lone: bytes, where: str) -> None:
    start = b'{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{"}}]}'
    if where == "content":
        payload = b'{"content":' + lone + b"}"
    else:
        payload = b'{"tool_calls":[{"index":0,"function":{"arguments":' + lone + b"}}]}"
    body = _chat_stream(b'{"content":"a"}', start, payload, b'{"content":"b"}')
    for target in ("messages", "responses"):
        for size in (len(body), 1, 5):
            chunks = [body[i : i + size] for i in range(0, len(body), size)]
            assert_same("chat", target, body, chunks, False)


@pytest.mark.c_extension
@pytest.mark.parametrize("target", ["messages", "responses"])
def test_the_compiled_fast_path_runs_on_plain_text(target: str) -> None:
    # Without this the differential tests could be comparing the core with itself.
    c = fastsse.get_backend("cython")
    n = 50
    body = _chat_stream(*[b'{"content":"w%d "}' % i for i in range(n)])
    t = c.ChatToMessages() if target == "messages" else c.ChatToResponses()
    t.write(body)
    t.close()
    # the first content delta opens the block or part (the core's work); the rest continue it
    assert n - 2 <= t._fast_events <= n
    body = _chat_stream(b'{"reasoning_content":"r"}', *[b'{"reasoning_content":"r%d"}' % i for i in range(n)])
    t = c.ChatToMessages() if target == "messages" else c.ChatToResponses()
    for i in range(0, len(body), 13):
        t.write(body[i : i + 13])
    t.close()
    assert n - 2 <= t._fast_events <= n + 1


@pytest.mark.c_extension
@pytest.mark.parametrize("target", ["messages", "responses"])
def test_the_compiled_fast_path_runs_on_tool_arguments(target: str) -> None:
    c = fastsse.get_backend("cython")
    start = (
        b'{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}'
    )
    more = [b'{"tool_calls":[{"index":0,"function":{"arguments":"\\"k%d\\":1,"}}]}' % i for i in range(20)]
    t = c.ChatToMessages() if target == "messages" else c.ChatToResponses()
    t.write(_chat_stream(start, *more))
    t.close()
    assert t._fast_events >= 19


@pytest.mark.c_extension
@pytest.mark.parametrize("source", ["messages", "responses"])
@pytest.mark.parametrize("field", [b"content", b"reasoning_content", b"refusal", b"arguments"])
def test_the_to_chat_fast_path_runs(source: str, field: bytes) -> None:
    # Upstreams written by the pure translator from a plain chat stream: every delta after the
    # one that opens its block, part or call is the compiled fast path's.
    c, p = _backends()
    n = 40
    if field == b"arguments":
        start = b'{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}'
        deltas = [
            start,
            *[b'{"tool_calls":[{"index":0,"function":{"arguments":"a%d"}}]}' % i for i in range(n)],
        ]
    else:
        deltas = [b'{"' + field + b'":"w%d "}' % i for i in range(n)]
    pt = p.ChatToMessages() if source == "messages" else p.ChatToResponses()
    upstream = pt.write(_chat_stream(*deltas)) + pt.close()
    t = c.MessagesToChat(created=CREATED) if source == "messages" else c.ResponsesToChat(created=CREATED)
    t.write(upstream)
    t.close()
    assert n - 2 <= t._fast_events <= n
    assert t.complete
    assert_same(source, "chat", upstream, [upstream[i : i + 9] for i in range(0, len(upstream), 9)], False)


# towards chat: what the compiled fast path counts must match the core's str lengths


def _sse(*payloads: bytes) -> bytes:
    return b"".join(b"data: " + p + b"\n\n" for p in payloads)


def _chat_deltas(out: bytes) -> list[dict[str, Any]]:
    return [
        orjson.loads(data)["choices"][0]["delta"]
        for _, data in _events(out)
        if data != "[DONE]" and orjson.loads(data).get("choices")
    ]


MESSAGES_CITED = _sse(
    b'{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":3,"output_tokens":0}}}',
    b'{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}',
    # U+00E9 and U+1F600 spelled as escapes: two characters
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\\u00e9\\ud83d\\ude00"}}',
    # a quote and a slash, escaped: two characters
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\\"\\/"}}',
    b'{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","url":"https://a.test","title":"A","cited_text":"x","encrypted_index":"e"}}}',
    b'{"type":"content_block_stop","index":0}',
    b'{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}',
    b'{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}}',
    # raw UTF-8: three characters in seven bytes
    b'{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"'
    + "\u4e2d\U0001f600y".encode()
    + b'"}}',
    b'{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","url":"https://b.test","title":"B","cited_text":"y","encrypted_index":"e"}}}',
    b'{"type":"content_block_stop","index":1}',
    b'{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9}}',
    b'{"type":"message_stop"}',
)


@pytest.mark.parametrize("name", [C, "python"])
@pytest.mark.parametrize("size", [0, 1, 11])
def test_citation_spans_count_characters_whatever_the_spelling(name: str, size: int) -> None:
    t = fastsse.get_backend(name).MessagesToChat(created=CREATED)
    out = drive(
        t,
        [MESSAGES_CITED]
        if size == 0
        else [MESSAGES_CITED[i : i + size] for i in range(0, len(MESSAGES_CITED), size)],
        False,
    )
    deltas = _chat_deltas(b"".join(out))
    text = "".join(d.get("content") or "" for d in deltas)
    assert text == 'a\u00e9\U0001f600"/x\u4e2d\U0001f600y'
    notes = [d["annotations"] for d in deltas if "annotations" in d]
    # block 0 is characters 0-5 of the content ("a", e-acute, U+1F600, quote, slash), block 1
    # characters 5-9 ("x", U+4E2D, U+1F600, "y"): str indexes
    assert notes == [
        [
            {
                "type": "url_citation",
                "url_citation": {"url": "https://a.test", "title": "A", "start_index": 0, "end_index": 5},
            },
            {
                "type": "url_citation",
                "url_citation": {"url": "https://b.test", "title": "B", "start_index": 5, "end_index": 9},
            },
        ]
    ]
    assert t.complete
    if name == "cython":
        assert t._fast_events >= 4  # the text deltas after each block's first went the fast way


RESPONSES_ARGS = _sse(
    b'{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1700000000,"status":"in_progress","model":"m","output":[]}}',
    b'{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","call_id":"call_1","name":"f","arguments":""}}',
    # {"a": spelled with escapes: five characters
    b'{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\\u0022a\\":"}',
    # "e-acute U+1F600" with the emoji as a surrogate pair: four characters
    b'{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"\\"\\u00e9\\ud83d\\ude00\\""}',
    # the done item has one more character than the deltas carried: only that one is sent
    b'{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"f","arguments":"{\\"a\\":\\"\\u00e9\\ud83d\\ude00\\"}"}}',
    b'{"type":"response.completed","sequence_number":5,"response":{"id":"resp_1","object":"response","created_at":1700000000,"status":"completed","model":"m","output":[],"usage":{"input_tokens":2,"output_tokens":3,"total_tokens":5}}}',
)


@pytest.mark.parametrize("name", [C, "python"])
@pytest.mark.parametrize("size", [0, 1, 13])
def test_done_items_send_only_the_arguments_not_yet_sent(name: str, size: int) -> None:
    t = fastsse.get_backend(name).ResponsesToChat(created=CREATED)
    out = drive(
        t,
        [RESPONSES_ARGS]
        if size == 0
        else [RESPONSES_ARGS[i : i + size] for i in range(0, len(RESPONSES_ARGS), size)],
        False,
    )
    deltas = _chat_deltas(b"".join(out))
    fragments = [c["function"].get("arguments") for d in deltas for c in d.get("tool_calls", [])]
    assert fragments == ["", '{"a":', '"\u00e9\U0001f600"', "}"]
    assert t.complete
    if name == "cython":
        assert t._fast_events >= 1  # the second delta at least (the first may open the call)


INDEX_SPELLINGS = [
    b"0.0",
    b"1e0",
    b"-0",
    b"0E0",
    b"-1",
    b"1.5",
    b"true",
    b"null",
    b'"0"',
    b"4294967296",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551616",
]


@pytest.mark.c_extension
@pytest.mark.parametrize("source", ["messages", "responses"])
@pytest.mark.parametrize("value", INDEX_SPELLINGS)
def test_index_spellings_agree_on_both_backends(source: str, value: bytes) -> None:
    # The fast readers parse block and output indexes from the bytes; the core takes a JSON int >= 0.
    p = fastsse.get_backend("python")
    body = _chat_stream(
        b'{"reasoning_content":"r"}',
        b'{"reasoning_content":"s"}',
        b'{"content":"a"}',
        b'{"content":"b"}',
        b'{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{"}}]}',
        b'{"tool_calls":[{"index":0,"function":{"arguments":"1"}}]}',
    )
    t = p.ChatToMessages() if source == "messages" else p.ChatToResponses()
    upstream = t.write(body) + t.close()
    keys = (
        [
            b'"index":0,"delta":{"type":"thinking_delta"',
            b'"index":1,"delta":{"type":"text_delta"',
            b'"index":2,"delta":{"type":"input_json_delta"',
        ]
        if source == "messages"
        else [
            b'"output_index":0,"summary_index":0,"delta"',
            b'"output_index":1,"content_index":0,"delta"',
            b'"output_index":2,"delta"',
        ]
    )
    for key in keys:
        assert key in upstream
        old = key.split(b",")[0]
        mutated = upstream.replace(key, key.replace(old, old.split(b":")[0] + b":" + value, 1))
        for size in (len(mutated), 7):
            assert_same(
                source, "chat", mutated, [mutated[i : i + size] for i in range(0, len(mutated), size)], False
            )


# the fast paths' decision points, one by one: where a sink must leave the chunk or event to the core


_S = b'{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{"}}]}'
CHAT_CASES = {
    "rc-null": [
        b'{"reasoning_content":"a"}',
        b'{"reasoning_content":null,"reasoning":"x"}',
        b'{"reasoning":"y","reasoning_content":null}',
    ],
    "rc-empty": [b'{"reasoning_content":"a"}', b'{"reasoning_content":"","reasoning":"x"}'],
    "r-then-rc": [b'{"reasoning":"a"}', b'{"reasoning":"b","reasoning_content":"c"}'],
    "new-id-same-index": [
        _S,
        b'{"tool_calls":[{"index":0,"function":{"arguments":"1"}}]}',
        b'{"tool_calls":[{"index":0,"id":"call_b","function":{"name":"g","arguments":"x"}}]}',
        b'{"tool_calls":[{"index":0,"function":{"arguments":"2"}}]}',
    ],
    "same-id-again": [_S, b'{"tool_calls":[{"index":0,"id":"call_a","function":{"arguments":"1"}}]}'],
    "name-again": [_S, b'{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"1"}}]}'],
    "id-only-new": [_S, b'{"tool_calls":[{"index":0,"id":"call_z","function":{"arguments":"1"}}]}'],
    "dup-index-in-chunk": [
        _S,
        b'{"tool_calls":[{"index":0,"function":{"arguments":"1"}},{"index":0,"function":{"arguments":"2"}}]}',
    ],
    "two-calls": [
        _S,
        b'{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"g","arguments":""}}]}',
        b'{"tool_calls":[{"index":0,"function":{"arguments":"1"}},{"index":1,"function":{"arguments":"2"}}]}',
        b'{"tool_calls":[{"function":{"arguments":"3"}}]}',
    ],
    "legacy-fc": [b'{"function_call":{"name":"f","arguments":"{"}}', b'{"function_call":{"arguments":"1"}}'],
    "content-and-args": [
        _S,
        b'{"content":"a"}',
        b'{"content":"b","tool_calls":[{"index":0,"function":{"arguments":"1"}}]}',
    ],
    "refusal-in-text": [b'{"content":"a"}', b'{"refusal":"no"}', b'{"refusal":"pe","content":"x"}'],
    "content-list": [b'{"content":"a"}', b'{"content":[{"type":"text","text":"b"}]}'],
    "content-num": [b'{"content":"a"}', b'{"content":5}', b'{"content":true}'],
    "role-again": [b'{"content":"a"}', b'{"role":"assistant","content":"b"}'],
    "message-not-delta": [b'{"content":"a"}'],
    "audio": [b'{"content":"a"}', b'{"content":"b","audio":{"id":"x","transcript":"t"}}'],
    "annot-empty": [b'{"content":"a"}', b'{"content":"b","annotations":[]}'],
    "fn-args-null": [
        _S,
        b'{"tool_calls":[{"index":0,"function":{"arguments":null}}]}',
        b'{"tool_calls":[{"index":0,"function":null}]}',
        b'{"tool_calls":[{"index":0}]}',
    ],
    "args-num": [_S, b'{"tool_calls":[{"index":0,"function":{"arguments":5}}]}'],
    "index-float": [
        _S,
        b'{"tool_calls":[{"index":0.0,"function":{"arguments":"1"}}]}',
        b'{"tool_calls":[{"index":-0,"function":{"arguments":"2"}}]}',
        b'{"tool_calls":[{"index":1e0,"function":{"arguments":"2"}}]}',
    ],
    "index-big": [
        _S,
        b'{"tool_calls":[{"index":18446744073709551616,"function":{"arguments":"1"}}]}',
        b'{"tool_calls":[{"index":9223372036854775807,"function":{"arguments":"1"}}]}',
    ],
    "choice-index-float": [b'{"content":"a"}'],
    "tool-calls-null": [_S, b'{"tool_calls":null,"content":"x"}'],
}
CHAT_EXTRA = {
    "choice-index-float": [
        b'data: {"choices":[{"index":0.0,"delta":{"content":"z"}}]}\n\n',
        b'data: {"choices":[{"index":-0,"delta":{"content":"z"}}]}\n\n',
        b'data: {"choices":[{"delta":{"content":"q"},"index":1}]}\n\n',
        b'data: {"choices":[{"delta":{"content":"q"}},{"delta":{"content":"r"}}]}\n\n',
    ],
    "message-not-delta": [
        b'data: {"choices":[{"index":0,"message":{"content":"z"}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":{"content":"y"},"message":{"content":"z"}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":null,"message":{"content":"z"}}]}\n\n',
    ],
}


@pytest.mark.c_extension
@pytest.mark.parametrize("name", sorted(CHAT_CASES))
@pytest.mark.parametrize("target", ["messages", "responses"])
def test_chat_decision_points_agree(name: str, target: str) -> None:
    body = _chat_stream(*CHAT_CASES[name])
    if name in CHAT_EXTRA:  # raw chunks before the finish chunk
        j = body.rindex(b"data: ", 0, body.index(b"data: [DONE]"))
        body = body[:j] + b"".join(CHAT_EXTRA[name]) + body[j:]
    for size in (len(body), 3):
        assert_same("chat", target, body, [body[i : i + size] for i in range(0, len(body), size)], False)


MESSAGE_START = b'{"type":"message_start","message":{"id":"m","model":"x","usage":{"input_tokens":1}}}'


def _txt(i: int) -> bytes:
    return b'{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}' % i


def _tool(i: int, n: bytes = b"f") -> bytes:
    return (
        b'{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"t%d","name":"%s","input":{}}}'
        % (i, i, n)
    )


def _thk(i: int) -> bytes:
    return b'{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":""}}' % i


def _td(i: int, t: bytes = b"x") -> bytes:
    return b'{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":"%s"}}' % (i, t)


def _jd(i: int, t: bytes = b"1") -> bytes:
    return (
        b'{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":"%s"}}'
        % (i, t)
    )


def _kd(i: int, t: bytes = b"k") -> bytes:
    return b'{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":"%s"}}' % (
        i,
        t,
    )


def _sig(i: int) -> bytes:
    return (
        b'{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":"c2ln"}}' % i
    )


def _stop(i: int) -> bytes:
    return b'{"type":"content_block_stop","index":%d}' % i


MESSAGES_END = [
    b'{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":2}}',
    b'{"type":"message_stop"}',
]
MESSAGES_CASES = {
    "text-into-tool": [MESSAGE_START, _tool(0), _jd(0), _td(0), _td(0), _jd(0)],
    "json-into-text": [MESSAGE_START, _txt(0), _td(0), _jd(0), _jd(0), _td(0)],
    "think-other-index": [MESSAGE_START, _thk(0), _kd(0), _kd(1), _kd(5), _sig(0), _kd(0), _stop(0)],
    "two-tools-same-index": [MESSAGE_START, _tool(0), _jd(0), _tool(0, b"g"), _jd(0), _jd(0)],
    "tool-unnamed": [
        MESSAGE_START,
        b'{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":""}}',
        _jd(0),
        _jd(0),
    ],
    "two-message-starts": [MESSAGE_START, _txt(0), _td(0), MESSAGE_START, _td(0), _td(0)],
    "deltas-before-start": [_td(0), _td(0), MESSAGE_START, _td(0), _td(0)],
    "after-stop": [MESSAGE_START, _txt(0), _td(0), _td(0), *MESSAGES_END, _td(0), _td(0)],
    "after-error": [
        MESSAGE_START,
        _txt(0),
        _td(0),
        b'{"type":"error","error":{"type":"x","message":"y"}}',
        _td(0),
        _td(0),
    ],
    "stop-then-delta": [MESSAGE_START, _txt(0), _td(0), _stop(0), _td(0), _td(0), _txt(1), _td(1)],
    "server-tool": [
        MESSAGE_START,
        b'{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{"q":"a"}}}',
        _jd(0),
        _jd(0),
    ],
    "tool-input-given": [
        MESSAGE_START,
        b'{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{"a":1}}}',
        _jd(0),
        _jd(0),
    ],
    "empty-deltas": [MESSAGE_START, _txt(0), _td(0, b""), _td(0, b""), _jd(0, b""), _kd(0, b"")],
}


RESPONSE_CREATED = b'{"type":"response.created","response":{"id":"r","model":"m","created_at":5}}'


def _msg(i: int) -> bytes:
    return (
        b'{"type":"response.output_item.added","output_index":%d,"item":{"type":"message","id":"msg%d","role":"assistant","content":[]}}'
        % (i, i)
    )


def _part(i: int) -> bytes:
    return (
        b'{"type":"response.content_part.added","output_index":%d,"content_index":0,"item_id":"msg%d","part":{"type":"output_text","text":""}}'
        % (i, i)
    )


def _fc(i: int, n: bytes = b"f") -> bytes:
    return (
        b'{"type":"response.output_item.added","output_index":%d,"item":{"type":"function_call","id":"fc%d","call_id":"c%d","name":"%s","arguments":""}}'
        % (i, i, i, n)
    )


def _ot(i: int, t: bytes = b"x") -> bytes:
    return (
        b'{"type":"response.output_text.delta","output_index":%d,"content_index":0,"item_id":"msg%d","delta":"%s"}'
        % (i, i, t)
    )


def _ad(i: int, t: bytes = b"1") -> bytes:
    return (
        b'{"type":"response.function_call_arguments.delta","output_index":%d,"item_id":"fc%d","delta":"%s"}'
        % (i, i, t)
    )


def _rs(i: int, t: bytes = b"r") -> bytes:
    return (
        b'{"type":"response.reasoning_summary_text.delta","output_index":%d,"summary_index":0,"delta":"%s"}'
        % (i, t)
    )


def _rf(i: int, t: bytes = b"no") -> bytes:
    return b'{"type":"response.refusal.delta","output_index":%d,"content_index":0,"delta":"%s"}' % (i, t)


def _fcd(i: int, a: bytes) -> bytes:
    return (
        b'{"type":"response.output_item.done","output_index":%d,"item":{"type":"function_call","id":"fc%d","call_id":"c%d","name":"f","arguments":"%s"}}'
        % (i, i, i, a)
    )


RESPONSES_END = b'{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}}'
RESPONSES_CASES = {
    "text-into-fc": [RESPONSE_CREATED, _fc(0), _ad(0), _ot(0), _ot(0), _ad(0)],
    "args-into-msg": [RESPONSE_CREATED, _msg(0), _part(0), _ot(0), _ad(0), _ad(0), _ot(0)],
    "dup-output-index": [RESPONSE_CREATED, _fc(0), _ad(0), _fc(0, b"g"), _ad(0), _ad(0)],
    "args-unknown": [RESPONSE_CREATED, _ad(3), _ad(3), _fc(3), _ad(3), _ad(3)],
    "no-created": [_ot(0), _ot(0), RESPONSE_CREATED, _ot(0), _ot(0)],
    "after-completed": [RESPONSE_CREATED, _ot(0), _ot(0), RESPONSES_END, _ot(0), _ad(0)],
    "done-shorter": [RESPONSE_CREATED, _fc(0), _ad(0, b"abc"), _ad(0, b"def"), _fcd(0, b"ab"), _ad(0, b"g")],
    "done-longer": [
        RESPONSE_CREATED,
        _fc(0),
        _ad(0, b"abc"),
        _ad(0, b"d"),
        _fcd(0, b"abcdefg"),
        _ad(0, b"h"),
    ],
    "done-different": [RESPONSE_CREATED, _fc(0), _ad(0, b"abc"), _fcd(0, b"xyzw"), _ad(0)],
    "refusal-summary": [RESPONSE_CREATED, _rs(0), _rs(0), _rf(1), _rf(1), _rs(0)],
    "in-progress-twice": [
        RESPONSE_CREATED,
        _ot(0),
        b'{"type":"response.in_progress","response":{"id":"r2","model":"m2"}}',
        _ot(0),
    ],
    "failed-mid": [
        RESPONSE_CREATED,
        _ot(0),
        _ot(0),
        b'{"type":"response.failed","response":{"error":{"code":"x","message":"m"}}}',
        _ot(0),
    ],
    "empty": [RESPONSE_CREATED, _ot(0, b""), _ad(0, b""), _fc(0), _ad(0, b""), _ad(0)],
    "fc-unnamed": [RESPONSE_CREATED, _fc(0, b""), _ad(0), _ad(0)],
}


@pytest.mark.c_extension
@pytest.mark.parametrize(
    ("source", "name"),
    [("messages", n) for n in sorted(MESSAGES_CASES)] + [("responses", n) for n in sorted(RESPONSES_CASES)],
)
def test_upstream_decision_points_agree(source: str, name: str) -> None:
    events = MESSAGES_CASES[name] if source == "messages" else RESPONSES_CASES[name]
    end = MESSAGES_END if source == "messages" else [RESPONSES_END]
    for tail in ([], end):
        body = _sse(*events, *tail)
        for target in ("chat", "responses" if source == "messages" else "messages"):
            for size in (len(body), 3, 17):
                for truncated in (False, True):
                    chunks = [body[i : i + size] for i in range(0, len(body), size)]
                    assert_same(source, target, body, chunks, truncated, include_usage=True)
