"""Decoding: the raw bytes of a stream, cut into reads, to one event (with a ``str`` data) per
dispatched event. Group ``decode:<corpus>:<chunking>``; the floor makes one ``str`` per event from
data bytes cut out in setup, the least any decoder handing out Python strings can do."""

from __future__ import annotations

import pytest

from _helpers import contender, describe
from fastsse import bench as _contenders
from fastsse.bench import CHUNKINGS, CORPORA


@pytest.mark.parametrize("name", _contenders.DECODERS)
@pytest.mark.parametrize("chunking", CHUNKINGS)
@pytest.mark.parametrize("corpus_name", CORPORA)
def test_decode(benchmark, corpora, corpus_name, chunking, name):
    k = contender(_contenders.decoder, name)
    corpus = corpora[corpus_name]
    args = k.prepare(corpus, chunking)
    benchmark.group = f"decode:{corpus_name}:{chunking}"
    describe(benchmark, k, corpus, chunking=chunking, reads=len(corpus.chunked(chunking)))
    benchmark(k.run, *args)
    assert k.check(*args) == _contenders.expected_events(corpus)
