"""``python -m fastsse gateway``: ``fastsse.gateway.Gateway`` served by its own HTTP/1.1 server
(``HttpServer``: httptools, uvloop where installed; uvicorn with ``[server] http = "uvicorn"``), from a TOML file (``--config``) or flags for the simple case, with JSON logs and
``--workers`` processes on one pre-bound socket. SIGTERM (or Ctrl-C) drains: new requests 503, the
answers in flight end within ``grace_seconds``, then exit 0; SIGHUP re-reads the file and swaps it
in for new requests; workers never outlive the main process. docs/gateway.md."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import logging
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, Final

from ..apis import NAMES
from ..gateway import (
    MAX_HEAD_BYTES,
    ConfigError,
    Gateway,
    GatewayConfig,
    HttpServer,
    JsonFormatter,
    MetricsShare,
    QuietCuts,
    TooLarge,
    config_from,
    load_config,
)
from ._common import CommandError, Parser, port, require

# [server] fields a running gateway cannot change: SIGHUP logs a change to them as ignored
RESTART_ONLY: Final = (
    "host",
    "port",
    "workers",
    "log",
    "loop",
    "http",
    "redis_url",
    "limits_without_redis",
    "resumable",
    "resume_max_bytes",
    "resume_ttl_seconds",
)
# seconds uvicorn may still take after the drain (the answers are settled by then: what is left is
# a /metrics or /health answer, and idle connections to close)
SHUTDOWN_SECONDS: Final = 3
RESPAWN_DELAY: Final = 0.5  # seconds before a worker that died is started again: no spinning
PR_SET_PDEATHSIG: Final = 1

log = logging.getLogger("fastsse.gateway")
Reread = Callable[[], GatewayConfig]

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
SIGTERM: /health and new requests get 503, streams in flight finish within server.grace_seconds,
then exit 0. SIGHUP: the config file is read again and swapped in for new requests."""


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
        choices=NAMES,
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
        config, reread = _config(args)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    require("httptools", "python -m fastsse gateway")
    return run(config, reread=reread)


def _config(args: Any) -> tuple[GatewayConfig, Reread | None]:
    """The configuration the flags give, and (with ``--config``) how to read it again for SIGHUP:
    the same file with the same flags over its ``[server]``. It raises ConfigError."""
    overrides: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "workers": args.workers,
        "log": args.log,
        "keys_env": args.keys_env,
    }
    if args.keys_env:
        overrides["keys"] = []  # read from the variable only
    if args.config:
        path = args.config

        def reread() -> GatewayConfig:
            return load_config(path, overrides=overrides)

        return reread(), reread
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
    return config_from({"upstream": upstreams}, overrides=overrides), None


def _reread(reread: Reread, old: GatewayConfig, *, quiet: bool = False) -> GatewayConfig | None:
    """The configuration read again (SIGHUP), with the fields that need a restart kept as they are
    (a change to them logged as ignored), or None when it fails its checks (logged: the old one
    stays). ``quiet``: a worker's read, whose main process already logged the same."""
    try:
        new = reread()
    except ConfigError as exc:
        log.error("SIGHUP: the configuration was not reloaded (the one in use stays): %s", exc)
        return None
    changed = [f for f in RESTART_ONLY if getattr(new.server, f, None) != getattr(old.server, f, None)]
    if changed:
        if not quiet:
            log.warning(
                "SIGHUP: %s changed: ignored until a restart",
                ", ".join(f"server.{field}" for field in changed),
            )
        kept = {field: getattr(old.server, field) for field in changed}
        new = dataclasses.replace(new, server=dataclasses.replace(new.server, **kept))
    if not quiet:
        _warn(new)
    return new


def _warn(config: GatewayConfig) -> None:
    for line in getattr(config, "warnings", ()):
        log.warning("config: %s", line)


def _logging(kind: str) -> None:
    # one record per answer: the caller's file and line, thread and process names are not in
    # the line, so the logging module need not find them (its documented optimisations)
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = _Lines(sys.stderr)
    if kind == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(QuietCuts())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


