"""``python -m fastsse gateway`` as a real process on 127.0.0.1 for the gateway tests: a config
file written from dicts, the listening line read for the port, the JSON log read for the records
of the answers."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"


def toml(
    server: Mapping[str, Any],
    upstreams: Sequence[Mapping[str, Any]],
    routes: Sequence[Mapping[str, Any]] = (),
    keys: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The TOML text of ``[server]`` and the ``[[upstream]]``, ``[[route]]`` and ``[[key]]`` tables
    (JSON strings and lists are TOML's)."""

    def table(fields: Mapping[str, Any]) -> list[str]:
        lines = []
        for key, value in fields.items():
            if isinstance(value, Mapping):
                inline = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items())
                lines.append(f"{key} = {{ {inline} }}")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
        return lines

    out = ["[server]", *table(server)]
    for name, tables in (("upstream", upstreams), ("route", routes), ("key", keys)):
        for fields in tables:
            out += ["", f"[[{name}]]", *table(fields)]
    return "\n".join(out) + "\n"


class GatewayProcess:
    """``GatewayProcess(upstreams, server=None, env=None)``: start with ``start()`` (or ``with``);
    ``url`` is ``http://127.0.0.1:PORT``; ``records()`` the answers logged so far."""

    def __init__(
        self,
        upstreams: Sequence[Mapping[str, Any]],
        server: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        routes: Sequence[Mapping[str, Any]] = (),
        keys: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="fastsse-gw-")
        self.config = pathlib.Path(self.dir.name) / "gateway.toml"
        self.config.write_text(
            toml({"host": "127.0.0.1", "port": 0, **(server or {})}, upstreams, routes, keys)
        )
        self.log = pathlib.Path(self.dir.name) / "stderr.txt"
        self.env = {**os.environ, **(env or {})}
        self.env["PYTHONPATH"] = os.pathsep.join([str(SRC), self.env.get("PYTHONPATH", "")])
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout: float = 20) -> GatewayProcess:
        argv = [sys.executable, "-m", "fastsse", "gateway", "--config", str(self.config), *self.args]
        with open(self.log, "wb") as sink:
            self.proc = subprocess.Popen(argv, env=self.env, stdout=sink, stderr=sink)
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            if "serving in process" in text and "listening on http://" in text:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the gateway did not start:\n{text}")
            time.sleep(0.02)
        line = next(ln for ln in text.splitlines() if "listening on http://" in ln)
        self.url = line.split("listening on ")[1].split()[0]
        return self

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.text().splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out

    def records(self) -> list[dict[str, Any]]:
        """The answer records, oldest first."""
        return [r for r in self.lines() if r.get("logger") == "fastsse.gateway" and "rid" in r]

    def record(
        self, before: int, test: Callable[[dict[str, Any]], bool] | None = None, timeout: float = 10
    ) -> dict[str, Any]:
        """The first record after the first ``before`` ones (that passes ``test``), waiting for it."""
        deadline = time.monotonic() + timeout
        while True:
            for entry in self.records()[before:]:
                if test is None or test(entry):
                    return entry
            if time.monotonic() > deadline:
                raise AssertionError(f"the gateway logged no such record:\n{self.text()[-3000:]}")
            time.sleep(0.01)

    def signal(self, sig: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 15) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.dir.cleanup()
