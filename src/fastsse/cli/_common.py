"""What every command shares: the name in its usage line, one error format, one missing-dependency line.

Every command reports a failure as one line on stderr, ``fastsse COMMAND: what went wrong``, and
exits 2 for a usage, dependency or transport problem. A command raises ``CommandError`` (or calls
``fail``); the dispatcher in ``fastsse/__main__.py`` prints it, so no command prints a traceback for
something the user can fix. The same goes for an argument the client's request setup refuses (a
URL without ``http://``, a timeout of 0): the dispatcher prints it as one line too
(``bad_argument``), so a command need not wrap each call that sets up a request.
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

# The default --max-event-bytes of check and events: far above any event a model streams (a chunk
# is a few hundred bytes, a whole tool call's arguments rarely a megabyte), low enough that a
# runaway event costs a bounded few tens of MB instead of several times its size.
MAX_EVENT_BYTES = 16 << 20

# Where the library checks a request's arguments before anything is sent (the URL's scheme, the
# headers, the key, the timeouts, max_event_bytes, the api): a ValueError or TypeError raised there
# is the user's argument, not a bug in the command.
_SETUP_PACKAGE = "fastsse.client."
_SETUP_MODULES = frozenset({"fastsse._formats", "fastsse._errors"})


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


def bad_argument(exc: BaseException) -> bool:
    """``bad_argument(exc) -> bool``: whether ``exc`` is an argument the request setup refused.

    True for a ValueError or TypeError (or a subclass of one, such as a body orjson cannot
    serialise; not an ``SSEError``, which is about the stream's data) raised in ``fastsse.client``,
    ``fastsse._formats`` or ``fastsse._errors``, the modules that check a request before it is
    sent. An error raised anywhere else (a command's own code, an ``on_chunk`` callback) keeps its
    traceback.
    """
    from .._errors import SSEError

    if not isinstance(exc, (ValueError, TypeError)) or isinstance(exc, SSEError):
        return False
    if exc.__traceback__ is None:
        return False
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = str(tb.tb_frame.f_globals.get("__name__", ""))
    return module.startswith(_SETUP_PACKAGE) or module in _SETUP_MODULES


def command(name: str) -> Callable[[Callable[[list[str] | None], int]], Callable[[list[str] | None], int]]:
    """Decorate a command's ``main(argv) -> int`` so that a CommandError, or an argument the request
    setup refused (``bad_argument``), ends it as one line and a status, as the dispatcher does."""

    def wrap(main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
        def run(argv: list[str] | None = None) -> int:
            try:
                return main(argv)
            except CommandError as exc:
                return fail(name, str(exc), exc.status)
            except (ValueError, TypeError) as exc:
                if not bad_argument(exc):
                    raise
                return fail(name, str(exc))

        run.__doc__, run.__name__ = main.__doc__, main.__name__
        return run

    return wrap


def port(text: str) -> int:
    """``port(text) -> int``: an argparse ``type`` for a TCP port, 0 (any free one) to 65535.

    It raises argparse.ArgumentTypeError for anything else: a socket would refuse a larger one
    with a traceback, and asyncio's server would quietly take it modulo 65536.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a TCP port is a number, not {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 0 to 65535, not {value}")
    return value


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
