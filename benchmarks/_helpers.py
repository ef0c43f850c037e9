"""Helpers shared by the bench modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fastsse import _contenders, _corpora


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
