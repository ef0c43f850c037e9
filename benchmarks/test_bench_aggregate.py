"""Aggregation: the decoded payloads (``str``, as a decoder hands them out) folded into one
``chat.completion``. Group ``aggregate:<corpus>``; the floor is ``orjson.loads`` of every JSON
payload, the least any aggregator that parses JSON can do. The openai SDK path is what
``Stream`` does per event (``json.loads`` + the client's default ``construct_type`` into
``ChatCompletionChunk``) followed by ``ChatCompletionStreamState.handle_chunk``."""

from __future__ import annotations

import pytest

from _helpers import contender, describe, run
from fastsse import _contenders

CHAT_CORPORA = ("chat", "tools")


@pytest.mark.parametrize("name", _contenders.AGGREGATORS)
@pytest.mark.parametrize("corpus_name", CHAT_CORPORA)
def test_aggregate(benchmark, corpora, corpus_name, name):
    k = contender(_contenders.aggregator, name)
    corpus = corpora[corpus_name]
    args = k.prepare(corpus, "event")
    benchmark.group = f"aggregate:{corpus_name}"
    describe(benchmark, k, corpus, payloads=len(args[0]))
    run(benchmark, k, args)
    if k.kind != "floor":
        assert k.check(*args) == _contenders.expected_summary(corpus)
