"""Relay: compliant bytes out of broken upstreams, each repair and each truncation case by hand,
chunking never matters, both backends agree, and the fold is the fold of what was forwarded."""

from __future__ import annotations

import json
import os
import pathlib
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastsse
from fastsse import ChatChunkEncoder, EventTooLarge, UsageError, check_stream, get_backend
from fastsse.sse._decoder_py import Decoder

LINT = pathlib.Path(__file__).parent / "vectors" / "lint"
CASES: dict[str, dict[str, Any]] = json.loads((LINT / "cases.json").read_text(encoding="utf-8"))

# Departures the relay leaves visible on purpose: a failure (error, truncation, a choice with no
# finish) must reach the client as one, and tool-call indexes or reused ids cannot be repaired
# without inventing something. For these it may only remove findings, never add one.
NOT_REPAIRED = {
    "empty-stream.sse",
    "error-object.sse",
    "truncated.sse",
    "missing-finish-reason.sse",
    "delta-after-finish.sse",
    "tool-call-without-index.sse",
    "tool-call-index-gap.sse",
    "tool-call-id-reused.sse",
    "tool-call-incomplete.sse",
    "tool-calls-without-calls.sse",
    "localai-3.7-tools.sse",
    # reasoning only in reasoning_details: copying it into "reasoning" would show it twice to
    # clients that read both
    "reasoning-field.sse",
}

HEAD = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":['


def chunk(choices: str, extra: str = "") -> bytes:
    """One compliant-framed event with the common head; ``choices`` is the JSON inside the list."""
    return f"data: {HEAD}{choices}]{extra}}}\n\n".encode()


def relay(backend: SimpleNamespace, data: bytes, cut: int | None = None, **options: Any) -> bytes:
    r = backend.Relay(**options)
    step = cut or len(data) or 1
    out = [r.write(data[k : k + step]) for k in range(0, len(data), step)]
    out.append(r.close())
    return b"".join(out)


def events(stream: bytes) -> list[Any]:
    """The payloads of a stream, parsed (``"[DONE]"`` as text)."""
    decoder = Decoder()
    return [
        e.data if e.data == "[DONE]" else orjson.loads(e.data) for e in decoder.feed(stream) + decoder.close()
    ]


def texts(stream: bytes) -> dict[tuple[int, str], str]:
    """Every text a stream delivers, per (choice, field); tool arguments per call. [DONE] ends it."""
    out: dict[tuple[int, str], str] = {}
    decoder = Decoder()
    for event in decoder.feed(stream) + decoder.close():
        if event.data == "[DONE]":
            break
        try:
            data = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            continue
        for choice in data.get("choices") or [] if isinstance(data, dict) else []:
            if not isinstance(choice, dict) or not isinstance(choice.get("delta"), dict):
                continue
            index = choice.get("index", 0)
            delta: dict[str, Any] = choice["delta"]
            if isinstance(delta.get("content"), list):  # Mistral's parts, read by hand: thinking, text
                parts = delta["content"]
                thinking = "".join(t["text"] for p in parts if p["type"] == "thinking" for t in p["thinking"])
                text = "".join(p["text"] for p in parts if p["type"] == "text")
                delta = {**{k: v for k, v in delta.items() if k != "content"}, "content": text}
                delta["reasoning_content"] = thinking + (delta.get("reasoning_content") or "")
            for key in ("content", "reasoning_content", "reasoning", "refusal"):
                value = delta.get(key)
                if value:
                    out[(index, key)] = out.get((index, key), "") + value
            for call in delta.get("tool_calls") or []:
                args = (call.get("function") or {}).get("arguments")
                if args:
                    key2 = (index, f"tool{call.get('index')}")
                    out[key2] = out.get(key2, "") + args
    return out


def folded(backend: SimpleNamespace, stream: bytes) -> dict[str, Any]:
    cs = backend.ChatStream()
    cs.write(stream)
    cs.close()
    out = cs.result()
    del out["verdict"]
    return out


# the lint captures: every repairable departure is repaired -------------------------------------


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture(backend: SimpleNamespace, name: str) -> None:
    data = (LINT / name).read_bytes()
    out = relay(backend, data)
    assert relay(backend, data, cut=1) == out
    assert relay(backend, data, cut=5) == out
    before = {f.code for f in check_stream(data)}
    after = {f.code for f in check_stream(out)}
    if name == "not-sse.sse":
        # a page is no stream: nothing of it is forwarded, and the client sees an empty stream
        assert out == b"" and after == {"empty-stream"}, (name, after)
    elif name in NOT_REPAIRED:
        assert after <= before, (name, after - before)
    else:
        assert after == set(), (name, after)
    if name == "index-out-of-range.sse":
        # dropped rather than repaired: a client would fold it into another choice or call
        assert b"INJECTED" not in out and b"call_x" not in out
    else:
        assert texts(out) == texts(data)  # no text invented, none lost
    if name.startswith(("compliant", "localai")):
        assert texts(out)  # the comparison above is not vacuous


@pytest.mark.parametrize("name", ["compliant.sse", "compliant-tools.sse", "compliant-comments.sse"])
def test_compliant_streams_pass_byte_for_byte(backend: SimpleNamespace, name: str) -> None:
    data = (LINT / name).read_bytes()
    assert relay(backend, data) == data
    assert relay(backend, data, cut=3) == data


def test_compiled_relay_forwards_content_chunks_without_the_core() -> None:
    cython = pytest.importorskip("fastsse.relay._relay_c")
    r = cython.Relay()
    data = (LINT / "compliant.sse").read_bytes()
    assert r.write(data) + r.close() == data
    # "Hi", " there" and the final chunk went through the reader's plan only
    assert r.aggregator._fast_folds == 3


