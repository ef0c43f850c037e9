"""What every command shares: the name in its usage line, one error format, one missing-dependency line.

Every command reports a failure as one line on stderr, ``fastsse COMMAND: what went wrong``, and
exits 2 for a usage, dependency or transport problem. A command raises ``CommandError`` (or calls
``fail``); the dispatcher in ``fastsse/__main__.py`` prints it, so no command prints a traceback for
something the user can fix.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import NoReturn

# pip extra that brings each optional module
EXTRAS = {"pycurl": "curl", "matplotlib": "plot"}


class CommandError(Exception):
    """Stops a command: the dispatcher prints ``fastsse COMMAND: message`` and exits with ``status``."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def prog(command: str | None = None) -> str:
    """How the user started us, for usage lines: ``fastsse`` (the console script) or ``python -m fastsse``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    base = "fastsse" if name in ("fastsse", "fastsse.exe") else "python -m fastsse"
    return f"{base} {command}" if command else base


def say(command: str, message: str) -> None:
    """Print one diagnostic line on stderr with the one prefix every command uses."""
    print(f"fastsse {command}: {message}" if command else f"fastsse: {message}", file=sys.stderr)


def fail(command: str, message: str, status: int = 2) -> int:
    """``say`` the message and return ``status``, for ``return fail(...)`` in a command's ``main``."""
    say(command, message)
    return status


def missing(module: str, purpose: str) -> str:
    """The one line for an optional dependency that is not installed."""
    extra = EXTRAS.get(module)
    how = (
        f"pip install 'fastsse-cython[{extra}]' (or pip install {module})"
        if extra
        else f"pip install {module}"
    )
    return f"{purpose} needs {module}, which is not installed: {how}"


def require(module: str, purpose: str) -> ModuleType:
    """Import an optional dependency, or raise CommandError with the line that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise CommandError(missing(module, purpose)) from None


def command(name: str) -> Callable[[Callable[[list[str] | None], int]], Callable[[list[str] | None], int]]:
    """Decorate a command's ``main(argv) -> int`` so that a CommandError ends it as one line and a status."""

    def wrap(main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
        def run(argv: list[str] | None = None) -> int:
            try:
                return main(argv)
            except CommandError as exc:
                return fail(name, str(exc), exc.status)

        run.__doc__, run.__name__ = main.__doc__, main.__name__
        return run

    return wrap


class Parser(argparse.ArgumentParser):
    """argparse with the shared error format: the usage line, then ``fastsse COMMAND: message``."""

    def __init__(self, command: str, description: str, epilog: str | None = None) -> None:
        super().__init__(
            prog=prog(command),
            description=description,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        self.command = command

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        say(self.command, message)
        sys.exit(2)
