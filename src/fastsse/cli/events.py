"""``python -m fastsse events``: print a captured stream's events as JSON lines."""

from __future__ import annotations

import sys
from typing import BinaryIO

import orjson

from .. import Decoder, EventTooLarge
from ..sse.lint import SNIFF_BYTES, NoFieldText, not_sse
from ._common import MAX_EVENT_BYTES, Parser, fail, say

EPILOG = """\
Exit status: 0 when the stream decoded, 1 when an event passed --max-event-bytes
or the input is not an event stream (an HTML page, a JSON document, binary data,
a text with no event and no SSE field), 2 on a usage error or a file that cannot
be read."""


def main(argv: list[str] | None = None) -> int:
    """Decode a captured SSE stream and print one JSON object per event."""
    parser = Parser("events", main.__doc__ or "", epilog=EPILOG)
    parser.add_argument("file", nargs="?", default="-", help="a captured stream; - or nothing reads stdin")
    parser.add_argument(
        "--max-event-bytes",
        type=int,
        default=MAX_EVENT_BYTES,
        metavar="N",
        help=f"drop an event (or a line) larger than N bytes, say so and exit 1, so memory stays bounded"
        f" (default {MAX_EVENT_BYTES} = 16 MiB)",
    )
    parser.add_argument("--chunk-size", type=int, default=65536, help="bytes read per feed (default 65536)")
    args = parser.parse_args(argv)
    if args.max_event_bytes < 1:
        return fail("events", "--max-event-bytes takes a positive number of bytes")
    if args.chunk_size < 1:
        return fail("events", "--chunk-size takes a positive number of bytes")
    decoder = Decoder(max_event_bytes=args.max_event_bytes)
    out = sys.stdout.buffer
    status = 0
    count = size = 0
    head = b""
    text = NoFieldText()
    name = "<stdin>" if args.file == "-" else args.file
    source: BinaryIO
    try:
        source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        return fail("events", str(exc))
    with source:
        while chunk := source.read(args.chunk_size):
            if len(head) < SNIFF_BYTES:
                head += chunk[: SNIFF_BYTES - len(head)]
            size += len(chunk)
            if count == 0:
                text.feed(chunk)
            try:
                events = decoder.feed(chunk)
            except EventTooLarge as exc:
                events = exc.events
                say("events", str(exc))
                status = 1
            count += len(events)
            for ev in events:
                record = {"event": ev.event, "data": ev.data, "id": ev.id, "retry": ev.retry}
                out.write(orjson.dumps(record) + b"\n")
    decoder.close()
    out.flush()
    if count == 0 and size:
        text.close()
        why = not_sse(head) or text.not_a_stream()
        if why is not None:
            return fail("events", f"{name}: not an event stream: {why}", 1)
        say("events", f"{name}: no event in {size} bytes")
    if decoder.truncated:
        say("events", f"{name}: the stream ended inside an event; it was discarded")
    return status
