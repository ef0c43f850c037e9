"""``Normalizer``: the earlier name of ``fastsse.Relay``, deprecated; new code says ``Relay``.

There is one implementation: ``Normalizer`` *is* ``Relay`` (of the selected backend). Compared
with the pure-Python normaliser it replaces, the relay also folds what it forwards (``result()``,
``verdict``), runs compiled, and no longer makes a cut stream look finished: it adds no
``finish_reason`` a choice never got and adds ``[DONE]`` only when the answer is whole. Payloads
that are not a JSON object are dropped (a client's JSON parser would fail on them) and counted in
``verdict.skipped``.
"""

from __future__ import annotations

from . import Relay

Normalizer = Relay

__all__ = ["Normalizer"]
