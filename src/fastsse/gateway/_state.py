"""The gateway's state: per-key limits (``rpm``, ``tpm``, ``max_streams``) and upstream ejection.

Two stores with one behaviour: ``LocalStore`` keeps the state in the process (each worker and each
instance counts alone), ``RedisStore`` keeps it in Redis so every worker of every instance agrees.
``make_store(server)`` picks one from ``[server] redis_url``.

Limits are a sliding window of ``window`` seconds (60) cut into 60 buckets: a request is counted in
the bucket of the moment it is admitted, an answer's tokens in the bucket of the moment it ends, and
a bucket leaves the window ``window`` seconds after it began. ``admit`` checks the three limits and
only then counts the request and takes its lease, in one step (one Lua script in Redis, timed by
Redis's clock so every instance agrees on the window): nothing is counted for a refused request.
A lease is held until ``release``, or until ``lease_seconds`` (600) pass, so a crashed instance
does not hold a key's streams forever.

Ejection counts an upstream's consecutive retryable failures; at ``eject_after`` it is out until its
cooldown ends, then one caller claims the probe: its success puts the upstream back, its failure
starts another cooldown. ``ejected()`` is the local view the router reads on every request, never a
call to Redis: ``RedisStore`` writes its own changes into it at once and reads the others' from Redis
every ``refresh_seconds`` (0.5) in a task that ``start()`` starts.

Redis unreachable (or failing): limits fail open (``admit`` returns None) or closed
(``Refusal("redis", 1.0)``), one warning per outage on the ``fastsse.gateway`` logger and one line
when it is back; ejection is counted in the process meanwhile. The ``redis`` package is imported
only by ``RedisStore``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol

from ._config import ConfigError

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from ._config import ServerConfig

__all__ = ["LocalStore", "RedisStore", "Refusal", "Store", "make_store"]

log = logging.getLogger(__name__.rpartition(".")[0])  # the package's logger, "fastsse.gateway"

BUCKETS: Final = 60  # a window is this many buckets of window / BUCKETS seconds
PREFIX: Final = "fastsse:gw:"
# Ejection keys share one Redis Cluster hash slot (the {up} tag), so one script may touch them all.
_EJECTED: Final = PREFIX + "{up}:ejected"
_FAILS: Final = PREFIX + "{up}:fails"
_PROBE: Final = PREFIX + "{up}:probe:"
_EJECTION_TTL: Final = 3600.0  # seconds an ejection hash outlives its last write plus the cooldown


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    """Why ``admit`` refused: ``limit`` is ``"rpm"``, ``"tpm"``, ``"max_streams"`` or ``"redis"``
    (Redis unreachable and ``limits_without_redis = "closed"``); ``retry_after`` the seconds until
    the window has room again (1.0 for ``max_streams`` and ``redis``)."""

    limit: str
    retry_after: float


class Store(Protocol):
    """What the gateway asks of its state, ``LocalStore`` or ``RedisStore``."""

    @property
    def shared(self) -> bool:
        """True when the state is shared across processes (Redis)."""

    @property
    def redis(self) -> Redis | None:
        """The Redis client (None without Redis)."""

    async def start(self) -> None:
        """Begin (Redis: load the scripts, start the ejection view's refresh)."""

    async def close(self) -> None:
        """End: stop the refresh, close the connections."""

    async def admit(
        self, key: str, *, rpm: int | None, tpm: int | None, max_streams: int | None, lease: str
    ) -> Refusal | None:
        """Check ``key``'s limits and, within them, count the request and hold ``lease``."""

    async def release(self, key: str, lease: str, tokens: int) -> None:
        """An admitted answer ended: drop its lease, count its tokens."""

    async def failed(self, upstream: str, eject_after: int, cooldown: float) -> bool:
        """One more consecutive retryable failure; True when it ejected the upstream."""

    async def succeeded(self, upstream: str) -> None:
        """An answer from ``upstream`` succeeded."""

    def ejected(self) -> Mapping[str, float]:
        """The ejected upstreams: name -> wall-clock end of the cooldown."""

    async def claim_probe(self, upstream: str, hold: float) -> bool:
        """True for the one caller that probes ``upstream`` once its cooldown ended."""


def make_store(server: ServerConfig) -> LocalStore | RedisStore:
    """``make_store(server) -> Store``: a ``RedisStore`` on ``server.redis_url`` (failing open or
    closed by ``server.limits_without_redis``), a ``LocalStore`` without one. It raises ConfigError
    for a Redis URL without the redis package installed, or one the package cannot parse."""
    if server.redis_url:
        return RedisStore(server.redis_url, fail=server.limits_without_redis)
    return LocalStore()


# ---------------------------------------------------------------------------------------------
# The window and the ejection rules in Python: LocalStore's whole state, and RedisStore's ejection
# view and its fallback while Redis is away. The Lua scripts below are the same rules in Redis.


def _blocked(
    buckets: dict[int, int], limit: int | None, first: int, width: float, now: float
) -> float | None:
    """Drop the buckets before ``first``; None when their sum is under ``limit``, else the seconds
    until enough of the oldest buckets leave the window to bring it under."""
    for index in [i for i in buckets if i < first]:
        del buckets[index]
    if limit is None:
        return None
    total = sum(buckets.values())
    if total < limit:
        return None
    for index in sorted(buckets):
        total -= buckets[index]
        if total < limit:
            return max((index + BUCKETS) * width - now, 0.001)
    return BUCKETS * width


class _Limits:
    """One key's window: requests and tokens per bucket, and its leases (lease -> expiry)."""

    __slots__ = ("leases", "requests", "tokens")

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}
        self.tokens: dict[int, int] = {}
        self.leases: dict[str, float] = {}


