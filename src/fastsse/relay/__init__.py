"""The gateway relay: ``Relay`` (compiled ``_relay_c``, twin ``_relay_py``) writes compliant chat bytes
from any upstream while folding them; ``_core`` holds the repair rules both share; ``normalize`` is
the blocking face over it."""
