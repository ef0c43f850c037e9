"""The gateway's configuration: ``[server]``, ``[[upstream]]``, ``[[route]]`` and ``[[key]]`` of a
TOML file, checked whole when the gateway starts (``load_config``), so a typo, a route naming an
upstream that does not exist or a missing key variable stops it at once with one line rather than at
the first request. docs/gateway.md lists every field.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, Final

from .._errors import FastSSEError
from ..apis import NAMES

APIS: Final = NAMES
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_GLOB = re.compile(r"[*?\[]")
_KEY = re.compile(r"[\x21-\x7e]+\Z")  # what a header can carry: no space, no control character
TRANSPORTS: Final = ("auto", "curl")
HTTP_SERVERS: Final = ("fastsse", "uvicorn")  # [server] http: the command's HTTP/1.1 server
BALANCES: Final = ("weighted", "least_busy", "latency", "ordered")
REDIS_SCHEMES: Final = ("redis://", "rediss://", "unix://")


class ConfigError(FastSSEError, ValueError):
    """A configuration the gateway cannot start with; the message names the field."""


# Where an ``[[upstream]]``'s default differs from the client's (every other option it takes has
# the client's default, from the client's table). A gateway waits on behalf of callers who wait on
# a person and retry themselves, so it bounds every wait and moves on to the route's next upstream
# rather than retry the one that failed; and one worker serves many callers at once.
UPSTREAM_DEFAULTS: Final[Mapping[str, Any]] = {
    "connect_timeout": 10.0,  # a dead host is found in seconds, not at the kernel's SYN retries
    "first_byte_timeout": 60.0,  # an upstream that accepted and never answers is let go
    "idle_timeout": 300.0,  # as is one that stalls mid-answer
    "max_retries": 0,  # the next upstream is the retry; with the caller's SDK's 2, 2 would make 9 tries
    "max_connections": 1024,  # the client's 100 would queue a worker's 101st stream
}


@dataclasses.dataclass(frozen=True)
class Upstream:
    """One ``[[upstream]]``: where answers come from, in the order they are tried."""

    name: str
    base_url: str
    api: str = "chat"
    api_key: str | None = dataclasses.field(default=None, repr=False)
    api_key_env: str | None = None
    connect_timeout: float = UPSTREAM_DEFAULTS["connect_timeout"]
    first_byte_timeout: float = UPSTREAM_DEFAULTS["first_byte_timeout"]
    idle_timeout: float = UPSTREAM_DEFAULTS["idle_timeout"]
    timeout: float | None = None
    max_retries: int = UPSTREAM_DEFAULTS["max_retries"]
    max_connections: int = UPSTREAM_DEFAULTS["max_connections"]
    first_chunk_gate: bool = False
    http2: bool = False
    # "auto": streams over plain http:// on the event loop (fastsse.client._loop) where the
    # upstream's options allow it, libcurl otherwise; "curl": libcurl always
    transport: str = "auto"
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    weight: float = 1.0
    eject_after: int = 3
    cooldown_seconds: float = 30.0
    # every other client option the upstream sets (proxy, ca_bundle, client_cert, path, driver...),
    # checked by the client's own option table: its AsyncClient gets them as they are
    client: Mapping[str, Any] = dataclasses.field(default_factory=dict)


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
    http: str = "fastsse"
    redis_url: str | None = dataclasses.field(default=None, repr=False)  # may hold a password
    limits_without_redis: str = "open"
    keepalive_seconds: float = 0.0
    resumable: bool = False
    resume_max_bytes: int = 64 << 20
    resume_ttl_seconds: float = 300.0


def _matcher(patterns: tuple[str, ...]) -> Any:
    """The ``match`` of one regular expression for the ``fnmatch`` globs (exact names included)."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns)).match


@dataclasses.dataclass(frozen=True)
class Route:
    """One ``[[route]]``: the requests whose ``model`` it matches go to its ``upstreams``,
    balanced by ``balance``, then to its ``fallbacks`` in order; ``upstream_model`` (when set) is
    the model name sent upstream. ``upstreams`` and ``fallbacks`` are ``[[upstream]]`` names."""

    model: str
    upstreams: tuple[str, ...]
    balance: str = "weighted"
    upstream_model: str | None = None
    fallbacks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        match = _matcher((self.model,)) if self.is_glob else None
        object.__setattr__(self, "_match", match)

    @property
    def is_glob(self) -> bool:
        """True when ``model`` is an ``fnmatch`` glob (``*``, ``?`` or ``[``), not one exact name."""
        return _GLOB.search(self.model) is not None

    def matches(self, model: str | None) -> bool:
        """True when ``model`` is this route's exact name or matches its glob (case-sensitive,
        ``fnmatch.fnmatchcase``); a request without a model matches as ``""`` (only ``"*"`` does)."""
        model = model or ""
        if model == self.model:
            return True
        match = self._match  # type: ignore[attr-defined]
        return match is not None and match(model) is not None


