"""Conformance rules for the OpenAI Responses and Anthropic Messages stream grammars.

``ResponsesChecker`` and ``MessagesChecker`` share the chat linter's SSE framing rules (BOM, line
endings, truncation, invalid UTF-8 / JSON...) and add the grammar of their API. ``API_CODES`` lists
every code each API adds; docs/conformance.md says which clients each one breaks. Reached through
``check_stream(data, api=...)``, ``checker(api)`` and ``python -m fastsse check --api``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import orjson

from .check import CODES, ERROR, WARNING, CodeInfo, Finding, StreamChecker

if TYPE_CHECKING:
    import argparse

__all__ = ["API_CODES", "MessagesChecker", "ResponsesChecker", "checker", "fetch"]

_GRAMMAR: Final[dict[str, CodeInfo]] = {
    "missing-event-field": CodeInfo(WARNING, "an event has no event: line naming its type"),
    "event-type-mismatch": CodeInfo(ERROR, "the event: line and the payload's type differ"),
    "unknown-event": CodeInfo(WARNING, "an event type the API does not define"),
}

API_CODES: Final[dict[str, dict[str, CodeInfo]]] = {
    "responses": {
        **_GRAMMAR,
        "missing-created": CodeInfo(ERROR, "the first event is not response.created"),
        "sequence-number": CodeInfo(WARNING, "sequence_number is missing or not one more than the last"),
        "missing-output-item-added": CodeInfo(
            ERROR, "an event names an output_index no response.output_item.added announced"
        ),
        "missing-content-part-added": CodeInfo(
            ERROR, "a text or refusal delta names a content_index no content_part.added announced"
        ),
        "duplicate-output-index": CodeInfo(ERROR, "response.output_item.added twice for one output_index"),
        "output-index-gap": CodeInfo(WARNING, "a new output_index is not the next one"),
        "delta-after-done": CodeInfo(ERROR, "a delta for an item after its response.output_item.done"),
        "missing-output-text-done": CodeInfo(
            ERROR, "an output_text part never gets response.output_text.done"
        ),
        "text-done-mismatch": CodeInfo(ERROR, "a .done event's text differs from its deltas joined"),
        "missing-output-item-done": CodeInfo(
            ERROR, "an output item is never closed by response.output_item.done"
        ),
        "missing-terminal": CodeInfo(
            ERROR, "no response.completed, response.incomplete or response.failed at the end"
        ),
        "after-terminal": CodeInfo(ERROR, "an event after the terminal event"),
        "missing-usage": CodeInfo(WARNING, "the terminal response carries no usage"),
        "error-object": CODES["error-object"],
    },
    "messages": {
        **_GRAMMAR,
        "missing-message-start": CodeInfo(ERROR, "an event before message_start"),
        "message-start-usage": CodeInfo(
            ERROR, "message_start has no usage object with integer input_tokens and output_tokens"
        ),
        "zero-usage": CodeInfo(
            WARNING, "input_tokens is 0 in message_start and no message_delta corrects it"
        ),
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
        "error-object": CODES["error-object"],
    },
}

_RESPONSES_TYPES: Final = frozenset(
    [
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "error",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.delta",
        "response.refusal.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
    ]
)
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
_TERMINAL: Final = ("response.completed", "response.incomplete", "response.failed")
_TEXT_DELTAS: Final = {"response.output_text.delta": "output_text", "response.refusal.delta": "refusal"}
_TEXT_DONE: Final = {
    "response.output_text.done": ("output_text", "text"),
    "response.refusal.done": ("refusal", "refusal"),
}
_DELTA_FITS: Final = {
    "text_delta": ("text",),
    "citations_delta": ("text",),
    "thinking_delta": ("thinking",),
    "signature_delta": ("thinking",),
    "input_json_delta": ("tool_use", "server_tool_use", "mcp_tool_use"),
}


class _GrammarChecker(StreamChecker):
    """The chat linter's framing rules with an event grammar in place of the chunk rules."""

    api: str = ""
    types: frozenset[str] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self._codes = API_CODES[self.api]

    def _report(self, code: str, offset: int | None, message: str) -> None:
        info = self._codes.get(code) or CODES[code]
        finding = Finding(code, info.severity, offset, message)
        self.findings.append(finding)
        self._new.append(finding)

    def _report_once(self, code: str, offset: int | None, message: str, key: object = None) -> None:
        if code == "non-data-field" and key == "event":
            return  # these grammars name every event
        super()._report_once(code, offset, message, key)

    def _event(self, offset: int, raw: bytes, etype: bytes | None) -> None:
        if b"\n" in raw:
            self._report_once("multi-line-data", offset, "a payload spread over several data: lines")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._report(
                "invalid-utf8", offset, f"the payload is not valid UTF-8 ({exc.reason} at byte {exc.start})"
            )
            text = raw.decode("utf-8", "replace")
        try:
            payload = orjson.loads(text)
        except orjson.JSONDecodeError:
            preview = text if len(text) <= 40 else text[:37] + "..."
            self._report("invalid-json", offset, f"the payload is not JSON: {preview!r}")
            return
        if not isinstance(payload, dict):
            self._report(
                "invalid-json", offset, f"the payload is JSON but not an object: {type(payload).__name__}"
            )
            return
        kind = payload.get("type")
        named = etype.decode("utf-8", "replace") if etype is not None else None
        if named is None:
            self._report_once(
                "missing-event-field", offset, "events without an event: line (the payload's type is used)"
            )
        elif isinstance(kind, str) and named != kind:
            self._report("event-type-mismatch", offset, f"event: {named} carries a payload of type {kind!r}")
        if not isinstance(kind, str):
            kind = named or ""
        if kind not in self.types:
            self._report_once("unknown-event", offset, f"an event of unknown type {kind!r}", key=kind)
            self._unknown(offset, payload)
            return
        self._grammar(offset, kind, payload)

    def _unknown(self, offset: int, payload: dict[str, Any]) -> None:
        pass

    def _grammar(self, offset: int, kind: str, payload: dict[str, Any]) -> None:
        raise NotImplementedError

    def _end_checks(self, end: int) -> None:
        if self.events == 0:
            self._report("empty-stream", end, "no event in the stream")
            return
        self._grammar_end(end)

    def _grammar_end(self, end: int) -> None:
        raise NotImplementedError


