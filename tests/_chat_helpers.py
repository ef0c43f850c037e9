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
