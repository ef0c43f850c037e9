"""``python -m fastsse gateway``: ``fastsse.gateway.Gateway`` served by uvicorn (httptools, uvloop
where installed), from a TOML file (``--config``) or flags for the simple case, with JSON logs,
graceful SIGTERM and ``--workers`` processes on one pre-bound socket. docs/gateway.md."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import time
from typing import Any

from ..gateway import ConfigError, Gateway, GatewayConfig, JsonFormatter, QuietCuts, config_from, load_config
from ._common import CommandError, Parser, port, require

EPILOG = """\
A config file names the fields exactly (docs/gateway.md lists them all):

  [server]
  host = "127.0.0.1"
  port = 8080
  keys_env = "GATEWAY_KEYS"        # inbound keys, comma-separated (or keys = ["..."])
  max_body_bytes = 4194304

  [[upstream]]
  name = "primary"
  base_url = "http://127.0.0.1:8000/v1"
  api = "chat"                      # chat, responses or messages
  api_key_env = "PRIMARY_KEY"       # or api_key = "..."

  [[upstream]]                      # tried when the first fails before its first byte
  name = "backup"
  base_url = "https://api.anthropic.com/v1"
  api = "messages"
  api_key_env = "ANTHROPIC_API_KEY"

Routes: POST /v1/chat/completions, /v1/responses, /v1/messages; GET /v1/models, /health, /metrics.
SIGTERM: new requests get 503, streams in flight finish within server.grace_seconds."""


def main(argv: list[str] | None = None) -> int:
    """``python -m fastsse gateway``: serve the configured upstreams until SIGTERM or Ctrl-C."""
    parser = Parser(
        "gateway",
        "Serve chat completions, Responses and Messages over upstreams of any of the three.",
        epilog=EPILOG,
    )
    parser.add_argument("--config", metavar="FILE", help="the TOML configuration")
    parser.add_argument(
        "--upstream", metavar="URL", action="append", help="an upstream base URL (repeat: fallbacks in order)"
    )
    parser.add_argument(
        "--api",
        choices=("chat", "responses", "messages"),
        default="chat",
        help="the --upstream's API (default chat)",
    )
    parser.add_argument(
        "--upstream-key-env", metavar="VAR", help="the environment variable holding the --upstream's key"
    )
    parser.add_argument(
        "--keys-env",
        metavar="VAR",
        help="the environment variable holding the inbound keys (comma-separated)",
    )
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port, help="TCP port (default 8080; 0 picks a free one)")
    parser.add_argument("--workers", type=int, help="processes sharing the port (default 1)")
    parser.add_argument("--log", choices=("json", "text"), help="log format on stderr (default json)")
    args = parser.parse_args(argv)
    if args.config and args.upstream:
        parser.error("give --config or --upstream, not both")
    if not args.config and not args.upstream:
        parser.error("give --config FILE or --upstream URL")
    try:
        config = _config(args)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    require("uvicorn", "python -m fastsse gateway")
    return run(config)


def _config(args: Any) -> GatewayConfig:
    if args.config:
        config = load_config(args.config)
        server = dict(vars(config.server))
        upstreams = [dict(vars(u)) for u in config.upstreams]
        for u in upstreams:  # already read: keep the key, drop the variable's name
            u.pop("api_key_env")
    else:
        server = {}
        upstreams = []
        for index, url in enumerate(args.upstream):
            entry: dict[str, Any] = {
                "name": f"upstream-{index}" if index else "upstream",
                "base_url": url,
                "api": args.api,
            }
            if args.upstream_key_env:
                entry["api_key_env"] = args.upstream_key_env
            upstreams.append(entry)
    for flag, field in (
        ("host", "host"),
        ("port", "port"),
        ("workers", "workers"),
        ("log", "log"),
        ("keys_env", "keys_env"),
    ):
        if getattr(args, flag) is not None:
            server[field] = getattr(args, flag)
    if args.keys_env:
        server["keys"] = []  # read from the variable only
    elif args.config:
        server.pop("keys_env")  # the keys were read when the file was
    data: dict[str, Any] = {
        "server": {k: list(v) if isinstance(v, tuple) else v for k, v in server.items() if v is not None},
        "upstream": [{k: v for k, v in u.items() if v is not None} for u in upstreams],
    }
    return config_from(data)


def _logging(kind: str) -> None:
    # one record per answer: the caller's file and line, thread and process names are not in
    # the line, so the logging module need not find them (its documented optimisations)
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    if kind == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(QuietCuts())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def _listen(host: str, port_number: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # the accepted ones inherit it. Without it, a response's head and first piece (two writes)
    # meet Nagle and the caller's delayed ACK: 40 ms added to every first byte.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port_number))
    except OSError as exc:
        sock.close()
        raise CommandError(f"cannot listen on {host}:{port_number}: {exc.strerror or exc}") from None
    sock.listen(4096)
    sock.set_inheritable(True)
    return sock


def _more_files() -> None:
    # two descriptors per stream (the caller's and the upstream's): a thousand streams need more
    # than the usual soft limit of 1,024
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            resource.setrlimit(
                resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 16, hard)
            )
    except (ImportError, ValueError, OSError):
        pass


def run(config: GatewayConfig) -> int:
    """Listen, then serve in this process or in ``server.workers`` forked ones; return the exit status."""
    server = config.server
    _logging(server.log)
    _more_files()
    sock = _listen(server.host, server.port)
    host, bound = sock.getsockname()[:2]
    where = f"[{host}]" if ":" in host else host
    names = ", ".join(f"{u.name} ({u.api}) {u.base_url}" for u in config.upstreams)
    print(
        f"fastsse gateway: listening on http://{where}:{bound}  upstreams: {names}",
        file=sys.stderr,
        flush=True,
    )
    if not server.keys and any(u.api_key for u in config.upstreams):
        logging.getLogger("fastsse.gateway").warning(
            "no server.keys: any caller that reaches %s:%d is served with the upstreams' keys", host, bound
        )
    if server.workers == 1 or not hasattr(os, "fork"):
        return _serve(config, sock)
    return _supervise(config, sock)


def _serve(config: GatewayConfig, sock: socket.socket) -> int:
    import uvicorn

    gateway = Gateway(config)
    loop = config.server.loop
    if loop == "auto":
        loop = "uvloop" if _has("uvloop") else "asyncio"
    uconfig = uvicorn.Config(
        gateway,
        loop=loop,
        http=_protocol() if _has("httptools") else "h11",
        lifespan="on",
        access_log=False,
        log_config=None,
        timeout_graceful_shutdown=int(max(1, round(config.server.grace_seconds))),
        timeout_keep_alive=config.server.keep_alive_seconds,  # type: ignore[arg-type]
        backlog=4096,
        server_header=False,
        proxy_headers=False,  # no X-Forwarded-* rewriting: one middleware less per request
    )

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            gateway.drain()  # new requests: 503, while those in flight finish
            super().handle_exit(sig, frame)

    Server(uconfig).run(sockets=[sock])
    return 0


def _protocol() -> type:
    """uvicorn's httptools protocol, which also closes a connection that sends no request (or
    stops in the middle of its head) for ``keep_alive_seconds``: uvicorn arms that timer only
    after a response, so 10,000 sockets opened and left idle would be kept for good."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class Protocol(HttpToolsProtocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm_idle()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            cycle = self.cycle
            if cycle is None or (cycle.response_complete and not self.pipeline):
                self._arm_idle()  # between requests, or a head still incomplete: the clock runs

        def _arm_idle(self) -> None:
            if self.timeout_keep_alive_task is None and not self.transport.is_closing():
                self.timeout_keep_alive_task = self.loop.call_later(
                    self.timeout_keep_alive, self.timeout_keep_alive_handler
                )

    return Protocol


def _supervise(config: GatewayConfig, sock: socket.socket) -> int:
    """Fork the workers (each serves the same listening socket), pass SIGTERM / SIGINT on to them,
    start a worker again if one dies, and return once all have stopped after a signal."""
    log = logging.getLogger("fastsse.gateway")
    stopping: list[int] = []

    def spawn() -> int:
        pid = os.fork()
        if pid == 0:  # the worker
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            status = 1
            try:
                status = _serve(config, sock)
            finally:
                os._exit(status)
        return pid

    children = {spawn() for _ in range(config.server.workers)}

    def forward(sig: int, frame: Any) -> None:
        if not stopping:
            sock.close()  # new connections are refused, not left in a queue nobody reads
        stopping.append(sig)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        children.discard(pid)
        if not stopping:
            log.warning("worker %d exited (status %d); starting another", pid, status)
            time.sleep(0.5)  # a worker that dies at start must not spin
            children.add(spawn())
    return 0


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
