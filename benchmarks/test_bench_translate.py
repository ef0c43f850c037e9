"""Translation: one upstream stream, read per event, into another API's stream. Group
``translate:<corpus>:<direction>``. The floor is ``orjson.loads`` of every upstream JSON payload
(the least a translator that reads the payloads can do); the issue's target is at most 2x the floor.
Each translator is one object per stream doing ``write(read) -> bytes`` and ``close()``, compiled
(``cython``) and the pure-Python twin (``python``); both outputs must equal each other. Beside a
chat upstream, ``relay``: the compiled ``Relay`` forwarding the same chat stream (chat in, chat out),
the cost of a gateway that does not translate."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest

import fastsse.translate
from fastsse import ChatChunkEncoder, get_backend
from fastsse.translate import translator

DIRECTIONS = (("chat", "messages"), ("chat", "responses"), ("messages", "chat"), ("responses", "chat"))
CORPORA = ("chat", "tools", "reasoning")
_cache: dict[tuple[str, str], tuple[list[bytes], list[bytes]]] = {}


def _reasoning_events() -> list[bytes]:
    """A reasoning model's answer, one chat event each: 1,500 reasoning_content deltas, then 500
    content deltas, words of 1-8 characters (about 8% of them non-ASCII), a fixed seed."""
    rng = random.Random(19)
    letters = "abcdefghijklmnopqrstuvwxyz"

    def word() -> str:
        w = "".join(rng.choice(letters) for _ in range(rng.randint(1, 8)))
        return (w + "é") if rng.random() < 0.08 else w

    enc = ChatChunkEncoder(id="chatcmpl-r", model="reasoner", created=1)
    events = [enc.role()]
    events += [enc.reasoning(" " + word()) for _ in range(1500)]
    events += [enc.content(" " + word()) for _ in range(500)]
    events += [enc.finish("stop"), enc.usage({"prompt_tokens": 20, "completion_tokens": 2000}), enc.done()]
    return events


def _upstream(corpora: Any, corpus: str, source: str) -> tuple[list[bytes], list[bytes]]:
    """(reads, JSON payloads) of ``corpus`` in ``source``'s format, one read per event."""
    key = (corpus, source)
    if key not in _cache:
        chat_reads = _reasoning_events() if corpus == "reasoning" else list(corpora[corpus].chunked("event"))
        if source == "chat":
            reads = chat_reads
        else:
            t = translator("chat", source)
            body = b"".join(t.write(r) for r in chat_reads) + t.close()
            reads = [e + b"\n\n" for e in body.split(b"\n\n") if e]
        payloads = [line[6:] for r in reads for line in r.split(b"\n") if line.startswith(b"data: ")]
        _cache[key] = (reads, [p for p in payloads if p != b"[DONE]"])
    return _cache[key]


def _translate(source: str, target: str) -> Any:
    def run(reads: list[bytes]) -> int:
        t = translator(source, target)
        n = 0
        for r in reads:
            n += len(t.write(r))
        return n + len(t.close())

    def first(reads: list[bytes]) -> bytes:
        t = translator(source, target)
        return b"".join([t.write(r) for r in reads]) + t.close()

    run.first = first  # type: ignore[attr-defined]
    return run


def _twin_output(source: str, target: str, reads: list[bytes], monkeypatch: Any) -> bytes:
    twin = get_backend("python")
    with monkeypatch.context() as m:
        for cls in ("ChatToMessages", "ChatToResponses", "MessagesToChat", "ResponsesToChat"):
            m.setattr(fastsse.translate, cls, getattr(twin, cls))
        t = translator(source, target)
        return b"".join([t.write(r) for r in reads]) + t.close()


def _relay(relay_class: Any) -> Callable[[list[bytes]], int]:
    def run(reads: list[bytes]) -> int:
        r = relay_class()
        n = 0
        for read in reads:
            n += len(r.write(read))
        return n + len(r.close())

    return run


def _floor(payloads: list[bytes]) -> int:
    loads = orjson.loads
    for p in payloads:
        loads(p)
    return len(payloads)


def _cases():
    for corpus in CORPORA:
        for source, target in DIRECTIONS:
            names = (
                ("orjson.loads", "relay", "cython", "python")
                if source == "chat"
                else ("orjson.loads", "cython", "python")
            )
            for name in names:
                yield pytest.param(corpus, source, target, name, id=f"{corpus}-{source}-{target}-{name}")


@pytest.mark.parametrize(("corpus", "source", "target", "name"), list(_cases()))
def test_translate(benchmark, corpora, monkeypatch, corpus, source, target, name):
    reads, payloads = _upstream(corpora, corpus, source)
    benchmark.group = f"translate:{corpus}:{source}->{target}"
    benchmark.extra_info.update(contender=name, corpus=corpus, events=len(reads), payloads=len(payloads))
    if name == "orjson.loads":
        assert benchmark(_floor, payloads) == len(payloads)
        return
    try:
        backend = get_backend("cython" if name == "relay" else name)
    except ImportError:
        pytest.skip("the compiled backend is not built")
    if name == "relay":
        relay = _relay(backend.Relay)
        assert benchmark(relay, reads) > 0
        return
    for cls in ("ChatToMessages", "ChatToResponses", "MessagesToChat", "ResponsesToChat"):
        monkeypatch.setattr(fastsse.translate, cls, getattr(backend, cls))
    run = _translate(source, target)
    expected = run.first(reads)
    assert expected == _twin_output(source, target, reads, monkeypatch)
    assert benchmark(run, reads) == len(expected)
