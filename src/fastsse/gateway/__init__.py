"""The gateway: chat completions, Responses and Messages served over upstreams of any of the three,
as ASGI parts and as an app (``python -m fastsse gateway`` runs it; docs/gateway.md).

- ``Gateway(config)``: the raw ASGI app (routes, inbound keys, body bound, header rules, fallback
  over the upstreams, ``/v1/models``, ``/health``, ``/metrics``, one log record per answer).
- ``Downstream(send, headers)``: one streamed answer's link to an ASGI ``send``, fed by an
  ``AsyncClient`` transfer's ``on_chunk`` with backpressure; ``finish()`` ends a whole answer,
  ``flush()`` alone leaves an unfinished one cut. ``stream_format(caller, upstream_api)`` names
  the byte format between two APIs.
- ``read_body``, ``watch_disconnect``: a bounded body, and the caller's disconnect as a callback.
- ``JsonFormatter``, ``QuietCuts``: one JSON line per log record (an answer's record merged in),
  and the filter that drops a server's line for a response cut on purpose.
- ``load_config(path)`` / ``config_from(mapping)``: the TOML configuration, checked whole at start
  (``ConfigError``).
"""

from __future__ import annotations

from ._app import Gateway, stream_format
from ._asgi import Batch, CallerGone, Downstream, TooLarge, read_body, watch_disconnect
from ._config import ConfigError, GatewayConfig, ServerConfig, Upstream, config_from, load_config
from ._log import JsonFormatter, QuietCuts
from ._metrics import Metrics

__all__ = [
    "Batch",
    "CallerGone",
    "ConfigError",
    "Downstream",
    "Gateway",
    "GatewayConfig",
    "JsonFormatter",
    "Metrics",
    "QuietCuts",
    "ServerConfig",
    "TooLarge",
    "Upstream",
    "config_from",
    "load_config",
    "read_body",
    "stream_format",
    "watch_disconnect",
]
