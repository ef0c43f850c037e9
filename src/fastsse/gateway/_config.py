"""The gateway's configuration: ``[server]`` and ``[[upstream]]`` of a TOML file, checked whole when
the gateway starts (``load_config``), so a typo or a missing key variable stops it at once with one
line rather than at the first request. docs/gateway.md lists every field.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, Final

from .._errors import FastSSEError

APIS: Final = ("chat", "responses", "messages")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")


class ConfigError(FastSSEError, ValueError):
    """A configuration the gateway cannot start with; the message names the field."""


@dataclasses.dataclass(frozen=True)
class Upstream:
    """One ``[[upstream]]``: where answers come from, in the order they are tried."""

    name: str
    base_url: str
    api: str = "chat"
    api_key: str | None = dataclasses.field(default=None, repr=False)
    api_key_env: str | None = None
    connect_timeout: float = 10.0
    first_byte_timeout: float = 60.0
    idle_timeout: float = 300.0
    timeout: float | None = None
    max_retries: int = 0
    max_connections: int = 1024
    first_chunk_gate: bool = False
    http2: bool = False
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """``[server]``: where the gateway listens and what it lets in."""

    host: str = "127.0.0.1"
    port: int = 8080
    keys: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    keys_env: str | None = None
    max_body_bytes: int = 4 << 20
    max_event_bytes: int = 16 << 20
    max_tokens: int = 4096
    forward_headers: tuple[str, ...] = ()
    workers: int = 1
    grace_seconds: float = 30.0
    keep_alive_seconds: float = 5.0
    otel: bool = False
    log: str = "json"
    loop: str = "auto"


@dataclasses.dataclass(frozen=True)
class GatewayConfig:
    """The whole configuration: ``server`` and the ``upstreams`` in order."""

    server: ServerConfig
    upstreams: tuple[Upstream, ...]


def _typed(table: str, name: str, value: Any, kind: Any) -> Any:
    """``value`` if it is of ``kind`` (``float`` takes an int too, never a bool)."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
    if not ok:
        want = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list"}
        raise ConfigError(f"{table}.{name} must be {want.get(kind, kind.__name__)}, not {value!r}")
    return value


def _positive(table: str, name: str, value: Any, kind: Any) -> Any:
    value = _typed(table, name, value, kind)
    if not (value > 0 and (kind is int or math.isfinite(value))):
        raise ConfigError(f"{table}.{name} must be above 0, not {value!r}")
    return value


def _fields(table: str, given: Mapping[str, Any], cls: Any) -> None:
    known = [f.name for f in dataclasses.fields(cls)]
    for name in given:
        if name not in known:
            raise ConfigError(f"unknown field {table}.{name} (known: {', '.join(known)})")


def _strings(table: str, name: str, value: Any) -> tuple[str, ...]:
    items = _typed(table, name, value, list)
    for item in items:
        if not isinstance(item, str) or not item:
            raise ConfigError(f"{table}.{name} must be a list of non-empty strings, not {value!r}")
    return tuple(items)


def _env(table: str, name: str, variable: Any, environ: Mapping[str, str]) -> str:
    variable = _typed(table, name, variable, str)
    value = environ.get(variable)
    if not value:
        raise ConfigError(f"{table}.{name}: the environment variable {variable} is not set")
    return value


def server_config(given: Mapping[str, Any], environ: Mapping[str, str]) -> ServerConfig:
    """``[server]`` checked. It raises ConfigError naming the field that is wrong."""
    table = "server"
    _fields(table, given, ServerConfig)
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name in ("host", "log", "loop", "keys_env"):
            out[name] = _typed(table, name, value, str)
        elif name == "port":
            port = _typed(table, name, value, int)
            if not 0 <= port <= 65535:
                raise ConfigError(f"server.port must be 0 to 65535, not {port}")
            out[name] = port
        elif name in ("max_body_bytes", "max_event_bytes", "max_tokens", "workers"):
            out[name] = _positive(table, name, value, int)
        elif name in ("grace_seconds", "keep_alive_seconds"):
            out[name] = _positive(table, name, value, float)
        elif name in ("keys", "forward_headers"):
            out[name] = _strings(table, name, value)
        elif name == "otel":
            out[name] = _typed(table, name, value, bool)
    keys = list(out.get("keys", ()))
    if "keys_env" in out:
        keys += [k.strip() for k in _env(table, "keys_env", out["keys_env"], environ).split(",") if k.strip()]
    out["keys"] = tuple(keys)
    for header in out.get("forward_headers", ()):
        if not _TOKEN.match(header):
            raise ConfigError(f"server.forward_headers: {header!r} is not a header name")
    out["forward_headers"] = tuple(h.lower() for h in out.get("forward_headers", ()))
    if out.get("log", "json") not in ("json", "text"):
        raise ConfigError(f"server.log must be 'json' or 'text', not {out['log']!r}")
    if out.get("loop", "auto") not in ("auto", "asyncio", "uvloop"):
        raise ConfigError(f"server.loop must be 'auto', 'asyncio' or 'uvloop', not {out['loop']!r}")
    return ServerConfig(**out)


