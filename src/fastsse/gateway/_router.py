"""``Router``: which ``[[route]]`` a request's model takes, and the order its upstreams are tried in.

Pure and synchronous (no I/O, no lock: one event loop per process calls it): the gateway asks
``route(model)`` once per request and ``plan(route, ejected, now)`` once per answer, then walks the
plan. What it keeps between calls is per process: an exact-name cache of the route lookups
(bounded), and per upstream the answers in flight (``least_busy``) and a decaying average of the
time to first byte (``latency``), fed by ``started`` / ``ended``. Which upstreams are ejected is the
caller's (the store's), passed in as ``ejected``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from typing import Final

from ._config import GatewayConfig, Route, Upstream

CACHE_SIZE: Final = 4096  # exact model names kept; past it the cache starts again
CACHE_NAME_CHARS: Final = 256  # a longer model name is looked up every time, never kept
LATENCY_ALPHA: Final = 0.3  # the weight of a new time-to-first-byte sample in the average
# A sample older than this counts as none, so an upstream ``latency`` stopped choosing (it was slow
# once) gets one request again and can show it recovered.
LATENCY_STALE_S: Final = 60.0
_MISS: Final = object()


class _Prepared:
    """A route's upstreams resolved once: the balanced ones (weight above 0), the weight-0 ones
    (tried after them), the fallbacks, and the balanced ones' weights."""

    __slots__ = ("balanced", "fallbacks", "ordered", "route", "tail", "weights", "zero")

    def __init__(self, route: Route, upstreams: Mapping[str, Upstream]) -> None:
        self.route = route
        named = [upstreams[name] for name in route.upstreams]
        self.balanced = tuple(u for u in named if u.weight > 0)
        self.zero = tuple(u for u in named if u.weight <= 0)
        self.fallbacks = tuple(upstreams[name] for name in route.fallbacks)
        self.weights = tuple(u.weight for u in self.balanced)
        # the plans with nothing ejected: the tail after the balanced ones, the whole in config order
        self.tail = tuple((u, False) for u in (*self.zero, *self.fallbacks))
        self.ordered = tuple((u, False) for u in self.balanced) + self.tail


