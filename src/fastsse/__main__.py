"""``python -m fastsse COMMAND``: each command lives in its own module with a ``main(argv) -> int``."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import BinaryIO

import orjson

from . import BACKEND, Decoder, EventTooLarge, __version__

# command -> (module holding main(argv), one-line help)
COMMANDS = {
    "demo": (
        "fastsse.cli.demo",
        "stream a chat completion from the built-in loopback server (or --url) and fold it",
    ),
    "events": ("fastsse.__main__", "print the decoded events of a captured stream as JSON lines"),
    "serve": ("fastsse.testing.server", "run the OpenAI-compatible loopback streaming server"),
    "check": ("fastsse.check", "lint a captured stream or a live endpoint for OpenAI stream conformance"),
    "bench": ("fastsse.cli.bench", "compare fastsse with the pure-Python backend and the peers"),
    "load": ("fastsse.cli.load", "load an OpenAI-compatible server: TTFT, TPOT, ITL, E2E, throughput"),
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


def events_main(argv: list[str] | None = None) -> int:
    """Decode a captured SSE stream and print one JSON object per event."""
    parser = argparse.ArgumentParser(prog="python -m fastsse events", description=events_main.__doc__)
    parser.add_argument("file", nargs="?", default="-", help="a captured stream; - or nothing reads stdin")
    parser.add_argument("--max-event-bytes", type=int, default=None, help="drop events larger than this")
    parser.add_argument("--chunk-size", type=int, default=65536, help="bytes read per feed (default 65536)")
    args = parser.parse_args(argv)
    decoder = Decoder(max_event_bytes=args.max_event_bytes)
    out = sys.stdout.buffer
    status = 0
    source: BinaryIO
    try:
        source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"fastsse events: {exc}", file=sys.stderr)
        return 2
    with source:
        while chunk := source.read(args.chunk_size):
            try:
                events = decoder.feed(chunk)
            except EventTooLarge as exc:
                events = exc.events
                print(f"fastsse events: {exc}", file=sys.stderr)
                status = 1
            for ev in events:
                record = {"event": ev.event, "data": ev.data, "id": ev.id, "retry": ev.retry}
                out.write(orjson.dumps(record) + b"\n")
    decoder.close()
    out.flush()
    if decoder.truncated:
        print("fastsse events: the stream ended inside an event; it was discarded", file=sys.stderr)
    return status


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
    if command == "events":
        return events_main(rest)
    module = importlib.import_module(COMMANDS[command][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
