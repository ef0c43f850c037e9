"""What one answer's record is made of, beside the answer: the first content's time of a stream
(``FirstToken``), the tokens a key's ``tpm`` is charged (``folded``), usage, the words of a
failure, and the OpenTelemetry span of the record (``tracer``, ``span``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from .._formats import API_FORMATS, CONTENT
from ..apis import usage_tokens
from ._config import ConfigError

# The logger and tracer are named after the package ("fastsse.gateway"), not this module.
NAME: Final = __name__.rpartition(".")[0]


# the fields of the three APIs' answers that hold generated text (the tpm estimate below)
_TEXT_FIELDS: Final = frozenset(
    {"content", "text", "refusal", "reasoning_content", "reasoning", "arguments", "thinking", "input"}
)
CHARS_PER_TOKEN: Final = 4  # the estimate of an answer that reported no usage


def folded(result: Mapping[str, Any]) -> int:
    """What a key's ``tpm`` is charged for an answer that reported no usage: the tokens the fold
    counted (one per token-bearing chunk, or usage's growth) where it kept a timing record, else
    the folded answer's generated text (or its ``text_chars``, from a fold that kept none) at
    ``CHARS_PER_TOKEN`` characters a token."""
    timing = result.get("timing")
    tokens = timing.get("tokens") if isinstance(timing, dict) else None
    if isinstance(tokens, list) and tokens:
        return sum(tokens)
    counted = result.get("text_chars")  # a fold that kept the facts, not the text
    if isinstance(counted, int):
        return -(-counted // CHARS_PER_TOKEN)
    chars = 0
    todo: list[Any] = [result]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            for name, value in item.items():
                if name in ("verdict", "timing", "usage"):
                    continue
                if isinstance(value, str):
                    chars += len(value) if name in _TEXT_FIELDS else 0
                elif isinstance(value, (dict, list)):
                    todo.append(value)
        elif isinstance(item, list):
            todo.extend(v for v in item if isinstance(v, (dict, list)))
    return -(-chars // CHARS_PER_TOKEN)


class FirstToken:
    """When the first content (reasoning, text, a tool call) of a streamed answer reached the
    gateway: ``see(piece)`` parses the events of each piece, in the caller's API, with that API's
    ``token_kind`` (``fastsse._formats``, the one table), until one carries content; ``at`` is
    its monotonic ns (0 before). The relay and translators keep no timing record of their own."""

    __slots__ = ("at", "kind")

    def __init__(self, caller: str) -> None:
        self.at = 0
        self.kind: Callable[[Mapping[str, Any]], int] = (
            legacy_kind if caller == "completions" else API_FORMATS[caller].token_kind
        )

    def see(self, data: bytes) -> bool:
        """Parse ``data``'s events: True once the first content was seen (``at`` is set)."""
        if self.at:
            return True
        for line in data.splitlines():
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload[:1] != b"{":
                continue
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue  # half an event, or not JSON: the next piece may tell
            if isinstance(event, dict) and self.kind(event):
                self.at = time.monotonic_ns()
                return True
        return False


def legacy_kind(event: Mapping[str, Any]) -> int:
    """A legacy completions chunk's kind: content when a choice's ``text`` is not empty."""
    for choice in event.get("choices") or ():
        if isinstance(choice, dict) and choice.get("text"):
            return CONTENT
    return 0


def tokens_of(result: Mapping[str, Any]) -> tuple[int | None, int | None]:
    return usage_tokens(result.get("usage"))


def unfinished_why(verdict: Mapping[str, Any]) -> str:
    return str(verdict.get("why") or verdict.get("departures") or "the upstream answer ended unfinished")


def failure_words(exc: BaseException) -> str:
    """A transport error's words without the upstream's URL (the caller need not learn it)."""
    text = str(exc)
    return text.split(": ", 1)[1] if text.startswith("http") and ": " in text else text


def tracer() -> Any:
    """The OpenTelemetry tracer of the gateway. It raises ConfigError when opentelemetry-api is
    not installed (``server.otel = true`` asked for it)."""
    try:
        from opentelemetry import trace
    except ImportError:
        raise ConfigError("server.otel needs opentelemetry-api: pip install opentelemetry-api") from None
    return trace.get_tracer(NAME)


def span(tracer: Any, record: dict[str, Any], arrived: int) -> None:
    """One SERVER span per answer, after the OpenTelemetry GenAI conventions, from its arrival to
    now (``time.monotonic_ns`` moved onto the wall clock OpenTelemetry stamps with)."""
    from opentelemetry.trace import SpanKind, Status, StatusCode

    start = time.time_ns() - (time.monotonic_ns() - arrived)
    operation = {"responses": "responses", "completions": "text_completion"}.get(record["route"], "chat")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.request.model": record.get("model") or "",
        "http.response.status_code": record.get("status") or 0,
        "fastsse.gateway.route": record["route"],
        "fastsse.gateway.upstream": record.get("upstream") or "-",
        "fastsse.gateway.outcome": record.get("outcome") or "",
        "fastsse.gateway.request_id": record["rid"],
    }
    if isinstance(record.get("tokens_in"), int):
        attributes["gen_ai.usage.input_tokens"] = record["tokens_in"]
    if isinstance(record.get("tokens_out"), int):
        attributes["gen_ai.usage.output_tokens"] = record["tokens_out"]
    span = tracer.start_span(
        f"{operation} {record.get('model') or ''}".strip(),
        kind=SpanKind.SERVER,
        start_time=start,
        attributes=attributes,
    )
    if record.get("outcome") not in ("complete", None):
        span.set_attribute("error.type", str(record.get("outcome")))
        span.set_status(Status(StatusCode.ERROR, str(record.get("why") or "")))
    span.end()
