"""Seed inputs for both fuzz targets, made from the repository's own streams.

``python fuzz/make_corpus.py DIR`` writes them as files (libFuzzer's corpus format); ``seeds()``
returns them for the pytest smoke run. Sources: the SSE golden and regression vectors, the chat
vectors (each as an SSE stream and as payload lines for mode 2), ``examples/*.sse``, and the chat
vectors translated to Messages and Responses by the pure-Python translators (the translator
target's upstreams). Each seed is an 8-byte header (see ``_harness.Input``) and the stream.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "tests" / "vectors"


def header(limit: int = 0, kind: int = 0, mode: int = 0, stop_at: int = 0, seed: int = 0) -> bytes:
    return bytes([limit, kind, mode, stop_at]) + seed.to_bytes(4, "little")


def _sse_streams() -> list[bytes]:
    out = []
    for name in ("sse.json", "regressions.json"):
        path = VECTORS / name
        if path.exists():
            out += [v["input"].encode(v["encoding"]) for v in json.loads(path.read_text("utf-8"))]
    out += [p.read_bytes() for p in sorted((ROOT / "examples").glob("*.sse"))]
    return out


def _chat_payloads() -> list[list[bytes]]:
    out = []
    for path in sorted((VECTORS / "chat").glob("*.json")):
        payloads = json.loads(path.read_text("utf-8")).get("payloads")
        if isinstance(payloads, list):
            out.append(
                [
                    p.encode() if isinstance(p, str) else json.dumps(p, separators=(",", ":")).encode()
                    for p in payloads
                ]
            )
    return out


def _translated(streams: list[bytes]) -> list[bytes]:
    """Each chat stream as Messages and as Responses events, as the pure translators write them
    (``created`` fixed, so the seed files are the same on every run)."""
    import fastsse

    py = fastsse.get_backend("python")
    out = []
    for stream in streams:
        stream = stream.replace(b'"model"', b'"created":1700000000,"model"', 1)
        for make in (py.ChatToMessages, py.ChatToResponses):
            t = make()
            out.append(t.write(stream) + t.close())
    return out


def seeds() -> list[bytes]:
    out = []
    for i, stream in enumerate(_sse_streams()):
        out.append(header() + stream)
        out.append(header(limit=24, kind=i % 3, seed=4 * i + 2) + stream)
        out.append(header(seed=1) + stream)  # byte by byte
    for i, payloads in enumerate(_chat_payloads()):
        out.append(header(seed=4 * i + 2) + b"".join(b"data: " + p + b"\n\n" for p in payloads))
        out.append(header(mode=2, stop_at=i % 16) + b"\n".join(payloads))
    chat = [b"".join(b"data: " + p + b"\n\n" for p in payloads) for payloads in _chat_payloads()]
    for i, stream in enumerate(_translated(chat)):
        if stream:
            out.append(header(seed=4 * i + 2) + stream)
    return out


def main() -> None:
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    for seed in seeds():
        (target / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    print(f"{len(seeds())} seeds in {os.fspath(target)}")


if __name__ == "__main__":
    main()
