"""Resuming a cut background Responses stream (``client/_resume.py``): the loopback server keeps
each background response and cuts the first connection halfway; the resumed fold must equal the
uncut one, with no event folded twice and a skipped one detected."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import fastsse
from fastsse.client._resume import Resumable

BODY = {"input": "hi", "background": True}

pytestmark = pytest.mark.usefixtures("library_defaults")


def _text(result: dict[str, Any]) -> str:
    return result["output"][0]["content"][0]["text"]


def test_a_cut_background_stream_resumes_to_the_uncut_answer(stream_backend: Any, server: Any) -> None:
    seen: list[int] = []
    result = fastsse.create_stream(
        {"model": "cut-resume", **BODY},
        lambda e: seen.append(e["sequence_number"]),
        api="responses",
        base_url=server.base_url,
        timing=True,
    )
    whole = fastsse.create_stream(
        {"model": "plain", "input": "hi"}, api="responses", base_url=server.base_url
    )
    verdict = result.pop("verdict")
    assert verdict["complete"] and verdict["resumes"] == 1 and verdict["repeated_events"] == 0
    assert _text(result) == _text(whole) and result["usage"] == whole["usage"]
    assert seen == list(range(len(seen)))  # every event once, in order, none missing
    assert result["timing"]["attempts"] == 2


def test_the_resume_asks_from_the_last_whole_event(stream_backend: Any, server: Any) -> None:
    result = fastsse.create_stream({"model": "cut-resume", **BODY}, api="responses", base_url=server.base_url)
    rid = result["id"]
    gets = [path for method, path in server.requested if method == "GET" and f"/{rid}?" in path]
    assert len(gets) == 1 and "stream=true" in gets[0] and "starting_after=" in gets[0]
    after = int(gets[0].rsplit("=", 1)[1])
    events = server.background[gets[0].split("/")[3].split("?")[0]]
    assert after == events[len(events) // 2 - 1][0]  # the last event the first connection sent whole


def test_a_repeated_event_is_not_folded_twice(stream_backend: Any, server: Any) -> None:
    result = fastsse.create_stream(
        {"model": "cut-resume-repeat", **BODY}, api="responses", base_url=server.base_url
    )
    whole = fastsse.create_stream(
        {"model": "plain", "input": "hi"}, api="responses", base_url=server.base_url
    )
    assert result["verdict"]["complete"] and result["verdict"]["repeated_events"] == 1
    assert _text(result) == _text(whole)


def test_a_skipped_event_makes_the_answer_incomplete(stream_backend: Any, server: Any) -> None:
    result = fastsse.create_stream(
        {"model": "cut-resume-skip", **BODY}, api="responses", base_url=server.base_url
    )
    verdict = result["verdict"]
    assert (
        not verdict["complete"]
        and "skipped events" in verdict["why"]
        and "sequence_gap" in verdict["departures"]
    )


def test_resume_false_leaves_the_cut_to_the_caller(stream_backend: Any, server: Any) -> None:
    with pytest.raises(fastsse.TransportError) as info:
        fastsse.create_stream(
            {"model": "cut-resume", **BODY}, api="responses", base_url=server.base_url, resume=False
        )
    assert info.value.result["verdict"]["truncated"] and not info.value.result["verdict"]["complete"]


def test_a_foreground_request_is_never_resumed(stream_backend: Any, server: Any) -> None:
    before = len([m for m, _ in server.requested if m == "GET"])
    with pytest.raises(fastsse.TransportError):
        fastsse.create_stream(
            {"model": "disconnect", "input": "hi"}, api="responses", base_url=server.base_url
        )
    assert len([m for m, _ in server.requested if m == "GET"]) == before


def test_resume_through_a_translator_and_the_async_client(stream_backend: Any, server: Any) -> None:
    async def main() -> tuple[list[bytes], dict[str, Any]]:
        sent: list[bytes] = []
        async with fastsse.AsyncClient(base_url=server.base_url, api="responses") as client:
            result = await client.create_stream(
                {"model": "cut-resume", **BODY}, sent.append, format="to-chat"
            )
        return sent, result

    sent, result = asyncio.run(main())
    out = b"".join(sent)
    assert result["verdict"]["complete"] and out.endswith(b"data: [DONE]\n\n")
    folded = fastsse.ChatStream()
    folded.write(out)
    folded.close()
    assert folded.result()["choices"][0]["message"]["content"].startswith("Hello!")
    assert folded.verdict.complete


@pytest.mark.parametrize("cut", [1, 7, 13, 40, 200])
def test_the_pass_through_keeps_whole_events_only(stream_backend: Any, cut: int) -> None:
    events = (
        b'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"r1"}}\r\n\r\n'
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":1,'
        b'"output_index":0,"content_index":0,"delta":"Hi"}\r\r'
        b": ping\n\n"
        b'data: {"type":"response.output_text.delta","sequence_number":2,"output_index":0,"content_index":0,"delta":"!"}\n\n'
    )
    seen: list[bytes] = []

    class Inner:
        def write(self, data: bytes) -> None:
            seen.append(data)

    stream = Resumable(Inner())
    for i in range(0, len(events), cut):
        stream.write(events[i : i + cut])
    assert b"".join(seen) == events and stream.tail == b""
    assert (stream.response_id, stream.last_sequence, stream.terminal) == ("r1", 2, False)