class _Item:
    __slots__ = ("added_at", "done", "done_parts", "parts", "texts", "type")

    def __init__(self, type_: str, added_at: int) -> None:
        self.type = type_
        self.added_at = added_at
        self.done = False
        self.parts: dict[int, str] = {}  # content_index -> part type
        self.texts: dict[int, list[str]] = {}  # content_index -> deltas
        self.done_parts: set[int] = set()  # content indexes whose .done event came


class ResponsesChecker(_GrammarChecker):
    """``ResponsesChecker()``: lint an OpenAI Responses event stream incrementally.

    ``feed(data)`` and ``close()`` return findings as ``StreamChecker``'s do; the codes are the
    framing ones plus ``API_CODES["responses"]``. It raises what ``StreamChecker`` raises.
    """

    api = "responses"
    types = _RESPONSES_TYPES

    def __init__(self) -> None:
        super().__init__()
        self._seq: int | None = None
        self._items: dict[int, _Item] = {}
        self._terminal: str | None = None
        self._seen_any = False

    def _grammar(self, offset: int, kind: str, payload: dict[str, Any]) -> None:
        first = not self._seen_any
        self._seen_any = True
        if first and kind != "response.created":
            self._report(
                "missing-created", offset, f"the stream opens with {kind}; the openai SDK raises RuntimeError"
            )
        self._unknown(offset, payload)
        if self._terminal is not None:
            self._report_once("after-terminal", offset, f"{kind} after {self._terminal}")
            return
        self._known(offset, kind, payload)

    def _unknown(self, offset: int, payload: dict[str, Any]) -> None:
        seq = payload.get("sequence_number")
        if type(seq) is not int or (self._seq is not None and seq != self._seq + 1):
            want = "an integer" if self._seq is None else str(self._seq + 1)
            self._report_once("sequence-number", offset, f"sequence_number {seq!r} where {want} was due")
        if type(seq) is int:
            self._seq = seq

    def _known(self, offset: int, kind: str, payload: dict[str, Any]) -> None:
        if kind == "error" or kind == "response.failed":
            error = payload.get("error") if kind == "error" else (payload.get("response") or {}).get("error")
            message = error.get("message") if isinstance(error, dict) else payload.get("message", error)
            self._report("error-object", offset, f"{kind} mid-stream: {message!r}")
        if kind in _TERMINAL:
            self._terminal = kind
            self._close_checks(offset, payload)
            return
        index = payload.get("output_index")
        if kind == "response.output_item.added":
            item = payload.get("item")
            if type(index) is not int:
                self._report(
                    "malformed-chunk", offset, "response.output_item.added without an integer output_index"
                )
                return
            if index in self._items:
                self._report("duplicate-output-index", offset, f"output_index {index} announced twice")
                return
            if index != len(self._items):
                self._report_once(
                    "output-index-gap", offset, f"output_index {index} where {len(self._items)} was next"
                )
            self._items[index] = _Item(item.get("type", "") if isinstance(item, dict) else "", offset)
            return
        if type(index) is not int:
            return  # response.created / in_progress and friends
        item = self._items.get(index)
        if item is None:
            self._report_once(
                "missing-output-item-added",
                offset,
                f"{kind} for output_index {index}, never announced; the openai SDK raises RuntimeError",
                key=index,
            )
            return
        if item.done:
            self._report_once(
                "delta-after-done",
                offset,
                f"{kind} for output_index {index} after its output_item.done",
                key=index,
            )
            return
        content_index = payload.get("content_index")
        if kind == "response.content_part.added" and type(content_index) is int:
            part = payload.get("part")
            item.parts[content_index] = part.get("type", "") if isinstance(part, dict) else ""
            item.texts[content_index] = []
        elif kind in _TEXT_DELTAS:
            if content_index not in item.parts:
                self._report_once(
                    "missing-content-part-added",
                    offset,
                    f"{kind} for content_index {content_index!r} of output {index}, no part announced",
                    key=(index, content_index),
                )
                return
            delta = payload.get("delta")
            if isinstance(delta, str):
                item.texts[content_index].append(delta)
        elif kind in _TEXT_DONE and content_index in item.texts:
            _, field = _TEXT_DONE[kind]
            joined = "".join(item.texts[content_index])
            if payload.get(field) != joined:
                self._report(
                    "text-done-mismatch",
                    offset,
                    f"{kind} text differs from the {len(joined)} characters streamed",
                )
            item.done_parts.add(content_index)
        elif kind == "response.output_item.done":
            self._finish_item(offset, index, item)

    def _finish_item(self, offset: int, index: int, item: _Item) -> None:
        item.done = True
        for content_index, part_type in sorted(item.parts.items()):
            if part_type in ("output_text", "refusal") and content_index not in item.done_parts:
                self._report(
                    "missing-output-text-done",
                    offset,
                    f"output {index} part {content_index} ({part_type}) closed without its .done event",
                )

    def _close_checks(self, offset: int, payload: dict[str, Any]) -> None:
        for index, item in sorted(self._items.items()):
            if not item.done and self._terminal != "response.failed":
                self._report(
                    "missing-output-item-done",
                    offset,
                    f"output {index} ({item.type}) never got response.output_item.done before {self._terminal}",
                )
        response = payload.get("response")
        if self._terminal != "response.failed" and not (
            isinstance(response, dict) and isinstance(response.get("usage"), dict)
        ):
            self._report("missing-usage", offset, f"{self._terminal} carries no usage")

    def _grammar_end(self, end: int) -> None:
        if self._terminal is None:
            self._report(
                "missing-terminal",
                end,
                "no response.completed / incomplete / failed; the openai SDK's get_final_response raises",
            )


