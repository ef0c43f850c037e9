"""Aggregation: the event payloads folded into one ``chat.completion``. Group
``aggregate:<corpus>:<form>``: ``str`` payloads are what a ``Decoder`` hands out, ``bytes`` what a
caller that cut the stream itself has. The floor is ``orjson.loads`` of every JSON payload in the
same form, the least any aggregator that parses JSON can do. The openai SDK path (``str`` only) is
what ``Stream`` does per event (``json.loads`` + the client's default ``construct_type`` into
``ChatCompletionChunk``) followed by ``ChatCompletionStreamState.handle_chunk``."""

from __future__ import annotations

import pytest

from _helpers import contender, describe, run
from fastsse import bench as _contenders

CHAT_CORPORA = ("chat", "tools")


def _cases():
    for corpus_name in CHAT_CORPORA:
        for form in _contenders.PAYLOAD_FORMS:
            for name in _contenders.AGGREGATORS:
                if name == "openai" and form != "str":
                    continue
                yield pytest.param(corpus_name, form, name, id=f"{corpus_name}-{form}-{name}")


@pytest.mark.parametrize(("corpus_name", "form", "name"), list(_cases()))
def test_aggregate(benchmark, corpora, corpus_name, form, name):
    k = contender(_contenders.aggregator, name)
    corpus = corpora[corpus_name]
    args = k.prepare(corpus, form)
    benchmark.group = f"aggregate:{corpus_name}:{form}"
    describe(benchmark, k, corpus, form=form, payloads=len(args[0]))
    run(benchmark, k, args)
    if k.kind != "floor":
        assert k.check(*args) == _contenders.expected_summary(corpus)
