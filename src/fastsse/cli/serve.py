"""``python -m fastsse serve``: the loopback server (``fastsse.testing.server``) until Ctrl-C, or with
``--scripted`` the scripted load-test server (``fastsse.load``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import sys

from ..load import Script, ScriptedServer, coerce_field
from ..testing import server
from ..testing.server import LoopbackServer
from ._common import Parser, fail, port


def main(argv: list[str] | None = None) -> int:
    """``python -m fastsse serve``: run the loopback server until Ctrl-C (``--scripted``: the load-test server)."""
    if argv is None:
        argv = sys.argv[1:]
    if "--scripted" in argv:
        return _scripted([arg for arg in argv if arg != "--scripted"])
    doc = server.__doc__ or ""
    scenarios = doc[doc.index("The request's") : doc.index("Every compliant")]
    parser = Parser(
        "serve",
        "Run the OpenAI-compatible loopback streaming server on 127.0.0.1.",
        epilog=scenarios.replace("``", "").rstrip()
        + "\n\nWRITE: small (uneven 1-11 byte pieces), event (one event per write), "
        "bulk (64 KiB writes).\n\n--scripted runs the scripted load-test server instead: known TTFT, "
        "ITL, tokens per chunk, send stamps, thousands of streams (python -m fastsse serve --scripted --help).",
    )
    parser.add_argument(
        "--port", type=port, default=8000, help="TCP port on 127.0.0.1; 0 picks a free one (default 8000)"
    )
    parser.add_argument("--api-key", help="answer 401 unless requests carry Authorization: Bearer API_KEY")
    parser.add_argument("--write", choices=server.WRITE_MODES, help="force one write mode for every stream")
    parser.add_argument(
        "--pause", type=float, default=0.0001, help="seconds between small pieces (default 0.0001)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the piece sizes (default 0)")
    parser.add_argument("--quiet", action="store_true", help="do not log requests")
    args = parser.parse_args(argv)
    try:
        loopback = LoopbackServer(
            args.port,
            api_key=args.api_key,
            write=args.write,
            pause=args.pause,
            seed=args.seed,
            verbose=not args.quiet,
        )
    except OSError as exc:
        return fail("serve", f"cannot listen on 127.0.0.1:{args.port}: {exc}")
    print(f"fastsse loopback server: {loopback.base_url}  (Ctrl-C stops it)", flush=True)
    try:
        loopback.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        loopback.close()
    return 0


def _scripted(argv: list[str]) -> int:
    """``python -m fastsse serve --scripted``: run the scripted server until Ctrl-C."""
    doc = sys.modules[Script.__module__].__doc__ or ""  # the scripted server's own guide
    parser = argparse.ArgumentParser(
        prog="python -m fastsse serve --scripted",
        description="Run the scripted OpenAI-compatible load-test server on 127.0.0.1.",
        epilog=doc[doc.index("**The script**") :].replace("``", "").replace("**", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--port", type=port, default=8000, help="TCP port on 127.0.0.1; 0 picks one (default 8000)"
    )
    parser.add_argument(
        "--cpu", type=int, help="pin the server to this core (benchmarks: keep it off the client's)"
    )
    parser.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="event loop: auto takes uvloop when installed (at 1,024 streams it kept to its schedule far better)",
    )
    parser.add_argument("--quiet", action="store_true", help="print only the address line")
    helps = {
        "ttft_ms": "ms from the request to the first token chunk (default 50)",
        "itl_ms": "ms between token chunks (default 20)",
        "chunks": "token chunks (default: from max_tokens, else 100)",
        "tokens_per_chunk": "tokens in each chunk (default 1)",
        "reasoning_chunks": "the first N chunks are reasoning_content (default 0)",
        "usage": "none, final or continuous (default: as stream_options asks)",
        "logprobs": "true: one logprobs entry per token (default: as the request asks)",
        "events_per_write": "events per HTTP chunk (default 1)",
        "chunk_per_event": "true: each event its own HTTP chunk, a group in one write (default false)",
        "truncate_after": "cut the connection after N token chunks",
        "error_after": "an error payload after N token chunks, no [DONE]",
        "status": "answer this HTTP error status instead",
        "stamp": "false: no fastsse_sent_ns stamp (default true)",
    }
    for field in dataclasses.fields(Script):
        # each value is checked and converted by coerce_field below, as a request's script is
        parser.add_argument(f"--{field.name.replace('_', '-')}", default=None, help=helps[field.name])
    args = parser.parse_args(argv)
    try:
        changes = {
            f.name: coerce_field(f.name, getattr(args, f.name))
            for f in dataclasses.fields(Script)
            if getattr(args, f.name) is not None
        }
        defaults = Script(**changes)
    except ValueError as exc:
        parser.error(str(exc))
    if args.cpu is not None:
        try:
            os.sched_setaffinity(0, {args.cpu})
        except (AttributeError, OSError) as exc:
            print(
                f"python -m fastsse serve --scripted: cannot pin to core {args.cpu}: {exc}", file=sys.stderr
            )
            return 2
    loop: asyncio.AbstractEventLoop | None = None
    if args.loop != "asyncio":
        try:
            import uvloop

            loop = uvloop.new_event_loop()
        except ImportError:
            if args.loop == "uvloop":
                print("python -m fastsse serve --scripted: uvloop is not installed", file=sys.stderr)
                return 2
    if loop is None:
        loop = asyncio.new_event_loop()
    server = ScriptedServer(args.port, defaults=defaults)
    try:
        loop.run_until_complete(server.start())
    except OSError as exc:
        print(
            f"python -m fastsse serve --scripted: cannot listen on 127.0.0.1:{args.port}: {exc}",
            file=sys.stderr,
        )
        return 2
    print(f"fastsse scripted server: {server.base_url}  (Ctrl-C stops it)", flush=True)
    if not args.quiet:
        print(f"script defaults: {dataclasses.asdict(defaults)}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        loop.run_forever()
    loop.run_until_complete(server.close())
    loop.close()
    return 0
