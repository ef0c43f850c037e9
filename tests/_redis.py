"""A real ``redis-server`` (Debian's) on a free loopback port, for the tests of the gateway's shared
state. Where the binary is missing the tests skip, except under ``CI=true``, where a missing
Redis is a failure: CI installs it (.ci/run), so a skip there would hide a broken install."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One ``redis-server`` process: ``url`` to reach it, ``stop()`` / ``start()`` to kill it and
    bring it back on the same port (its data is not kept: no RDB, no AOF)."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            message = "redis-server is not installed (apt-get install redis-server)"
            if os.environ.get("CI") == "true":
                pytest.fail(message + "; CI installs it, so this is a broken install")
            pytest.skip(message)
        self.binary = binary
        self.dir = tempfile.TemporaryDirectory(prefix="fastsse-redis-")
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10) -> RedisServer:
        argv = [
            self.binary,
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--save", "",
            "--appendonly", "no",
            "--dir", self.dir.name,
            "--protected-mode", "yes",
        ]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2) as sock,
            ):
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        self.stop()
        self.dir.cleanup()


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    """A started ``RedisServer``, stopped on the way out."""
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.close()
