"""``python -m fastsse demo``: stream a chat completion, print tokens as they arrive, then the fold.

With no ``--url`` it starts the built-in loopback server on a free port and talks to it; with
``--url`` (and ``--model``, ``--api-key``) it talks to any OpenAI-compatible server.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import orjson

from .. import BACKEND
from .._errors import TransportError
from ..client import create_stream


@contextlib.contextmanager
def _endpoint(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from ..testing import serve_in_thread

    with serve_in_thread(port=0) as server:
        yield server.base_url


def _printer(out: Any) -> Any:
    state = {"reasoning": False}

    def on_chunk(chunk: dict[str, Any]) -> bool:
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                continue
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str):
                    if not state["reasoning"]:
                        out.write("(thinking) ")
                        state["reasoning"] = True
                    out.write(f"\x1b[2m{delta[key]}\x1b[0m" if out.isatty() else delta[key])
            if isinstance(delta.get("content"), str):
                if state["reasoning"]:
                    out.write("\n\n")
                    state["reasoning"] = False
                out.write(delta["content"])
            for call in delta.get("tool_calls") or ():
                if isinstance(call, dict) and isinstance(call.get("function"), dict):
                    fn = call["function"]
                    if fn.get("name"):
                        out.write(f"\n[tool call {call.get('index', 0)}: {fn['name']}] ")
                    if isinstance(fn.get("arguments"), str):
                        out.write(fn["arguments"])
        out.flush()
        return True  # return False to cancel mid-stream

    return on_chunk


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fastsse demo", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument(
        "--url", help="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1"
    )
    parser.add_argument(
        "--model", default=None, help="model name (default: the loopback server's 'demo' scenario)"
    )
    parser.add_argument("--api-key", default=None, help="API key (default: OPENAI_API_KEY)")
    parser.add_argument("--prompt", default="Write a short haiku about the sea.", help="the user message")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds for the whole request (default 120)"
    )
    args = parser.parse_args(argv)

    model = args.model or ("demo" if not args.url else os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    request = {
        "model": model,
        "messages": [{"role": "user", "content": args.prompt}],
        "stream_options": {"include_usage": True},
    }
    out = sys.stdout
    with _endpoint(args.url) as base_url:
        print(f"fastsse demo (backend: {BACKEND}) -> {base_url} model={model}\n", file=sys.stderr)
        try:
            result = create_stream(
                request,
                _printer(out),
                base_url=base_url,
                api_key=args.api_key or os.environ.get("OPENAI_API_KEY") or "sk-loopback",
                timeout=args.timeout,
                connect_timeout=10,
            )
        except TransportError as exc:
            print(f"\nfastsse demo: {exc}", file=sys.stderr)
            print(orjson.dumps(exc.result, option=orjson.OPT_INDENT_2).decode(), file=out)
            return 2
    out.write("\n\nFinal aggregated response:\n")
    out.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 1 if "status" in result else 0
