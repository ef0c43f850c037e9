"""A raw-socket HTTP server on 127.0.0.1 for faults the loopback server cannot script.

It reads each request (head and Content-Length body, kept in ``requests``), then runs
``script(conn)``, which writes whatever bytes the test wants. ``connections`` counts accepted
connections, so a test can prove that nothing was sent at all. With ``tls`` (a server
context) each connection is wrapped first; ``peer_certs`` records the client certificates.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

# The variables curl reads a proxy from: a developer's or CI's proxy must not carry loopback
# test traffic, nor a test's own proxy be bypassed by no_proxy.
PROXY_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
)


def clear_proxies(monkeypatch: Any) -> None:
    """Unset every proxy variable curl reads, for the test (``monkeypatch`` puts them back)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


class RawServer:
    """Accepts connections on 127.0.0.1, reads each request, then runs ``script(conn)`` on it."""

    def __init__(
        self,
        script: Callable[[socket.socket], None],
        *,
        tls: ssl.SSLContext | None = None,
        threaded: bool = False,
        backlog: int = 4,
    ) -> None:
        self.script = script
        self.tls = tls
        self.threaded = threaded  # each connection on a thread of its own (for many at once)
        self.arrivals: list[float] = []  # time.monotonic() as each request was read in full
        self.peer_certs: list[dict[str, str] | None] = []  # subject of each TLS client certificate
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.requests: list[bytes] = []  # each request's head and body, as received
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            if self.threaded:
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
            else:
                self._handle(conn)

    def _handle(self, conn: socket.socket) -> None:
        if self.tls is not None:
            try:
                conn = self._handshake(conn)
            except (OSError, ssl.SSLError):
                conn.close()
                return  # a refused handshake is what some tests want
        with conn:
            conn.settimeout(10)
            try:
                self._read_request(conn)
                self.script(conn)
            except OSError:
                pass  # the client went away: that is what most scripts wait for
            except BaseException as exc:
                self.errors.append(exc)

    def _handshake(self, conn: socket.socket) -> socket.socket:
        assert self.tls is not None
        conn.settimeout(10)
        tls = self.tls.wrap_socket(conn, server_side=True)
        cert = tls.getpeercert()
        subject = {k: v for rdn in cert.get("subject", ()) for k, v in rdn} if cert else None
        self.peer_certs.append({"CN": subject["commonName"]} if subject else None)
        return tls

    def _read_request(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(65536)
            if not more:
                raise ConnectionError("client closed before sending its request")
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        while len(body) < length:
            more = conn.recv(65536)
            if not more:
                break
            body += more
        self.arrivals.append(time.monotonic())
        self.requests.append(head + b"\r\n\r\n" + body)

    def headers(self, index: int = -1) -> list[tuple[str, str]]:
        """The header lines of request ``index`` as (lower-case name, value) pairs, in order."""
        head = self.requests[index].partition(b"\r\n\r\n")[0].decode("latin-1")
        pairs = []
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            pairs.append((name.strip().lower(), value.strip()))
        return pairs

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        # wake an accept() at once (Linux): a test that starts dozens of servers would otherwise
        # wait out the accept timeout at each exit; elsewhere the timeout still ends the loop
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(timeout=15)
        self.sock.close()
        assert not self.thread.is_alive(), "the raw server did not stop"
        assert not self.errors, self.errors
