"""``python -m fastsse COMMAND``: each command lives in its own module with a ``main(argv) -> int``."""

from __future__ import annotations

import importlib
import os
import sys

from . import BACKEND, __version__

# command -> (module holding main(argv), one-line help)
COMMANDS = {
    "demo": (
        "fastsse.cli.demo",
        "stream a chat answer from the built-in loopback server (or --url) and fold it",
    ),
    "events": ("fastsse.cli.events", "print the decoded events of a captured stream as JSON lines"),
    "serve": ("fastsse.cli.serve", "run the OpenAI-compatible loopback streaming server"),
    "check": ("fastsse.cli.check", "lint a captured stream or a live endpoint for OpenAI stream conformance"),
    "bench": ("fastsse.cli.bench", "compare fastsse with the pure-Python backend and the peers"),
    "load": ("fastsse.cli.load", "load an OpenAI-compatible server: TTFT, TPOT, ITL, E2E, throughput"),
    "gateway": (
        "fastsse.cli.gateway",
        "serve chat, Responses and Messages over upstreams of any of the three",
    ),
}


def _usage() -> str:
    from .cli import prog

    lines = [
        f"usage: {prog()} COMMAND [ARGS]   (fastsse {__version__}, backend: {BACKEND})",
        "",
        "commands:",
    ]
    lines += [f"  {name:<8} {text}" for name, (_, text) in COMMANDS.items()]
    lines.append(f"\n{prog()} COMMAND --help shows a command's options.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if argv[0] in ("-V", "--version"):
        print(f"fastsse {__version__} (backend: {BACKEND})")
        return 0
    from .cli import EXTRAS, CommandError, bad_argument, fail, missing

    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(_usage(), file=sys.stderr)
        return fail("", f"unknown command {command!r}")
    try:
        module = importlib.import_module(COMMANDS[command][0])
        return int(module.main(rest) or 0)
    except CommandError as exc:
        return fail(command, str(exc), exc.status)
    except (ValueError, TypeError) as exc:
        # A request argument the client refused before sending anything (a URL without http://,
        # a timeout of 0) is the user's to fix: one line, as for a usage error.
        if not bad_argument(exc):
            raise
        return fail(command, str(exc))
    except ImportError as exc:
        # An optional dependency a command reached for without checking first: one line, not a traceback.
        if exc.name in EXTRAS:
            return fail(command, missing(exc.name, command))
        raise
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as Unix tools do, with a shell's status for a
        # SIGPIPE death. Python flushes stdout once more at exit, so point it at /dev/null first.
        _silence_stdout()
        return 141


def _silence_stdout() -> None:
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # a replaced stdout (a test's capture): nothing will be flushed to the closed pipe
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