class _Lines(logging.StreamHandler):  # type: ignore[type-arg]
    """A ``StreamHandler`` that writes each record as one line and calls no ``flush`` of its own
    when the stream writes the line out by itself: a text stream that flushes at each newline (a
    terminal's stderr), or one that writes through to an unbuffered file (stderr elsewhere, since
    Python 3.9). The handler's flush took its lock a second time and asked the stream to write
    what it already wrote, for every answer. Any other stream is flushed as ``StreamHandler``
    flushes it."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        raw = getattr(stream, "write_through", False) and isinstance(
            getattr(stream, "buffer", None), io.RawIOBase
        )
        self._flushes = not (getattr(stream, "line_buffering", False) or raw)

    def emit(self, record: logging.LogRecord) -> None:
        """The record, formatted, and a newline, in one write."""
        if self._flushes:
            super().emit(record)
            return
        try:
            self.stream.write(self.format(record) + self.terminator)
        except RecursionError:  # as StreamHandler: a recursion is the caller's bug
            raise
        except Exception:
            self.handleError(record)


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


def run(config: GatewayConfig, *, reread: Reread | None = None) -> int:
    """Listen, then serve in this process or in ``server.workers`` forked ones until SIGTERM or
    SIGINT; return the exit status. ``reread`` reads the configuration again on SIGHUP (None: SIGHUP
    is logged and changes nothing)."""
    server = config.server
    if hasattr(signal, "SIGHUP"):  # its default action is to exit: ignored until it is handled
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
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
    _warn(config)
    if not server.keys and not getattr(config, "keys", ()) and any(u.api_key for u in config.upstreams):
        log.warning(
            "no server.keys: any caller that reaches %s:%d is served with the upstreams' keys", host, bound
        )
    if server.workers == 1 or not hasattr(os, "fork"):
        return _serve(config, sock, reread=reread)
    return _supervise(config, sock, reread)


def _serve(
    config: GatewayConfig,
    sock: socket.socket,
    *,
    reread: Reread | None,
    parent: int | None = None,
    share: MetricsShare | None = None,
) -> int:
    """Serve ``sock`` in this process until SIGTERM (or SIGINT without a ``parent``) has drained
    it; ``parent``: the main process's pid when this is a worker. Return the exit status."""
    gateway = Gateway(config)
    gateway.share = share
    try:
        if config.server.http == "uvicorn":
            _serve_uvicorn(gateway, config, sock, reread, parent)
            return 0
        return _run_loop(config.server.loop, _Serving(gateway, config, reread, parent).run(sock))
    finally:
        if share is not None:  # a forced exit skips the app's shutdown: the figures are kept here
            share.close(gateway.metrics)


def _run_loop(kind: str, main: Any) -> int:
    """Run the coroutine ``main`` on a new event loop (uvloop's for ``auto`` where installed)."""
    loop: asyncio.AbstractEventLoop
    if kind == "uvloop" or (kind == "auto" and _has("uvloop")):
        import uvloop

        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return int(loop.run_until_complete(main))
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