class _Block:
    __slots__ = ("json", "started_at", "stopped", "type")

    def __init__(self, type_: str, started_at: int) -> None:
        self.type = type_
        self.started_at = started_at
        self.stopped = False
        self.json: list[str] = []


class MessagesChecker(_GrammarChecker):
    """``MessagesChecker()``: lint an Anthropic Messages event stream incrementally.

    ``feed(data)`` and ``close()`` return findings as ``StreamChecker``'s do; the codes are the
    framing ones plus ``API_CODES["messages"]``. It raises what ``StreamChecker`` raises.
    """

    api = "messages"
    types = _MESSAGES_TYPES

    def __init__(self) -> None:
        super().__init__()
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


def checker(api: str = "chat", /, *, expect_usage: bool = False) -> StreamChecker:
    """``checker(api="chat", /, *, expect_usage=False) -> StreamChecker``

    A fresh checker for ``api``: ``"chat"`` (``StreamChecker``), ``"responses"`` or ``"messages"``.
    It raises ValueError for another API and for ``expect_usage`` with a non-chat API.
    """
    if api == "chat":
        return StreamChecker(expect_usage=expect_usage)
    if expect_usage:
        raise ValueError("expect_usage applies to chat streams only")
    if api == "responses":
        return ResponsesChecker()
    if api == "messages":
        return MessagesChecker()
    raise ValueError(f"unknown api {api!r}; expected 'chat', 'responses' or 'messages'")


