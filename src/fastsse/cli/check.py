"""``python -m fastsse check``: lint a captured stream, or a live endpoint, with ``fastsse.check``.

``--url`` posts one small streaming request of the chosen API through a ``Client``'s ``post``
(the engine, with the client's schemes, header and key checks, the auth rule, protocols, content
decoding and timeouts), as ``create_stream`` sends it; only the body goes elsewhere: every byte of
a non-error answer reaches the linter as it arrives, whatever its Content-Type.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, Final

import orjson

from .. import Decoder
from .._errors import TransportError
from .._formats import api_format
from ..apis import NAMES
from ..check import CODES, ERROR, WARNING, Finding, MessagesChecker, ResponsesChecker
from ..check import checker as make_checker
from ..client import Client, Reply
from ..load import not_found
from ._common import MAX_EVENT_BYTES, Parser, fail, missing

_PROMPT: Final = "Say hello in one short sentence."
HINT_BYTES: Final = 16384  # of the stream's start kept for the --api hint: its first events
HINT_EVENTS: Final = 32
ERROR_BYTES: Final = 1 << 20  # of an error answer's body read at most
STREAM_HEADERS: Final = {"Content-Type": "application/json", "Accept": "text/event-stream"}
_API_NAMES: Final = {"chat": "chat completions", "responses": "Responses", "messages": "Messages"}


def _request(args: argparse.Namespace) -> bytes:
    """The body ``--url`` posts for ``--api``: a short prompt, with ``"stream": true``."""
    fmt = api_format(args.api)
    request: dict[str, Any] = {"model": args.model}
    if fmt.name == "chat":
        request["messages"] = [{"role": "user", "content": _PROMPT}]
        if args.expect_usage:
            request["stream_options"] = {"include_usage": True}
    elif fmt.name == "messages":
        request.update(max_tokens=256, messages=[{"role": "user", "content": _PROMPT}])
    else:
        request["input"] = _PROMPT
    return fmt.body(request)


def _base_url(args: argparse.Namespace) -> str:
    """``--url`` without the API's path, when it was given with it."""
    url: str = args.url
    return url.rstrip("/").removesuffix(api_format(args.api).path)


def fetch(args: argparse.Namespace, feed: Callable[[bytes], None], /) -> Reply:
    """POST the ``--url`` request through a one-connection ``Client`` of ``--api`` (its URL, header
    and key checks, the auth rule, content decoding, ``--timeout``), every body byte of an answer
    below 400 handed to ``feed`` as it arrives, whatever its Content-Type; the reply holds the
    status, the headers and an error answer's body.

    It raises InvalidRequest or TypeError for a bad URL or key (before sending), TransportError
    when the transfer fails (``.result`` holds the status and headers of an answer that began),
    ImportError without pycurl.
    """
    fmt = api_format(args.api)
    with Client(
        api=fmt.name,
        base_url=_base_url(args),
        api_key=args.api_key or None,
        timeout=args.timeout,
        connect_timeout=min(args.timeout, 10.0),
        max_retries=0,
        max_connections=1,
    ) as client:
        return client.post(
            fmt.path, _request(args), headers=STREAM_HEADERS, on_body=feed, max_body_bytes=ERROR_BYTES
        )


def looks_like(head: bytes, /) -> tuple[str, str] | None:
    """``looks_like(head) -> (api, evidence) | None``: the API whose stream ``head`` (the first
    bytes of one) starts like, from its first events: ``"messages"`` or ``"responses"`` for their
    event types (in ``event:`` lines or in the payloads' ``"type"``), ``"chat"`` for
    ``chat.completion.chunk`` objects or chunks with ``choices``; None when no event tells."""
    for event in Decoder().feed(head)[:HINT_EVENTS]:
        for api, types in (("messages", MessagesChecker.types), ("responses", ResponsesChecker.types)):
            if event.event in types:
                return api, f"event: {event.event}"
        try:
            payload = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(payload, dict):
            continue
        kind = payload.get("type")
        for api, types in (("messages", MessagesChecker.types), ("responses", ResponsesChecker.types)):
            if isinstance(kind, str) and kind in types:
                return api, f'"type": "{kind}"'
        if payload.get("object") == "chat.completion.chunk":
            return "chat", '"object": "chat.completion.chunk"'
        if isinstance(payload.get("choices"), list):
            return "chat", 'chunks with "choices"'
    return None


def _hint(api: str, head: bytes, findings: list[Finding]) -> str | None:
    """The --api hint: a stream with findings that starts like another API's, or None."""
    if not findings:
        return None
    guess = looks_like(head)
    if guess is None or guess[0] == api:
        return None
    other, evidence = guess
    return f"it looks like a {_API_NAMES[other]} stream ({evidence}): try --api {other}"