class _Serving:
    """The gateway on its own HTTP/1.1 server (``HttpServer``) with the command's signals: the first
    SIGTERM (SIGINT) drains (``/health`` and new requests 503, the listener still open) and settles
    the answers in flight within ``grace_seconds``; then the idle connections close and the others
    get ``SHUTDOWN_SECONDS`` to end. A second one stops at once. SIGHUP re-reads the configuration.
    A worker whose main process is gone drains the same way."""

    def __init__(self, gateway: Gateway, config: GatewayConfig, reread: Reread | None, parent: int | None):
        self.gateway = gateway
        self.current = config
        self.reread = reread
        self.parent = parent
        self.server = HttpServer(gateway, keep_alive_seconds=config.server.keep_alive_seconds)
        self.draining = False
        self.settling: asyncio.Task[None] | None = None
        self.stopped: asyncio.Future[bool] | None = None  # True: forced

    async def run(self, sock: socket.socket) -> int:
        loop = asyncio.get_running_loop()
        self.stopped = loop.create_future()
        try:
            await self.gateway.startup()
        except Exception as exc:
            log.error("the gateway did not start: %s", exc)
            return 3
        await self.server.start(sock)
        handlers = [signal.SIGTERM, signal.SIGINT, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]
        for sig in handlers:
            try:
                loop.add_signal_handler(sig, self.signalled, sig)
            except (NotImplementedError, RuntimeError):  # Windows: no handlers on the loop
                signal.signal(sig, lambda s, _f: loop.call_soon_threadsafe(self.signalled, s))
        watch = loop.call_later(1.0, self._watch_parent) if self.parent is not None else None
        log.info("serving in process %d", os.getpid())
        try:
            forced = await self.stopped
        finally:
            if watch is not None:
                watch.cancel()
            for sig in handlers:
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(sig)
        if forced:
            self.server.close()
            pending = [*self.server.tasks, *([self.settling] if self.settling is not None else [])]
            for task in pending:
                task.cancel()
            if pending:  # their records are written as they end (cut): a moment, no more
                await asyncio.wait(pending, timeout=0.5)
            return 0
        self.server.shutdown()
        await self.server.wait(SHUTDOWN_SECONDS)
        await self.gateway.shutdown()
        return 0

    def signalled(self, sig: int) -> None:
        if sig == getattr(signal, "SIGHUP", None):
            if not self.draining:
                self._reload()
            return
        if sig == signal.SIGINT and self.parent is not None:
            return  # Ctrl-C reached the whole group: the main process passes it on as SIGTERM
        if self.draining:
            self._stop(True)
            return
        self.draining = True
        self.gateway.drain()
        self.settling = asyncio.get_running_loop().create_task(self._settle())

    def _stop(self, forced: bool) -> None:
        if self.stopped is not None and not self.stopped.done():
            self.stopped.set_result(forced)

    async def _settle(self) -> None:
        try:
            await _drain(self.gateway, self.current.server.grace_seconds)
        finally:
            self._stop(False)

    def _watch_parent(self) -> None:
        if self.draining:
            return
        if _orphaned(self.parent):
            self.signalled(signal.SIGTERM)
            return
        asyncio.get_running_loop().call_later(1.0, self._watch_parent)

    def _reload(self) -> None:
        new = _reload(self.gateway, self.reread, self.current, self.parent)
        if new is not None:
            self.current = new
            self.server.keep_alive_seconds = new.server.keep_alive_seconds


async def _drain(gateway: Gateway, grace: float) -> None:
    """After the first SIGTERM, under either server: the answers in flight settle within
    ``grace`` seconds (a failure of the drain is logged)."""
    log.info("draining: %d answers in flight, grace %gs", gateway.in_flight, grace)
    try:
        await gateway.settle(grace)
    except Exception:
        log.exception("the drain failed")


def _orphaned(parent: int | None) -> bool:
    """Whether this is a worker whose main process ``parent`` is gone (logged: it drains)."""
    if parent is None or os.getppid() == parent:
        return False
    log.warning("the main process %d is gone: worker %d drains", parent, os.getpid())
    return True


def _reload(
    gateway: Gateway, reread: Reread | None, current: GatewayConfig, parent: int | None
) -> GatewayConfig | None:
    """SIGHUP in a serving process: the configuration read again and swapped in (None: unchanged,
    the reason logged)."""
    if reread is None:
        log.warning("SIGHUP: no --config file to read again; nothing changed")
        return None
    new = _reread(reread, current, quiet=parent is not None)
    if new is None:
        return None
    try:
        gateway.reload(new)
    except Exception as exc:
        log.error("SIGHUP: the configuration was not reloaded (the one in use stays): %s", exc)
        return None
    log.info(
        "SIGHUP: configuration reloaded in process %d (%d upstreams, %d routes, %d keys)",
        os.getpid(),
        len(new.upstreams),
        len(getattr(new, "routes", ())),
        len(getattr(new, "keys", ())),
    )
    return new


def _serve_uvicorn(
    gateway: Gateway, config: GatewayConfig, sock: socket.socket, reread: Reread | None, parent: int | None
) -> None:
    """``[server] http = "uvicorn"``: the same app under uvicorn (httptools, uvloop where
    installed), with the same signals."""
    require("uvicorn", 'python -m fastsse gateway with [server] http = "uvicorn"')
    import uvicorn

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
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        timeout_keep_alive=config.server.keep_alive_seconds,  # type: ignore[arg-type]
        backlog=4096,
        server_header=False,
        proxy_headers=False,  # no X-Forwarded-* rewriting: one middleware less per request
    )
    server = _server_class()(uconfig, gateway, config, reread, parent)
    hup = getattr(signal, "SIGHUP", None)  # not on Windows
    previous = signal.signal(hup, server.handle_hup) if hup is not None else None
    try:
        server.run(sockets=[sock])
    finally:
        if hup is not None:
            signal.signal(hup, previous)


