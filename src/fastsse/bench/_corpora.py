"""Deterministic benchmark corpora: the byte streams that ``python -m fastsse bench`` and the
pytest-benchmark suite in ``benchmarks/`` time, and the ways they are cut into reads.

Every corpus is built from a fixed seed, so two runs (and two machines) time the same bytes. The
corpora live in the package rather than in ``benchmarks/`` because the ``bench`` command must work
from an installed wheel. ``scale`` shrinks a corpus for the quick runs (plain-test mode, ``--quick``);
the shapes stay the same.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

import orjson

from .._errors import InvalidRequest

SEED: Final = 20250601
CHUNKINGS: Final = ("64B", "1KiB", "16KiB", "random", "event")
CORPORA: Final = ("chat", "tools", "large", "crlf")

_FIXED_SIZES: Final = {"64B": 64, "1KiB": 1024, "16KiB": 16384}
_DONE: Final = b"data: [DONE]\n\n"
_CREATED: Final = 1748736000
_MODEL: Final = "gpt-4o-mini-2024-07-18"
_FINGERPRINT: Final = "fp_34a54ae93c"

# Prose for the content deltas: mostly ASCII, about one word in twelve is not (Latin accents,
# CJK, emoji, typographic punctuation), as in real multilingual answers.
_PROSE: Final = (
    "the of and to in is that for it as with was on be by this are from or an which at can model stream "
    "token server client event data chunk answer function request response value result first second "
    "because however returns parses buffer memory python string bytes line field decoder aggregate"
)
_WORDS: Final = _PROSE.split()
_NON_ASCII: Final = (
    "café",
    "naïve",
    "Größe",
    "über",
    "日本語",
    "数据",
    "😀",
    "—",
    "€",
    "résumé",
    "ñandú",
    "Ωmega",
)


@dataclass(frozen=True)
class Corpus:
    """One byte stream and what a correct decoder must produce from it.

    ``events`` are the stream's bytes cut at event boundaries (comments ride with the event that
    follows them), ``datas`` the UTF-8 data of every event a decoder dispatches, ``types`` their
    event types, and ``chunks`` the JSON-decoded payloads (for the chat corpora; ``[DONE]`` is
    dispatched as an event but is not a chunk).
    """

    name: str
    description: str
    events: tuple[bytes, ...]
    datas: tuple[bytes, ...]
    types: tuple[str, ...]
    chat: bool = False
    _cache: dict[str, list[bytes]] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def raw(self) -> bytes:
        return b"".join(self.events)

    @property
    def nbytes(self) -> int:
        return len(self.raw)

    @property
    def nevents(self) -> int:
        """Events a decoder dispatches (``[DONE]`` included)."""
        return len(self.datas)

    @cached_property
    def payloads(self) -> list[str]:
        """Every dispatched event's data as ``str``, as a decoder hands it to an aggregator."""
        return [d.decode("utf-8") for d in self.datas]

    @cached_property
    def json_payloads(self) -> list[str]:
        """The payloads that are JSON (everything but ``[DONE]``): the orjson floor's input."""
        return [p for p in self.payloads if p != "[DONE]"]

    @cached_property
    def payload_bytes(self) -> list[bytes]:
        """Every dispatched event's data as ``bytes``, fresh copies made one after the other so
        they sit packed in memory as a stream read does (the generator's own objects are
        scattered, and chasing them costs more than decoding a chat payload)."""
        return [bytes(memoryview(d)) for d in self.datas]

    @cached_property
    def json_payload_bytes(self) -> list[bytes]:
        return [p for p in self.payload_bytes if p != b"[DONE]"]

    def chunked(self, how: str) -> list[bytes]:
        """The stream cut into reads: ``64B``, ``1KiB``, ``16KiB``, ``random`` (log-uniform 1 B to
        16 KiB, seeded) or ``event`` (one read per event). Cached; done once, never while timed."""
        if how in self._cache:
            return self._cache[how]
        raw = self.raw
        if how == "event":
            chunks = list(self.events)
        elif how == "random":
            rng = random.Random(f"{SEED}:{self.name}:chunks")
            chunks, pos = [], 0
            while pos < len(raw):
                size = int(2 ** rng.uniform(0, 14))
                chunks.append(raw[pos : pos + size])
                pos += size
        elif how in _FIXED_SIZES:
            size = _FIXED_SIZES[how]
            chunks = [raw[i : i + size] for i in range(0, len(raw), size)]
        else:
            raise InvalidRequest(f"unknown chunking {how!r}; expected one of {CHUNKINGS}")
        self._cache[how] = chunks
        return chunks


def _text(rng: random.Random, nchars: int) -> str:
    words: list[str] = []
    total = 0
    while total < nchars:
        word = rng.choice(_NON_ASCII) if rng.random() < 0.08 else rng.choice(_WORDS)
        words.append(word)
        total += len(word) + 1
    return " ".join(words)


def _pieces(rng: random.Random, text: str, lo: int, hi: int) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        n = rng.randint(lo, hi)
        out.append(text[pos : pos + n])
        pos += n
    return out


def _chunk(choices: list[Any], **extra: Any) -> dict[str, Any]:
    chunk = {
        "id": "chatcmpl-BdG7fLkz0QyQp3mXcV2s9YbWk1aNe",
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": _MODEL,
        "service_tier": "default",
        "system_fingerprint": _FINGERPRINT,
        "choices": choices,
    }
    chunk.update(extra)
    return chunk


def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


_USAGE: Final = {
    "prompt_tokens": 1234,
    "completion_tokens": 20000,
    "total_tokens": 21234,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
}


