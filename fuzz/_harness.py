"""What the fuzz targets share: turning the fuzzer's bytes into options, a stream and its chunking.

The checks live here, free of atheris, so ``tests/test_fuzz_seeds.py`` runs them on the seed corpus
in every test run; the ``fuzz_*.py`` scripts only hand them to atheris (importing this module inside
``atheris.instrument_imports`` so the Python twin's branches guide the fuzzer).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import fastsse

KINDS = (bytes, bytearray, memoryview)


class Input:
    """A fuzz input read as: limit (0 = none), chunking, input type, framing mode, then the stream."""

    def __init__(self, buf: bytes) -> None:
        head, body = buf[:8], buf[8:]
        head = head.ljust(8, b"\x00")
        self.limit: int | None = head[0] % 96 or None  # small caps hit the overflow paths often
        self.kind = KINDS[head[1] % 3]
        self.mode = (
            head[2] % 4
        )  # 0, 1: raw bytes; 2: each line of the body is a data: payload; 3: CR/CRLF mix
        self.stop_at = head[3] % 16  # ChatStream: on_chunk answers False (odd) or raises (even) at this call
        seed = int.from_bytes(head[4:8], "little")
        self.data = frame(body, self.mode)
        self.cuts = cuts(len(self.data), seed)

    def chunks(self) -> list[Any]:
        bounds = [0, *self.cuts, len(self.data)]
        return [self.kind(self.data[a:b]) for a, b in itertools.pairwise(bounds)]


def frame(body: bytes, mode: int) -> bytes:
    if mode == 2:
        return b"".join(b"data: " + line + b"\n\n" for line in body.split(b"\n"))
    if mode == 3:
        return body.replace(b"\n", b"\r\n").replace(b"\x00", b"\r")
    return body


def cuts(n: int, seed: int) -> list[int]:
    """A deterministic chunking from a 32-bit seed: none, bytewise, or up to 24 cut points."""
    if n < 2:
        return []
    shape = seed & 3
    if shape == 0:
        return []
    if shape == 1 and n <= 4096:
        return list(range(1, n))
    out = set()
    x = seed | 1
    for _ in range((seed >> 2) % 24 + 1):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF  # an LCG: the same input always cuts the same way
        out.add(x % n)
    return sorted(out - {0})


# The Decoder target

C = fastsse.get_backend("cython")
PY = fastsse.get_backend("python")


def run_decoder(backend, chunks, limit):
    decoder = backend.Decoder(max_event_bytes=limit)
    trace = []
    for chunk in chunks:
        try:
            trace.append([(e.event, e.data, e.id, e.retry) for e in decoder.feed(chunk)])
        except fastsse.EventTooLarge as exc:
            trace.append(("too-large", exc.limit, [(e.event, e.data, e.id, e.retry) for e in exc.events]))
    trace.append(decoder.close())
    return trace, decoder.truncated, decoder.last_event_id, decoder.retry


def events_of(result):
    out = []
    for step in result[0]:
        out.extend(step[2] if isinstance(step, tuple) else step)
    return out


def check_decoder(buf: bytes) -> None:
    inp = Input(buf)
    chunks = inp.chunks()
    c = run_decoder(C, chunks, inp.limit)
    p = run_decoder(PY, chunks, inp.limit)
    if c != p:
        raise AssertionError(
            f"backends differ on {inp.data!r} in {len(chunks)} chunks, limit {inp.limit}:\n{c}\n{p}"
        )
    whole = run_decoder(C, [inp.data], inp.limit)
    if events_of(whole) != events_of(c) or whole[1:] != c[1:]:
        raise AssertionError(
            f"chunking changed the events of {inp.data!r} (cuts {inp.cuts}, limit {inp.limit})"
        )


# The ChatStream target


class Refused(Exception):
    """What on_chunk raises when the input asks it to."""


def write_all(stream, chunks):
    """Write every chunk and close: what each write returned or raised."""
    outcomes = []
    for chunk in chunks:
        try:
            outcomes.append(stream.write(chunk))
        except fastsse.EventTooLarge as exc:
            outcomes.append(("too-large", exc.limit))
        except Refused as exc:
            outcomes.append(("refused", exc.args))
    stream.close()
    return outcomes


def run_chatstream(backend, chunks, limit, stop_at):
    seen = []

    def on_chunk(chunk):
        seen.append(repr(chunk))  # a snapshot: later folding must not matter
        if len(seen) == stop_at:
            if stop_at % 2:
                return False
            raise Refused(stop_at)
        return None

    stream = backend.ChatStream(on_chunk, max_event_bytes=limit)
    outcomes = write_all(stream, chunks)
    first = stream.result()
    if stream.result() != first:
        raise AssertionError("result() changed between two calls with no write between them")
    return outcomes, seen, first


def unfused(data, limit):
    decoder = C.Decoder(max_event_bytes=limit)
    agg = C.ChatAggregator()
    try:
        events = decoder.feed(data)
    except fastsse.EventTooLarge:
        return None
    for event in events:
        agg.feed_event(event)
    result = agg.result()
    result.pop("verdict")  # the stream's verdict knows more (truncation, aborts): compare the fold
    return result


def check_chatstream(buf: bytes) -> None:
    inp = Input(buf)
    chunks = inp.chunks()
    c = run_chatstream(C, chunks, inp.limit, inp.stop_at)
    p = run_chatstream(PY, chunks, inp.limit, inp.stop_at)
    if c != p:
        raise AssertionError(f"backends differ on {inp.data!r} in {len(chunks)} chunks:\n{c}\n{p}")
    outcomes, _, result = c
    if inp.stop_at == 0:
        # Without on_chunk the compiled ChatStream folds most chunks with its fast reader, never
        # building them: it must end where the on_chunk run (orjson and the fold) ended.
        fast = C.ChatStream(max_event_bytes=inp.limit)
        if (write_all(fast, chunks), fast.result()) != (outcomes, result):
            raise AssertionError(
                f"the fast reader and orjson differ on {inp.data!r}:\n{fast.result()}\n{result}"
            )
    # The fused path must fold exactly what Decoder + feed_event folds, invalid UTF-8 included.
    if inp.stop_at == 0 and all(o is None for o in outcomes):
        want = unfused(inp.data, inp.limit)
        result = dict(result)
        result.pop("verdict", None)
        if want is not None and want != result:
            raise AssertionError(
                f"ChatStream and Decoder+ChatAggregator differ on {inp.data!r}:\n{result}\n{want}"
            )


# The Relay target


def run_relay(backend, chunks, limit, stop_at):
    seen = []

    def on_chunk(chunk):
        seen.append(repr(chunk))
        return False if len(seen) == stop_at else None

    relay = backend.Relay(max_event_bytes=limit, on_chunk=on_chunk if stop_at else None)
    out = []
    for chunk in chunks:
        try:
            out.append(relay.write(chunk))
        except fastsse.EventTooLarge as exc:
            out.append(("too-large", exc.limit, exc.events))
    out.append(relay.close())
    return out, seen, relay.result()


def _sent(out):
    return b"".join(b"".join(step[2]) if isinstance(step, tuple) else step for step in out)


def _payloads(stream):
    decoder = C.Decoder()
    return [(e.event, e.data if e.data == "[DONE]" else json.loads(e.data)) for e in decoder.feed(stream)]


def check_relay(buf: bytes) -> None:
    inp = Input(buf)
    chunks = inp.chunks()
    c = run_relay(C, chunks, inp.limit, inp.stop_at % 4)
    p = run_relay(PY, chunks, inp.limit, inp.stop_at % 4)
    c_sent, p_sent = _sent(c[0]), _sent(p[0])
    # The compiled relay splices where the twin re-serialises: the same JSON values, the same
    # events, the same fold; identical bytes wherever no splice happened.
    if _payloads(c_sent) != _payloads(p_sent) or c[1:] != p[1:]:
        raise AssertionError(f"backends differ on {inp.data!r} in {len(chunks)} chunks:\n{c}\n{p}")
    if b"\r" in c_sent or (c_sent and not c_sent.endswith(b"\n\n")):
        raise AssertionError(f"the relay sent bad framing for {inp.data!r}: {c_sent!r}")
    whole = run_relay(C, [inp.data], inp.limit, inp.stop_at % 4)
    if whole[1:] != c[1:] or (inp.limit is None and _sent(whole[0]) != c_sent):
        raise AssertionError(f"chunking changed what the relay sent for {inp.data!r} (cuts {inp.cuts})")


# The translator target

DIRECTIONS = (
    ("chat", "messages"),
    ("chat", "responses"),
    ("messages", "chat"),
    ("responses", "chat"),
    ("messages", "responses"),
    ("responses", "messages"),
)
CREATED = 1_700_000_000


def _translator(backend, source, target, limit):
    from fastsse.translate import _Chain

    if source == "chat":
        return (backend.ChatToMessages if target == "messages" else backend.ChatToResponses)(
            max_event_bytes=limit
        )
    to_chat = (backend.MessagesToChat if source == "messages" else backend.ResponsesToChat)(
        created=CREATED, max_event_bytes=limit
    )
    if target == "chat":
        return to_chat
    second = (backend.ChatToMessages if target == "messages" else backend.ChatToResponses)(
        max_event_bytes=limit
    )
    return _Chain(to_chat, second)


def run_translator(backend, direction, chunks, limit, truncated):
    t = _translator(backend, *direction, limit)
    trace = []
    for chunk in chunks:
        try:
            trace.append(t.write(chunk))
        except fastsse.EventTooLarge as exc:
            trace.append(("too-large", exc.limit))
    try:
        trace.append(t.close(truncated=truncated))
    except fastsse.EventTooLarge as exc:
        trace.append(("too-large", exc.limit))
    state = {"result": t.result()}
    for name in ("verdict", "dropped", "complete", "error", "skipped"):
        if hasattr(t, name):
            state[name] = getattr(t, name)
    return trace, state


class _Clock:
    """The encoders read the clock for an upstream without ``created``: both runs must see one time."""

    @staticmethod
    def time() -> float:
        return float(CREATED)


def directions_from_env():
    """``FASTSSE_FUZZ_DIRECTIONS=chat-messages,responses-chat`` narrows a run; all six by default."""
    import os

    wanted = os.environ.get("FASTSSE_FUZZ_DIRECTIONS", "")
    if not wanted.strip():
        return DIRECTIONS
    chosen = tuple(tuple(w.strip().split("-")) for w in wanted.split(",") if w.strip())
    unknown = [d for d in chosen if d not in DIRECTIONS]
    if unknown:
        raise SystemExit(f"FASTSSE_FUZZ_DIRECTIONS: unknown direction(s) {unknown}; known: {DIRECTIONS}")
    return chosen


def check_translate(buf: bytes, directions=DIRECTIONS) -> None:
    """Both backends' translators, for every direction, on the same chunks: the same bytes from
    every write and close, the same ``EventTooLarge``, fold, verdict and counters."""
    from fastsse.chat import encode
    from fastsse.responses import encode as responses_encode
    from fastsse.translate import _rules

    inp = Input(buf)
    chunks = inp.chunks()
    # a cap of 4-124 bytes for one input in four (most events pass it; some do not)
    limit = inp.limit * 4 if inp.limit is not None and inp.limit < 32 else None
    truncated = bool(inp.stop_at & 1)
    modules = (encode, responses_encode, _rules)
    saved = [m.time for m in modules]
    for m in modules:
        m.time = _Clock
    try:
        for direction in directions:
            c = run_translator(C, direction, chunks, limit, truncated)
            p = run_translator(PY, direction, chunks, limit, truncated)
            if c != p:
                raise AssertionError(
                    f"backends differ for {direction} on {inp.data!r} in {len(chunks)} chunks, "
                    f"limit {limit}, truncated {truncated}:\n{c}\n{p}"
                )
    finally:
        for m, t in zip(modules, saved, strict=True):
            m.time = t