def _server_class() -> Any:
    """``uvicorn.Server`` with the gateway's signals: the first SIGTERM (SIGINT) drains (``/health``
    and new requests 503, the listener still open) and settles the answers in flight within
    ``grace_seconds`` before uvicorn shuts down; a second one forces the exit. SIGHUP re-reads the
    configuration. A worker whose main process is gone drains the same way."""
    import uvicorn

    class Server(uvicorn.Server):
        def __init__(
            self,
            uconfig: Any,
            gateway: Gateway,
            config: GatewayConfig,
            reread: Reread | None,
            parent: int | None,
        ) -> None:
            super().__init__(uconfig)
            self.gateway = gateway
            self.current = config
            self.reread = reread
            self.parent = parent
            self.draining = False
            self.hups = 0
            self.settling: Any = None

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if not self.should_exit:
                log.info("serving in process %d", os.getpid())

        # the signal handlers only set flags (and the gateway's own): the loop acts on them at its
        # next tick, a tenth of a second later
        def handle_exit(self, sig: int, frame: Any) -> None:
            if sig == signal.SIGINT and self.parent is not None:
                return  # Ctrl-C reached the whole group: the main process passes it on as SIGTERM
            if self.draining:
                self.should_exit = self.force_exit = True
                return
            self.draining = True
            self.gateway.drain()

        def handle_hup(self, sig: int, frame: Any) -> None:
            self.hups += 1

        async def on_tick(self, counter: int) -> bool:
            if self.draining and self.settling is None:
                self.settling = asyncio.get_running_loop().create_task(self._settle())
            if self.hups and not self.draining:
                self.hups = 0
                self._reload()
            if counter % 10 == 0 and not self.draining and _orphaned(self.parent):
                self.handle_exit(signal.SIGTERM, None)
            return bool(await super().on_tick(counter))

        async def _settle(self) -> None:
            try:
                await _drain(self.gateway, self.current.server.grace_seconds)
            finally:
                self.should_exit = True

        def _reload(self) -> None:
            new = _reload(self.gateway, self.reread, self.current, self.parent)
            if new is None:
                return
            self.current = new
            # read by each new connection
            self.config.timeout_keep_alive = new.server.keep_alive_seconds  # type: ignore[assignment]

    return Server