@dataclasses.dataclass(frozen=True)
class Key:
    """One ``[[key]]``: a caller's key with a ``name`` (in logs and metrics, never the key) and its
    limits: ``rpm`` requests a minute, ``tpm`` tokens a minute, ``max_streams`` answers in flight
    (None: no limit), ``models`` the globs it may call (empty: every model)."""

    name: str
    key: str = dataclasses.field(repr=False)
    rpm: int | None = None
    tpm: int | None = None
    max_streams: int | None = None
    models: tuple[str, ...] = ()
    key_env: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "_match", _matcher(self.models) if self.models else None)

    def allows(self, model: str | None) -> bool:
        """True when this key may call ``model``: ``models`` is empty or one of its globs matches
        (case-sensitive; a request without a model matches as ``""``)."""
        match = self._match  # type: ignore[attr-defined]
        return match is None or match(model or "") is not None


@dataclasses.dataclass(frozen=True)
class GatewayConfig:
    """The whole configuration: ``server``, the ``upstreams`` in order, the ``routes`` in order
    (empty: every request goes to every upstream in order), the callers' ``keys`` with limits, and
    ``warnings``: lines the command logs at start (a route that an earlier one shadows)."""

    server: ServerConfig
    upstreams: tuple[Upstream, ...]
    routes: tuple[Route, ...] = ()
    keys: tuple[Key, ...] = ()
    warnings: tuple[str, ...] = ()


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


def _at_least_zero(table: str, name: str, value: Any, kind: Any) -> Any:
    value = _typed(table, name, value, kind)
    if not (value >= 0 and (kind is int or math.isfinite(value))):
        raise ConfigError(f"{table}.{name} must be 0 or more, not {value!r}")
    return value


def _fields(table: str, given: Mapping[str, Any], cls: Any) -> None:
    known = [f.name for f in dataclasses.fields(cls)]
    for name in given:
        if name not in known:
            raise ConfigError(f"unknown field {table}.{name} (known: {', '.join(known)})")


def _table(table: str, given: Any, cls: Any, required: tuple[str, ...]) -> None:
    """The checks every array table starts with: a table, known fields, the required ones there."""
    if not isinstance(given, Mapping):
        raise ConfigError(f"{table} must be a table")
    _fields(table, given, cls)
    for name in required:
        if name not in given:
            raise ConfigError(f"{table}.{name} is missing")


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
        if name in ("host", "log", "loop", "http", "keys_env", "redis_url", "limits_without_redis"):
            out[name] = _typed(table, name, value, str)
        elif name == "port":
            port = _typed(table, name, value, int)
            if not 0 <= port <= 65535:
                raise ConfigError(f"server.port must be 0 to 65535, not {port}")
            out[name] = port
        elif name in ("max_body_bytes", "max_event_bytes", "max_tokens", "workers", "resume_max_bytes"):
            out[name] = _positive(table, name, value, int)
        elif name in ("grace_seconds", "keep_alive_seconds", "resume_ttl_seconds"):
            out[name] = _positive(table, name, value, float)
        elif name == "keepalive_seconds":
            out[name] = _at_least_zero(table, name, value, float)
        elif name in ("keys", "forward_headers"):
            out[name] = _strings(table, name, value)
        elif name in ("otel", "resumable"):
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
    if out.get("http", "fastsse") not in HTTP_SERVERS:
        raise ConfigError(f"server.http must be one of {', '.join(HTTP_SERVERS)}, not {out['http']!r}")
    if "redis_url" in out and not out["redis_url"].lower().startswith(REDIS_SCHEMES):
        # the URL itself is not repeated: it may hold a password
        raise ConfigError("server.redis_url must start with redis://, rediss:// or unix://")
    if out.get("limits_without_redis", "open") not in ("open", "closed"):
        raise ConfigError(
            f"server.limits_without_redis must be 'open' or 'closed', not {out['limits_without_redis']!r}"
        )
    if out.get("resumable") and "redis_url" not in out:
        raise ConfigError("server.resumable needs server.redis_url: resumable streams are kept in Redis")
    return ServerConfig(**out)


# What the gateway sets on every upstream's client itself: an upstream table cannot change them.
_GATEWAY_SETS: Final = frozenset(
    {"max_event_bytes", "raise_for_status", "timing", "keep_text", "format", "fallbacks", "client"}
)


def _client_rows() -> dict[str, Any]:
    """The client option rows an ``[[upstream]]`` may set beyond its own fields, by name."""
    from ..client import OPTIONS, ClientOptions

    own = {f.name for f in dataclasses.fields(Upstream)}
    names = set(ClientOptions.__annotations__) - own - _GATEWAY_SETS
    return {row.name: row for row in OPTIONS if row.name in names}


