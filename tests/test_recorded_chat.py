"""The 48 streams recorded from real providers (shared/recorded/chat) fold to what
tests/vectors/recorded_chat.json says, on both backends, through Decoder + feed_event and through
ChatStream.write in several chunkings, and the linter finds exactly the codes listed there.

The expectations were written from the rules and read from the streams with jq, never printed by
fastsse (see the file's description)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import fastsse
from _recorded import recorded
from fastsse import check_stream

VECTOR = Path(__file__).parent / "vectors" / "recorded_chat.json"
STREAMS: list[dict[str, Any]] = json.loads(VECTOR.read_text(encoding="utf-8"))["streams"]
IDS = [s["file"].removesuffix(".sse") for s in STREAMS]


def _pieces(data: bytes, how: str) -> list[bytes]:
    if how == "whole":
        return [data]
    if how == "random":
        rng = random.Random(len(data))
        out, at = [], 0
        while at < len(data):
            step = rng.randint(1, 300)
            out.append(data[at : at + step])
            at += step
        return out
    step = int(how)
    return [data[i : i + step] for i in range(0, len(data), step)]


def _same_text(expected: Any, actual: Any) -> bool:
    """A short text is listed whole; a long one as its first and last 40 characters and length."""
    if isinstance(expected, dict):
        return (
            isinstance(actual, str)
            and len(actual) == expected["length"]
            and actual[:40] == expected["head"]
            and actual[-40:] == expected["tail"]
        )
    return actual == expected


def _check_result(result: dict[str, Any], want: dict[str, Any]) -> None:
    for key in ("id", "model", "created", "usage"):
        assert result[key] == want[key], key
    assert result.get("error") == want["error"]
    assert [c["index"] for c in result["choices"]] == [c["index"] for c in want["choices"]]
    for choice, expected in zip(result["choices"], want["choices"], strict=True):
        message = choice["message"]
        assert choice["finish_reason"] == expected["finish_reason"]
        assert message["role"] == expected["role"]
        for field in ("content", "reasoning_content", "reasoning", "refusal"):
            assert _same_text(expected[field], message.get(field)), field
        if "text" in expected:
            assert _same_text(expected["text"], choice["text"])
        calls = [
            {
                "id": c["id"],
                "type": c["type"],
                "name": c["function"]["name"],
                "arguments": c["function"]["arguments"],
            }
            for c in message.get("tool_calls", [])
        ]
        assert calls == expected["tool_calls"]
        urls = [a["url_citation"]["url"] for a in message.get("annotations", [])]
        assert urls == expected.get("annotation_urls", [])
        details = message.get("reasoning_details", [])
        assert len(details) == len(expected.get("reasoning_details", []))
        for part, want_part in zip(details, expected.get("reasoning_details", []), strict=True):
            assert part.keys() == want_part.keys()
            for key, value in want_part.items():
                assert _same_text(value, part[key]), key
        assert "content_parts" not in message


def _check_verdict(verdict: Any, want: dict[str, Any], *, closed: bool) -> None:
    v = want["verdict"]
    assert verdict.complete is v["complete_closed" if closed else "complete_open"]
    assert verdict.done is v["done"]
    assert verdict.error is v["error"]
    assert list(verdict.finish_reasons) == v["finish_reasons"]
    assert verdict.usage is v["usage"]
    assert (verdict.skipped, verdict.malformed, verdict.unknown_parts) == (
        v["skipped"],
        v["malformed"],
        v["unknown_parts"],
    )
    assert verdict.truncated is False


@pytest.mark.parametrize("how", ["whole", "1", "7", "random"])
@pytest.mark.parametrize("want", STREAMS, ids=IDS)
def test_decoder_and_feed_event(backend: SimpleNamespace, want: dict[str, Any], how: str) -> None:
    data = recorded("chat", want["file"])
    decoder = backend.Decoder()
    agg = backend.ChatAggregator()
    for piece in _pieces(data, how):
        for event in decoder.feed(piece):
            agg.feed_event(event)
    _check_result(agg.result(), want)
    _check_verdict(agg.verdict, want, closed=False)
    decoder.close()
    agg.close(truncated=decoder.truncated)
    _check_verdict(agg.verdict, want, closed=True)


@pytest.mark.parametrize("how", ["whole", "1", "7", "random"])
@pytest.mark.parametrize("want", STREAMS, ids=IDS)
def test_chat_stream_write(backend: SimpleNamespace, want: dict[str, Any], how: str) -> None:
    data = recorded("chat", want["file"])
    stream = backend.ChatStream()
    for piece in _pieces(data, how):
        if stream.write(piece) == 0:
            break
    _check_verdict(stream.verdict, want, closed=False)
    stream.close()
    result = stream.result()
    verdict = result.pop("verdict")
    _check_result(result, want)
    _check_verdict(stream.verdict, want, closed=True)
    assert verdict["complete"] is want["verdict"]["complete_closed"]


@pytest.mark.parametrize("want", STREAMS, ids=IDS)
def test_chunks_seen_by_on_chunk_fold_alike(backend: SimpleNamespace, want: dict[str, Any]) -> None:
    """With an on_chunk the compiled stream builds every chunk (no fast reader): same fold."""
    data = recorded("chat", want["file"])
    seen: list[Any] = []
    stream = backend.ChatStream(seen.append)
    for piece in _pieces(data, "7"):
        if stream.write(piece) == 0:
            break
    stream.close()
    result = stream.result()
    result.pop("verdict")
    _check_result(result, want)
    _check_verdict(stream.verdict, want, closed=True)
    assert seen and all(type(chunk) is dict for chunk in seen)


@pytest.mark.c_extension
@pytest.mark.parametrize("want", STREAMS, ids=IDS)
def test_backends_agree_on_everything(want: dict[str, Any]) -> None:
    """Beyond the listed fields: the whole result, verdict included, is the same on both backends
    (the compiled fast reader never diverges from the Python twin on what providers send)."""
    data = recorded("chat", want["file"])
    results = []
    for name in ("cython", "python"):
        stream = fastsse.get_backend(name).ChatStream()
        stream.write(data)
        stream.close()
        results.append(stream.result())
    assert results[0] == results[1]


@pytest.mark.parametrize("how", ["whole", "7", "random"])
@pytest.mark.parametrize("want", STREAMS, ids=IDS)
def test_linter_findings(want: dict[str, Any], how: str) -> None:
    data = recorded("chat", want["file"])
    from fastsse import StreamChecker

    checker = StreamChecker()
    for piece in _pieces(data, how):
        checker.feed(piece)
    checker.close()
    assert sorted({f.code for f in checker.findings}) == want["lint"]
    if how == "whole":
        assert sorted({f.code for f in check_stream(data)}) == want["lint"]


@pytest.mark.parametrize(
    "name", ["28-mistral-magistral-content-parts.sse", "48-mistral-magistral-answer-in-text-part.sse"]
)
def test_normalizer_writes_content_parts_as_strings(backend: SimpleNamespace, name: str) -> None:
    """A gateway's Normalizer turns Mistral's parts into the strings clients expect, and the
    fold of its output is the fold of the original."""
    from fastsse import Normalizer

    data = recorded("chat", name)
    norm = Normalizer()
    out = norm.write(data) + norm.close()
    assert "content-parts" not in {f.code for f in check_stream(out)}
    folds = []
    for stream_bytes in (data, out):
        stream = backend.ChatStream()
        stream.write(stream_bytes)
        stream.close()
        message = stream.result()["choices"][0]["message"]
        folds.append((message["content"], message["reasoning_content"]))
    assert folds[0] == folds[1]
    want = next(s for s in STREAMS if s["file"] == name)["choices"][0]
    assert _same_text(want["content"], folds[1][0]) and _same_text(want["reasoning_content"], folds[1][1])
