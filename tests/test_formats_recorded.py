"""The 48 recorded Responses and Messages streams (../shared/recorded/formats, with provenance in
its manifest.json) folded on both backends in several chunkings and through ``feed_event``.

What each fold must hold is in tests/vectors/formats/recorded.json, derived from the streams with
jq alone by tests/vectors/_derive_recorded.sh (long texts as length, first and last 40
characters); the verdicts below are written by hand from the manifest's notes on each stream.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from _formats_helpers import VECTORS, fold_events, fold_stream, recorded_dir

with open(VECTORS / "recorded.json", encoding="utf-8") as _f:
    EXPECTED: dict[str, dict[str, Any]] = json.load(_f)

# Streams that are not complete, or that departed from the grammar; every other stream is
# complete with no departure.
# A response.incomplete (r12, r13, r20: a max_output_tokens limit) is complete: the answer ended
# as the Responses API ends one a limit stopped, as chat's finish_reason "length" does; its status
# ("incomplete") and incomplete_details carry the reason.
VERDICTS: dict[str, dict[str, Any]] = {
    "r14-openai-error-then-failed": {"why": "error: insufficient_quota", "error": True},
    "r18-openrouter-data-only-reasoning-text": {"departures": ["terminal_ids_differ"]},
    "r20-xai-incomplete-mid-message": {"departures": ["item_not_done"]},
    # The last event (message_stop) has no closing blank line: by the SSE rules it never arrived.
    "m03-anthropic-text-then-tool-use": {"why": "the byte stream ended inside an event", "truncated": True},
    "m12-anthropic-error-midstream-fragment": {
        "why": "error: api_error",
        "error": True,
        "departures": ["block_not_started", "no_message_start", "block_not_stopped"],
    },
    "m13-docs-error-event": {"why": "error: overloaded_error", "error": True},
    "m25-anthropic-max-tokens-mid-tool-input": {
        "why": "the byte stream ended inside an event",
        "truncated": True,
        "departures": ["block_not_stopped"],
    },
}


def same_text(got: Any, expected: Any) -> bool:
    if isinstance(expected, dict) and set(expected) == {"len", "prefix", "suffix"}:
        return (
            isinstance(got, str)
            and len(got) == expected["len"]
            and got.startswith(expected["prefix"])
            and got.endswith(expected["suffix"])
        )
    return bool(got == expected)


def check_responses(result: dict[str, Any], expect: dict[str, Any]) -> None:
    for key in ("status", "usage", "incomplete_details", "error"):
        assert result[key] == expect[key], key
    assert len(result["output"]) == len(expect["output"])
    for got, want in zip(result["output"], expect["output"], strict=True):
        for key in ("type", "id", "status", "name", "call_id"):
            assert got.get(key) == want.get(key), key
        for key in ("arguments", "code"):
            if key in want:
                assert same_text(got.get(key), want[key]), key
        for part in want["content"]:
            held = got["content"][part["index"]]
            assert held["type"] == part["type"]
            assert same_text(held["refusal" if part["type"] == "refusal" else "text"], part["text"])
        for i, text in enumerate(want["summary"]):
            assert same_text(got["summary"][i]["text"], text)
        if want["annotations"]:
            assert sum(len(p.get("annotations") or []) for p in got["content"]) == want["annotations"]


def check_messages(result: dict[str, Any], expect: dict[str, Any]) -> None:
    for key in ("id", "model", "stop_reason", "stop_sequence", "usage"):
        assert result[key] == expect[key], key
    assert result.get("error") == expect["error"]
    assert len(result["content"]) == len(expect["content"])
    for got, want in zip(result["content"], expect["content"], strict=True):
        for key in ("type", "id", "name", "tool_use_id", "input"):
            assert got.get(key) == want.get(key), key
        for key in ("text", "thinking", "signature", "data", "partial_json"):
            if key in want:
                assert same_text(got.get(key), want[key]), key
        if want["citations"]:
            assert len(got["citations"]) == want["citations"]


def check(name: str, result: dict[str, Any], verdict: Any, *, through_stream: bool) -> None:
    entry = EXPECTED[name]
    expect = entry["expect"]
    (check_responses if entry["api"] == "responses" else check_messages)(result, expect)
    notes = VERDICTS.get(name, {})
    why = notes.get("why")
    if notes.get("truncated") and not through_stream:
        why = "no terminal event"  # an aggregator fed events never sees the unfinished one
    assert verdict.terminal == expect["terminal"]
    assert verdict.why == why
    assert verdict.complete is (why is None)
    assert list(verdict.departures) == notes.get("departures", [])
    assert verdict.error is notes.get("error", False)
    assert verdict.truncated is (through_stream and notes.get("truncated", False))
    assert verdict.skipped == verdict.malformed == 0


@pytest.fixture(scope="module")
def corpus() -> Path:
    return recorded_dir()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_stream(backend: SimpleNamespace, corpus: Path, name: str) -> None:
    entry = EXPECTED[name]
    data = (corpus / entry["api"] / f"{name}.sse").read_bytes()
    sizes: list[int | None] = [None, 7, 4096]
    if len(data) < 20_000:
        sizes.append(1)
    for size in sizes:
        result, verdict = fold_stream(backend, entry["api"], data, size)
        check(name, result, verdict, through_stream=True)
    result, verdict = fold_events(backend, entry["api"], data)
    check(name, result, verdict, through_stream=False)


def test_corpus_is_whole(corpus: Path) -> None:
    with open(corpus / "manifest.json", encoding="utf-8") as f:
        manifest = json.load(f)
    assert sorted(s["id"] for s in manifest["streams"]) == sorted(EXPECTED)