def upstream_config(index: int, given: Mapping[str, Any], environ: Mapping[str, str]) -> Upstream:
    """One ``[[upstream]]`` checked (``index`` from 0). It raises ConfigError naming the field."""
    table = f"upstream[{index}]"
    if not isinstance(given, Mapping):
        raise ConfigError(f"{table} must be a table")
    _fields(table, given, Upstream)
    for required in ("name", "base_url"):
        if required not in given:
            raise ConfigError(f"{table}.{required} is missing")
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name in ("name", "base_url", "api", "api_key", "api_key_env"):
            out[name] = _typed(table, name, value, str)
        elif name in ("connect_timeout", "first_byte_timeout", "idle_timeout", "timeout"):
            out[name] = _positive(table, name, value, float)
        elif name == "max_connections":
            out[name] = _positive(table, name, value, int)
        elif name == "max_retries":
            out[name] = _typed(table, name, value, int)
            if out[name] < 0:
                raise ConfigError(f"{table}.max_retries must be 0 or more, not {value}")
        elif name in ("first_chunk_gate", "http2"):
            out[name] = _typed(table, name, value, bool)
        elif name == "headers":
            if not isinstance(value, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            ):
                raise ConfigError(f"{table}.headers must be a table of strings")
            for key, text in value.items():
                if not _TOKEN.match(key) or re.search(r"[\r\n\x00]", text):
                    raise ConfigError(f"{table}.headers.{key}: not a header name, or CR/LF in its value")
            out[name] = dict(value)
    if not _NAME.match(out["name"]):
        raise ConfigError(f"{table}.name {out['name']!r}: letters, digits, '.', '_' and '-' only")
    if not re.match(r"https?://[^\s/]+", out["base_url"], re.I):
        raise ConfigError(f"{table}.base_url must be an http:// or https:// URL, not {out['base_url']!r}")
    if out.get("api", "chat") not in APIS:
        raise ConfigError(f"{table}.api must be one of {', '.join(APIS)}, not {out['api']!r}")
    if "api_key" in out and "api_key_env" in out:
        raise ConfigError(f"{table}: give api_key or api_key_env, not both")
    if "api_key_env" in out:
        out["api_key"] = _env(table, "api_key_env", out["api_key_env"], environ)
    return Upstream(**out)


def config_from(data: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """``config_from(data, environ=os.environ) -> GatewayConfig``: the parsed TOML (or any mapping of
    the same shape) checked. It raises ConfigError for an unknown table or field, a value of the
    wrong type or range, no upstream, two upstreams of one name, or a key variable that is not set.
    """
    environ = os.environ if environ is None else environ
    for table in data:
        if table not in ("server", "upstream"):
            raise ConfigError(f"unknown table [{table}] (known: [server], [[upstream]])")
    server = data.get("server", {})
    if not isinstance(server, Mapping):
        raise ConfigError("[server] must be a table")
    upstreams = data.get("upstream", [])
    if isinstance(upstreams, Mapping) or not isinstance(upstreams, list):
        raise ConfigError("upstreams are an array of tables: [[upstream]]")
    if not upstreams:
        raise ConfigError("no [[upstream]]: the gateway needs one at least")
    parsed = tuple(upstream_config(i, u, environ) for i, u in enumerate(upstreams))
    names = [u.name for u in parsed]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"two upstreams are named {name!r}")
    return GatewayConfig(server_config(server, environ), parsed)


def load_config(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """``load_config(path, environ=os.environ) -> GatewayConfig``: read and check a TOML file.

    It raises ConfigError for a file that cannot be read or is not TOML, and what ``config_from``
    raises.
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as exc:
        raise ConfigError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{os.fspath(path)} is not valid TOML: {exc}") from None
    return config_from(data, environ)
