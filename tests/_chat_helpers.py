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


def verdict_subset(verdict: Any, expected: dict[str, Any]) -> dict[str, Any]:
    got = {name: getattr(verdict, name) for name in expected}
    if "finish_reasons" in got:
        got["finish_reasons"] = list(got["finish_reasons"])
    return got
