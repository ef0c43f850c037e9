"""Helpers shared by the Responses / Messages tests: load the hand-written vectors, frame events
as SSE, find the recorded corpus, and fold a byte stream every way a caller can."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
VECTORS = Path(__file__).parent / "vectors" / "formats"
CHUNKINGS = (None, 1, 3, 17, 256)  # None: the whole stream in one write


def load_vectors(api: str) -> list[dict[str, Any]]:
    with open(VECTORS / f"{api}.json", encoding="utf-8") as f:
        vectors: list[dict[str, Any]] = json.load(f)
    return vectors


def payload_text(item: object) -> str:
    return item if isinstance(item, str) else json.dumps(item, ensure_ascii=False, separators=(",", ":"))


def frame(events: list[Any], *, named: bool) -> bytes:
    """``event: <type>`` (when ``named`` and the payload has a type) and ``data: <payload>``."""
    out = []
    for item in events:
        if named and isinstance(item, dict) and isinstance(item.get("type"), str):
            out.append(f"event: {item['type']}\n")
        out.append(f"data: {payload_text(item)}\n\n")
    return "".join(out).encode()


def shared_dir() -> Path | None:
    """The ``shared`` folder beside the checkout, or FASTSSE_SHARED; None when neither exists."""
    env = os.environ.get("FASTSSE_SHARED")
    for candidate in ([Path(env)] if env else []) + [ROOT.parent / "shared"]:
        if (candidate / "recorded" / "formats" / "manifest.json").is_file():
            return candidate
    return None


def recorded_dir() -> Path:
    found = shared_dir()
    if found is None:
        pytest.skip(
            "the recorded corpus (../shared/recorded/formats, or FASTSSE_SHARED) is not beside this checkout"
        )
    return found / "recorded" / "formats"


def classes(backend: SimpleNamespace, api: str) -> tuple[Any, Any]:
    if api == "responses":
        return backend.ResponsesAggregator, backend.ResponsesStream
    return backend.MessagesAggregator, backend.MessagesStream


def fold_stream(
    backend: SimpleNamespace, api: str, data: bytes, size: int | None
) -> tuple[dict[str, Any], Any]:
    """Fold ``data`` through the fused stream in writes of ``size`` bytes: (result, verdict)."""
    _, stream_cls = classes(backend, api)
    stream = stream_cls()
    step = size or max(len(data), 1)
    for i in range(0, len(data), step):
        if stream.write(data[i : i + step]) == 0:
            break
    stream.close()
    out = stream.result()
    out.pop("verdict")
    return out, stream.verdict


def fold_events(backend: SimpleNamespace, api: str, data: bytes) -> tuple[dict[str, Any], Any]:
    """Decode ``data`` into Events and fold each with ``feed_event``: (result, verdict)."""
    agg_cls, _ = classes(backend, api)
    agg = agg_cls()
    decoder = backend.Decoder()
    for event in decoder.feed(data):
        agg.feed_event(event)
    decoder.close()
    return agg.result(), agg.verdict


def fold_payloads(backend: SimpleNamespace, api: str, texts: list[str]) -> tuple[dict[str, Any], Any]:
    agg_cls, _ = classes(backend, api)
    agg = agg_cls()
    for text in texts:
        agg.feed_data(text.encode())
    return agg.result(), agg.verdict