def test_the_deprecated_name_still_relays() -> None:
    # code written for Normalizer (fastsse.Normalizer, fastsse.relay.normalize.Normalizer) still
    # relays: a whole answer that never sent [DONE] gets it, and nothing else changes
    from fastsse.relay.normalize import Normalizer

    whole = chunk('{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}') + chunk(
        '{"index":0,"delta":{},"finish_reason":"stop"}'
    )
    for cls in (fastsse.Normalizer, Normalizer):
        old = cls()
        assert old.write(whole) + old.close() == whole + b"data: [DONE]\n\n"
        assert old.text() == "Hi" and old.verdict.complete


def test_relay_has_no_feed_that_would_skip_writes_checks(backend: SimpleNamespace) -> None:
    # The scanner's feed(data) -> list[Event] under a Relay scanned after close(), let an oversized
    # event through without stopping the relay, and kept the bytes to send for the next write.
    r = backend.Relay(max_event_bytes=64)
    assert not hasattr(r, "feed")
    with pytest.raises(AttributeError, match=r"write\(data\)"):
        r.feed(chunk('{"index":0,"delta":{"content":"x"}}'))
    with pytest.raises(EventTooLarge):
        r.write(b"data: " + b"x" * 100 + b"\n\n")
    assert r.verdict.too_large
    r.close()
    with pytest.raises(UsageError, match="after close"):
        r.write(chunk('{"index":0,"delta":{"content":"x"}}'))
    assert r.text() == ""


# each repair, by hand ------------------------------------------------------------------------------

ROLE = chunk('{"index":0,"delta":{"role":"assistant"},"finish_reason":null}')
HI = chunk('{"index":0,"delta":{"content":"Hi"},"finish_reason":null}')
STOP = chunk('{"index":0,"delta":{},"finish_reason":"stop"}')
DONE = b"data: [DONE]\n\n"


def test_empty_finish_reason_becomes_null(backend: SimpleNamespace) -> None:
    upstream = ROLE + chunk('{"index":0,"delta":{"content":"Hi"},"finish_reason":""}') + STOP + DONE
    assert relay(backend, upstream) == ROLE + HI + STOP + DONE


def test_empty_content_leaves_the_role_chunk(backend: SimpleNamespace) -> None:
    upstream = (
        chunk('{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}') + HI + STOP + DONE
    )
    assert relay(backend, upstream) == ROLE + HI + STOP + DONE


def test_repeated_role_is_dropped(backend: SimpleNamespace) -> None:
    upstream = (
        ROLE
        + chunk('{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}')
        + STOP
        + DONE
    )
    assert relay(backend, upstream) == ROLE + HI + STOP + DONE


def test_missing_role_is_added_to_the_first_chunk(backend: SimpleNamespace) -> None:
    upstream = HI + STOP + DONE
    expected = chunk('{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}')
    assert relay(backend, upstream) == expected + STOP + DONE


def test_role_goes_on_the_first_chunk_with_a_delta(backend: SimpleNamespace) -> None:
    # The fuzzer's finding: a first entry for choice 0 without a usable delta (its key mangled)
    # opens the choice in the fold, but no role reached the client; the compiled fast path used to
    # forward the next chunk untouched while the twin added the role to it.
    upstream = chunk('{"index":0,"dexlta":{"role":"assistant"},"finish_reason":null}') + HI + STOP + DONE
    expected = chunk('{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}')
    assert events(relay(backend, upstream))[1:] == events(expected + STOP + DONE)


def test_tool_call_id_name_and_type_are_sent_once(backend: SimpleNamespace) -> None:
    first = '{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}'
    again = '{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}'
    upstream = (
        ROLE
        + chunk('{"index":0,"delta":{"tool_calls":[' + first + ']},"finish_reason":null}')
        + chunk('{"index":0,"delta":{"tool_calls":[' + again + ']},"finish_reason":null}')
        + chunk('{"index":0,"delta":{},"finish_reason":"tool_calls"}')
        + DONE
    )
    out = relay(backend, upstream)
    assert out == (
        ROLE
        + chunk('{"index":0,"delta":{"tool_calls":[' + first + ']},"finish_reason":null}')
        + chunk(
            '{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":null}'
        )
        + chunk('{"index":0,"delta":{},"finish_reason":"tool_calls"}')
        + DONE
    )
    assert check_stream(out) == []


def test_localai_tools_keep_each_id_and_name_once(backend: SimpleNamespace) -> None:
    out = relay(backend, (LINT / "localai-3.7-tools.sse").read_bytes())
    assert [f.code for f in check_stream(out)] == ["tool-call-id-reused"]  # ids cannot be repaired honestly
    assert out.count(b'"id":"0b4e3b1e"') == 2 and out.count(b'"role"') == 1
    assert out.count(b'"name"') == 2 and out.count(b'"type"') == 2


def test_localai_exact_output(backend: SimpleNamespace) -> None:
    out = relay(backend, (LINT / "localai-3.7.sse").read_bytes())
    head = (
        '{"created":1762700000,"object":"chat.completion.chunk","id":"0b4e3b1e-5c1c-4b7a-9a55-3f4f2d0c8e11",'
        '"model":"qwen3-8b","choices":[{"index":0,"finish_reason":'
    )
    usage = '{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}'
    expected = [
        head + 'null,"delta":{"role":"assistant"}}]}',
        head + 'null,"delta":{"content":"Hello"}}]}',
        head + 'null,"delta":{"content":"!"}}]}',
        head + 'null,"delta":{"content":" How can I help?"}}]}',
        head + '"stop","delta":{}}]}',
        # usage sent on every chunk goes out once, as the include_usage chunk, before [DONE]
        '{"id":"0b4e3b1e-5c1c-4b7a-9a55-3f4f2d0c8e11","object":"chat.completion.chunk",'
        '"created":1762700000,"model":"qwen3-8b","choices":[],"usage":' + usage + "}",
        "[DONE]",
    ]
    assert out == b"".join(f"data: {line}\n\n".encode() for line in expected)


USAGE = '"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}'


