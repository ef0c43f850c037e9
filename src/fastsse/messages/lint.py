"""Conformance rules for the Anthropic Messages stream grammar: ``MessagesChecker`` and ``CODES``, the
codes it adds to the framing rules (docs/conformance.md says which clients each one breaks). Reached
through ``fastsse.check``: ``check_stream(data, api="messages")``, ``checker("messages")`` and
``python -m fastsse check --api messages``.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from ..fold.lint import GRAMMAR_CODES, GrammarChecker
from ..sse.lint import CODES as SSE_CODES
from ..sse.lint import ERROR, WARNING, CodeInfo

__all__ = ["CODES", "MessagesChecker"]

CODES: Final[dict[str, CodeInfo]] = {
    **GRAMMAR_CODES,
    "missing-message-start": CodeInfo(ERROR, "an event before message_start"),
    "message-start-usage": CodeInfo(
        ERROR, "message_start has no usage object with integer input_tokens and output_tokens"
    ),
    "zero-usage": CodeInfo(WARNING, "input_tokens is 0 in message_start and no message_delta corrects it"),
    "block-index-order": CodeInfo(
        ERROR, "a content_block_start index is not the next one (0, 1, 2... in start order)"
    ),
    "block-not-started": CodeInfo(ERROR, "a delta or stop for an index no content_block_start opened"),
    "delta-after-block-stop": CodeInfo(ERROR, "a delta or second stop after content_block_stop"),
    "delta-type-mismatch": CodeInfo(ERROR, "a delta type that does not fit its block's type"),
    "tool-use-incomplete": CodeInfo(ERROR, "a tool_use block with an empty id or name"),
    "tool-input-invalid": CodeInfo(ERROR, "a tool block's input_json_delta pieces do not join into JSON"),
    "tool-input-empty": CodeInfo(
        WARNING, "a tool block got input_json_delta events, every one of them empty"
    ),
    "missing-content-block-stop": CodeInfo(ERROR, "a content block is never stopped"),
    "missing-stop-reason": CodeInfo(ERROR, "no message_delta with a stop_reason before message_stop"),
    "missing-message-stop": CodeInfo(ERROR, "no message_stop at the end"),
    "after-message-stop": CodeInfo(ERROR, "an event after message_stop"),
    "error-object": SSE_CODES["error-object"],
}

_MESSAGES_TYPES: Final = frozenset(
    [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    ]
)
_DELTA_FITS: Final = {
    "text_delta": ("text",),
    "citations_delta": ("text",),
    "thinking_delta": ("thinking",),
    "signature_delta": ("thinking",),
    "input_json_delta": ("tool_use", "server_tool_use", "mcp_tool_use"),
}


class _Block:
    __slots__ = ("json", "started_at", "stopped", "type")

    def __init__(self, type_: str, started_at: int) -> None:
        self.type = type_
        self.started_at = started_at
        self.stopped = False
        self.json: list[str] = []


class MessagesChecker(GrammarChecker):
    """``MessagesChecker(*, max_event_bytes=None)``: lint an Anthropic Messages event stream incrementally.

    ``feed(data)`` and ``close()`` return findings as ``StreamChecker``'s do; the codes are the
    framing ones plus ``API_CODES["messages"]``; ``max_event_bytes`` bounds an event as there. It
    raises what ``StreamChecker`` raises.
    """

    api = "messages"
    types = _MESSAGES_TYPES
    done_effect = "the anthropic SDK skips an event with no event: line and fastsse's fold skips it"
    codes = CODES
    stream = "a Messages stream"

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        super().__init__(max_event_bytes=max_event_bytes)
        self._started = False
        self._blocks: dict[int, _Block] = {}
        self._stop_reason = False
        self._stopped_at: int | None = None
        self._zero_input: int | None = None  # offset of a message_start with input_tokens 0
        self._input_later = False
        self._error = False

    def _grammar(self, offset: int, kind: str, payload: dict[str, Any]) -> None:
        if self._stopped_at is not None:
            self._report_once("after-message-stop", offset, f"{kind} after message_stop")
            return
        if kind == "ping":
            return
        if kind == "error":
            self._error = True
            error = payload.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            self._report("error-object", offset, f"an event: error mid-stream: {message!r}")
            return
        if not self._started and kind != "message_start":
            self._report_once(
                "missing-message-start",
                offset,
                f"{kind} before message_start; the anthropic SDK raises RuntimeError",
            )
        if kind == "message_start":
            self._started = True
            message = payload.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            if not (
                isinstance(usage, dict)
                and type(usage.get("input_tokens")) is int
                and type(usage.get("output_tokens")) is int
            ):
                self._report("message-start-usage", offset, f"message_start usage is {usage!r}")
            elif usage["input_tokens"] == 0:
                self._zero_input = offset
        elif kind == "content_block_start":
            index = payload.get("index")
            block = payload.get("content_block")
            btype = block.get("type", "") if isinstance(block, dict) else ""
            if type(index) is not int:
                self._report("malformed-chunk", offset, "content_block_start without an integer index")
                return
            if index != len(self._blocks) or index in self._blocks:
                self._report(
                    "block-index-order",
                    offset,
                    f"content_block_start index {index} where {len(self._blocks)} was next; "
                    "the anthropic SDK looks blocks up by position",
                )
            self._blocks[index] = _Block(btype, offset)
            if (
                btype == "tool_use"
                and isinstance(block, dict)
                and not (block.get("id") and block.get("name"))
            ):
                self._report(
                    "tool-use-incomplete",
                    offset,
                    f"tool_use block {index} has id {block.get('id')!r} and name {block.get('name')!r}",
                )
        elif kind in ("content_block_delta", "content_block_stop"):
            index = payload.get("index")
            found = self._blocks.get(index) if type(index) is int else None
            if found is None:
                self._report_once(
                    "block-not-started", offset, f"{kind} for index {index!r}, never started", key=index
                )
                return
            if found.stopped:
                self._report_once(
                    "delta-after-block-stop",
                    offset,
                    f"{kind} for block {index} after its content_block_stop",
                    key=index,
                )
                return
            if kind == "content_block_stop":
                found.stopped = True
                joined = "".join(found.json)
                if found.json and not joined:
                    self._report(
                        "tool-input-empty",
                        offset,
                        f"block {index}: every input_json_delta was empty, so the input is {{}}",
                    )
                elif joined:
                    try:
                        orjson.loads(joined)
                    except orjson.JSONDecodeError:
                        preview = joined if len(joined) <= 40 else joined[:37] + "..."
                        self._report(
                            "tool-input-invalid", offset, f"block {index} input is not JSON: {preview!r}"
                        )
                return
            delta = payload.get("delta")
            dtype = delta.get("type") if isinstance(delta, dict) else None
            fits = _DELTA_FITS.get(dtype) if isinstance(dtype, str) else None
            if fits is not None and found.type not in fits:
                self._report_once(
                    "delta-type-mismatch",
                    offset,
                    f"{dtype} into a {found.type or 'typeless'} block {index}; the anthropic SDK drops it",
                    key=index,
                )
            elif dtype == "input_json_delta" and isinstance(delta, dict):
                piece = delta.get("partial_json")
                if isinstance(piece, str):
                    found.json.append(piece)
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self._stop_reason = True
            usage = payload.get("usage")
            if isinstance(usage, dict) and type(usage.get("input_tokens")) is int and usage["input_tokens"]:
                self._input_later = True
            self._open_blocks(offset, "message_delta")
        elif kind == "message_stop":
            self._stopped_at = offset
            self._open_blocks(offset, "message_stop")
            if not self._stop_reason:
                self._report(
                    "missing-stop-reason", offset, "message_stop without a message_delta stop_reason"
                )

    def _open_blocks(self, offset: int, where: str) -> None:
        for index, block in sorted(self._blocks.items()):
            if not block.stopped:
                self._report_once(
                    "missing-content-block-stop",
                    offset,
                    f"block {index} ({block.type}) still open at {where}",
                    key=index,
                )

    def _grammar_end(self, end: int) -> None:
        if self._zero_input is not None and not self._input_later and self._stopped_at is not None:
            self._report(
                "zero-usage",
                self._zero_input,
                "input_tokens 0 in message_start and no message_delta carries the real count",
            )
        if self._stopped_at is None and not self._error:
            self._report("missing-message-stop", end, "no message_stop; the answer may be truncated")
