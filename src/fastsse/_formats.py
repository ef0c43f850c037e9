"""The three streaming APIs fastsse folds, side by side: what a client must send to get each one
and which fused stream reads it. ``create_stream(..., api=...)`` and the many-streams engine read
this table, so a fourth format is one more row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from . import _backend

ANTHROPIC_VERSION = "2023-06-01"


def _chat_token(event: Mapping[str, Any]) -> bool:
    for choice in event.get("choices") or ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and any(
            delta.get(key) for key in ("content", "reasoning_content", "reasoning", "refusal", "tool_calls")
        ):
            return True
    return False


_RESPONSES_TOKENS = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
    }
)
_MESSAGES_TOKENS = frozenset({"text_delta", "thinking_delta", "input_json_delta"})


def _responses_token(event: Mapping[str, Any]) -> bool:
    return event.get("type") in _RESPONSES_TOKENS and bool(event.get("delta"))


def _messages_token(event: Mapping[str, Any]) -> bool:
    if event.get("type") != "content_block_delta":
        return False
    delta = event.get("delta")
    if not isinstance(delta, dict) or delta.get("type") not in _MESSAGES_TOKENS:
        return False
    return any(isinstance(v, str) and v for k, v in delta.items() if k != "type")


@dataclass(frozen=True, slots=True)
class ApiFormat:
    """One streaming API: ``name`` (``"chat"``, ``"responses"``, ``"messages"``), the default
    ``path`` under the base URL, the default ``base_url`` and the environment variables read for
    the base URL and the key, the name of the fused stream class in each backend, and
    ``is_token(event)``, which says whether a parsed event carries the first token (text,
    reasoning or tool input; not ``response.created`` or ``message_start``)."""

    name: str
    path: str
    base_url: str
    base_url_env: str | None
    api_key_env: str
    stream_name: str
    is_token: Callable[[Mapping[str, Any]], bool]

    def body(self, request: Mapping[str, Any], /) -> bytes:
        """The request body: ``request`` with ``"stream": true`` (all three APIs use that field)."""
        return orjson.dumps({**request, "stream": True})

    def headers(self, api_key: str | None, /) -> list[str]:
        """The default header lines: JSON in, an event stream out, and the key the way this API
        wants it (``Authorization: Bearer`` for the OpenAI APIs, ``x-api-key`` with
        ``anthropic-version`` for Messages)."""
        lines = ["Content-Type: application/json", "Accept: text/event-stream", "Expect:"]
        if self.name == "messages":
            if api_key:
                lines.append(f"x-api-key: {api_key}")
            lines.append(f"anthropic-version: {ANTHROPIC_VERSION}")
        elif api_key:
            lines.append(f"Authorization: Bearer {api_key}")
        return lines

    def stream(
        self,
        on_chunk: Callable[[dict[str, Any]], object] | None = None,
        *,
        max_event_bytes: int | None = None,
    ) -> Any:
        """A new fused stream of the selected backend for this API (``ChatStream``,
        ``ResponsesStream`` or ``MessagesStream``): the factory the transports and the engine use."""
        cls = getattr(_backend, self.stream_name)
        return cls(on_chunk, max_event_bytes=max_event_bytes)


API_FORMATS: dict[str, ApiFormat] = {
    "chat": ApiFormat(
        "chat",
        "/chat/completions",
        "https://api.openai.com/v1",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "ChatStream",
        _chat_token,
    ),
    "responses": ApiFormat(
        "responses",
        "/responses",
        "https://api.openai.com/v1",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "ResponsesStream",
        _responses_token,
    ),
    # The anthropic SDK's ANTHROPIC_BASE_URL leaves out /v1, where fastsse's base URLs include it,
    # so it is not read: pass base_url to point at another server.
    "messages": ApiFormat(
        "messages",
        "/messages",
        "https://api.anthropic.com/v1",
        None,
        "ANTHROPIC_API_KEY",
        "MessagesStream",
        _messages_token,
    ),
}


def api_format(name: str, /) -> ApiFormat:
    """The ``ApiFormat`` for ``"chat"``, ``"responses"`` or ``"messages"``.

    It raises ValueError for another name.
    """
    try:
        return API_FORMATS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown api {name!r}; expected 'chat', 'responses' or 'messages'") from None