class _Ejection:
    """Consecutive failures, cooldown ends and probe holds per upstream, on one clock."""

    __slots__ = ("ends", "fails", "probes", "view")

    def __init__(self) -> None:
        self.fails: dict[str, int] = {}
        self.ends: dict[str, float] = {}
        self.probes: dict[str, float] = {}
        self.view: Mapping[str, float] = MappingProxyType(self.ends)

    def failed(self, name: str, eject_after: int, cooldown: float, now: float) -> bool:
        if eject_after <= 0:
            return False
        end = self.ends.get(name)
        if end is not None:
            if end > now:  # an answer begun before the ejection: already counted out
                return False
            self.ends[name] = now + cooldown  # the probe failed: another cooldown
            self.probes.pop(name, None)
            return True
        count = self.fails.get(name, 0) + 1
        if count < eject_after:
            self.fails[name] = count
            return False
        self.fails.pop(name, None)
        self.ends[name] = now + cooldown
        return True

    def succeeded(self, name: str, now: float) -> None:
        end = self.ends.get(name)
        if end is not None and end > now:  # an answer begun before the ejection: the cooldown stands
            return
        self.ends.pop(name, None)
        self.fails.pop(name, None)
        self.probes.pop(name, None)

    def claim(self, name: str, hold: float, now: float) -> bool:
        end = self.ends.get(name)
        if end is None:
            return True  # up again: nothing to probe
        if end > now or self.probes.get(name, -math.inf) > now:
            return False
        self.probes[name] = now + hold
        return True