def upstream_config(index: int, given: Mapping[str, Any], environ: Mapping[str, str]) -> Upstream:
    """One ``[[upstream]]`` checked (``index`` from 0). It raises ConfigError naming the field."""
    table = f"upstream[{index}]"
    rows = _client_rows()
    extra: dict[str, Any] = {}
    if isinstance(given, Mapping):
        for name in [n for n in given if n in rows]:
            check = rows[name].check
            try:
                extra[name] = given[name] if check is None else check(given[name], name)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{table}.{name}: {exc}") from None
        given = {k: v for k, v in given.items() if k not in rows}
    _table(table, given, Upstream, ("name", "base_url"))
    out: dict[str, Any] = {"client": extra} if extra else {}
    for name, value in given.items():
        if name in ("name", "base_url", "api", "api_key", "api_key_env"):
            out[name] = _typed(table, name, value, str)
        elif name in ("connect_timeout", "first_byte_timeout", "idle_timeout", "timeout"):
            out[name] = _positive(table, name, value, float)
        elif name == "max_connections":
            out[name] = _positive(table, name, value, int)
        elif name in ("max_retries", "eject_after"):
            out[name] = _at_least_zero(table, name, value, int)
        elif name == "weight":
            out[name] = _at_least_zero(table, name, value, float)
        elif name == "cooldown_seconds":
            out[name] = _positive(table, name, value, float)
        elif name in ("first_chunk_gate", "http2"):
            out[name] = _typed(table, name, value, bool)
        elif name == "transport":
            if value not in TRANSPORTS:
                raise ConfigError(f"{table}.transport must be one of {', '.join(TRANSPORTS)}, not {value!r}")
            out[name] = value
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
    if extra:  # the rest of the client's checks (a proxy's scheme, a CA file that is there...)
        _prepared(table, out, extra)
    return Upstream(**out)


def _prepared(table: str, out: Mapping[str, Any], extra: Mapping[str, Any]) -> None:
    """Set up a request as the upstream's client will: what the library refuses, the gateway
    refuses at start. It raises ConfigError naming the table and the client's words."""
    from ..client import prepare

    spec = {k: v for k, v in extra.items() if k not in ("driver", "max_connections")}
    try:
        prepare({"model": "m"}, api=out.get("api", "chat"), base_url=out["base_url"], api_key="k", **spec)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{table}: {exc}") from None


def route_config(index: int, given: Mapping[str, Any], upstreams: Mapping[str, Upstream]) -> Route:
    """One ``[[route]]`` checked (``index`` from 0) against the ``upstreams`` by name. It raises
    ConfigError naming the route and the field: an unknown upstream name, an upstream named twice,
    no upstream, an unknown ``balance``, every upstream of weight 0."""
    table = f"route[{index}]"
    _table(table, given, Route, ("model", "upstreams"))
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name in ("model", "balance", "upstream_model"):
            out[name] = _typed(table, name, value, str)
            if not out[name]:
                raise ConfigError(f"{table}.{name} must not be empty")
        else:  # upstreams, fallbacks
            out[name] = _strings(table, name, value)
    table = f"route[{index}] (model {out['model']!r})"
    if not out["upstreams"]:
        raise ConfigError(f"{table}.upstreams is empty: a route needs one upstream at least")
    seen: set[str] = set()
    for field in ("upstreams", "fallbacks"):
        for upstream in out.get(field, ()):
            if upstream not in upstreams:
                raise ConfigError(f"{table}.{field}: no [[upstream]] is named {upstream!r}")
            if upstream in seen:
                raise ConfigError(f"{table}.{field}: {upstream!r} is named twice in the route")
            seen.add(upstream)
    balance = out.get("balance", "weighted")
    if balance not in BALANCES:
        raise ConfigError(f"{table}.balance must be one of {', '.join(BALANCES)}, not {balance!r}")
    if all(upstreams[u].weight == 0 for u in out["upstreams"]):
        raise ConfigError(f"{table}.upstreams: every one has weight 0, so the route would take no traffic")
    return Route(**out)


def key_config(index: int, given: Mapping[str, Any], environ: Mapping[str, str]) -> Key:
    """One ``[[key]]`` checked (``index`` from 0), ``key_env`` read from ``environ``. It raises
    ConfigError naming the field (never the key's value)."""
    table = f"key[{index}]"
    _table(table, given, Key, ("name",))
    if ("key" in given) == ("key_env" in given):
        raise ConfigError(f"{table}: give key or key_env (one of them)")
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name in ("name", "key", "key_env"):
            out[name] = _typed(table, name, value, str)
        elif name in ("rpm", "tpm", "max_streams"):
            out[name] = _positive(table, name, value, int)
        else:  # models
            out[name] = _strings(table, name, value)
    if not _NAME.match(out["name"]):
        raise ConfigError(f"{table}.name {out['name']!r}: letters, digits, '.', '_' and '-' only")
    field = "key_env" if "key_env" in out else "key"
    if field == "key_env":
        out["key"] = _env(table, field, out["key_env"], environ)
    if not _KEY.match(out["key"]):
        raise ConfigError(f"{table}.{field}: the key is empty or has a space or a control character in it")
    return Key(**out)


