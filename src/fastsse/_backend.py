"""The one switch between the compiled and the pure-Python backend, below every domain it decides for.

``FASTSSE_NO_EXTENSIONS=1`` (also true/yes/on), or an interpreter other than CPython, forces the
Python backend. Otherwise the compiled backend is used when every one of its modules is built here,
and the pure one when any is missing, silently: never a mix. This module only looks for the built
files; it imports none of them. Each domain imports its own twin under ``COMPILED`` (``sse`` picks
``_decoder_c`` or ``_decoder_py``, ``chat`` ``_fold_c`` or ``_fold_py``, ...), so the imports run
downward only. A compiled module that is built but cannot be loaded is an ImportError, not a mix.

``BACKEND`` says which one won. ``fastsse.get_backend(name)`` (``_twins``, above the domains) gathers
either backend into one namespace, and sets ``current`` to the selected one: what the transports and
``translator()`` build their streams from, the one name a test replaces to switch every format.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from types import SimpleNamespace
from typing import Final

# The compiled backend, as setup.py's MODULES builds it (tests/test_packaging.py holds the two alike).
COMPILED_MODULES: Final = (
    "sse._decoder_c",
    "chat._fold_c",
    "fold._stream_c",
    "responses._fold_c",
    "messages._fold_c",
    "relay._relay_c",
    "translate._to_chat_c",
    "translate._from_chat_c",
    "client._streams_c",
)


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on", "y")


def _built(module: str) -> bool:
    # Found where the import system would find it, without importing its package (that would run
    # the domain's __init__, which reads this module's COMPILED).
    *package, _ = module.split(".")
    where = os.path.join(os.path.dirname(os.path.abspath(__file__)), *package)
    spec = importlib.machinery.PathFinder.find_spec(f"{__package__}.{module}", [where])
    return spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)


NO_EXTENSIONS: Final[bool] = _flag("FASTSSE_NO_EXTENSIONS") or sys.implementation.name != "cpython"
COMPILED: Final[bool] = not NO_EXTENSIONS and all(_built(m) for m in COMPILED_MODULES)
BACKEND: Final[str] = "cython" if COMPILED else "python"

# The selected backend's namespace; ``fastsse._twins`` sets it when ``import fastsse`` loads it.
current: SimpleNamespace
