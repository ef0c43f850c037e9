"""Helpers shared by the bench modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fastsse import bench as _contenders
from fastsse import bench as _corpora


def contender(factory: Callable[[str], _contenders.Contender], name: str) -> _contenders.Contender:
    """The named contender, or a skip naming what is missing (a peer package, a fastsse API)."""
    try:
        return factory(name)
    except _contenders.Unavailable as exc:
        pytest.skip(str(exc))


def describe(benchmark: Any, k: _contenders.Contender, corpus: _corpora.Corpus, **extra: Any) -> None:
    benchmark.extra_info.update(
        contender=k.name,
        label=k.label,
        version=k.version,
        kind=k.kind,
        corpus=corpus.name,
        bytes=corpus.nbytes,
        events=corpus.nevents,
        **extra,
    )


# Contenders whose single run takes seconds on the full corpora (the openai SDK's fold re-dumps
# the whole snapshot on every chunk): a fixed number of rounds instead of calibration.
SLOW_ROUNDS = {"openai": 3}


def run(benchmark: Any, k: _contenders.Contender, args: tuple[Any, ...]) -> Any:
    rounds = SLOW_ROUNDS.get(k.name) if benchmark.group.split(":")[0] in ("aggregate", "stream") else None
    if rounds and benchmark.enabled:
        return benchmark.pedantic(k.run, args, rounds=rounds, iterations=1, warmup_rounds=0)
    return benchmark(k.run, *args)