class LocalStore:
    """``LocalStore(*, window=60.0, lease_seconds=600.0, clock=time.time)``: the state in this
    process. Without Redis every worker and every instance counts alone: a key's ``rpm`` of 10 admits
    up to 10 per process. ``clock`` gives wall-clock seconds (the ejection view's unit)."""

    shared: Final = False
    redis: Final = None

    def __init__(
        self, *, window: float = 60.0, lease_seconds: float = 600.0, clock: Callable[[], float] = time.time
    ) -> None:
        if not (window > 0 and lease_seconds > 0):
            raise ConfigError(f"window and lease_seconds must be above 0, not {window!r}, {lease_seconds!r}")
        self._width = window / BUCKETS
        self._lease_seconds = lease_seconds
        self._clock = clock
        self._keys: dict[str, _Limits] = {}
        self._ejection = _Ejection()

    async def start(self) -> None:
        """Nothing to start."""

    async def close(self) -> None:
        """Nothing to close."""

    async def admit(
        self, key: str, *, rpm: int | None, tpm: int | None, max_streams: int | None, lease: str
    ) -> Refusal | None:
        """None when ``key`` is within ``rpm`` (requests in the window, this one included),
        ``tpm`` (tokens in the window, under it) and ``max_streams`` (leases held, under it): the
        request is counted and holds ``lease``. Else the ``Refusal``, and nothing is counted."""
        now = self._clock()
        width = self._width
        bucket = math.floor(now / width)
        first = bucket - BUCKETS + 1
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _Limits()
        wait = _blocked(state.requests, rpm, first, width, now)
        if wait is not None:
            return Refusal("rpm", wait)
        wait = _blocked(state.tokens, tpm, first, width, now)
        if wait is not None:
            return Refusal("tpm", wait)
        leases = state.leases
        if max_streams is not None and len(leases) >= max_streams:
            for name in [n for n, expiry in leases.items() if expiry <= now]:
                del leases[name]
            if len(leases) >= max_streams:
                return Refusal("max_streams", 1.0)
        state.requests[bucket] = state.requests.get(bucket, 0) + 1
        leases[lease] = now + self._lease_seconds
        return None

    async def release(self, key: str, lease: str, tokens: int) -> None:
        """Drop ``lease`` and count ``tokens`` now (an unknown key or lease: only the tokens)."""
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _Limits()
        state.leases.pop(lease, None)
        if tokens > 0:
            now = self._clock()
            bucket = math.floor(now / self._width)
            _blocked(state.tokens, None, bucket - BUCKETS + 1, self._width, now)
            state.tokens[bucket] = state.tokens.get(bucket, 0) + tokens

    async def failed(self, upstream: str, eject_after: int, cooldown: float) -> bool:
        """Count one more consecutive retryable failure of ``upstream``: True when this one ejected
        it (the ``eject_after``-th; 0 never ejects) or re-ejected it (a failed probe, its cooldown
        over); False while it is still cooling (an answer begun before it was ejected)."""
        return self._ejection.failed(upstream, eject_after, cooldown, self._clock())

    async def succeeded(self, upstream: str) -> None:
        """Reset ``upstream``'s failures; a success once its cooldown ended (the probe) puts it
        back. A success while it cools (an answer begun before) leaves the cooldown running."""
        self._ejection.succeeded(upstream, self._clock())

    def ejected(self) -> Mapping[str, float]:
        """The ejected upstreams, name -> the clock's time its cooldown ends (a live read-only
        view; an upstream whose cooldown ended stays in it until a probe succeeds)."""
        return self._ejection.view

    async def claim_probe(self, upstream: str, hold: float) -> bool:
        """True for one caller once ``upstream``'s cooldown ended (again ``hold`` seconds later
        if that caller reports neither success nor failure); True too for an upstream not
        ejected; False while it cools."""
        return self._ejection.claim(upstream, hold, self._clock())


# ---------------------------------------------------------------------------------------------
# Redis

_LUA_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""

# A window hash: field = bucket index, value = count. Drop stale buckets; nil when under the limit,
# else the seconds until enough of the oldest leave the window.
_LUA_WINDOW = """
local function blocked(key, limit, first, width, now)
  local flat = redis.call('HGETALL', key)
  local live, stale, total = {}, {}, 0
  for i = 1, #flat, 2 do
    local index = tonumber(flat[i])
    if index < first then
      stale[#stale + 1] = flat[i]
    else
      local count = tonumber(flat[i + 1])
      live[#live + 1] = {index, count}
      total = total + count
    end
  end
  if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
  if limit < 0 or total < limit then return nil end
  table.sort(live, function(a, b) return a[1] < b[1] end)
  for _, entry in ipairs(live) do
    total = total - entry[2]
    if total < limit then return math.max((entry[1] + BUCKETS) * width - now, 0.001) end
  end
  return BUCKETS * width
end
""".replace("BUCKETS", str(BUCKETS))

# KEYS: requests hash, tokens hash, leases zset.
# ARGV: rpm, tpm, max_streams (-1: none), lease, bucket width, lease seconds, key ttl ms.
_ADMIT = (
    _LUA_NOW
    + _LUA_WINDOW
    + """
local width = tonumber(ARGV[5])
local bucket = math.floor(now / width)
local first = bucket - BUCKETS + 1
local wait = blocked(KEYS[1], tonumber(ARGV[1]), first, width, now)
if wait then return {'rpm', string.format('%.6f', wait)} end
local tpm = tonumber(ARGV[2])
if tpm >= 0 then
  wait = blocked(KEYS[2], tpm, first, width, now)
  if wait then return {'tpm', string.format('%.6f', wait)} end
end
local streams = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if streams >= 0 and redis.call('ZCARD', KEYS[3]) >= streams then return {'max_streams', '1'} end
redis.call('HINCRBY', KEYS[1], string.format('%d', bucket), 1)
redis.call('PEXPIRE', KEYS[1], ARGV[7])
local lease = tonumber(ARGV[6])
redis.call('ZADD', KEYS[3], string.format('%.6f', now + lease), ARGV[4])
redis.call('PEXPIRE', KEYS[3], math.ceil(lease * 1000))
return 0
""".replace("BUCKETS", str(BUCKETS))
)