def _format(findings: list[Finding], source: str, size: int, events: int) -> str:
    errors = sum(f.severity == ERROR for f in findings)
    warnings = len(findings) - errors
    lines = [
        f"{source}:{f.offset if f.offset is not None else '-'}: {f.severity} {f.code}: {f.message}"
        for f in findings
    ]
    if findings:
        lines.append(f"{source}: {errors} error(s), {warnings} warning(s) in {size} bytes, {events} event(s)")
    else:
        lines.append(f"{source}: compliant ({size} bytes, {events} event(s))")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m fastsse check``: exit 0 when compliant (warnings allowed), 1 on errors, 2 on usage or transport errors."""
    parser = Parser(
        "check",
        "Lint a captured OpenAI-style chat stream, or a live endpoint, for the shape clients rely on.",
        epilog="Exit status: 0 no errors (warnings allowed), 1 errors found (or the input is not an\n"
        "event stream), 2 usage or transport error. Every finding code is explained in\n"
        "docs/conformance.md.",
    )
    parser.add_argument("file", nargs="?", help="a captured stream (the raw response body); - reads stdin")
    parser.add_argument(
        "--url",
        help="POST a small streaming request of --api to this endpoint (a base URL, or one ending in the"
        " API's path: /chat/completions, /responses, /messages)",
    )
    parser.add_argument("--model", default="gpt-4o-mini", help="model for --url (default: gpt-4o-mini)")
    parser.add_argument(
        "--api-key", help="key for --url (default: $OPENAI_API_KEY; $ANTHROPIC_API_KEY with --api messages)"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds for the whole --url request (default 60)"
    )
    parser.add_argument(
        "--expect-usage",
        action="store_true",
        help="require a usage chunk (with --url, also ask for it with stream_options.include_usage)",
    )
    parser.add_argument(
        "--max-event-bytes",
        type=int,
        default=MAX_EVENT_BYTES,
        metavar="N",
        help=f"report an event (or a line) larger than N bytes as event-too-large and skip it unread, so"
        f" memory stays bounded (default {MAX_EVENT_BYTES} = 16 MiB)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    parser.add_argument(
        "--api",
        choices=NAMES,
        default="chat",
        help="the stream's grammar: chat completions (default), OpenAI Responses or Anthropic Messages",
    )
    args = parser.parse_args(argv)
    if (args.file is None) == (args.url is None):
        parser.print_usage(sys.stderr)
        return fail("check", "give exactly one of FILE, - or --url URL")

    if args.api != "chat" and args.expect_usage:
        return fail("check", "--expect-usage applies to chat streams only")
    if args.max_event_bytes < 1:
        return fail("check", "--max-event-bytes takes a positive number of bytes")
    checker = make_checker(args.api, expect_usage=args.expect_usage, max_event_bytes=args.max_event_bytes)
    head = bytearray()  # the stream's first bytes, for the --api hint

    def feed(chunk: bytes) -> None:
        if len(head) < HINT_BYTES:
            head.extend(chunk[: HINT_BYTES - len(head)])
        checker.feed(chunk)

    http_findings: list[Finding] = []
    cut: Finding | None = None
    if args.url is not None:
        source = args.url
        reply: Reply | None = None
        try:
            reply = fetch(args, feed)
        except ImportError:
            return fail("check", missing("pycurl", "check --url"))
        except TransportError as exc:
            # refused, or timed out before the answer began: nothing to lint
            if not checker.size or not isinstance(exc.result.get("http"), dict):
                return fail("check", str(exc))
            # cut after the answer began: what arrived is linted, and the cut is one more finding
            why = str(exc).split(": ", 1)[-1]  # the words after "URL: "
            cut = Finding(
                "transfer-cut",
                CODES["transfer-cut"].severity,
                checker.size,
                f"the transfer failed after {checker.size} bytes: {why}",
            )
            status, headers = exc.result["http"]["status"], exc.result.get("headers", {})
        except (TypeError, ValueError) as exc:
            return fail("check", str(exc))
        if reply is not None:
            status, headers = reply.status, reply.headers
        if status >= 400:
            assert reply is not None
            text = reply.body.decode("utf-8", "replace").strip()
            hint = not_found(_base_url(args)) if status == 404 else ""
            return fail("check", f"{reply.url}: HTTP {status}: {text[:500]}{hint}")
        content_type = headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "text/event-stream":
            http_findings.append(
                Finding(
                    "content-type",
                    CODES["content-type"].severity,
                    None,
                    f"Content-Type is {content_type or 'missing'!r}, not text/event-stream; SSE clients refuse it",
                )
            )
    else:
        source = "<stdin>" if args.file == "-" else args.file
        try:
            if args.file == "-":
                stream = sys.stdin.buffer
                while chunk := stream.read(65536):
                    feed(chunk)
            else:
                with open(args.file, "rb") as f:
                    while chunk := f.read(65536):
                        feed(chunk)
        except OSError as exc:
            return fail("check", str(exc))
    size = checker.size
    checker.close()
    findings = http_findings + checker.findings + ([cut] if cut is not None else [])
    foreign = [f.code for f in checker.findings] == ["not-sse"]
    guess = None if foreign else _hint(args.api, bytes(head), checker.findings)
    if args.json:
        report = {
            "source": source,
            "bytes": size,
            "events": checker.events,
            "errors": sum(f.severity == ERROR for f in findings),
            "warnings": sum(f.severity == WARNING for f in findings),
            "findings": [f.as_dict() for f in findings],
            "hint": guess,
        }
        sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
    elif foreign:
        # one line: the other findings would only describe how an HTML page or a binary fails as SSE
        for finding in http_findings:
            print(f"{source}: {finding.severity} {finding.code}: {finding.message}")
        print(f"{source}: {checker.findings[0].message} ({size} bytes)")
    else:
        print(_format(findings, source, size, checker.events))
        if guess is not None:
            print(f"{source}: hint: {guess}")
    return 1 if any(f.severity == ERROR for f in findings) else 0
