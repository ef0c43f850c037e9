"""What the benchmarks time: fastsse's two backends, the peers and the floors, one small adapter each.

Shared by ``python -m fastsse bench`` and the pytest-benchmark suite in ``benchmarks/``, so both
time exactly the same calls. Each adapter has

- ``prepare(corpus, chunking) -> tuple``: everything the timed call needs (done in setup);
- ``run(*prepared)``: the timed call: the library's own idiomatic loop over the whole stream,
  with nothing else in it;
- ``check(*prepared)``: the same work, returning what it produced in a comparable form, so the
  suite (and ``bench``) can assert that every contender decoded the corpus correctly.

A peer whose package is not installed raises ``Unavailable`` with the reason when it is asked for.
The peers are the optional extra ``pip install 'fastsse-cython[bench]'``.
"""

from __future__ import annotations

import importlib.metadata
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from ._corpora import Corpus

DONE: Final = "[DONE]"


class Unavailable(Exception):
    """A contender cannot run here (its package is missing, or fastsse lacks the API it times)."""


@dataclass(frozen=True)
class Contender:
    name: str  # stable id: "fastsse-cython", "openai", ...
    label: str  # what a table shows
    version: str
    kind: str  # "fastsse", "peer" or "floor"
    prepare: Callable[[Corpus, str], tuple[Any, ...]]
    run: Callable[..., Any]
    check: Callable[..., Any]


