"""The options every request takes, grouped once: ``RequestOptions``.

``create_stream``, ``Client`` and ``AsyncClient`` spell them out as keyword arguments (so ``help()``
and type checkers show them) and build one frozen ``RequestOptions``; the engine keeps a client's
as the defaults and ``replace`` lays a request's own on top, then ``_request.prepare`` checks
and turns them into a ``RequestSpec``. Adding an option is one field here, one keyword in each
public signature and one line in ``OPTIONS_DOC``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["OPTIONS_DOC", "REQUEST_ONLY", "RequestOptions"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RequestOptions:
    """What a request is sent with (each field as in ``create_stream``); immutable, so a client's
    defaults can be shared by every request it makes."""

    api: str = "chat"
    base_url: str | None = None
    api_key: str | None = None
    path: str | None = None
    headers: Mapping[str, str] | Sequence[str] | None = None
    timeout: float | None = None
    connect_timeout: float | None = None
    idle_timeout: float | None = None
    proxy: str | None = None
    ca_bundle: str | None = None
    client_cert: str | tuple[str, str] | None = None
    max_event_bytes: int | None = None

    def replace(self, overrides: Mapping[str, Any], /) -> RequestOptions:
        """These options with ``overrides`` (a request's own) laid on top.

        It raises TypeError for a name that is not an option.
        """
        if not overrides:
            return self
        unknown = [name for name in overrides if name not in _FIELDS]
        if unknown:
            raise TypeError(f"unknown request option {unknown[0]!r}")
        return dataclasses.replace(self, **overrides)

    def as_dict(self) -> dict[str, Any]:
        """The options as keyword arguments (for ``create_stream`` and ``prepare``)."""
        return {name: getattr(self, name) for name in _FIELDS}


_FIELDS: Final = tuple(field.name for field in dataclasses.fields(RequestOptions))

# Options a single request takes beside the RequestOptions: they are not client defaults.
REQUEST_ONLY: Final = frozenset({"curl", "format", "on_chunk"})

OPTIONS_DOC: Final = """
    Options (keyword-only; each is also accepted per request): ``api`` (``"chat"``, ``"responses"``,
    ``"messages"``), ``base_url`` and ``api_key`` (default ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``,
    then the OpenAI endpoint; a client reads the environment once, when it is made), ``headers`` (a mapping or ``"Name: value"`` lines, sent with every
    request), ``path`` (``"/chat/completions"``), ``timeout`` / ``connect_timeout`` /
    ``idle_timeout`` (seconds), ``proxy``, ``ca_bundle``, ``client_cert`` and ``max_event_bytes``,
    all as in ``create_stream`` and checked by the same rules (ValueError / TypeError at
    construction, or when a request with its own options is made). Per request only: ``curl`` (a
    ``pycurl.Curl`` of your own, used for that transfer and left open, its connection kept) and
    ``format`` (``"relay"``, ``"to-chat"``, ``"to-responses"``, ``"to-messages"``: ``on_chunk`` then
    receives the bytes to send downstream). Client-only: ``max_connections`` (transfers at once;
    more requests wait in a queue, and ``timing["started"] - timing["queued"]`` is that wait;
    ``timeout`` counts that wait: a request still queued when its ``timeout`` runs out fails with
    TransportError code 28, one that starts late gets what is left (the requests ``as_completed``
    holds back for its ``concurrency`` are not queued yet); default 100) and ``timing`` (default True: every result carries ``result["timing"]``, a
    ``fastsse.Timing``; False drops the record and its cost), ``http2`` (default False: HTTP/2
    for every request of the client, by prior knowledge on ``http://`` and ALPN on ``https://``,
    requests multiplexed on shared connections, waiting for one being opened rather than opening
    their own; ``max_connections`` still bounds the transfers in flight; a ``curl=`` handle keeps
    its own settings. Without it curl's defaults hold: HTTP/1.1 on ``http://``, HTTP/2 when the
    server offers it on ``https://``), ``driver`` (default None: ``"compiled"`` where fastsse's
    libcurl driver is built and loads (Linux: libcurl driven from C, each read of a compiled
    ``ChatStream`` fed from C), else ``"pycurl"``; ``$FASTSSE_DRIVER`` overrides the default;
    ``fastsse.client.engine.compiled_driver()`` says why not; a request with ``curl=`` needs
    ``"pycurl"``).
"""