# KEYS: tokens hash, leases zset. ARGV: lease, tokens, bucket width, key ttl ms.
_RELEASE = (
    _LUA_NOW
    + _LUA_WINDOW
    + """
redis.call('ZREM', KEYS[2], ARGV[1])
local tokens = tonumber(ARGV[2])
if tokens > 0 then
  local width = tonumber(ARGV[3])
  local bucket = math.floor(now / width)
  blocked(KEYS[1], -1, bucket - BUCKETS + 1, width, now)
  redis.call('HINCRBY', KEYS[1], string.format('%d', bucket), tokens)
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return 0
""".replace("BUCKETS", str(BUCKETS))
)

_LUA_KEEP = """
local function keep(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
"""

# KEYS: fails hash, ejected hash, probe key. ARGV: upstream, eject_after, cooldown, ttl ms.
# Returns {ejected now (0/1), failures counted, end of cooldown or '', Redis's now}.
_FAILED = (
    _LUA_NOW
    + _LUA_KEEP
    + """
local name = ARGV[1]
local cooldown = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local clock = string.format('%.6f', now)
local ends = redis.call('HGET', KEYS[2], name)
if ends then
  if tonumber(ends) > now then return {0, 0, ends, clock} end
  local again = string.format('%.6f', now + cooldown)
  redis.call('HSET', KEYS[2], name, again)
  keep(KEYS[2], ttl)
  redis.call('DEL', KEYS[3])
  return {1, 0, again, clock}
end
local count = redis.call('HINCRBY', KEYS[1], name, 1)
keep(KEYS[1], ttl)
if count < tonumber(ARGV[2]) then return {0, count, '', clock} end
local until_ = string.format('%.6f', now + cooldown)
redis.call('HDEL', KEYS[1], name)
redis.call('HSET', KEYS[2], name, until_)
keep(KEYS[2], ttl)
return {1, 0, until_, clock}
"""
)

# KEYS: fails hash, ejected hash, probe key. ARGV: upstream. 0: still cooling, 1: up.
_SUCCEEDED = (
    _LUA_NOW
    + """
local ends = redis.call('HGET', KEYS[2], ARGV[1])
if ends and tonumber(ends) > now then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3])
return 1
"""
)

