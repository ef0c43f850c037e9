"""Translation: one upstream stream, read per event, into another API's stream. Group
``translate:<corpus>:<direction>``. The floor is ``orjson.loads`` of every upstream JSON payload
(the least a translator that reads the payloads can do); the issue's target is at most 2x the floor.
Each translator is one object per stream doing ``write(read) -> bytes`` and ``close()``, on the
compiled and the pure-Python fold streams; its output is checked against the first run's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

import fastsse.translate
from fastsse import get_backend
from fastsse.translate import translator

DIRECTIONS = (("chat", "messages"), ("chat", "responses"), ("messages", "chat"), ("responses", "chat"))
CORPORA = ("chat", "tools")
_cache: dict[tuple[str, str], tuple[list[bytes], list[bytes]]] = {}


def _upstream(corpora: Any, corpus: str, source: str) -> tuple[list[bytes], list[bytes]]:
    """(reads, JSON payloads) of ``corpus`` in ``source``'s format, one read per event."""
    key = (corpus, source)
    if key not in _cache:
        chat = corpora[corpus]
        if source == "chat":
            reads = list(chat.chunked("event"))
        else:
            t = translator("chat", source)
            body = b"".join(t.write(r) for r in chat.chunked("event")) + t.close()
            reads = [e + b"\n\n" for e in body.split(b"\n\n") if e]
        payloads = [line[6:] for r in reads for line in r.split(b"\n") if line.startswith(b"data: ")]
        _cache[key] = (reads, [p for p in payloads if p != b"[DONE]"])
    return _cache[key]


def _translate(source: str, target: str) -> Callable[[list[bytes]], int]:
    def run(reads: list[bytes]) -> int:
        t = translator(source, target)
        n = 0
        for r in reads:
            n += len(t.write(r))
        return n + len(t.close())

    return run


def _floor(payloads: list[bytes]) -> int:
    loads = orjson.loads
    for p in payloads:
        loads(p)
    return len(payloads)


def _cases():
    for corpus in CORPORA:
        for source, target in DIRECTIONS:
            for name in ("orjson.loads", "cython", "python"):
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
        backend = get_backend(name)
    except ImportError:
        pytest.skip("the compiled backend is not built")
    monkeypatch.setattr(fastsse.translate, "ChatToMessages", backend.ChatToMessages)
    monkeypatch.setattr(fastsse.translate, "ChatToResponses", backend.ChatToResponses)
    monkeypatch.setattr(fastsse.translate, "MessagesToChat", backend.MessagesToChat)
    monkeypatch.setattr(fastsse.translate, "ResponsesToChat", backend.ResponsesToChat)
    run = _translate(source, target)
    expected = run(reads)
    assert expected > 0
    assert benchmark(run, reads) == expected
