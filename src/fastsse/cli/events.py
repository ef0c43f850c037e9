"""``python -m fastsse events``: print a captured stream's events as JSON lines."""

from __future__ import annotations

import argparse
import sys
from typing import BinaryIO

import orjson

from .. import Decoder, EventTooLarge


def main(argv: list[str] | None = None) -> int:
    """Decode a captured SSE stream and print one JSON object per event."""
    parser = argparse.ArgumentParser(prog="python -m fastsse events", description=main.__doc__)
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