# KEYS: ejected hash, probe key. ARGV: upstream, hold ms.
_CLAIM = (
    _LUA_NOW
    + """
local ends = redis.call('HGET', KEYS[1], ARGV[1])
if not ends then return 1 end
if tonumber(ends) > now then return 0 end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""
)

# KEYS: ejected hash. ARGV: ttl ms, then upstream, end (Redis clock) pairs: ejections made in one
# process while Redis was away, kept where Redis has none or an earlier end.
_MERGE = (
    _LUA_KEEP
    + """
for i = 2, #ARGV, 2 do
  local ends = redis.call('HGET', KEYS[1], ARGV[i])
  if not ends or tonumber(ends) < tonumber(ARGV[i + 1]) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
keep(KEYS[1], tonumber(ARGV[1]))
return 0
"""
)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisStore:
    """``RedisStore(url, *, fail="open", window=60.0, lease_seconds=600.0, refresh_seconds=0.5,
    timeout=0.5, connections=64)``: the state in the Redis at ``url`` (``redis://``, ``rediss://``,
    ``unix://``), shared by every process that uses it. Keys live under ``fastsse:gw:``, each with
    an expiry so an idle one vanishes. Every call to Redis is bounded by ``timeout`` seconds and
    runs on one of ``connections`` pooled connections (more calls at once wait for one). While
    Redis is unreachable, ``admit`` answers per ``fail`` (``"open"``: None; ``"closed"``:
    ``Refusal("redis", 1.0)``) without trying it, ejection is counted in the process, and the
    refresh (or, before ``start()``, one call per ``refresh_seconds``) finds it back. A caller
    cancelled during a call gets its CancelledError at once; the call finishes on its own, and an
    admit's lease taken meanwhile is given back. ``window`` is the limits' window in seconds (60;
    shorter in tests).

    It raises ConfigError if the redis package is not installed, the URL cannot be parsed, or
    ``fail`` is neither ``"open"`` nor ``"closed"``.
    """

    shared: Final = True

    def __init__(
        self,
        url: str,
        *,
        fail: str = "open",
        window: float = 60.0,
        lease_seconds: float = 600.0,
        refresh_seconds: float = 0.5,
        timeout: float = 0.5,
        connections: int = 64,
    ) -> None:
        try:
            import redis.asyncio
            import redis.exceptions
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError:
            raise ConfigError("server.redis_url needs the redis package: pip install redis") from None
        if fail not in ("open", "closed"):
            raise ConfigError(f"server.limits_without_redis must be 'open' or 'closed', not {fail!r}")
        if not (window > 0 and lease_seconds > 0 and refresh_seconds > 0 and timeout > 0 and connections > 0):
            raise ConfigError(
                "window, lease_seconds, refresh_seconds, timeout and connections must be above 0"
            )
        try:
            # A bounded pool: a thousand answers at once queue for 64 connections (a script takes
            # well under a millisecond) rather than open a thousand.
            pool = redis.asyncio.BlockingConnectionPool.from_url(
                url,
                max_connections=connections,
                timeout=max(timeout, 5.0),
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                # one quick retry on a fresh connection: a pooled one is dead after Redis restarted
                retry=Retry(NoBackoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)),
            )
        except ValueError as exc:
            raise ConfigError(f"server.redis_url: {exc}") from None
        client: Redis = redis.asyncio.Redis.from_pool(pool)
        self.redis: Redis = client
        self.fail = fail
        self._refused = Refusal("redis", 1.0) if fail == "closed" else None
        self._errors = (redis.exceptions.RedisError, OSError)
        kwargs = client.connection_pool.connection_kwargs
        self.where = str(
            kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
        )
        self._width = window / BUCKETS
        self._lease_seconds = lease_seconds
        self._key_ttl = str(math.ceil((window + self._width) * 1000))
        self._refresh_seconds = refresh_seconds
        self._admit = client.register_script(_ADMIT)
        self._release = client.register_script(_RELEASE)
        self._failed = client.register_script(_FAILED)
        self._succeeded = client.register_script(_SUCCEEDED)
        self._claim = client.register_script(_CLAIM)
        self._merge = client.register_script(_MERGE)
        self._ejection = _Ejection()  # local clock; the fallback while Redis is away
        self._skew = 0.0  # Redis's clock minus ours
        self._writes = 0  # local changes to the ejection view, so a refresh begun before one is not applied
        self._down = False
        self._unpushed = False  # an outage's ejections not yet written back to Redis
        self._retry_at = 0.0
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._orphans: set[asyncio.Future[Any]] = set()
        self._timeout = timeout

    # -- outages -----------------------------------------------------------------------------

    def _away(self) -> bool:
        """True to skip Redis on a request: it is down and the refresh (or, without it, one
        request per ``refresh_seconds``) finds out when it is back, so no request waits on it."""
        if not self._down:
            return False
        if self._task is not None:
            return True
        now = time.monotonic()
        if now < self._retry_at:
            return True
        self._retry_at = now + self._refresh_seconds
        return False

    def _lost(self, exc: BaseException) -> None:
        self._unpushed = True  # ejections made from now on go to Redis when it is back
        if not self._down:
            self._down = True
            log.warning(
                "redis at %s unreachable: limits fail %s, ejection counted per process until it is back (%s: %s)",
                self.where,
                self.fail,
                type(exc).__name__,
                exc,
            )
        self._retry_at = time.monotonic() + self._refresh_seconds

    def _local_change(self) -> None:
        # the ejection view changed in this process only (Redis away): a refresh in flight must
        # not replace it with Redis's, and the next one writes its ejections back
        self._unpushed = True
        self._writes += 1

    def _found(self) -> None:
        if self._down:
            self._down = False
            log.warning("redis at %s reachable again: limits and ejection shared again", self.where)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Read the ejection state once and start its refresh every ``refresh_seconds``. Redis
        unreachable is not an error here: the outage is logged and the refresh keeps trying."""
        if self._task is None:
            await self._refresh_once()
            self._task = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def close(self) -> None:
        """Stop the refresh, let the calls of cancelled callers finish (a second at most) and
        close the connections."""
        self._closing = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()  # a cancel redis-py loses mid-command ends the loop at its next turn anyway
            await asyncio.wait({task}, timeout=self._timeout * 4 + self._refresh_seconds)
            if task.done() and not task.cancelled():
                task.exception()
        if self._orphans:
            await asyncio.wait(set(self._orphans), timeout=1.0)
        await self.redis.aclose()

    async def _refresh_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self._refresh_seconds)
            try:
                await self._refresh_once()
            except Exception:  # the view must stay alive: a bug here is logged, not fatal
                log.exception("refreshing the ejection view from redis at %s", self.where)

    async def _call(self, call: Awaitable[Any], orphan: Callable[[Any], None] | None = None) -> Any:
        """``await call`` shielded: a cancelled caller gets its CancelledError at once while the
        command finishes on its own (redis-py can lose a cancel that lands mid-command, and a
        command cut half-way costs its connection); ``orphan`` then gets its result."""
        future = asyncio.ensure_future(call)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self._orphans.add(future)
            future.add_done_callback(functools.partial(self._orphaned, orphan))
            raise

    def _orphaned(self, orphan: Callable[[Any], None] | None, future: asyncio.Future[Any]) -> None:
        self._orphans.discard(future)
        if future.cancelled() or future.exception() is not None:
            return
        if orphan is not None:
            orphan(future.result())

    def _unlease(self, key: str, lease: str) -> Callable[[Any], None]:
        """For an admit whose caller was cancelled: release the lease it took, if it took one."""

        def unlease(reply: Any) -> None:
            if reply == 0 and not self._closing:
                release = asyncio.ensure_future(self.release(key, lease, 0))
                self._orphans.add(release)
                release.add_done_callback(functools.partial(self._orphaned, None))

        return unlease

    async def _refresh_once(self) -> None:
        writes = self._writes
        before = time.time()
        try:
            if self._unpushed:  # whichever call saw Redis back first, the refresh writes ours
                self._unpushed = False  # an ejection made while this push runs sets it again
                try:
                    await self._push_local()
                except BaseException:
                    self._unpushed = True
                    raise
            pipe = self.redis.pipeline(transaction=False)
            pipe.time()
            pipe.hgetall(_EJECTED)
            pipe.hgetall(_FAILS)
            (seconds, micros), ejected, fails = await self._call(pipe.execute())
        except self._errors as exc:
            self._lost(exc)
            return
        after = time.time()
        self._skew = seconds + micros / 1e6 - (before + after) / 2
        self._found()
        if writes != self._writes:
            return  # a change of ours landed meanwhile: the next refresh reads it
        view = self._ejection
        view.ends.clear()
        view.ends.update((_text(k), float(v) - self._skew) for k, v in ejected.items())
        view.fails.clear()
        view.fails.update((_text(k), int(v)) for k, v in fails.items() if int(v) > 0)

    async def _push_local(self) -> None:
        """Back from an outage: the ejections this process made meanwhile, still cooling, into Redis
        (where Redis has none or an earlier end), before its view replaces ours."""
        now = time.time()
        pairs: list[str] = []
        for name, end in self._ejection.ends.items():
            if end > now:
                pairs += [name, f"{end + self._skew:.6f}"]
        if pairs:
            await self._call(self._merge(keys=[_EJECTED], args=[str(int(_EJECTION_TTL * 1000)), *pairs]))

    # -- limits ------------------------------------------------------------------------------

    async def admit(
        self, key: str, *, rpm: int | None, tpm: int | None, max_streams: int | None, lease: str
    ) -> Refusal | None:
        """None when ``key`` is within ``rpm`` (requests in the window, this one included),
        ``tpm`` (tokens in the window, under it) and ``max_streams`` (leases held, under it): the
        request is counted and holds ``lease``, in one script. Else the ``Refusal``, and nothing
        is counted. Redis unreachable: None or ``Refusal("redis", 1.0)`` per ``fail``."""
        if self._away():
            return self._refused
        base = f"{PREFIX}{{{key}}}:"
        try:
            reply = await self._call(
                self._admit(
                    keys=[base + "rpm", base + "tpm", base + "streams"],
                    args=[
                        -1 if rpm is None else rpm,
                        -1 if tpm is None else tpm,
                        -1 if max_streams is None else max_streams,
                        lease,
                        repr(self._width),
                        repr(self._lease_seconds),
                        self._key_ttl,
                    ],
                ),
                self._unlease(key, lease),
            )
        except self._errors as exc:
            self._lost(exc)
            return self._refused
        if self._down:
            self._found()
        if reply == 0:
            return None
        return Refusal(_text(reply[0]), float(reply[1]))

    async def release(self, key: str, lease: str, tokens: int) -> None:
        """Drop ``lease`` and count ``tokens`` now. Redis unreachable: the tokens are lost and
        the lease expires by itself."""
        if self._away():
            return
        base = f"{PREFIX}{{{key}}}:"
        try:
            await self._call(
                self._release(
                    keys=[base + "tpm", base + "streams"],
                    args=[lease, max(int(tokens), 0), repr(self._width), self._key_ttl],
                )
            )
        except self._errors as exc:
            self._lost(exc)
            return
        if self._down:
            self._found()

    # -- ejection ----------------------------------------------------------------------------

    def _keys(self, upstream: str) -> list[str]:
        return [_FAILS, _EJECTED, _PROBE + upstream]

    async def failed(self, upstream: str, eject_after: int, cooldown: float) -> bool:
        """Count one more consecutive retryable failure of ``upstream`` across every instance:
        True when this one ejected it (the ``eject_after``-th; 0 never ejects) or re-ejected it (a
        failed probe, its cooldown over); False while it is still cooling. Redis unreachable: the
        failure is counted in this process."""
        if eject_after <= 0:
            return False
        if self._away():
            self._local_change()
            return self._ejection.failed(upstream, eject_after, cooldown, time.time())
        ttl = str(math.ceil((max(cooldown, 0.0) + _EJECTION_TTL) * 1000))
        try:
            out, count, end, now = await self._call(
                self._failed(
                    keys=self._keys(upstream), args=[upstream, eject_after, repr(float(cooldown)), ttl]
                )
            )
        except self._errors as exc:
            self._lost(exc)
            self._local_change()
            return self._ejection.failed(upstream, eject_after, cooldown, time.time())
        if self._down:
            self._found()
        self._writes += 1
        view = self._ejection
        if end:
            self._skew = float(now) - time.time()
            view.ends[upstream] = float(end) - self._skew
            view.fails.pop(upstream, None)
        else:
            view.fails[upstream] = int(count)
        return bool(out)

    async def succeeded(self, upstream: str) -> None:
        """Reset ``upstream``'s failures across every instance; a success once its cooldown ended
        (the probe) puts it back. No call to Redis when the local view shows neither a failure
        nor an ejection (the usual case), so a success right after another instance's failure may
        leave that one counted (for ``refresh_seconds`` at most)."""
        view = self._ejection
        if upstream not in view.fails and upstream not in view.ends:
            return
        if self._away():
            self._local_change()
            view.succeeded(upstream, time.time())
            return
        try:
            up = await self._call(self._succeeded(keys=self._keys(upstream), args=[upstream]))
        except self._errors as exc:
            self._lost(exc)
            self._local_change()
            view.succeeded(upstream, time.time())
            return
        if self._down:
            self._found()
        if up:
            self._writes += 1
            view.ends.pop(upstream, None)
            view.fails.pop(upstream, None)
            view.probes.pop(upstream, None)

    def ejected(self) -> Mapping[str, float]:
        """The ejected upstreams, name -> wall-clock time (this host's clock) its cooldown ends: a
        live read-only view, this instance's changes at once, the others' within
        ``refresh_seconds``. An upstream whose cooldown ended stays in it until a probe succeeds."""
        return self._ejection.view

    async def claim_probe(self, upstream: str, hold: float) -> bool:
        """True for one caller across every instance once ``upstream``'s cooldown ended (again
        ``hold`` seconds later if that caller reports neither success nor failure); True too for
        an upstream not ejected; False while it cools. Redis unreachable: claimed in this process."""
        if self._away():
            self._local_change()
            return self._ejection.claim(upstream, hold, time.time())
        try:
            won = await self._call(
                self._claim(
                    keys=[_EJECTED, _PROBE + upstream], args=[upstream, max(math.ceil(hold * 1000), 1)]
                )
            )
        except self._errors as exc:
            self._lost(exc)
            self._local_change()
            return self._ejection.claim(upstream, hold, time.time())
        if self._down:
            self._found()
        return bool(won)