def _chat_chunks(rng: random.Random, nchunks: int) -> list[dict[str, Any]]:
    # role chunk, nchunks - 3 content chunks, the stop chunk, the usage chunk (choices: [])
    ncontent = nchunks - 3
    pieces: list[str] = []
    while len(pieces) < ncontent:
        pieces += _pieces(rng, _text(rng, 4000), 1, 8)
    chunks = [_chunk([_choice({"role": "assistant", "content": "", "refusal": None})], usage=None)]
    chunks += [_chunk([_choice({"content": p})], usage=None) for p in pieces[:ncontent]]
    chunks.append(_chunk([_choice({}, "stop")], usage=None))
    chunks.append(_chunk([], usage=_USAGE))
    return chunks


def _tool_chunks(rng: random.Random, args_bytes: int) -> list[dict[str, Any]]:
    # Parallel tool calls as OpenAI streams them: one call after the other, each opened by a chunk
    # with id, type, name and empty arguments, then its arguments in fragments of 1 to 8 characters.
    names = ("search_documents", "run_sql_query", "get_weather_forecast")
    chunks = [_chunk([_choice({"role": "assistant", "content": None, "refusal": None})], usage=None)]
    per_call = args_bytes // len(names)
    for index, name in enumerate(names):
        args = orjson.dumps(
            {
                "query": _text(rng, per_call // 2),
                "filters": {"lang": "en", "after": "2024-01-01", "limit": 25},
                "notes": [_text(rng, 60) for _ in range(per_call // 2 // 70)],
            }
        ).decode()
        opener = {
            "index": index,
            "id": f"call_{rng.getrandbits(96):024x}",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        chunks.append(_chunk([_choice({"tool_calls": [opener]})], usage=None))
        for piece in _pieces(rng, args, 1, 8):
            delta = {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
            chunks.append(_chunk([_choice(delta)], usage=None))
    chunks.append(_chunk([_choice({}, "tool_calls")], usage=None))
    chunks.append(_chunk([], usage=_USAGE))
    return chunks


def _chat_corpus(name: str, description: str, chunks: list[dict[str, Any]]) -> Corpus:
    datas = [orjson.dumps(c) for c in chunks] + [b"[DONE]"]
    events = tuple(b"data: " + d + b"\n\n" for d in datas)
    return Corpus(name, description, events, tuple(datas), ("message",) * len(datas), chat=True)


def chat(scale: float = 1.0) -> Corpus:
    n = max(8, round(20_000 * scale))
    chunks = _chat_chunks(random.Random(f"{SEED}:chat"), n)
    return _chat_corpus(
        "chat",
        f"{n:,} chat.completion.chunk events (role, content deltas of 1-8 characters, about 8% of words "
        "non-ASCII, stop, usage with choices: []) and [DONE], LF endings",
        chunks,
    )


def tools(scale: float = 1.0) -> Corpus:
    args_bytes = max(600, round(12_000 * scale))
    chunks = _tool_chunks(random.Random(f"{SEED}:tools"), args_bytes)
    return _chat_corpus(
        "tools",
        f"three parallel tool calls, ~{args_bytes // 1000} KB of JSON arguments in fragments of 1-8 "
        f"characters ({len(chunks):,} chunks) and [DONE]",
        chunks,
    )


def crlf(scale: float = 1.0) -> Corpus:
    """The chat corpus with CRLF line endings and an sse-starlette style ``: ping`` comment
    before every 100th event."""
    base = chat(scale)
    events = []
    for i, data in enumerate(base.datas):
        ping = (
            b": ping - 2025-06-01 00:00:%02d.000000+00:00\r\n\r\n" % (i // 100 % 60) if i % 100 == 99 else b""
        )
        events.append(ping + b"data: " + data + b"\r\n\r\n")
    return Corpus(
        "crlf",
        f"the chat corpus ({base.nevents:,} events) with CRLF endings and a `: ping` comment every 100 events",
        tuple(events),
        base.datas,
        base.types,
        chat=True,
    )


def large(scale: float = 1.0) -> Corpus:
    """Big multi-line events, e.g. a document or a base64 image in one event: ~16 KB of data each,
    in ``data:`` lines of 16 to 1024 bytes, with ``event:`` and ``id:`` fields; ASCII, except one
    event in four carries a non-ASCII word."""
    n = max(20, round(2_000 * scale))
    rng = random.Random(f"{SEED}:large")
    pool_rng = random.Random(f"{SEED}:pool")
    pool = " ".join(pool_rng.choice(_WORDS) for _ in range(1 << 15)).encode()
    events, datas = [], []
    for i in range(n):
        lines, size = [], 0
        while size < 16_000:
            length = rng.randint(16, 1024)
            start = rng.randrange(0, len(pool) - length)
            lines.append(pool[start : start + length])
            size += length + 1
        if i % 4 == 0:
            lines[len(lines) // 2] += " Größe 数据".encode()
        datas.append(b"\n".join(lines))
        body = b"".join(b"data: " + line + b"\n" for line in lines)
        events.append(b"event: snapshot\nid: %d\n" % i + body + b"\n")
    return Corpus(
        "large",
        f"{n:,} multi-line events of ~16 KB (data lines of 16-1024 bytes, event: and id: fields)",
        tuple(events),
        tuple(datas),
        ("snapshot",) * n,
    )


BUILDERS: Final = {"chat": chat, "tools": tools, "large": large, "crlf": crlf}


def build(name: str, scale: float = 1.0) -> Corpus:
    """The named corpus (``chat``, ``tools``, ``large``, ``crlf``) at ``scale`` (1.0 = full size)."""
    return BUILDERS[name](scale)
