"""``python -m fastsse demo``: stream a chat completion, print tokens as they arrive, then the fold.

With no ``--url`` it starts the built-in loopback server on a free port and talks to it; with
``--url`` (and ``--model``, ``--api-key``) it talks to any OpenAI-compatible server.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, Final, TextIO

import orjson

from .. import BACKEND
from .._errors import TransportError
from ..load import endpoint, not_found
from ..sse.lint import SNIFF_BYTES, not_sse, short
from ._common import Parser, command, fail, prog, require, say

DESCRIPTION = """\
Stream a chat answer and fold it. The text is printed as it arrives (reasoning
first, marked "(thinking)", a refusal marked "(refusal)"; several choices a line
at a time, each prefixed [choice N]), tool calls by name as they open and whole
once the answer is folded, then the folded chat.completion with its verdict.

With no --url, the built-in loopback server is started on 127.0.0.1 and answers
as the model named by --model (default: demo); {prog} serve --help
lists its models (tools, reasoning, error, http-401, ...)."""

EPILOG = """\
Exit status: 0 when the verdict says the answer is complete, 1 when it is not
(an error in the stream, a cut, no [DONE]; the partial response is printed) or
the server answered with an HTTP error such as 401 or a page instead of a
stream, 2 when no answer began (a usage error, pycurl missing, the connection
refused, a timeout before the first chunk)."""


@contextlib.contextmanager
def _endpoint(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from ..testing import serve_in_thread

    with serve_in_thread(port=0) as server:
        yield server.base_url


class Printer:
    """``on_chunk`` for the demo: each choice's text as it arrives, in words a person can read.

    One choice streams token by token: reasoning first, marked "(thinking)", a refusal marked
    "(refusal)". When a stream carries several choices their tokens interleave, so each choice's text
    is printed a line at a time (and its last line when it finishes), prefixed ``[choice N]``.
    Tool-call arguments arrive as fragments, interleaved when a model makes several calls at once,
    so they are not printed as they come: each call is announced by name when it opens, and
    ``tool_calls`` prints the folded calls once the stream has ended.
    """

    _MARKS: Final = {"reasoning": "(thinking) ", "refusal": "(refusal) ", "content": ""}

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.column = 0  # characters on the current output line, to start announcements on a fresh one
        self.printed = False
        self.choices: set[int] = set()
        self.kind: dict[int, str] = {}  # choice -> what its text is now: reasoning, content or refusal
        self.pending: dict[int, str] = {}  # several choices: each one's unfinished line

    @property
    def multi(self) -> bool:
        return len(self.choices) > 1

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.printed = True
            newline = text.rfind("\n")
            self.column = len(text) - newline - 1 if newline >= 0 else self.column + len(text)

    def _line(self, text: str) -> None:
        self._write(("\n" if self.column else "") + text + "\n")

    def _prefix(self, index: int) -> str:
        return f"[choice {index}] " if self.multi else ""

    def _text(self, index: int, kind: str, text: str) -> None:
        previous = self.kind.get(index)
        self.kind[index] = kind
        if self.multi:
            if previous != kind:
                self._flush(index)
                self.pending[index] = self._MARKS[kind]
            self.pending[index] = self.pending.get(index, "") + text
            *lines, self.pending[index] = self.pending[index].split("\n")
            for line in lines:
                self._line(self._prefix(index) + line)
            return
        if previous != kind:
            if previous is not None:
                self._write("\n\n" if self.column else "\n")
            self._write(self._MARKS[kind])
        dim = kind == "reasoning" and self.out.isatty()
        self._write(f"\x1b[2m{text}\x1b[0m" if dim else text)

    def _flush(self, index: int) -> None:
        rest = self.pending.pop(index, "")
        if rest.strip():
            self._line(self._prefix(index) + rest)

    def __call__(self, chunk: dict[str, Any]) -> bool:
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            if type(index) is not int:
                continue
            if index not in self.choices:
                self.choices.add(index)
                if len(self.choices) == 2 and self.column:
                    self._write("\n")  # choice 0's live line ends; from here on, lines carry their choice
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                continue
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str) and delta[key]:
                    self._text(index, "reasoning", delta[key])
            for key in ("content", "refusal"):
                if isinstance(delta.get(key), str) and delta[key]:
                    self._text(index, key, delta[key])
            for call in delta.get("tool_calls") or ():
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"]:
                    self._line(f"{self._prefix(index)}[tool call {call.get('index', 0)}: {fn['name']} ...]")
            if choice.get("finish_reason") is not None:
                self._flush(index)
        self.out.flush()
        return True  # return False to cancel mid-stream

    def finish(self, result: dict[str, Any]) -> None:
        """Print what is still pending (several choices' last lines), then each choice's folded tool calls."""
        for index in sorted(self.pending):
            self._flush(index)
        for choice in result.get("choices") or ():
            calls = (choice.get("message") or {}).get("tool_calls") or []
            prefix = self._prefix(choice.get("index", 0))
            for n, call in enumerate(calls):
                fn = call.get("function") or {}
                self._line(f"{prefix}[tool call {n}] {fn.get('name')}({fn.get('arguments') or ''})")


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
    error = result["http"]["error"]
    status = f"HTTP {result['http']['status']}"
    if isinstance(error, str):  # a body that is not an error object: a page, a document, a text
        body = error.encode("utf-8", "replace")
        first = error.strip().split("\n", 1)[0]
        why = not_sse(body[:SNIFF_BYTES]) or (f"it starts {short(first)}" if first else "it is empty")
        return f"{status}: not an event stream: {why} ({len(body)} bytes)"
    message = error.get("message") if isinstance(error, dict) else error
    kind = f" ({error['type']})" if isinstance(error, dict) and error.get("type") else ""
    text = " ".join(str(message).split()) if message is not None else "no error message"
    if len(text) > 300:
        text = text[:299] + "\u2026"
    return f"{status}: {text}{kind}"


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

    from ..client import create_stream, prepare

    model = args.model or ("demo" if not args.url else os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    request = {
        "model": model,
        "messages": [{"role": "user", "content": args.prompt}],
        "stream_options": {"include_usage": True},
    }
    options: dict[str, Any] = {
        "api_key": args.api_key or os.environ.get("OPENAI_API_KEY") or "sk-loopback",
        "timeout": args.timeout,
        "connect_timeout": 10,
    }
    out = sys.stdout
    printer = Printer(out)
    cut: str | None = None  # why the transfer failed after the answer began
    with _endpoint(args.url) as base_url:
        # create_stream's own checks, before the banner: a bad --url or --timeout is then the one
        # line the dispatcher prints (fastsse.cli._common.bad_argument), with nothing above it
        prepare(request, base_url=base_url, **options)
        print(f"fastsse demo (backend: {BACKEND}) -> {base_url} model={model}\n", file=sys.stderr)
        try:
            result = create_stream(request, printer, base_url=base_url, **options)
        except TransportError as exc:
            result = exc.result  # the fold of what arrived before the failure
            if not (printer.choices or result.get("id") is not None or result.get("choices")):
                if printer.column:
                    out.write("\n")
                out.flush()
                return fail("demo", str(exc))  # no answer began: nothing to show
            cut = f"the transfer failed mid-stream: {exc}"
    http = result.get("http") or {}
    if http.get("error") is not None:  # an HTTP error (or a page instead of a stream): no answer to print
        if http["status"] == 404:  # the URL tried, and the /v1 a base URL most often lacks
            return fail("demo", f"{endpoint(base_url)}: {_http_error(result)}{not_found(base_url)}", 1)
        return fail("demo", f"{base_url}: {_http_error(result)}", 1)
    printer.finish(result)
    complete = bool((result.get("verdict") or {}).get("complete"))
    title = "Final aggregated response:" if complete else "Partial response (the answer is incomplete):"
    out.write(("\n\n" if printer.column else "\n") + title + "\n")
    out.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    out.flush()
    if not complete:
        say("demo", f"the answer is incomplete: {cut or _why_incomplete(result)}")
        return 1
    return 0