def _shadows(earlier: Route, later: Route) -> bool:
    """True when every model ``later`` matches goes to ``earlier`` first (told only where it is
    sure: the same pattern, an exact name the earlier glob matches, or an earlier ``"*"``)."""
    if earlier.model == later.model or not earlier.is_glob:
        return earlier.model == later.model
    return (not later.is_glob and earlier.matches(later.model)) or earlier.model.strip("*") == ""


def config_from(
    data: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
) -> GatewayConfig:
    """``config_from(data, environ=os.environ, *, overrides=None) -> GatewayConfig``: the parsed
    TOML (or any mapping of the same shape) checked. ``overrides`` are ``[server]`` fields set over
    the file's before the check (what the command's flags give; a None value is left out).

    It raises ConfigError for an unknown table or field, a value of the wrong type or range, no
    upstream, two upstreams (or keys) of one name, a route naming an upstream that does not exist,
    two keys of one value, or a key variable that is not set.
    """
    environ = os.environ if environ is None else environ
    for table in data:
        if table not in ("server", "upstream", "route", "key"):
            raise ConfigError(f"unknown table [{table}] (known: [server], [[upstream]], [[route]], [[key]])")
    server = data.get("server", {})
    if not isinstance(server, Mapping):
        raise ConfigError("[server] must be a table")
    if overrides:
        server = {**server, **{k: v for k, v in overrides.items() if v is not None}}
    tables = {}
    for table in ("upstream", "route", "key"):
        given = data.get(table, [])
        if isinstance(given, Mapping) or not isinstance(given, list):
            raise ConfigError(f"{table}s are an array of tables: [[{table}]]")
        tables[table] = given
    if not tables["upstream"]:
        raise ConfigError("no [[upstream]]: the gateway needs one at least")
    parsed = tuple(upstream_config(i, u, environ) for i, u in enumerate(tables["upstream"]))
    by_name = {u.name: u for u in parsed}
    if len(by_name) < len(parsed):
        names = [u.name for u in parsed]
        raise ConfigError(f"two upstreams are named {next(n for n in names if names.count(n) > 1)!r}")
    server_config_ = server_config(server, environ)
    routes = tuple(route_config(i, r, by_name) for i, r in enumerate(tables["route"]))
    if not routes and all(u.weight == 0 for u in parsed):
        raise ConfigError(
            "every [[upstream]] has weight 0 and no [[route]] says otherwise: no traffic would go"
        )
    keys = tuple(key_config(i, k, environ) for i, k in enumerate(tables["key"]))
    _check_keys(keys, server_config_.keys)
    warnings = []
    for i, later in enumerate(routes):
        for j, earlier in enumerate(routes[:i]):
            if _shadows(earlier, later):
                warnings.append(
                    f"route[{i}] (model {later.model!r}) is shadowed by route[{j}] (model {earlier.model!r}),"
                    " which matches first: it takes no request"
                )
                break
    limited = any(k.rpm or k.tpm or k.max_streams for k in keys)
    if limited and server_config_.workers > 1 and server_config_.redis_url is None:
        warnings.append(
            f"the [[key]] limits are counted per process: with {server_config_.workers} workers and no"
            " server.redis_url a key gets up to that many times its limits"
        )
    return GatewayConfig(server_config_, parsed, routes, keys, tuple(warnings))


def _check_keys(keys: tuple[Key, ...], unnamed: tuple[str, ...]) -> None:
    names: dict[str, int] = {}
    values: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key.name in names:
            raise ConfigError(f"key[{index}].name: key[{names[key.name]}] is named {key.name!r} too")
        if key.key in values:  # the value is never repeated in the message
            raise ConfigError(f"key[{index}]: the same key as key[{values[key.key]}]")
        if key.key in unnamed:
            raise ConfigError(f"key[{index}]: the same key is in server.keys (or server.keys_env)")
        names[key.name] = values[key.key] = index


def load_config(
    path: str | os.PathLike[str],
    environ: Mapping[str, str] | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
) -> GatewayConfig:
    """``load_config(path, environ=os.environ, *, overrides=None) -> GatewayConfig``: read and check
    a TOML file; ``overrides`` are ``[server]`` fields set over the file's before the check (the
    command's ``--host``, ``--port``, ``--workers``, ``--log``, ``--keys-env``; a None value is
    left out).

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
    return config_from(data, environ, overrides=overrides)
