"""The gateway relay: ``Relay`` (compiled ``_relay_c`` or its twin ``_relay_py``, as
``fastsse._backend.COMPILED`` says) writes compliant chat bytes from any upstream while folding
them; ``_core`` holds the repair rules both share; ``normalize`` keeps ``Normalizer``, the earlier
name of ``Relay`` (deprecated)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _backend

if TYPE_CHECKING or not _backend.COMPILED:
    from ._relay_py import Relay
else:
    from ._relay_c import Relay

__all__ = ["Relay"]
