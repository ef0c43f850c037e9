"""What only the command line runs: each command parses its arguments, calls the library, prints.

``python -m fastsse COMMAND`` dispatches here (``fastsse/__main__.py``); ``import fastsse`` never
imports this package.
"""

from __future__ import annotations

from ._common import EXTRAS, CommandError, bad_argument, fail, missing, prog

# What ``fastsse/__main__.py`` dispatches the commands with.
__all__ = ["EXTRAS", "CommandError", "bad_argument", "fail", "missing", "prog"]