def version(dist: str) -> str:
    """``version(dist) -> str``: the installed version of the distribution ``dist``, or "?"."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _fastsse_version() -> str:
    from .. import __version__

    return __version__


def _backend(name: str) -> Any:
    from .._twins import get_backend

    try:
        return get_backend(name)
    except ImportError as exc:
        raise Unavailable(f"fastsse's {name} backend is not built ({exc})") from None


def _need(module: str, dist: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise Unavailable(f"{dist} is not installed (pip install 'fastsse-cython[bench]')") from None


def _chunks(corpus: Corpus, chunking: str) -> tuple[Any, ...]:
    return (corpus.chunked(chunking),)


def _consume(iterator: Any) -> None:
    deque(iterator, maxlen=0)


# --- decode: bytes in, one event with a str data per dispatched event out ----------------------

DECODERS: Final = ("fastsse-cython", "fastsse-python", "openai", "httpx-sse", "sseclient-py", "floor")


def _fastsse_decoder(name: str) -> Contender:
    Decoder = _backend(name).Decoder

    def run(chunks: list[bytes]) -> int:
        feed = Decoder().feed
        n = 0
        for chunk in chunks:
            n += len(feed(chunk))
        return n

    def check(chunks: list[bytes]) -> list[tuple[str, str]]:
        feed = Decoder().feed
        return [(ev.event, ev.data) for chunk in chunks for ev in feed(chunk)]

    return Contender(f"fastsse-{name}", f"fastsse {name}", _fastsse_version(), "fastsse", _chunks, run, check)


def _openai_decoder() -> Contender:
    streaming = _need("openai._streaming", "openai")
    SSEDecoder = streaming.SSEDecoder

    def run(chunks: list[bytes]) -> int:
        # What openai.Stream does with response.iter_bytes().
        n = 0
        for _ in SSEDecoder().iter_bytes(iter(chunks)):
            n += 1
        return n

    def check(chunks: list[bytes]) -> list[tuple[str, str]]:
        return [(sse.event or "message", sse.data) for sse in SSEDecoder().iter_bytes(iter(chunks))]

    return Contender("openai", "openai SSEDecoder", version("openai"), "peer", _chunks, run, check)


def _httpx_sse_decoder() -> Contender:
    decoders = _need("httpx_sse._decoders", "httpx-sse")
    httpx_decoders = _need("httpx._decoders", "httpx")
    SSEDecoder, SSELineDecoder = decoders.SSEDecoder, decoders.SSELineDecoder
    TextDecoder, TextChunker = httpx_decoders.TextDecoder, httpx_decoders.TextChunker

    def events(chunks: list[bytes]) -> Any:
        # httpx_sse.EventSource.iter_sse over httpx.Response.iter_text(): bytes -> incremental
        # UTF-8 (errors="replace") -> SSELineDecoder -> SSEDecoder, as connect_sse runs it.
        text = TextDecoder(encoding="utf-8")
        chunker = TextChunker()
        lines = SSELineDecoder()
        decoder = SSEDecoder()
        for chunk in chunks:
            for piece in chunker.decode(text.decode(chunk)):
                for line in lines.decode(piece):
                    sse = decoder.decode(line.rstrip("\n"))
                    if sse is not None:
                        yield sse
        for piece in chunker.decode(text.flush()):
            for line in lines.decode(piece):
                sse = decoder.decode(line.rstrip("\n"))
                if sse is not None:
                    yield sse
        for line in lines.flush():
            sse = decoder.decode(line.rstrip("\n"))
            if sse is not None:
                yield sse

    def run(chunks: list[bytes]) -> int:
        n = 0
        for _ in events(chunks):
            n += 1
        return n

    def check(chunks: list[bytes]) -> list[tuple[str, str]]:
        return [(sse.event or "message", sse.data) for sse in events(chunks)]

    return Contender("httpx-sse", "httpx-sse", version("httpx-sse"), "peer", _chunks, run, check)


def _sseclient_decoder() -> Contender:
    SSEClient = _need("sseclient", "sseclient-py").SSEClient

    def run(chunks: list[bytes]) -> int:
        n = 0
        for _ in SSEClient(chunks).events():
            n += 1
        return n

    def check(chunks: list[bytes]) -> list[tuple[str, str]]:
        return [(ev.event, ev.data) for ev in SSEClient(chunks).events()]

    return Contender("sseclient-py", "sseclient-py", version("sseclient-py"), "peer", _chunks, run, check)


def _floor_decoder() -> Contender:
    # The floor for any decoder that hands out Python strings: one str per event, made from the
    # event's data bytes cut out in setup; no scanning at all. Each str is dropped at once, as the
    # decoders' events are, so the floor does not pay for keeping 20,000 strings alive.
    def prepare(corpus: Corpus, chunking: str) -> tuple[Any, ...]:
        # Packed copies (see Corpus.payload_bytes): the corpus's own data objects are scattered,
        # and chasing them cost more than the decoding (180-260 vs 60-130 ns per chat event).
        return (corpus.payload_bytes, corpus.types)

    def run(datas: list[bytes], types: tuple[str, ...]) -> None:
        _consume(map(bytes.decode, datas))

    def check(datas: list[bytes], types: tuple[str, ...]) -> list[tuple[str, str]]:
        return list(zip(types, map(bytes.decode, datas), strict=True))

    return Contender("floor", "floor: one str per event", "", "floor", prepare, run, check)


def decoder(name: str) -> Contender:
    """The decode contender ``name`` (one of ``DECODERS``); Unavailable if it cannot run here."""
    if name.startswith("fastsse-"):
        return _fastsse_decoder(name.removeprefix("fastsse-"))
    return {
        "openai": _openai_decoder,
        "httpx-sse": _httpx_sse_decoder,
        "sseclient-py": _sseclient_decoder,
        "floor": _floor_decoder,
    }[name]()


# --- aggregate: the decoded payloads (str or bytes) in, one chat.completion out ----------------

AGGREGATORS: Final = ("fastsse-cython", "fastsse-python", "openai", "floor")


PAYLOAD_FORMS: Final = ("str", "bytes")


def _payloads(corpus: Corpus, form: str) -> tuple[Any, ...]:
    # "str": what a Decoder hands out; "bytes": what a caller that cut the stream itself has.
    return (corpus.payloads if form == "str" else corpus.payload_bytes,)


def _require(cls: Any, *methods: str) -> None:
    missing = [m for m in methods if not callable(getattr(cls, m, None))]
    if missing:
        where = f"{cls.__module__}.{cls.__qualname__}"
        raise Unavailable(f"{where} has no {', '.join(missing)} yet (not on this branch)")


def summary(result: Any) -> dict[str, Any]:
    """The parts of a folded chat completion every aggregator must agree on, from a fastsse
    ``result()`` dict or an openai ``ChatCompletion``."""
    if not isinstance(result, dict):
        result = result.model_dump()
    choices = []
    for choice in result["choices"]:
        message = choice["message"]
        calls = [
            (c.get("id"), c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls") or ()
        ]
        # content None and "" both mean "no text" (a tool-call answer); aggregators may pick either.
        content = message.get("content") or None
        choices.append((message.get("role"), content, calls, choice.get("finish_reason")))
    usage = result.get("usage") or {}
    return {"choices": choices, "total_tokens": usage.get("total_tokens"), "model": result.get("model")}


def expected_summary(corpus: Corpus) -> dict[str, Any]:
    """What folding the corpus must give, computed straight from the chunks (no aggregator)."""
    content: list[str] = []
    calls: dict[int, list[Any]] = {}
    finish = None
    usage = None
    for payload in corpus.json_payloads:
        chunk = orjson.loads(payload)
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            delta = choice["delta"]
            content.append(delta.get("content") or "")
            finish = choice.get("finish_reason") or finish
            for call in delta.get("tool_calls") or ():
                entry = calls.setdefault(call["index"], [None, "", ""])
                entry[0] = call.get("id") or entry[0]
                entry[1] += call.get("function", {}).get("name") or ""
                entry[2] += call.get("function", {}).get("arguments") or ""
    text = "".join(content) or None
    tool_calls = [tuple(calls[i]) for i in sorted(calls)]
    return {
        "choices": [("assistant", text, tool_calls, finish)],
        "total_tokens": usage and usage["total_tokens"],
        "model": orjson.loads(corpus.json_payloads[0])["model"],
    }


def _fastsse_aggregator(name: str) -> Contender:
    ChatAggregator = _backend(name).ChatAggregator
    _require(ChatAggregator, "feed_data", "result")

    def run(payloads: list[str]) -> Any:
        agg = ChatAggregator()
        _consume(map(agg.feed_data, payloads))
        return agg.result()

    def check(payloads: list[str]) -> dict[str, Any]:
        return summary(run(payloads))

    return Contender(
        f"fastsse-{name}", f"fastsse {name}", _fastsse_version(), "fastsse", _payloads, run, check
    )


def _openai_parts() -> tuple[Any, Any, Any]:
    models = _need("openai._models", "openai")
    chunk_type = _need("openai.types.chat", "openai").ChatCompletionChunk
    state = _need("openai.lib.streaming.chat", "openai").ChatCompletionStreamState
    return models.construct_type, chunk_type, state


def _openai_aggregator() -> Contender:
    construct_type, ChatCompletionChunk, ChatCompletionStreamState = _openai_parts()
    loads = _need("json", "json").loads

    def run(payloads: list[str]) -> Any:
        # openai.Stream's per-event work (sse.json(), then the client's default construct_type into
        # ChatCompletionChunk) and the SDK's own accumulator over those chunks.
        state = ChatCompletionStreamState()
        for payload in payloads:
            if payload.startswith(DONE):
                break
            chunk = construct_type(type_=ChatCompletionChunk, value=loads(payload))
            state.handle_chunk(chunk)
        return state.get_final_completion()

    def check(payloads: list[str]) -> dict[str, Any]:
        return summary(run(payloads))

    return Contender(
        "openai", "openai ChatCompletionStreamState", version("openai"), "peer", _payloads, run, check
    )


def _orjson_floor(corpus: Corpus, form: str) -> tuple[Any, ...]:
    # In the fused groups ``form`` is a chunking: ChatStream parses bytes, so the floor does too.
    return (corpus.json_payloads if form == "str" else corpus.json_payload_bytes,)


def _floor_aggregator() -> Contender:
    loads = orjson.loads

    def run(payloads: list[str]) -> None:
        _consume(map(loads, payloads))

    def check(payloads: list[str]) -> None:
        return None

    return Contender("floor", "floor: orjson.loads", version("orjson"), "floor", _orjson_floor, run, check)


def aggregator(name: str) -> Contender:
    """The aggregate contender ``name`` (one of ``AGGREGATORS``); Unavailable if it cannot run here."""
    if name.startswith("fastsse-"):
        return _fastsse_aggregator(name.removeprefix("fastsse-"))
    return {"openai": _openai_aggregator, "floor": _floor_aggregator}[name]()


# --- fused: raw byte chunks in, one chat.completion out -----------------------------------------

STREAMERS: Final = (
    "fastsse-cython",
    "fastsse-python",
    "fastsse-on-chunk",
    "fastsse-unfused",
    "openai",
    "floor",
)


def _ignore(chunk: Any) -> None:
    return None


def _fastsse_stream(name: str, *, on_chunk: bool = False) -> Contender:
    ChatStream = _backend(name).ChatStream
    _require(ChatStream, "write", "close", "result")
    callback = _ignore if on_chunk else None

    def run(chunks: list[bytes]) -> Any:
        # pycurl calls write() once per received buffer; here the loop stands in for it. With an
        # on_chunk (one that does nothing) every chunk is built as a dict for it.
        stream = ChatStream(callback)
        write = stream.write
        for chunk in chunks:
            write(chunk)
        stream.close()
        return stream.result()

    def check(chunks: list[bytes]) -> dict[str, Any]:
        return summary(run(chunks))

    if on_chunk:
        return Contender(
            "fastsse-on-chunk",
            "fastsse ChatStream(on_chunk)",
            _fastsse_version(),
            "fastsse",
            _chunks,
            run,
            check,
        )
    return Contender(
        f"fastsse-{name}", f"fastsse {name} ChatStream", _fastsse_version(), "fastsse", _chunks, run, check
    )


def _fastsse_unfused() -> Contender:
    backend = _backend("cython")
    Decoder, ChatAggregator = backend.Decoder, backend.ChatAggregator
    _require(ChatAggregator, "feed_data", "result")

    def run(chunks: list[bytes]) -> Any:
        # The same work without fusion: Decoder events handed to ChatAggregator in Python.
        feed = Decoder().feed
        agg = ChatAggregator()
        feed_data = agg.feed_data
        for chunk in chunks:
            for event in feed(chunk):
                feed_data(event.data)
        return agg.result()

    def check(chunks: list[bytes]) -> dict[str, Any]:
        return summary(run(chunks))

    return Contender(
        "fastsse-unfused",
        "fastsse Decoder+ChatAggregator",
        _fastsse_version(),
        "fastsse",
        _chunks,
        run,
        check,
    )


def _openai_stream() -> Contender:
    SSEDecoder = _need("openai._streaming", "openai").SSEDecoder
    construct_type, ChatCompletionChunk, ChatCompletionStreamState = _openai_parts()

    def run(chunks: list[bytes]) -> Any:
        # openai.Stream.__stream__ over response.iter_bytes(), folded by ChatCompletionStreamState.
        state = ChatCompletionStreamState()
        for sse in SSEDecoder().iter_bytes(iter(chunks)):
            if sse.data.startswith(DONE):
                break
            state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=sse.json()))
        return state.get_final_completion()

    def check(chunks: list[bytes]) -> dict[str, Any]:
        return summary(run(chunks))

    return Contender(
        "openai", "openai SSEDecoder+StreamState", version("openai"), "peer", _chunks, run, check
    )


def stream(name: str) -> Contender:
    """The fused contender ``name`` (one of ``STREAMERS``); Unavailable if it cannot run here."""
    if name == "fastsse-unfused":
        return _fastsse_unfused()
    if name == "fastsse-on-chunk":
        return _fastsse_stream("cython", on_chunk=True)
    if name.startswith("fastsse-"):
        return _fastsse_stream(name.removeprefix("fastsse-"))
    return {"openai": _openai_stream, "floor": _floor_aggregator}[name]()


def expected_events(corpus: Corpus) -> list[tuple[str, str]]:
    """The (type, data) pairs a correct decoder dispatches for ``corpus``."""
    return list(zip(corpus.types, (d.decode("utf-8") for d in corpus.datas), strict=True))
