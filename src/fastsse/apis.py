"""The streaming APIs fastsse speaks, as data: one ``Api`` row per API, read by every module that
needs a per-API fact (the request's path, key and limit, the usage's field names, which events end
a stream and which of those end a whole or a failed answer). A fourth API is one more row.

h11's ``_state.py`` is the model: the grammar is a table, and the code that drives it reads the
table instead of spelling the facts out again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._errors import InvalidRequest

__all__ = ["APIS", "NAMES", "Api", "api", "usage_tokens"]


@dataclass(frozen=True, slots=True)
class Api:
    """One streaming API.

    ``name`` (``"chat"``, ``"responses"``, ``"messages"``); ``path`` under the base URL; the default
    ``base_url`` and the environment variables read for it (``base_url_env``, None: not read) and
    for the key (``api_key_env``); ``key_header``, the header the key goes in
    (``"authorization"`` as a Bearer token, or ``"x-api-key"``); ``limit_fields``, the request's
    output limit, the current name first; ``usage_fields``, the usage's input and output token
    counts; ``terminal``, what ends a stream (``"[DONE]"`` for chat, else event types), of which
    ``whole`` end an answer as the API ends answers (a length limit included) and ``failed`` end
    a failed one; ``error_events``, the event types that carry an error mid-stream (chat sends an
    ``{"error": ...}`` payload instead); ``stream_name``, the fused stream class of each backend.
    """

    name: str
    path: str
    base_url: str
    base_url_env: str | None
    api_key_env: str
    key_header: str
    limit_fields: tuple[str, ...]
    usage_fields: tuple[str, str]
    terminal: tuple[str, ...]
    whole: tuple[str, ...]
    failed: tuple[str, ...]
    error_events: tuple[str, ...]
    stream_name: str

    @property
    def limit_field(self) -> str:
        """The request's output limit field, by its current name."""
        return self.limit_fields[0]


APIS: Final[dict[str, Api]] = {
    "chat": Api(
        name="chat",
        path="/chat/completions",
        base_url="https://api.openai.com/v1",
        base_url_env="OPENAI_BASE_URL",
        api_key_env="OPENAI_API_KEY",
        key_header="authorization",
        limit_fields=("max_completion_tokens", "max_tokens"),
        usage_fields=("prompt_tokens", "completion_tokens"),
        terminal=("[DONE]",),
        whole=("[DONE]",),  # with every choice finished; a finish_reason "length" included
        failed=(),
        error_events=(),
        stream_name="ChatStream",
    ),
    "responses": Api(
        name="responses",
        path="/responses",
        base_url="https://api.openai.com/v1",
        base_url_env="OPENAI_BASE_URL",
        api_key_env="OPENAI_API_KEY",
        key_header="authorization",
        limit_fields=("max_output_tokens",),
        usage_fields=("input_tokens", "output_tokens"),
        terminal=("response.completed", "response.incomplete", "response.failed"),
        whole=("response.completed", "response.incomplete"),  # incomplete: a limit ended it
        failed=("response.failed",),
        error_events=("error",),
        stream_name="ResponsesStream",
    ),
    # The anthropic SDK's ANTHROPIC_BASE_URL leaves out /v1, where fastsse's base URLs include it,
    # so it is not read: pass base_url to point at another server.
    "messages": Api(
        name="messages",
        path="/messages",
        base_url="https://api.anthropic.com/v1",
        base_url_env=None,
        api_key_env="ANTHROPIC_API_KEY",
        key_header="x-api-key",
        limit_fields=("max_tokens",),
        usage_fields=("input_tokens", "output_tokens"),
        terminal=("message_stop",),
        whole=("message_stop",),  # whatever the stop_reason, max_tokens included
        failed=(),
        error_events=("error",),
        stream_name="MessagesStream",
    ),
}

NAMES: Final = tuple(APIS)
_ONE_OF: Final = ", ".join(map(repr, NAMES[:-1])) + f" or {NAMES[-1]!r}"


def api(name: str, /) -> Api:
    """The ``Api`` row for ``name``. It raises InvalidRequest for another name."""
    try:
        return APIS[name]
    except (KeyError, TypeError):
        raise InvalidRequest(f"unknown api {name!r}; expected {_ONE_OF}") from None


def usage_tokens(usage: Mapping[str, Any] | None, /) -> tuple[int | None, int | None]:
    """``(input, output)`` token counts of any API's ``usage`` object (None where it has none)."""
    if not isinstance(usage, Mapping):
        return None, None
    counts: list[int | None] = [None, None]
    for row in APIS.values():
        for i, field in enumerate(row.usage_fields):
            value = usage.get(field)
            if counts[i] is None and isinstance(value, int) and not isinstance(value, bool):
                counts[i] = value
    return counts[0], counts[1]
