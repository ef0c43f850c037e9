"""Helpers shared by the chat tests: load the hand-written chat vectors, frame payloads as SSE."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CHAT_VECTORS = sorted((Path(__file__).parent / "vectors" / "chat").glob("*.json"))


def load_chat_vector(path: Path) -> dict[str, Any]:
    """A vector's ``payloads`` hold JSON values; a string is the raw payload text (malformed
    JSON, ``[DONE]``), anything else is sent as its compact JSON encoding."""
    with open(path, encoding="utf-8") as f:
        vector: dict[str, Any] = json.load(f)
    vector["texts"] = [payload_text(p) for p in vector["payloads"]]
    return vector


def payload_text(item: object) -> str:
    if isinstance(item, str):
        return item
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"))


def sse(texts: list[str]) -> bytes:
    """Frame payload texts the way an OpenAI server does: ``data: <payload>\\n\\n`` each."""
    return "".join(f"data: {t}\n\n" for t in texts).encode()


def bare(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without its ``"verdict"``, to compare with a chat.completion written by hand.

    Every fastsse result carries the verdict as a dict (ChatAggregator, ChatStream, create_stream,
    iter_chunks alike); this checks that it is there before setting it aside.
    """
    assert isinstance(result["verdict"], dict), result
    return {key: value for key, value in result.items() if key != "verdict"}


def verdict_subset(verdict: Any, expected: dict[str, Any]) -> dict[str, Any]:
    got = {name: getattr(verdict, name) for name in expected}
    if "finish_reasons" in got:
        got["finish_reasons"] = list(got["finish_reasons"])
    return got


def not_a_stream(result: dict[str, Any]) -> dict[str, Any]:
    """The facts of an answer that was no stream (an HTTP error, a redirect, a 204, a page), after
    checking that the result still has the streamed shape: the API's empty answer, fastsse's facts
    under ``http`` with its ``error`` set (a stream's is None), no fastsse key beside the API's
    fields, and a verdict that is not complete, says there was an error and says why (naming the
    status). ``location`` is in the facts when the answer had one."""
    verdict = result["verdict"]
    http = result["http"]
    assert verdict["complete"] is False and verdict["error"] is True, verdict
    assert isinstance(verdict["why"], str) and f"HTTP {http['status']}" in verdict["why"], verdict
    assert result.get("object") in ("chat.completion", "response") or result.get("type") == "message", result
    assert http["error"] is not None and not {"retry_after", "location", "upstream"} & set(result)
    if result.get("object") == "response":  # a Responses answer's own status and error: null here
        assert result["status"] is None and result["error"] is None, result
    else:
        assert "status" not in result and "error" not in result, result
    facts = {key: http[key] for key in ("error", "status", "retry_after")}
    if http["location"] is not None:
        facts["location"] = http["location"]
    return facts


def without_timing(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without the ``"timing"`` record every client result carries (checked present)."""
    assert isinstance(result.get("timing"), dict), result
    return {key: value for key, value in result.items() if key != "timing"}


def assert_folds_to(result: dict[str, Any], answer: dict[str, Any]) -> None:
    """``result`` (a fold) carries the whole ``chat.completion`` ``answer`` a server sent instead of a
    stream: the same top-level fields, every choice's message fields and finish reason, and a
    complete verdict. The fold's shape adds fields the answer may lack (``refusal: None``...)."""
    for key in ("id", "created", "model", "usage"):
        assert result[key] == answer.get(key), key
    assert result["object"] == "chat.completion"
    assert len(result["choices"]) == len(answer["choices"])
    for got, want in zip(result["choices"], answer["choices"], strict=True):
        assert got["index"] == want["index"] and got["finish_reason"] == want["finish_reason"]
        for key, value in want["message"].items():
            if value is not None:
                assert got["message"][key] == value, key
    assert result["verdict"]["complete"] is True and result["verdict"]["why"] is None
