"""``python -m fastsse COMMAND``: each command lives in its own module with a ``main(argv) -> int``."""

from __future__ import annotations

import importlib
import sys

from . import BACKEND, __version__

# command -> (module holding main(argv), one-line help)
COMMANDS = {
    "demo": (
        "fastsse.cli.demo",
        "stream a chat completion from the built-in loopback server (or --url) and fold it",
    ),
    "events": ("fastsse.cli.events", "print the decoded events of a captured stream as JSON lines"),
    "serve": ("fastsse.testing.server", "run the OpenAI-compatible loopback streaming server"),
    "check": ("fastsse.check", "lint a captured stream or a live endpoint for OpenAI stream conformance"),
    "bench": ("fastsse.cli.bench", "compare fastsse with the pure-Python backend and the peers"),
}


def _usage() -> str:
    lines = [
        f"usage: python -m fastsse COMMAND [ARGS]   (fastsse {__version__}, backend: {BACKEND})",
        "",
        "commands:",
    ]
    lines += [f"  {name:<8} {text}" for name, (_, text) in COMMANDS.items()]
    lines.append("\n`python -m fastsse COMMAND --help` for a command's options.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if argv[0] in ("-V", "--version"):
        print(f"fastsse {__version__} (backend: {BACKEND})")
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"fastsse: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