_PROMPT: Final = "Say hello in one short sentence."


def fetch(args: argparse.Namespace, checker: StreamChecker, /) -> tuple[int, str, bytes]:
    """``check --api responses|messages --url``: POST a small streaming request to ``args.url``
    (a base URL, or one ending in the API's path) with the API's headers, feed the body to
    ``checker`` as it arrives; return (HTTP status, Content-Type, the error body if any).

    It raises ImportError without pycurl and pycurl.error on a transport failure.
    """
    import os

    import pycurl

    from ._formats import api_format

    fmt = api_format(args.api)
    request: dict[str, Any] = {"model": args.model}
    if fmt.name == "messages":
        request.update(max_tokens=256, messages=[{"role": "user", "content": _PROMPT}])
    else:
        request["input"] = _PROMPT
    url = args.url.rstrip("/")
    if not url.endswith(fmt.path):
        url += fmt.path
    content_type: list[str] = []
    body = bytearray()
    status = [0]

    def on_header(line: bytes) -> None:
        if line.startswith(b"HTTP/"):
            parts = line.split()
            status[0] = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            content_type.clear()
        elif line.lower().startswith(b"content-type:"):
            content_type.append(line.split(b":", 1)[1].strip().decode("latin-1"))

    def on_body(chunk: bytes) -> None:
        if status[0] >= 400:
            if len(body) < 65536:
                body.extend(chunk)
        else:
            checker.feed(chunk)

    curl = pycurl.Curl()
    try:
        curl.setopt(pycurl.URL, url)
        curl.setopt(pycurl.POST, 1)
        curl.setopt(pycurl.POSTFIELDS, fmt.body(request))
        curl.setopt(pycurl.HTTPHEADER, fmt.headers(args.api_key or os.environ.get(fmt.api_key_env)))
        curl.setopt(pycurl.WRITEFUNCTION, on_body)
        curl.setopt(pycurl.HEADERFUNCTION, on_header)
        curl.setopt(pycurl.CONNECTTIMEOUT_MS, int(min(args.timeout, 10.0) * 1000))
        curl.setopt(pycurl.TIMEOUT_MS, int(args.timeout * 1000))
        curl.setopt(pycurl.NOSIGNAL, 1)
        curl.perform()
        code = curl.getinfo(pycurl.RESPONSE_CODE)
    finally:
        curl.close()
    return code, content_type[-1] if content_type else "", bytes(body)
