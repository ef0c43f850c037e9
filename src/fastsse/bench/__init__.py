"""What ``python -m fastsse bench`` and the suite in ``benchmarks/`` time: corpora and contenders.

The corpora (``build(name, scale)``, from a fixed seed) are the byte streams, cut into reads as
``CHUNKINGS`` name; a contender (``decoder``, ``aggregator``, ``stream``) wraps fastsse's two
backends, a peer or a floor in one small adapter (``prepare``, the timed ``run``, ``check``), so
the command and the pytest-benchmark suite time exactly the same calls. A peer that is not
installed raises ``Unavailable``. ``import fastsse`` never imports this package.
"""

from __future__ import annotations

from ._contenders import (
    AGGREGATORS,
    DECODERS,
    PAYLOAD_FORMS,
    STREAMERS,
    Contender,
    Unavailable,
    aggregator,
    decoder,
    expected_events,
    expected_summary,
    stream,
    summary,
    version,
)
from ._corpora import BUILDERS, CHUNKINGS, CORPORA, SEED, Corpus, build

__all__ = [
    "AGGREGATORS",
    "BUILDERS",
    "CHUNKINGS",
    "CORPORA",
    "DECODERS",
    "PAYLOAD_FORMS",
    "SEED",
    "STREAMERS",
    "Contender",
    "Corpus",
    "Unavailable",
    "aggregator",
    "build",
    "decoder",
    "expected_events",
    "expected_summary",
    "stream",
    "summary",
    "version",
]
