"""The gateway: chat completions, Responses and Messages served over upstreams of any of the three,
as ASGI parts and as an app (``python -m fastsse gateway`` runs it; docs/gateway.md).

- ``Gateway(config)``: the raw ASGI app (routes, inbound keys, body bound, header rules, fallback
  over the upstreams, ``/v1/models``, ``/health``, ``/metrics``, one log record per answer).
- ``Downstream(send, headers)``: one streamed answer's link to an ASGI ``send``, fed by an
  ``AsyncClient`` transfer's ``on_chunk`` with backpressure; ``finish()`` ends a whole answer,
  ``flush()`` alone leaves an unfinished one cut; ``keepalive`` seconds of silence send an SSE
  comment (``KEEPALIVE``), and ``fail(stream_error(api, status, error))`` ends a stream whose 200
  went out with the API's in-stream error event. ``stream_format(caller, upstream_api)`` names
  the byte format between two APIs.
- ``read_body``, ``watch_disconnect``: a bounded body, and the caller's disconnect as a callback.
- ``HttpServer(app)``: the command's HTTP/1.1 server for one ASGI app (``Gateway``), with the
  ``fastsse.wire`` extension through which ``Downstream`` writes its chunks itself.
- ``JsonFormatter``, ``QuietCuts``: one JSON line per log record (an answer's record merged in),
  and the filter that drops a server's line for a response cut on purpose.
- ``load_config(path)`` / ``config_from(mapping)``: the TOML configuration, checked whole at start
  (``ConfigError``): ``[server]``, ``[[upstream]]`` (``Upstream``), ``[[route]]`` (``Route``) and
  ``[[key]]`` (``Key``).
- ``Router``: a model's route and the order its upstreams are tried in (balance, ejection, probes).
- ``make_store(server)``: the state shared by answers (limits, ejection): ``LocalStore`` in the
  process, ``RedisStore`` across workers and instances; ``Refusal`` is a limit's answer.
- ``Resumer``: resumable streams in Redis (``GET /v1/streams/<id>``).
- ``Metrics``, ``MetricsShare``: ``/metrics``, and one page for every worker.
"""

from __future__ import annotations

from ._app import Gateway, stream_format
from ._asgi import (
    KEEPALIVE,
    Batch,
    CallerGone,
    Downstream,
    TooLarge,
    read_body,
    stream_error,
    watch_disconnect,
)
from ._config import (
    ConfigError,
    GatewayConfig,
    Key,
    Route,
    ServerConfig,
    Upstream,
    config_from,
    load_config,
)
from ._http import MAX_HEAD_BYTES, HttpServer
from ._log import JsonFormatter, QuietCuts
from ._metrics import Metrics, MetricsShare
from ._resume import Resumer
from ._router import Router
from ._state import LocalStore, RedisStore, Refusal, make_store

__all__ = [
    "KEEPALIVE",
    "MAX_HEAD_BYTES",
    "Batch",
    "CallerGone",
    "ConfigError",
    "Downstream",
    "Gateway",
    "GatewayConfig",
    "HttpServer",
    "JsonFormatter",
    "Key",
    "LocalStore",
    "Metrics",
    "MetricsShare",
    "QuietCuts",
    "RedisStore",
    "Refusal",
    "Resumer",
    "Route",
    "Router",
    "ServerConfig",
    "TooLarge",
    "Upstream",
    "config_from",
    "load_config",
    "make_store",
    "read_body",
    "stream_error",
    "stream_format",
    "watch_disconnect",
]
