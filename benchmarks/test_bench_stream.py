"""The fused path: raw byte reads written to ``ChatStream`` (scan, parse and fold in one call per
read, as pycurl's WRITEFUNCTION drives it) up to the folded ``chat.completion``. Group
``stream:<corpus>:<chunking>``, beside the unfused ``Decoder`` + ``ChatAggregator`` loop, the openai
SDK (``SSEDecoder`` + ``ChatCompletionStreamState``) and the ``orjson.loads`` floor. The SDK's fold
costs O(answer) per chunk, so it is timed at one chunking (1 KiB) only, to keep the run short."""

from __future__ import annotations

import pytest

from _helpers import contender, describe, run
from fastsse import bench as _contenders
from fastsse.bench import CHUNKINGS

STREAM_CORPORA = ("chat", "tools", "crlf")


def _cases():
    for corpus_name in STREAM_CORPORA:
        for chunking in CHUNKINGS:
            for name in _contenders.STREAMERS:
                if name == "openai" and chunking != "1KiB":
                    continue
                yield pytest.param(corpus_name, chunking, name, id=f"{corpus_name}-{chunking}-{name}")


@pytest.mark.parametrize(("corpus_name", "chunking", "name"), list(_cases()))
def test_stream(benchmark, corpora, corpus_name, chunking, name):
    k = contender(_contenders.stream, name)
    corpus = corpora[corpus_name]
    args = k.prepare(corpus, chunking)
    benchmark.group = f"stream:{corpus_name}:{chunking}"
    describe(benchmark, k, corpus, chunking=chunking, reads=len(corpus.chunked(chunking)))
    run(benchmark, k, args)
    if k.kind != "floor":
        assert k.check(*args) == _contenders.expected_summary(corpus)