class Router:
    """``Router(config, *, rng=None, previous=None)``: the routes of one ``GatewayConfig``.

    With no ``[[route]]`` in the config every model takes one default route over every upstream in
    config order (``balance="ordered"``), which is the gateway's behaviour without routes. ``rng``
    (a ``random.Random``) makes the balancing repeatable in tests. ``previous``: the router of the
    config this one replaces (a reload); both then share the answers in flight and the time to first
    byte per upstream name, so the old config's answers still ending count in the new one's
    ``least_busy`` and ``latency``.
    """

    __slots__ = (
        "_cache",
        "_default",
        "_inflight",
        "_prepared",
        "_random",
        "_ttfb",
        "config",
        "routes",
        "upstreams",
    )

    def __init__(
        self, config: GatewayConfig, *, rng: random.Random | None = None, previous: Router | None = None
    ) -> None:
        self.config = config
        self.upstreams: dict[str, Upstream] = {u.name: u for u in config.upstreams}
        self._default: Route | None = None
        if config.routes:
            self.routes = config.routes
        else:
            self._default = Route("*", tuple(self.upstreams), balance="ordered")
            self.routes = (self._default,)
        self._prepared = {id(r): _Prepared(r, self.upstreams) for r in self.routes}
        self._cache: dict[str, Route | None] = {}
        self._random = rng if rng is not None else random.Random()
        self._inflight: dict[str, int] = {} if previous is None else previous._inflight
        # name: (the average in seconds, the wall clock of its last sample)
        self._ttfb: dict[str, tuple[float, float]] = {} if previous is None else previous._ttfb

    def route(self, model: str | None) -> Route | None:
        """The first route (in config order) whose ``model`` matches, or None: the model is not
        routed. A request without a model looks up ``""``, which only a glob such as ``"*"`` takes."""
        if self._default is not None:
            return self._default
        name = model or ""
        found = self._cache.get(name, _MISS)
        if found is not _MISS:
            return found  # type: ignore[return-value]
        found = next((r for r in self.routes if r.matches(name)), None)
        if len(name) <= CACHE_NAME_CHARS:
            # the names are the callers' choice: a bounded cache, or a memory hole
            if len(self._cache) >= CACHE_SIZE:
                self._cache.clear()
            self._cache[name] = found
        return found

    def plan(self, route: Route, ejected: Mapping[str, float], now: float) -> list[tuple[Upstream, bool]]:
        """The upstreams to try for one answer, in order, as ``(upstream, probe)``.

        ``ejected`` maps an ejected upstream's name to the wall-clock time (``time.time()``) its
        cooldown ends; ``now`` is the wall clock. An ejected upstream whose cooldown has ended
        (``ejected[name] <= now``) comes with ``probe=True``: the caller tries it only if it wins
        the probe (``Store.claim_probe``) and skips it otherwise; one still cooling is left out.

        The order: the route's cooled upstreams of weight above 0 as probes first (so a probe
        happens as soon as the cooldown ends, not only after every healthy upstream failed), then
        the route's other upstreams of weight above 0 in the ``balance`` order, then its weight-0
        upstreams in config order, then the ``fallbacks`` in config order; ejected ones among the
        last two are in their place as probes. It raises KeyError for a route naming an upstream
        the config does not have.
        """
        prepared = self._prepared.get(id(route))
        if prepared is None or prepared.route is not route:
            prepared = _Prepared(route, self.upstreams)  # a route of another config: not kept
        balanced = prepared.balanced
        if not ejected:
            if route.balance == "ordered" or len(balanced) < 2:
                return list(prepared.ordered)
            out = [(u, False) for u in self._order(route.balance, balanced, prepared.weights)]
            out += prepared.tail
            return out
        up: list[Upstream] = []
        weights: list[float] = []
        out = []
        for upstream, weight in zip(balanced, prepared.weights, strict=True):
            end = ejected.get(upstream.name)
            if end is None:
                up.append(upstream)
                weights.append(weight)
            elif end <= now:
                out.append((upstream, True))
        out += [(u, False) for u in self._order(route.balance, up, weights)]
        for group in (prepared.zero, prepared.fallbacks):
            for upstream in group:
                end = ejected.get(upstream.name)
                if end is None or end <= now:
                    out.append((upstream, end is not None))
        return out

    def soonest(self, route: Route, ejected: Mapping[str, float], now: float) -> float:
        """Seconds (0 or more) until the soonest cooldown among the route's upstreams and fallbacks
        ends: the Retry-After when none can be tried. 0.0 when none is ejected."""
        ends = [ejected[name] for name in (*route.upstreams, *route.fallbacks) if name in ejected]
        return max(0.0, min(ends) - now) if ends else 0.0

    def started(self, name: str) -> None:
        """An answer from upstream ``name`` began (``least_busy`` counts it in flight)."""
        self._inflight[name] = self._inflight.get(name, 0) + 1

    def ended(self, name: str, ttfb_s: float | None) -> None:
        """The answer ``started`` for upstream ``name`` ended; ``ttfb_s``: its time to first byte in
        seconds (None when no byte came: no sample; a caller may pass the seconds it waited for an
        attempt that timed out, so that ``latency`` learns of it)."""
        count = self._inflight.get(name, 0)
        if count > 1:
            self._inflight[name] = count - 1
        else:
            self._inflight.pop(name, None)
        if ttfb_s is not None and ttfb_s >= 0 and math.isfinite(ttfb_s):
            clock = time.time()
            last = self._ttfb.get(name)
            if last is None or clock - last[1] > LATENCY_STALE_S:
                self._ttfb[name] = (ttfb_s, clock)
            else:
                self._ttfb[name] = (last[0] + LATENCY_ALPHA * (ttfb_s - last[0]), clock)

    def inflight(self, name: str) -> int:
        """Answers from upstream ``name`` in flight in this process (``started`` less ``ended``)."""
        return self._inflight.get(name, 0)

    def ttfb(self, name: str) -> float | None:
        """The decaying average time to first byte of upstream ``name`` in seconds, None without a
        sample (or with only one older than ``LATENCY_STALE_S``)."""
        last = self._ttfb.get(name)
        if last is None or time.time() - last[1] > LATENCY_STALE_S:
            return None
        return last[0]

    def models(self) -> list[str]:
        """The routes' exact model names (globs left out), each once, in config order; empty
        without ``[[route]]``."""
        if self._default is not None:
            return []
        return list(dict.fromkeys(r.model for r in self.routes if not r.is_glob))

    def _order(
        self,
        balance: str,
        up: tuple[Upstream, ...] | list[Upstream],
        weights: tuple[float, ...] | list[float],
    ) -> tuple[Upstream, ...] | list[Upstream]:
        """``up`` (none ejected, every weight above 0) in the order ``balance`` tries them."""
        if len(up) < 2 or balance == "ordered":
            return up
        draw = self._random.random
        count = len(up)
        if balance == "weighted":
            if count == 2:
                second_first = draw() * (weights[0] + weights[1]) >= weights[0]
                return [up[1], up[0]] if second_first else up
            # an exponential race: the first is picked by weight, the rest in weighted-random order
            log = math.log
            keys = [-log(1.0 - draw()) / w for w in weights]
            return [up[i] for i in sorted(range(count), key=keys.__getitem__)]
        if balance == "least_busy":
            inflight = self._inflight
            return sorted(up, key=lambda u: (inflight.get(u.name, 0), draw()))
        # latency: the power of two choices on the average time to first byte; no sample is best
        stale = time.time() - LATENCY_STALE_S
        averages = []
        for upstream in up:
            last = self._ttfb.get(upstream.name)
            averages.append(-1.0 if last is None or last[1] < stale else last[0])
        one = int(draw() * count)
        two = int(draw() * (count - 1))
        two += two >= one
        if averages[two] < averages[one] or (averages[two] == averages[one] and draw() < 0.5):
            one = two
        rest = sorted((i for i in range(count) if i != one), key=averages.__getitem__)
        return [up[one], *(up[i] for i in rest)]
