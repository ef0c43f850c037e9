"""``python -m fastsse demo``: stream a chat completion, print tokens as they arrive, then the fold.

With no ``--url`` it starts the built-in loopback server on a free port and talks to it; with
``--url`` (and ``--model``, ``--api-key``) it talks to any OpenAI-compatible server.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

import orjson

from .. import BACKEND
from .._errors import TransportError
from ._common import Parser, command, fail, prog, require, say

DESCRIPTION = """\
Stream a chat answer and fold it. The text is printed as it arrives (reasoning
first, marked "(thinking)"), tool calls by name as they open and whole once the
answer is folded, then the folded chat.completion with its verdict.

With no --url, the built-in loopback server is started on 127.0.0.1 and answers
as the model named by --model (default: demo); {prog} serve --help
lists its models (tools, reasoning, error, http-401, ...)."""

EPILOG = """\
Exit status: 0 when the verdict says the answer is complete, 1 when it is not
(an error in the stream, a cut, no [DONE]) or the server answered with an HTTP
error such as 401, 2 when no request could be made (a usage error, pycurl
missing, the connection refused or timed out)."""


@contextlib.contextmanager
def _endpoint(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from ..testing import serve_in_thread

    with serve_in_thread(port=0) as server:
        yield server.base_url


class Printer:
    """``on_chunk`` for the demo: the text of choice 0 as it arrives, in words a person can read.

    Tool-call arguments arrive as fragments, interleaved when a model makes several calls at once,
    so they are not printed as they come: each call is announced by name when it opens, and
    ``tool_calls`` prints the folded calls once the stream has ended.
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.reasoning = False
        self.column = 0  # characters on the current output line, to start announcements on a fresh one
        self.printed = False

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.printed = True
            newline = text.rfind("\n")
            self.column = len(text) - newline - 1 if newline >= 0 else self.column + len(text)

    def _line(self, text: str) -> None:
        self._write(("\n" if self.column else "") + text + "\n")

    def __call__(self, chunk: dict[str, Any]) -> bool:
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                continue
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str) and delta[key]:
                    if not self.reasoning:
                        self._write("(thinking) ")
                        self.reasoning = True
                    text = delta[key]
                    self._write(f"\x1b[2m{text}\x1b[0m" if self.out.isatty() else text)
            if isinstance(delta.get("content"), str) and delta["content"]:
                if self.reasoning:
                    self._write("\n\n")
                    self.reasoning = False
                self._write(delta["content"])
            for call in delta.get("tool_calls") or ():
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"]:
                    self._line(f"[tool call {call.get('index', 0)}: {fn['name']} ...]")
        self.out.flush()
        return True  # return False to cancel mid-stream

    def tool_calls(self, result: dict[str, Any]) -> None:
        choices = result.get("choices") or [{}]
        calls = (choices[0].get("message") or {}).get("tool_calls") or []
        for n, call in enumerate(calls):
            fn = call.get("function") or {}
            self._line(f"[tool call {n}] {fn.get('name')}({fn.get('arguments') or ''})")


def _why_incomplete(result: dict[str, Any]) -> str:
    verdict = result.get("verdict") or {}
    error = result.get("error")
    if verdict.get("error"):
        message = error.get("message") if isinstance(error, dict) else error
        return f"the server sent an error in the stream: {message}"
    if verdict.get("truncated"):
        return "the stream ended in the middle of an event"
    if verdict.get("too_large"):
        return "an event was larger than max_event_bytes"
    if verdict.get("aborted"):
        return "the stream was cancelled"
    if not verdict.get("done"):
        return "the stream ended without data: [DONE]"
    missing = [n for n, reason in enumerate(verdict.get("finish_reasons") or ()) if reason is None]
    if missing or not verdict.get("finish_reasons"):
        return f"choice {missing[0] if missing else 0} got no finish_reason"
    return "the verdict says it is not complete"


def _http_error(result: dict[str, Any]) -> str:
    error = result.get("error")
    message = error.get("message") if isinstance(error, dict) else error
    kind = f" ({error['type']})" if isinstance(error, dict) and error.get("type") else ""
    text = str(message).strip() if message is not None else "no error message"
    return f"HTTP {result['status']}: {text[:300]}{kind}"


@command("demo")
def main(argv: list[str] | None = None) -> int:
    parser = Parser("demo", DESCRIPTION.format(prog=prog()), EPILOG)
    parser.add_argument(
        "--url", help="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1"
    )
    parser.add_argument(
        "--model",
        default=None,
        help="model name (default: demo on the loopback server; with --url, $OPENAI_MODEL or gpt-4o-mini)",
    )
    parser.add_argument("--api-key", default=None, help="API key (default: $OPENAI_API_KEY)")
    parser.add_argument("--prompt", default="Write a short haiku about the sea.", help="the user message")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds for the whole request (default 120)"
    )
    args = parser.parse_args(argv)
    require("pycurl", "demo")  # before a server is started for nothing

    from ..client import create_stream

    model = args.model or ("demo" if not args.url else os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    request = {
        "model": model,
        "messages": [{"role": "user", "content": args.prompt}],
        "stream_options": {"include_usage": True},
    }
    out = sys.stdout
    printer = Printer(out)
    with _endpoint(args.url) as base_url:
        print(f"fastsse demo (backend: {BACKEND}) -> {base_url} model={model}\n", file=sys.stderr)
        try:
            result = create_stream(
                request,
                printer,
                base_url=base_url,
                api_key=args.api_key or os.environ.get("OPENAI_API_KEY") or "sk-loopback",
                timeout=args.timeout,
                connect_timeout=10,
            )
        except TransportError as exc:
            if printer.column:
                out.write("\n")
            out.flush()
            return fail("demo", str(exc))
    if "status" in result:  # an HTTP error (or a page instead of a stream): there is no answer to print
        return fail("demo", f"{base_url}: {_http_error(result)}", 1)
    printer.tool_calls(result)
    complete = bool((result.get("verdict") or {}).get("complete"))
    title = "Final aggregated response:" if complete else "Partial response (the answer is incomplete):"
    out.write(("\n\n" if printer.column else "\n") + title + "\n")
    out.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    out.flush()
    if not complete:
        say("demo", f"the answer is incomplete: {_why_incomplete(result)}")
        return 1
    return 0