def usage_stream() -> bytes:
    return (
        ROLE
        + chunk('{"index":0,"delta":{"content":"Hi"},"finish_reason":null}', "," + USAGE)
        + chunk('{"index":0,"delta":{},"finish_reason":"stop"}', "," + USAGE)
        + DONE
    )


def test_usage_on_content_chunks_goes_out_once_at_the_end(backend: SimpleNamespace) -> None:
    r = backend.Relay()
    out = r.write(usage_stream()) + r.close()
    assert out == ROLE + HI + STOP + f"data: {HEAD}],{USAGE}}}\n\n".encode() + DONE
    assert check_stream(out, expect_usage=True) == []
    assert r.result()["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def test_usage_keep_and_drop(backend: SimpleNamespace) -> None:
    assert relay(backend, usage_stream(), usage="keep") == usage_stream()
    r = backend.Relay(usage="drop")
    assert r.write(usage_stream()) + r.close() == ROLE + HI + STOP + DONE
    assert r.result()["usage"]["total_tokens"] == 5  # still there for billing


def test_usage_kept_on_a_chunk_with_nothing_else_to_deliver(backend: SimpleNamespace) -> None:
    upstream = ROLE + chunk('{"index":0,"delta":{},"finish_reason":null}', "," + USAGE) + HI + STOP + DONE
    r = backend.Relay(usage="keep")
    assert r.write(upstream) + r.close() == ROLE + f"data: {HEAD}],{USAGE}}}\n\n".encode() + HI + STOP + DONE
    assert r.result()["usage"]["total_tokens"] == 5


def test_upstream_usage_chunk_is_forwarded_as_it_is(backend: SimpleNamespace) -> None:
    upstream = ROLE + HI + STOP + f"data: {HEAD}],{USAGE}}}\n\n".encode() + DONE
    assert relay(backend, upstream) == upstream


# the compiled relay's own path for the common chunks: the final chunk, the usage chunk, [DONE] ----

USAGE_CHUNK = f"data: {HEAD}],{USAGE}}}\n\n".encode()
NULLS_FINAL = chunk('{"index":0,"delta":{"content":null},"finish_reason":"stop"}')

# upstream, options, what goes out, how many events the compiled relay hands to RelayCore.event
COMMON: dict[str, tuple[bytes, dict[str, Any], bytes, int]] = {
    "whole answer": (ROLE + HI + STOP + USAGE_CHUNK + DONE, {}, ROLE + HI + STOP + USAGE_CHUNK + DONE, 1),
    "usage keep": (
        ROLE + HI + STOP + USAGE_CHUNK + DONE,
        {"usage": "keep"},
        ROLE + HI + STOP + USAGE_CHUNK + DONE,
        1,
    ),
    # folded for billing, never sent: the core's
    "usage drop": (ROLE + HI + STOP + USAGE_CHUNK + DONE, {"usage": "drop"}, ROLE + HI + STOP + DONE, 2),
    # the usage chunk carries the usage a content chunk had: it is not sent again at [DONE]
    "usage held, then its chunk": (
        ROLE
        + chunk('{"index":0,"delta":{"content":"Hi"},"finish_reason":null}', "," + USAGE)
        + STOP
        + USAGE_CHUNK
        + DONE,
        {},
        ROLE + HI + STOP + USAGE_CHUNK + DONE,
        1,
    ),
    "a usage chunk without choices": (
        ROLE + HI + STOP + f"data: {HEAD[:-11]}{USAGE}}}\n\n".encode(),
        {},
        ROLE + HI + STOP + f'data: {HEAD[:-11]}{USAGE},"choices":[]}}\n\n'.encode() + DONE,
        2,
    ),
    "a usage chunk with a null choice": (
        ROLE + HI + STOP + chunk("null", "," + USAGE),
        {},
        ROLE + HI + STOP + chunk("null") + USAGE_CHUNK + DONE,
        2,
    ),
    "a chunk with nothing at all": (
        ROLE + HI + STOP + chunk("", ',"usage":null'),
        {},
        ROLE + HI + STOP + DONE,
        2,
    ),
    # the first chunk of choice 1: the core adds its role and splits off the finish
    "a final for an index never seen": (
        ROLE + chunk('{"index":1,"delta":{},"finish_reason":"stop"}') + STOP,
        {},
        ROLE
        + chunk('{"index":1,"delta":{"role":"assistant"},"finish_reason":null}')
        + chunk('{"index":1,"delta":{},"finish_reason":"stop"}')
        + STOP
        + DONE,
        2,
    ),
    # a choice finishes once: the second final is dropped, which needs the first one marked
    "a second final": (ROLE + HI + STOP + STOP, {}, ROLE + HI + STOP + DONE, 2),
    "a final with text": (
        ROLE + chunk('{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}'),
        {},
        ROLE + HI + STOP + DONE,
        2,
    ),
    "a final with a delta of nulls": (ROLE + HI + NULLS_FINAL, {}, ROLE + HI + STOP + DONE, 2),
    # the relay reads no "message": the chunk goes out as it is and the choice is not finished
    "a final under message": (
        ROLE + HI + chunk('{"index":0,"message":{},"finish_reason":"stop"}') + STOP,
        {},
        ROLE + HI + chunk('{"index":0,"message":{},"finish_reason":"stop"}') + STOP + DONE,
        2,
    ),
    "a final beside a content choice": (
        ROLE
        + chunk('{"index":1,"delta":{"role":"assistant"},"finish_reason":null}')
        + chunk(
            '{"index":0,"delta":{},"finish_reason":"stop"},'
            '{"index":1,"delta":{"content":"Hi"},"finish_reason":null}'
        )
        + chunk('{"index":1,"delta":{},"finish_reason":"length"}'),
        {},
        ROLE
        + chunk('{"index":1,"delta":{"role":"assistant"},"finish_reason":null}')
        + chunk(
            '{"index":0,"delta":{},"finish_reason":"stop"},'
            '{"index":1,"delta":{"content":"Hi"},"finish_reason":null}'
        )
        + chunk('{"index":1,"delta":{},"finish_reason":"length"}')
        + DONE,
        2,
    ),
    "a final with logprobs and a provider field": (
        ROLE + chunk('{"index":0,"delta":{},"logprobs":null,"x":1,"finish_reason":"stop"}', ',"x_top":2'),
        {},
        ROLE
        + chunk('{"index":0,"delta":{},"logprobs":null,"x":1,"finish_reason":"stop"}', ',"x_top":2')
        + DONE,
        1,
    ),
    # [DONE] with a usage held for the end: the core's done() sends the usage chunk first
    "[DONE] with usage held": (
        ROLE + chunk('{"index":0,"delta":{"content":"Hi"},"finish_reason":null}', "," + USAGE) + STOP + DONE,
        {},
        ROLE + HI + STOP + USAGE_CHUNK + DONE,
        1,
    ),
    "[DONE] between blanks": (ROLE + HI + STOP + b"data:  [DONE] \t\n\n", {}, ROLE + HI + STOP + DONE, 1),
    # a chunk that could not be read: the answer misses it, and [DONE] is withheld
    "[DONE] after a lost chunk": (ROLE + HI + b'data: {"id":\n\n' + STOP + DONE, {}, ROLE + HI + STOP, 2),
    "[DONE] as an error": (
        ROLE + HI + STOP + b"event: error\n" + DONE,
        {},
        ROLE
        + HI
        + STOP
        + b'data: {"error":{"message":"[DONE]","type":"upstream_error","param":null,"code":null}}\n\n',
        2,
    ),
    "[DONE] first": (DONE + ROLE, {}, DONE, 0),
}


@pytest.fixture
def core_events(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The payloads handed to ``RelayCore.event`` while the test runs."""
    from fastsse.relay._core import RelayCore

    seen: list[bytes] = []
    event = RelayCore.event

    def counted(self: RelayCore, payload: bytes, is_error: bool, multi_line: bool) -> bytes:
        seen.append(payload)
        return event(self, payload, is_error, multi_line)

    monkeypatch.setattr(RelayCore, "event", counted)
    return seen


@pytest.mark.parametrize("name", sorted(COMMON))
def test_common_chunks_and_their_edges(backend: SimpleNamespace, core_events: list[bytes], name: str) -> None:
    upstream, options, expected, in_core = COMMON[name]
    r = backend.Relay(**options)
    out = r.write(upstream) + r.close()
    if backend.name == "cython":
        # what the compiled relay takes itself (the pure relay hands the core every event)
        assert len(core_events) == in_core, core_events
    assert out == expected
    assert relay(backend, upstream, cut=3, **options) == expected
    twin = get_backend("python").Relay(**options)
    twin.write(upstream)
    twin.close()
    assert r.result() == twin.result()
    assert r.verdict == twin.verdict


def test_common_chunks_go_to_on_chunk(backend: SimpleNamespace, core_events: list[bytes]) -> None:
    # with on_chunk every chunk is the core's, which hands it over before sending it
    seen: list[dict[str, Any]] = []
    r = backend.Relay(on_chunk=seen.append)
    out = r.write(ROLE + HI + STOP + USAGE_CHUNK + DONE) + r.close()
    assert out == ROLE + HI + STOP + USAGE_CHUNK + DONE
    marks = [c["choices"][0]["finish_reason"] if c["choices"] else c["usage"]["total_tokens"] for c in seen]
    assert marks == [None, None, "stop", 5]
    assert STOP[6:-2] in core_events and USAGE_CHUNK[6:-2] in core_events


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"])
def test_crlf_and_cr_framing(backend: SimpleNamespace, ending: bytes) -> None:
    compliant = (LINT / "compliant.sse").read_bytes()
    data = b"\xef\xbb\xbf" + compliant.replace(b"\n", ending)
    assert relay(backend, data) == compliant
    assert relay(backend, data, cut=1) == compliant


def test_multi_line_data_becomes_one_line(backend: SimpleNamespace) -> None:
    upstream = (
        ROLE
        + b'data: {"id":"c","object":"chat.completion.chunk",\ndata: "created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
    )
    out = relay(backend, upstream + STOP + DONE)
    assert out == ROLE + HI + STOP + DONE


def test_fields_other_than_data_are_dropped(backend: SimpleNamespace) -> None:
    upstream = b"id: 7\nretry: 10\nevent: message\n" + ROLE + b"event: ping\n\n" + HI + STOP + DONE
    assert relay(backend, upstream) == ROLE + HI + STOP + DONE


def test_final_chunk_with_text_is_split(backend: SimpleNamespace) -> None:
    upstream = ROLE + chunk('{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}') + DONE
    assert relay(backend, upstream) == ROLE + HI + STOP + DONE


def test_changed_id_created_and_object_are_put_back(backend: SimpleNamespace) -> None:
    changed = HI.replace(b'"id":"c"', b'"id":"d"').replace(b'"created":1', b'"created":2')
    wrong = HI.replace(b"chat.completion.chunk", b"chat.completion")
    assert relay(backend, ROLE + changed + wrong + STOP + DONE) == ROLE + HI + HI + STOP + DONE


def test_null_id_created_and_model_are_put_back(backend: SimpleNamespace) -> None:
    # A null is a changed value, not a missing one: clients key the answer on these (the fuzzer
    # found the compiled relay forwarding nulls its twin put back).
    for field, value in (
        (b'"id":"c"', b'"id":null'),
        (b'"created":1', b'"created":null'),
        (b'"model":"m"', b'"model":null'),
    ):
        nulled = HI.replace(field, value)
        assert nulled != HI
        assert relay(backend, ROLE + nulled + STOP + DONE) == ROLE + HI + STOP + DONE, field


TWO = chunk('{"index":0,"delta":{"role":"assistant"}},{"index":1,"delta":{"role":"assistant"}}')
ERROR = b'data: {"error":{"message":"overloaded","type":"server_error"}}\n\n'
LOST = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"x\x00"}}]\n\n'  # no closing brace


@pytest.mark.parametrize(
    ("stream", "complete"),
    [
        (ROLE + HI + STOP + DONE, True),  # every choice finished, then [DONE]
        (ROLE + HI + STOP, False),  # no [DONE] yet: a clean end would still complete it
        (ROLE + HI + DONE, False),  # [DONE] without a finish_reason
        (TWO + STOP + DONE, False),  # choice 1 never finished
        (ROLE + HI + ERROR, False),  # an error payload ends the stream, not complete
        (ROLE + HI + LOST + STOP + DONE, False),  # a chunk lost: no [DONE] is sent
        (b"data: [DONE]\n\n", False),  # no choice at all
    ],
)
def test_complete_says_when_nothing_more_can_be_sent(
    backend: SimpleNamespace, stream: bytes, complete: bool
) -> None:
    r = backend.Relay()
    sent = r.write(stream)
    assert r.complete is complete
    if complete:
        assert sent.endswith(DONE)
        # whatever the upstream does next: nothing more goes out, and it stays complete
        assert r.write(HI + b"data: {bro") == b"" and r.close(truncated=True) == b""
        assert r.complete and r.verdict.complete


def test_a_clean_end_that_adds_done_completes_the_answer(backend: SimpleNamespace) -> None:
    # an upstream that ends its streams without [DONE]: close() sends one for a whole answer
    r = backend.Relay()
    r.write(ROLE + HI + STOP)
    assert not r.complete
    assert r.close() == DONE and r.complete
    cut = backend.Relay()
    cut.write(ROLE + HI + STOP)
    assert cut.close(truncated=True) == b"" and not cut.complete


def test_complete_is_false_when_on_chunk_stops_the_stream(backend: SimpleNamespace) -> None:
    r = backend.Relay(on_chunk=lambda chunk: False if chunk["choices"][0].get("finish_reason") else None)
    r.write(ROLE + HI + STOP + DONE)
    assert not r.complete and r.verdict.aborted


def test_chunks_with_nothing_to_deliver_are_dropped(backend: SimpleNamespace) -> None:
    empty_delta = chunk('{"index":0,"delta":{},"finish_reason":null}')
    no_choices = f"data: {HEAD}]}}\n\n".encode()
    empty_calls = chunk('{"index":0,"delta":{"content":"Hi","tool_calls":[]},"finish_reason":null}')
    upstream = ROLE + empty_delta + no_choices + empty_calls + STOP + DONE
    assert relay(backend, upstream) == ROLE + HI + STOP + DONE


def test_payloads_that_are_not_a_chunk_are_dropped_and_counted(backend: SimpleNamespace) -> None:
    r = backend.Relay()
    out = r.write(ROLE + b"data: keep-alive\n\n" + b"data: 5\n\n" + HI + STOP + DONE) + r.close()
    assert out == ROLE + HI + STOP + DONE
    assert r.verdict.skipped == 2 and r.verdict.complete


def test_invalid_utf8_is_never_forwarded(backend: SimpleNamespace) -> None:
    bad = HI.replace(b'"Hi"', b'"H\xffi"')
    r = backend.Relay()
    out = r.write(ROLE + bad + STOP + DONE) + r.close()
    assert out == ROLE + HI.replace(b'"Hi"', '"H\ufffdi"'.encode()) + STOP + DONE
    assert r.text() == "H\ufffdi"


@pytest.mark.parametrize(
    ("upstream", "error"),
    [
        (
            b'data: {"error":{"message":"The model crashed","type":"server_error","param":null,"code":null}}\n\n',
            '{"error":{"message":"The model crashed","type":"server_error","param":null,"code":null}}',
        ),
        (
            b'data: {"error":"boom"}\n\n',
            '{"error":{"message":"boom","type":"upstream_error","param":null,"code":null}}',
        ),
        (
            b'data: {"error":{"message":"slow down","code":429}}\n\n',
            '{"error":{"message":"slow down","type":"upstream_error","param":null,"code":429}}',
        ),
        (
            b"event: error\ndata: overloaded\n\n",
            '{"error":{"message":"overloaded","type":"upstream_error","param":null,"code":null}}',
        ),
        (
            b'event: error\ndata: {"message":"bad"}\n\n',
            '{"error":{"message":"bad","type":"upstream_error","param":null,"code":null}}',
        ),
    ],
)
def test_error_payload_goes_out_in_the_openai_shape_and_ends_the_stream(
    backend: SimpleNamespace, upstream: bytes, error: str
) -> None:
    r = backend.Relay()
    out = r.write(ROLE + HI + upstream + HI + DONE) + r.close()
    assert out == ROLE + HI + f"data: {error}\n\n".encode()  # nothing after it, no [DONE]
    assert r.verdict.error and not r.verdict.complete
    assert r.result()["error"] == orjson.loads(error)["error"]


def test_comments_are_forwarded_or_dropped(backend: SimpleNamespace) -> None:
    data = (LINT / "compliant-comments.sse").read_bytes()
    assert relay(backend, data) == data
    assert relay(backend, data, comments=False) == (LINT / "compliant.sse").read_bytes()


def test_model_and_id_rewrite(backend: SimpleNamespace) -> None:
    r = backend.Relay(model="gpt-gw", id="chatcmpl-gw")
    out = r.write(usage_stream()) + r.close()
    chunks = [e for e in events(out) if e != "[DONE]"]
    assert len(chunks) == 4
    assert {(c["model"], c["id"]) for c in chunks} == {("gpt-gw", "chatcmpl-gw")}
    result = r.result()
    assert (result["model"], result["id"]) == ("gpt-gw", "chatcmpl-gw")
    assert check_stream(out, expect_usage=True) == []


def test_drop_fields(backend: SimpleNamespace) -> None:
    upstream = (
        ROLE
        + chunk(
            '{"index":0,"delta":{"content":"Hi","x_delta":1},"finish_reason":null,"x_choice":2}', ',"x_top":3'
        )
        + STOP
        + DONE
    )
    assert relay(backend, upstream, drop_fields=("x_top", "x_choice", "x_delta")) == ROLE + HI + STOP + DONE
    assert relay(backend, upstream) == upstream
    r = backend.Relay(drop_fields=["system_fingerprint"])
    fp = HI.replace(b'"model":"m"', b'"model":"m","system_fingerprint":"fp"')
    assert r.write(ROLE + fp + STOP + DONE) + r.close() == ROLE + HI + STOP + DONE


# truncation: a cut upstream reaches the client cut ----------------------------------------------


def test_cut_inside_a_line(backend: SimpleNamespace) -> None:
    r = backend.Relay()
    out = r.write(ROLE + HI[:30]) + r.close()
    assert out == ROLE
    assert r.truncated and r.verdict.truncated and not r.verdict.complete


def test_cut_between_events_without_a_finish(backend: SimpleNamespace) -> None:
    r = backend.Relay()
    out = r.write(ROLE + HI) + r.close()
    assert out == ROLE + HI  # no invented finish_reason, no [DONE]
    verdict = r.verdict
    assert not verdict.truncated and not verdict.done and not verdict.complete
    assert verdict.finish_reasons == (None,)


def test_whole_answer_without_done_gets_done(backend: SimpleNamespace) -> None:
    r = backend.Relay()
    assert r.write(ROLE + HI + STOP) + r.close() == ROLE + HI + STOP + DONE
    assert r.verdict.complete


def test_held_usage_is_not_sent_for_a_cut_stream(backend: SimpleNamespace) -> None:
    r = backend.Relay()
    upstream = ROLE + chunk('{"index":0,"delta":{"content":"Hi"},"finish_reason":null}', "," + USAGE)
    assert r.write(upstream) + r.close() == ROLE + HI
    assert r.result()["usage"]["total_tokens"] == 5  # the gateway still bills what it saw


def test_done_without_finish_is_forwarded_without_inventing_one(backend: SimpleNamespace) -> None:
    r = backend.Relay()
    assert r.write(ROLE + HI + DONE) + r.close() == ROLE + HI + DONE
    assert r.verdict.done and not r.verdict.complete


def test_missing_final_blank_line_keeps_the_last_event(backend: SimpleNamespace) -> None:
    r = backend.Relay()
    assert r.write(ROLE + HI + STOP + b"data: [DONE]\n") + r.close() == ROLE + HI + STOP + DONE
    assert r.verdict.complete and not r.verdict.truncated


def test_nothing_passes_after_done(backend: SimpleNamespace) -> None:
    data = (LINT / "after-done.sse").read_bytes()
    assert relay(backend, data) == (LINT / "compliant.sse").read_bytes()


def test_empty_upstream(backend: SimpleNamespace) -> None:
    r = backend.Relay()
    assert r.write(b"") + r.close() == b""
    assert not r.verdict.complete


# bounds, errors, on_chunk ----------------------------------------------------------------------------


def test_max_event_bytes(backend: SimpleNamespace) -> None:
    big = chunk('{"index":0,"delta":{"content":"' + "x" * 500 + '"},"finish_reason":null}')
    r = backend.Relay(max_event_bytes=300)
    with pytest.raises(EventTooLarge) as info:
        r.write(ROLE + HI + big + HI)
    assert info.value.events == [ROLE + HI]  # what that call had to send, nothing lost
    assert r.write(STOP + DONE) == b""
    assert r.close() == b""  # a stream cut by the bound is not a finished answer
    assert r.verdict.too_large and not r.verdict.complete


def test_bad_input(backend: SimpleNamespace) -> None:
    r = backend.Relay()
    with pytest.raises(TypeError, match="bytes"):
        r.write("data: x\n\n")  # type: ignore[arg-type]
    assert r.write(memoryview(ROLE)) + r.write(bytearray(HI)) == ROLE + HI
    r.close()
    assert r.close() == b""
    with pytest.raises(UsageError, match="after close"):
        r.write(b"x")


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"usage": "sometimes"}, ValueError),
        ({"model": ""}, TypeError),
        ({"id": 5}, TypeError),
        ({"drop_fields": "x_top"}, TypeError),
        ({"max_event_bytes": 0}, ValueError),
    ],
)
def test_bad_options(backend: SimpleNamespace, options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        backend.Relay(**options)


def test_on_chunk_sees_what_is_forwarded_and_can_stop_it(backend: SimpleNamespace) -> None:
    seen: list[Any] = []

    def guard(c: dict[str, Any]) -> bool:
        seen.append(c)
        return "secret" not in orjson.dumps(c).decode()

    secret = HI.replace(b'"Hi"', b'"secret"')
    r = backend.Relay(on_chunk=guard)
    out = r.write(ROLE + HI + secret + HI + STOP + DONE) + r.close()
    assert out == ROLE + HI
    assert len(seen) == 3 and r.verdict.aborted and not r.verdict.complete
    assert r.text() == "Hi"


def test_on_chunk_sees_the_error_and_may_refuse_it(backend: SimpleNamespace) -> None:
    error = b'data: {"error":{"message":"boom","type":"server_error","param":null,"code":null}}\n\n'
    seen: list[Any] = []
    r = backend.Relay(on_chunk=seen.append)
    assert r.write(ROLE + error + HI) + r.close() == ROLE + error
    assert seen[-1] == orjson.loads(error[6:]) and r.verdict.error
    r = backend.Relay(on_chunk=lambda c: "error" not in c)
    assert r.write(ROLE + error + HI) + r.close() == ROLE
    assert r.verdict.aborted and not r.verdict.error and not r.verdict.complete


def test_on_chunk_cannot_reenter(backend: SimpleNamespace) -> None:
    holder: list[Any] = []
    r = backend.Relay(on_chunk=lambda c: holder[0].write(b""))
    holder.append(r)
    with pytest.raises(RuntimeError, match="inside on_chunk"):
        r.write(ROLE)


# the fold: what was forwarded ----------------------------------------------------------------------


def test_result_is_the_fold_of_the_forwarded_stream(backend: SimpleNamespace) -> None:
    for name in ("localai-3.7.sse", "localai-3.7-tools.sse", "id-changed.sse", "final-delta-not-empty.sse"):
        r = backend.Relay()
        out = r.write((LINT / name).read_bytes()) + r.close()
        result = r.result()
        del result["verdict"]
        assert result == folded(backend, out), name


def test_text_runs_without_building_the_result(backend: SimpleNamespace) -> None:
    r = backend.Relay()
    assert r.text() == ""
    r.write(ROLE + HI)
    assert r.text() == "Hi"
    r.write(chunk('{"index":0,"delta":{"content":" there"},"finish_reason":null}'))
    assert r.text() == "Hi there" and r.text(1) == ""


# chunk invariance and the two backends ------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(CASES)), cuts=st.lists(st.integers(0, 2000), max_size=10))
def test_any_chunking_gives_the_same_output(backend: SimpleNamespace, name: str, cuts: list[int]) -> None:
    data = (LINT / name).read_bytes()
    r = backend.Relay()
    out = []
    last = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        out.append(r.write(data[last:cut]))
        last = cut
    out.append(r.write(data[last:]))
    out.append(r.close())
    assert b"".join(out) == relay(backend, data)


def shared_dir() -> pathlib.Path | None:
    env = os.environ.get("FASTSSE_SHARED")
    folder = pathlib.Path(env) if env else pathlib.Path(__file__).resolve().parents[1].parent / "shared"
    return folder if (folder / "recorded" / "chat").is_dir() else None


RECORDED = sorted((shared_dir() or pathlib.Path("/nonexistent")).glob("recorded/chat/*.sse"))


@pytest.mark.c_extension
@pytest.mark.skipif(
    not RECORDED, reason="the recorded streams (../shared/recorded, or FASTSSE_SHARED) are absent"
)
@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_streams(path: pathlib.Path) -> None:
    """Real providers' streams: both backends send the same payloads, chunking never matters,
    no text is lost, no finding is added except the [DONE] an error payload withholds."""
    data = path.read_bytes()
    cython, python = get_backend("cython"), get_backend("python")
    out = relay(cython, data)
    assert relay(cython, data, cut=7) == out
    assert events(relay(python, data)) == events(out)
    assert texts(out) == texts(data)
    added = {f.code for f in check_stream(out)} - {f.code for f in check_stream(data)}
    assert added <= {"missing-done"}
    if "missing-done" in added:
        assert events(out)[-1].get("error")
    upstream = folded(cython, data)
    r = cython.Relay()
    r.write(data)
    r.close()
    mine = r.result()
    for a, b in zip(upstream["choices"], mine["choices"], strict=True):
        assert (a["message"]["content"] or "") == (b["message"]["content"] or "")
        assert a["message"].get("tool_calls") == b["message"].get("tool_calls")
        assert a["finish_reason"] == b["finish_reason"]


def test_server_localai_streams_relay_clean(backend: SimpleNamespace) -> None:
    import httpx

    from fastsse.testing.server import serve_in_thread

    with serve_in_thread(pause=0) as server, httpx.Client(timeout=20) as http:
        for model, expected in (("localai", []), ("localai-tools", ["tool-call-id-reused"])):
            body = {"model": model, "stream": True}
            with http.stream("POST", server.base_url + "/chat/completions", json=body) as response:
                r = backend.Relay()
                out = b"".join(r.write(piece) for piece in response.iter_raw()) + r.close()
            assert sorted({f.code for f in check_stream(out)}) == expected, model
            assert r.verdict.complete


def test_encoder_streams_pass_untouched(backend: SimpleNamespace) -> None:
    enc = ChatChunkEncoder(id="c", model="m", created=1)
    upstream = (
        enc.role()
        + enc.reasoning("think")
        + enc.content("Hi")
        + enc.tool_call(0, id="call_1", name="f", arguments='{"a"')
        + enc.tool_call(0, arguments=":1}")
        + enc.finish("tool_calls")
        + enc.usage({"total_tokens": 1})
        + enc.done()
    )
    assert relay(backend, upstream) == upstream


# generated streams: the compiled fast path and splices against the pure-Python relay -------------

_TEXT = st.sampled_from(["Hi", " there", "", "é", "\u003e", '"q"', "\\", "日本", "\U0001f600", "a\nb"])
_REASON = st.sampled_from([None, "", "stop", "length", "tool_calls", "absent"])


@st.composite
def _upstream_chunk(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["text", "text", "text", "role", "tool", "final", "empty", "usage", "junk"]))
    index = draw(st.sampled_from([0, 0, 0, 1]))
    choice: dict[str, Any] = {"index": index}
    delta: dict[str, Any] = {}
    if kind == "text":
        delta[draw(st.sampled_from(["content", "content", "reasoning_content", "refusal"]))] = draw(_TEXT)
    elif kind == "role":
        delta["role"] = "assistant"
        if draw(st.booleans()):
            delta["content"] = draw(_TEXT)
    elif kind == "tool":
        call: dict[str, Any] = {"index": draw(st.sampled_from([0, 0, 1]))}
        if draw(st.booleans()):
            call["id"] = draw(st.sampled_from(["call_a", "call_b"]))
        if draw(st.booleans()):
            call["type"] = "function"
        function: dict[str, Any] = {}
        if draw(st.booleans()):
            function["name"] = draw(st.sampled_from(["f", "g"]))
        if draw(st.booleans()):
            function["arguments"] = draw(st.sampled_from(['{"a":', "1}", ""]))
        if function or draw(st.booleans()):
            call["function"] = function
        delta["tool_calls"] = [call] if draw(st.integers(0, 5)) else []
    elif kind == "final" and draw(st.booleans()):
        delta["content"] = draw(_TEXT)
    elif kind == "junk":
        return draw(st.sampled_from([b"data: keep-alive\n\n", b": ping\n\n", b"data: [1]\n\n", b"id: 3\n\n"]))
    choice["delta"] = delta
    reason = draw(_REASON) if kind != "final" else draw(st.sampled_from(["stop", "tool_calls", ""]))
    if reason != "absent":
        choice["finish_reason"] = reason
    chunk: dict[str, Any] = {
        "id": draw(st.sampled_from(["c", "c", "c", "d"])),
        "object": draw(st.sampled_from(["chat.completion.chunk"] * 5 + ["chat.completion"])),
        "created": 1,
        "model": "m",
        "choices": [] if kind == "usage" else [choice],
    }
    if kind == "usage" or draw(st.integers(0, 3)) == 0:
        chunk["usage"] = {"prompt_tokens": 1, "completion_tokens": draw(st.integers(0, 9)), "total_tokens": 2}
    if draw(st.integers(0, 4)) == 0:
        chunk["x_provider"] = {"k": 1}
    # orjson's compact bytes, or an upstream with its own formatting (spaces, ASCII escapes)
    payload = orjson.dumps(chunk) if draw(st.booleans()) else json.dumps(chunk).encode()
    if draw(st.integers(0, 9)) == 0:
        return b"data: " + payload.replace(b",", b",\ndata: ", 1) + b"\n\n"  # multi-line data
    return b"data: " + payload + b"\n\n"


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(_upstream_chunk(), max_size=14),
    end=st.sampled_from([b"data: [DONE]\n\n", b"", b'data: {"id":']),
    cuts=st.lists(st.integers(0, 4000), max_size=8),
    options=st.sampled_from(
        [
            {},
            {"usage": "keep"},
            {"usage": "drop"},
            {"model": "gw", "id": "x"},
            {"drop_fields": ["x_provider"]},
        ]
    ),
)
def test_backends_agree_on_generated_streams(
    pieces: list[bytes], end: bytes, cuts: list[int], options: dict[str, Any]
) -> None:
    data = b"".join(pieces) + end
    outputs = {}
    for name in ("cython", "python"):
        try:
            backend = get_backend(name)
        except ImportError:
            continue
        r = backend.Relay(**options)
        out = r.write(data) + r.close()
        pieces_out, last = [], 0
        r2 = backend.Relay(**options)
        for cut in sorted(c % (len(data) + 1) for c in cuts):
            pieces_out.append(r2.write(data[last:cut]))
            last = cut
        pieces_out.append(r2.write(data[last:]) + r2.close())
        assert b"".join(pieces_out) == out, name
        result = r.result()
        assert r2.result() == result
        outputs[name] = (out, result)
        del result["verdict"]
        if r.verdict.complete:
            sent = folded(backend, out)
            if options.get("usage") == "drop":  # folded for billing, never sent
                assert sent["usage"] is None
                sent["usage"] = result["usage"]
            assert result == sent, name  # the fold is the fold of what was sent
        assert b"\r" not in out and all(e == "[DONE]" or isinstance(e, dict) for e in events(out))
    if len(outputs) == 2:
        assert events(outputs["cython"][0]) == events(outputs["python"][0])
        assert outputs["cython"][1] == outputs["python"][1]


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from(["", "x", "stop", "assistant", "call_a"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "index",
                    "delta",
                    "role",
                    "content",
                    "finish_reason",
                    "tool_calls",
                    "id",
                    "type",
                    "function",
                    "name",
                    "arguments",
                    "usage",
                    "choices",
                    "error",
                    "model",
                    "object",
                    "created",
                    "message",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(_JSON, max_size=6))
def test_garbage_never_raises(backend: SimpleNamespace, values: list[Any]) -> None:
    """Whatever JSON an upstream sends where a chunk should be, the relay raises nothing and sends
    only JSON objects or [DONE], each on one data: line."""
    data = b"".join(
        b"data: " + orjson.dumps({"choices": [v], "id": "c"} if i % 2 else v) + b"\n\n"
        for i, v in enumerate(values)
    )
    r = backend.Relay()
    out = r.write(data) + r.close()
    assert all(e == "[DONE]" or isinstance(e, dict) for e in events(out))
    assert all(line.startswith(b"data: ") for line in out.split(b"\n") if line)
    r.result()


def test_engine_relay_format() -> None:
    """``Client.create_stream(request, send, format="relay")``: send gets the compliant bytes, the
    result is the relay's fold; a cut transfer raises and its bytes end without [DONE]."""
    pytest.importorskip("pycurl")
    from fastsse.testing.server import serve_in_thread

    with serve_in_thread(pause=0) as server, fastsse.Client(base_url=server.base_url, timeout=20) as client:
        sent: list[bytes] = []
        result = client.create_stream({"model": "localai-tools", "stream": True}, sent.append, format="relay")
        out = b"".join(sent)
        assert [f.code for f in check_stream(out)] == ["tool-call-id-reused"]
        assert result["verdict"]["complete"] and out.endswith(b"data: [DONE]\n\n")
        assert [c["function"]["name"] for c in result["choices"][0]["message"]["tool_calls"]] == [
            "get_weather",
            "get_time",
        ]
        cut: list[bytes] = []
        with pytest.raises(fastsse.TransportError) as info:
            client.create_stream({"model": "disconnect", "stream": True}, cut.append, format="relay")
        assert b"[DONE]" not in b"".join(cut) and cut
        assert not info.value.result["verdict"]["complete"]
