"""The gateway relay: upstream bytes in, compliant bytes out, folded on the way. Group
``relay:<stream>``, one event per read (how a token stream arrives), per stream of ``N`` content
chunks; divide a round by the ``chunks`` in ``extra_info`` for the CPU per chunk.

- ``compliant``: what OpenAI sends (role chunk, content chunks, final, usage chunk, ``[DONE]``);
  every content chunk needs no repair, so the relay forwards it as its own bytes.
- ``localai``: the same answer as LocalAI 3.7 sent it (seed 000): ``finish_reason: ""`` and a
  usage value on every chunk, empty content in the role chunk and the final; every chunk needs a
  repair.

Contenders: ``Relay`` on each backend; ``relay-wire-cython``, the gateway's direct path on the
compiled backend: the relay's compiled ``BytesStream`` into a ``WireSink`` that frames each piece
as an HTTP/1.1 chunk for a transport's ``write`` (here a list's ``append``); the pure-Python ``Normalizer`` it replaced followed by a
``ChatStream`` on its output (two passes, as a gateway needed before); the LiteLLM-style path
(the openai SDK's SSE decoder and chunk parsing, the chunk validated into a pydantic model,
``model_dump_json``, SSE framing; LiteLLM's own model classes are stood in for by the SDK's); and
the floor, ``orjson.loads`` of every payload of the same stream.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from _normalizer_v0 import Normalizer as NormalizerV0
from fastsse import ChatChunkEncoder, check_stream, get_backend

WORDS = ("Hello", " there", ",", " how", " can", " I", " help", " you", " today", "?")


def _compliant(n: int) -> list[bytes]:
    enc = ChatChunkEncoder(id="chatcmpl-0b4e3b1e5c1c4b7a", model="gpt-4o-mini-2024-07-18", created=1762700000)
    events = [enc.role()]
    events += [enc.content(WORDS[i % len(WORDS)]) for i in range(n)]
    events += [
        enc.finish("stop"),
        enc.usage({"prompt_tokens": 9, "completion_tokens": n, "total_tokens": 9 + n}),
    ]
    events.append(enc.done())
    return events


def _localai(n: int) -> list[bytes]:
    head = (
        '{"created":1762700000,"object":"chat.completion.chunk","id":"0b4e3b1e-5c1c-4b7a-9a55-3f4f2d0c8e11",'
        '"model":"qwen3-8b","choices":[{"index":0,"finish_reason":'
    )
    usage = ',"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}'
    lines = [head + '"","delta":{"role":"assistant","content":""}}]' + usage]
    lines += [
        head + '"","delta":{"content":' + orjson.dumps(WORDS[i % len(WORDS)]).decode() + "}}]" + usage
        for i in range(n)
    ]
    lines.append(head + '"stop","delta":{"content":""}}]' + usage)
    return [f"data: {line}\n\n".encode() for line in lines] + [b"data: [DONE]\n\n"]


STREAMS = {"compliant": _compliant, "localai": _localai}


def _payloads(events: list[bytes]) -> list[bytes]:
    return [e[6:-2] for e in events if e != b"data: [DONE]\n\n"]


def _dechunk(data: bytes) -> bytes:
    out, at = [], 0
    while at < len(data):
        end = data.index(b"\r\n", at)
        size = int(data[at:end], 16)
        out.append(data[end + 2 : end + 2 + size])
        at = end + 2 + size + 2
    return b"".join(out)


# contenders: each takes the list of reads and returns (downstream bytes, folded content)


def _relay(backend: str) -> Any:
    relay_cls = get_backend(backend).Relay

    def run(reads: list[bytes]) -> tuple[bytes, str]:
        r = relay_cls()
        write = r.write
        out = [write(read) for read in reads]
        out.append(r.close())
        return b"".join(out), r.text()

    return run


def _relay_wire() -> Any:
    from fastsse import _backend
    from fastsse.client import new_sink
    from fastsse.client._streams import new_stream

    if _backend.current.name != "cython":
        pytest.skip("the compiled backend is not the current one")

    def run(reads: list[bytes]) -> tuple[bytes, str]:
        wire: list[bytes] = []
        sink = new_sink(wire.append)
        sink.write = wire.append
        sink.direct = True
        stream = new_stream("relay", sink, api="chat", max_event_bytes=None, timing=False, direct=True)
        write = stream.write
        for read in reads:
            write(read)
        stream.close()
        return b"".join(wire), stream.relay.text()

    return run


def _normalizer_chatstream(reads: list[bytes]) -> tuple[bytes, str]:
    norm = NormalizerV0()
    cs = get_backend("cython").ChatStream()
    out = []
    for read in reads:
        piece = norm.write(read)
        cs.write(piece)
        out.append(piece)
    tail = norm.close()
    cs.write(tail)
    cs.close()
    out.append(tail)
    return b"".join(out), cs.result()["choices"][0]["message"]["content"]


def _litellm_style() -> Any:
    openai_streaming = pytest.importorskip("openai._streaming")
    pydantic = pytest.importorskip("pydantic")
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    # A gateway's own response model, lenient like LiteLLM's ModelResponseStream (the SDK's
    # strict ChatCompletionChunk refuses LocalAI's finish_reason "").
    class Delta(pydantic.BaseModel):
        role: str | None = None
        content: str | None = None
        tool_calls: list[dict[str, Any]] | None = None

    class Choice(pydantic.BaseModel):
        index: int
        delta: Delta
        finish_reason: str | None = None

    class StreamChunk(pydantic.BaseModel):
        id: str
        object: str = "chat.completion.chunk"
        created: int
        model: str
        choices: list[Choice]
        usage: dict[str, Any] | None = None

    def run(reads: list[bytes]) -> tuple[bytes, str]:
        out = []
        text = []
        for sse in openai_streaming.SSEDecoder().iter_bytes(iter(reads)):
            if sse.data.startswith("[DONE]"):
                out.append(b"data: [DONE]\n\n")
                break
            parsed = construct_type(type_=ChatCompletionChunk, value=sse.json())
            chunk = StreamChunk.model_validate(parsed.model_dump())
            for choice in chunk.choices:
                if choice.delta.content:
                    text.append(choice.delta.content)
            out.append(b"data: " + chunk.model_dump_json(exclude_none=True).encode() + b"\n\n")
        return b"".join(out), "".join(text)

    return run


def _floor(reads: list[bytes]) -> tuple[bytes, str]:
    loads = orjson.loads
    for payload in _payloads(reads):
        loads(payload)
    return b"", ""


CONTENDERS = {
    "relay-cython": lambda: _relay("cython"),
    "relay-python": lambda: _relay("python"),
    "relay-wire-cython": _relay_wire,
    "normalizer+chatstream": lambda: _normalizer_chatstream,
    "litellm-style": _litellm_style,
    "orjson.loads": lambda: _floor,
}


@pytest.mark.parametrize("name", list(CONTENDERS))
@pytest.mark.parametrize("stream", list(STREAMS))
def test_relay(benchmark: Any, quick: bool, stream: str, name: str) -> None:
    n = 50 if quick else 1000
    reads = STREAMS[stream](n)
    run = CONTENDERS[name]()
    benchmark.group = f"relay:{stream}"
    benchmark.extra_info.update(contender=name, chunks=len(reads) - 1, bytes=sum(map(len, reads)))
    if name == "orjson.loads":
        payloads = _payloads(reads)
        loads = orjson.loads

        def floor() -> None:
            for payload in payloads:
                loads(payload)

        benchmark(floor)
        return
    out, text = benchmark(run, reads)
    if name == "relay-wire-cython":
        out = _dechunk(out)
    expected = "".join(WORDS[i % len(WORDS)] for i in range(n))
    assert text == expected
    if name.startswith("relay") or name == "normalizer+chatstream":
        assert check_stream(out, expect_usage=name.startswith("relay") or stream == "compliant") == []
    if name.startswith("relay") and stream == "compliant":
        assert out == b"".join(reads)  # forwarded as its own bytes