def _protocol() -> type:
    """uvicorn's httptools protocol, which also closes a connection that sends no request (or
    stops in the middle of its head) for ``keep_alive_seconds``: uvicorn arms that timer only
    after a response, so 10,000 sockets opened and left idle would be kept for good."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class Protocol(HttpToolsProtocol):
        # The answer streaming on this connection that writes to its transport itself
        # (``gateway.Downstream``'s direct path), told when the transport fills and drains.
        fastsse_down: Any = None
        _head = 0  # the bytes of the request line and headers read so far
        _head_over = False

        def on_message_begin(self) -> None:
            self._head = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)
            super().on_header(name, value)

        def _count(self, size: int) -> None:
            # llhttp bounds no head: past MAX_HEAD_BYTES the parser stops (a callback that
            # raises is a parser error to uvicorn) and the answer is a 431
            self._head += size
            if self._head > MAX_HEAD_BYTES:
                self._head_over = True
                raise TooLarge("request head too large")

        def send_400_response(self, msg: str) -> None:
            if not self._head_over:
                super().send_400_response(msg)
                return
            body = b"Request header fields too large"
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%b" % (len(body), body)
            )
            self.transport.close()

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not None and cycle.scope is self.scope and "path" in self.scope:
                # the answer may write its body's chunks to this transport itself, bypassing
                # the cycle's send (which still writes the head and the end)
                self.scope["extensions"] = {"fastsse.wire": (self, cycle)}  # type: ignore[dict-item]

        def pause_writing(self) -> None:
            super().pause_writing()
            if self.fastsse_down is not None:
                self.fastsse_down.paused()

        def resume_writing(self) -> None:
            super().resume_writing()
            if self.fastsse_down is not None:
                self.fastsse_down.resumed()

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


def _supervise(config: GatewayConfig, sock: socket.socket, reread: Reread | None) -> int:
    """Fork the workers (each serves the same listening socket) and watch them: SIGTERM / SIGINT
    passed on to them as SIGTERM (a second one forces them), SIGHUP checked here then passed on, a
    worker that dies started again; return 0 once all have stopped after a signal. Signals reach
    this loop through a wakeup pipe, never interrupting it half-way."""
    parent = os.getpid()
    prctl = _prctl()
    directory = tempfile.mkdtemp(prefix="fastsse-metrics-", dir=_short_tmp())
    current = [config]  # what a worker started from now gets (SIGHUP replaces it)
    children: set[int] = set()
    respawn: list[float] = []
    stopping = 0
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)

    def spawn() -> None:
        pid = os.fork()
        if pid:
            children.add(pid)
            return
        status = 1  # the worker
        try:
            signal.set_wakeup_fd(-1)
            os.close(wake_r)
            os.close(wake_w)
            for sig, action in (
                (signal.SIGTERM, signal.SIG_DFL),
                (signal.SIGINT, signal.SIG_IGN),  # Ctrl-C reaches the group: the main passes it on
                (signal.SIGHUP, signal.SIG_IGN),  # until the worker listens for it
                (signal.SIGCHLD, signal.SIG_DFL),
            ):
                signal.signal(sig, action)
            if prctl is not None:
                prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:  # the main process died before the line above
                os._exit(0)
            share = MetricsShare(directory)
            status = _serve(current[0], sock, reread=reread, parent=parent, share=share)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            log.exception("worker %d failed", os.getpid())
        finally:
            os._exit(status)

    handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)
    previous = {sig: signal.signal(sig, _wake) for sig in handled}
    previous_fd = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    try:
        for _ in range(config.server.workers):
            spawn()
        while children or (respawn and not stopping):
            now = time.monotonic()
            wait = min([1.0, *(max(0.0, at - now) for at in respawn)])
            select.select([wake_r], [], [], wait)
            for sig in _drain_pipe(wake_r):
                if sig in (signal.SIGTERM, signal.SIGINT):
                    stopping += 1
                    if stopping == 1:
                        log.info(
                            "%s: %d workers drain (grace %gs)",
                            signal.Signals(sig).name,
                            len(children),
                            current[0].server.grace_seconds,
                        )
                        respawn.clear()
                    else:
                        log.warning("%s again: the workers stop now", signal.Signals(sig).name)
                    _send(children, signal.SIGTERM)
                elif sig == signal.SIGHUP and not stopping:
                    if reread is None:
                        log.warning("SIGHUP: no --config file to read again; nothing changed")
                        continue
                    new = _reread(reread, current[0])
                    if new is not None:
                        current[0] = new
                        _send(children, signal.SIGHUP)
            for pid, status in _reap():
                children.discard(pid)
                if not stopping:
                    log.warning("worker %d exited (status %d); starting another", pid, status)
                    respawn.append(time.monotonic() + RESPAWN_DELAY)
            now = time.monotonic()
            while respawn and respawn[0] <= now and not stopping:
                respawn.pop(0)
                spawn()
    finally:
        signal.set_wakeup_fd(previous_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(wake_r)
        os.close(wake_w)
        sock.close()
        shutil.rmtree(directory, ignore_errors=True)
    return 0


def _wake(sig: int, frame: Any) -> None:
    """The main process's handler: nothing here; the signal's number reaches the loop through the
    wakeup pipe."""


def _drain_pipe(fd: int) -> list[int]:
    out: list[int] = []
    while True:
        try:
            data = os.read(fd, 512)
        except (BlockingIOError, InterruptedError):
            return out
        if not data:
            return out
        out += data


def _reap() -> list[tuple[int, int]]:
    """The workers that exited, with their exit codes (-N: killed by signal N)."""
    out: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        if pid == 0:
            return out
        out.append((pid, os.waitstatus_to_exitcode(status)))


def _send(children: set[int], sig: int) -> None:
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _prctl() -> Callable[..., int] | None:
    """Linux's ``prctl`` (a worker asks for SIGTERM when its parent dies), or None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


def _short_tmp() -> str | None:
    """A directory for the metrics sockets whose paths fit a Unix socket's 107 bytes."""
    return None if len(tempfile.gettempdir()) <= 60 else "/tmp"


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
