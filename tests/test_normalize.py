"""Normalizer: LocalAI-style streams come out lint-clean, text is never invented or lost, chunking never matters."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsse import ChatChunkEncoder, Normalizer, check_stream
from fastsse._decoder_py import Decoder

LINT = pathlib.Path(__file__).parent / "vectors" / "lint"
CASES: dict[str, dict] = json.loads((LINT / "cases.json").read_text(encoding="utf-8"))

# Departures the normaliser leaves alone on purpose: failures stay visible (error, truncation),
# payloads it cannot parse pass through, and tool-call indexes or reused ids it cannot repair
# without inventing something. For these it must not add findings, only keep or remove them.
NOT_REPAIRED = {
    "error-object.sse",
    "truncated.sse",
    "invalid-json.sse",
    "invalid-utf8.sse",
    "malformed-chunk.sse",
    "delta-after-finish.sse",
    "tool-call-without-index.sse",
    "tool-call-index-gap.sse",
    "tool-call-id-reused.sse",
    "tool-call-incomplete.sse",
    "localai-3.7-tools.sse",
    # reasoning only in reasoning_details: copying it into "reasoning" would show it twice to
    # clients that read both
    "reasoning-field.sse",
}


def normalize(data: bytes, cut: int | None = None) -> bytes:
    norm = Normalizer()
    out = []
    step = cut or len(data) or 1
    for k in range(0, len(data), step):
        out.append(norm.write(data[k : k + step]))
    out.append(norm.close())
    return b"".join(out)


def texts(stream: bytes) -> dict[tuple[int, str], str]:
    """Every text a stream delivers, per (choice, field); tool arguments per call. [DONE] ends it."""
    decoder = Decoder()
    events = decoder.feed(stream) + decoder.close()
    out: dict[tuple[int, str], str] = {}
    for event in events:
        if event.data == "[DONE]":
            break
        try:
            chunk = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            continue
        for choice in chunk.get("choices") or [] if isinstance(chunk, dict) else []:
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
                if delta.get(key):
                    out[(index, key)] = out.get((index, key), "") + delta[key]
            for call in delta.get("tool_calls") or []:
                args = (call.get("function") or {}).get("arguments")
                if args:
                    key2 = (index, f"tool{call.get('index')}")
                    out[key2] = out.get(key2, "") + args
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture(name: str) -> None:
    data = (LINT / name).read_bytes()
    out = normalize(data)
    assert normalize(data, cut=1) == out
    assert normalize(data, cut=5) == out
    before = {f.code for f in check_stream(data)}
    after = {f.code for f in check_stream(out)}
    if name in NOT_REPAIRED:
        assert after <= before
    else:
        assert after == set(), (name, after)
    assert texts(out) == texts(data)
    if name.startswith(("compliant", "localai")):
        assert texts(out)  # the comparison above is not vacuous


@pytest.mark.parametrize("name", ["compliant.sse", "compliant-tools.sse", "compliant-comments.sse"])
def test_compliant_streams_pass_byte_for_byte(name: str) -> None:
    data = (LINT / name).read_bytes()
    assert normalize(data) == data
    assert normalize(data, cut=3) == data


def test_localai_exact_output() -> None:
    out = normalize((LINT / "localai-3.7.sse").read_bytes())
    head = (
        '{"created":1762700000,"object":"chat.completion.chunk","id":"0b4e3b1e-5c1c-4b7a-9a55-3f4f2d0c8e11",'
        '"model":"qwen3-8b","choices":[{"index":0,"finish_reason":'
    )
    usage = ',"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}'
    expected = [
        head + 'null,"delta":{"role":"assistant"}}]' + usage,
        head + 'null,"delta":{"content":"Hello"}}]' + usage,
        head + 'null,"delta":{"content":"!"}}]' + usage,
        head + 'null,"delta":{"content":" How can I help?"}}]' + usage,
        head + '"stop","delta":{}}]' + usage,
        "[DONE]",
    ]
    assert out == b"".join(f"data: {line}\n\n".encode() for line in expected)


def test_localai_tools_keep_each_id_and_name_once() -> None:
    out = normalize((LINT / "localai-3.7-tools.sse").read_bytes())
    assert [f.code for f in check_stream(out)] == ["tool-call-id-reused"]  # ids cannot be repaired honestly
    assert out.count(b'"id":"0b4e3b1e"') == 2 and out.count(b'"role"') == 1


def test_content_moves_out_of_the_final_chunk() -> None:
    data = (LINT / "final-delta-not-empty.sse").read_bytes()
    out = normalize(data)
    events = Decoder().feed(out)
    chunks = [orjson.loads(e.data) for e in events[:-1]]
    assert chunks[-2]["choices"] == [{"index": 0, "delta": {"content": " there"}, "finish_reason": None}]
    assert chunks[-1]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert events[-1].data == "[DONE]"


def test_missing_final_chunk_and_done_are_added() -> None:
    enc = ChatChunkEncoder(id="c", model="m", created=1)
    upstream = enc.role() + enc.tool_call(0, id="call_1", name="f", arguments="{}") + enc.content("x")
    out = normalize(upstream)
    assert out.startswith(upstream)
    assert out[len(upstream) :] == (
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
    )
    assert check_stream(out) == []


def test_final_chunks_come_before_usage() -> None:
    enc = ChatChunkEncoder(id="c", model="m", created=1)
    upstream = enc.role() + enc.content("x") + b'data: {"id":"c","choices":[],"usage":{"total_tokens":1}}\n\n'
    out = normalize(upstream)
    assert check_stream(out, expect_usage=True) == []
    assert out.index(b'"finish_reason":"stop"') < out.index(b'"usage"')


def test_truncated_upstream_is_not_papered_over() -> None:
    enc = ChatChunkEncoder(id="c", model="m", created=1)
    role = enc.role()
    upstream = role + enc.content("partial")[:20]
    norm = Normalizer()
    out = norm.write(upstream) + norm.close()
    assert norm.truncated
    assert out == role
    assert b"[DONE]" not in out


def test_error_is_forwarded_without_done() -> None:
    data = (LINT / "error-object.sse").read_bytes()
    out = normalize(data)
    assert out.endswith(b'"message":"The model crashed","type":"server_error","param":null,"code":null}}\n\n')
    assert b"[DONE]" not in out


def test_framing_repairs() -> None:
    data = b"\xef\xbb\xbf" + (LINT / "compliant.sse").read_bytes().replace(b"\n", b"\r\n")
    assert normalize(data) == (LINT / "compliant.sse").read_bytes()
    cr = (LINT / "compliant.sse").read_bytes().replace(b"\n", b"\r")
    assert normalize(cr, cut=1) == (LINT / "compliant.sse").read_bytes()


def test_nothing_passes_after_done() -> None:
    data = (LINT / "after-done.sse").read_bytes()
    assert normalize(data) == (LINT / "compliant.sse").read_bytes()


def test_incremental_output() -> None:
    enc = ChatChunkEncoder(id="c", model="m", created=1)
    norm = Normalizer()
    role = enc.role()
    assert norm.write(role[:10]) == b""
    assert norm.write(role[10:]) == role
    assert norm.write(b": keep-alive\n\n") == b": keep-alive\n\n"
    assert norm.close().endswith(b"data: [DONE]\n\n")
    assert norm.close() == b""
    with pytest.raises(ValueError, match="after close"):
        norm.write(b"x")
    with pytest.raises(TypeError, match="bytes"):
        Normalizer().write("data: x\n\n")  # type: ignore[arg-type]


def test_server_localai_stream_normalises_clean() -> None:
    import httpx

    from fastsse.testing.server import serve_in_thread

    with serve_in_thread(pause=0) as server, httpx.Client(timeout=20) as http:
        body = {"model": "localai", "stream": True}
        with http.stream("POST", server.base_url + "/chat/completions", json=body) as response:
            norm = Normalizer()
            out = b"".join(norm.write(piece) for piece in response.iter_raw()) + norm.close()
    assert check_stream(out) == []


@settings(max_examples=80, deadline=None)
@given(name=st.sampled_from(sorted(CASES)), cuts=st.lists(st.integers(0, 2000), max_size=10))
def test_any_chunking_gives_the_same_output(name: str, cuts: list[int]) -> None:
    data = (LINT / name).read_bytes()
    norm = Normalizer()
    out = []
    last = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        out.append(norm.write(data[last:cut]))
        last = cut
    out.append(norm.write(data[last:]))
    out.append(norm.close())
    assert b"".join(out) == normalize(data)
