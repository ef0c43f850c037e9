"""What a client sends to get each streaming API and what reads its answer: ``fastsse.apis``' rows
with the request's headers and body, and each API's token kinds for the timing record.
``create_stream(..., api=...)`` and the many-streams engine read this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from ._timing import CONTENT, REASONING
from .apis import APIS, api
from .messages import token_kind as _messages_kind
from .responses import token_kind as _responses_kind

__all__ = ["API_FORMATS", "CONTENT", "REASONING", "ApiFormat", "api_format"]

ANTHROPIC_VERSION = "2023-06-01"


def _chat_kind(event: Mapping[str, Any]) -> int:
    kind = 0
    for choice in event.get("choices") or ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            continue
        if delta.get("content") or delta.get("refusal") or delta.get("tool_calls"):
            kind |= CONTENT
        if delta.get("reasoning_content") or delta.get("reasoning"):
            kind |= REASONING
    return kind


@dataclass(frozen=True, slots=True)
class ApiFormat:
    """One streaming API: ``name`` (``"chat"``, ``"responses"``, ``"messages"``), the default
    ``path`` under the base URL, the default ``base_url`` and the environment variables read for
    the base URL and the key, the name of the fused stream class in each backend (which
    ``fastsse.client._streams.new_stream``, the one stream table, builds), and
    ``token_kind(event)``: what a parsed event carries for the timing record, ``CONTENT`` (text,
    refusal, tool input), ``REASONING``, both (3) or nothing (0: ``response.created``,
    ``message_start``, pings, signatures, usage); the first token is the first event with a kind."""

    name: str
    path: str
    base_url: str
    base_url_env: str | None
    api_key_env: str
    stream_name: str
    token_kind: Callable[[Mapping[str, Any]], int]

    def body(self, request: Mapping[str, Any], /) -> bytes:
        """The request body: ``request`` with ``"stream": true`` (all three APIs use that field)."""
        return orjson.dumps({**request, "stream": True})

    def headers(self, api_key: str | None, /) -> list[str]:
        """The default header lines: JSON in, an event stream out, and the key the way this API
        wants it (``Authorization: Bearer`` for the OpenAI APIs, ``x-api-key`` with
        ``anthropic-version`` for Messages)."""
        lines = ["Content-Type: application/json", "Accept: text/event-stream", "Expect:"]
        if APIS[self.name].key_header == "x-api-key":
            if api_key:
                lines.append(f"x-api-key: {api_key}")
            lines.append(f"anthropic-version: {ANTHROPIC_VERSION}")
        elif api_key:
            lines.append(f"Authorization: Bearer {api_key}")
        return lines


_KINDS: Final = {"chat": _chat_kind, "responses": _responses_kind, "messages": _messages_kind}

API_FORMATS: dict[str, ApiFormat] = {
    a.name: ApiFormat(
        a.name, a.path, a.base_url, a.base_url_env, a.api_key_env, a.stream_name, _KINDS[a.name]
    )
    for a in APIS.values()
}


def api_format(name: str, /) -> ApiFormat:
    """The ``ApiFormat`` for ``"chat"``, ``"responses"`` or ``"messages"``.

    It raises InvalidRequest for another name.
    """
    try:
        return API_FORMATS[name]
    except (KeyError, TypeError):
        api(name)  # raises InvalidRequest, naming the APIs
        raise
