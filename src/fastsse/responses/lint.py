"""Conformance rules for the OpenAI Responses stream grammar: ``ResponsesChecker`` and ``CODES``, the
codes it adds to the framing rules (docs/conformance.md says which clients each one breaks). Reached
through ``fastsse.check``: ``check_stream(data, api="responses")``, ``checker("responses")`` and
``python -m fastsse check --api responses``.
"""

from __future__ import annotations

from typing import Any, Final

from ..apis import APIS
from ..fold.lint import GRAMMAR_CODES, GrammarChecker
from ..sse.lint import CODES as SSE_CODES
from ..sse.lint import ERROR, WARNING, CodeInfo

__all__ = ["CODES", "ResponsesChecker"]

CODES: Final[dict[str, CodeInfo]] = {
    **GRAMMAR_CODES,
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
    "missing-output-text-done": CodeInfo(ERROR, "an output_text part never gets response.output_text.done"),
    "text-done-mismatch": CodeInfo(ERROR, "a .done event's text differs from its deltas joined"),
    "missing-output-item-done": CodeInfo(
        ERROR, "an output item is never closed by response.output_item.done"
    ),
    "missing-terminal": CodeInfo(
        ERROR, "no response.completed, response.incomplete or response.failed at the end"
    ),
    "after-terminal": CodeInfo(ERROR, "an event after the terminal event"),
    "missing-usage": CodeInfo(WARNING, "the terminal response carries no usage"),
    "error-object": SSE_CODES["error-object"],
}

# Every event type of the Responses streaming API reference, as the openai SDK's ResponseStreamEvent
# union has named them across its versions (tests/test_check_formats.py holds the list to the installed
# SDK's union). The names a later version renamed stay: a server built against the older reference
# still sends them, and they are documented events, not unknown ones.
_RESPONSES_TYPES: Final = frozenset(
    [
        # the response's life
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "error",
        # items and their content
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.output_text_annotation.added",  # the earlier name
        "response.refusal.delta",
        "response.refusal.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        # reasoning
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.reasoning.delta",  # the earlier names of reasoning_text and the summary text
        "response.reasoning.done",
        "response.reasoning_summary.delta",
        "response.reasoning_summary.done",
        # audio
        "response.audio.delta",
        "response.audio.done",
        "response.audio.transcript.delta",
        "response.audio.transcript.done",
        # built-in tools
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.code.delta",  # the earlier names
        "response.code_interpreter_call.code.done",
        "response.image_generation_call.in_progress",
        "response.image_generation_call.generating",
        "response.image_generation_call.partial_image",
        "response.image_generation_call.completed",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_list_tools.failed",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.arguments_delta",  # the earlier names
        "response.mcp_call.arguments_done",
        "response.shell_call_command.added",
        "response.shell_call_command.delta",
        "response.shell_call_command.done",
        "response.shell_call_output_content.delta",
        "response.shell_call_output_content.done",
        "response.compaction.compacting",
    ]
)
_TERMINAL: Final = APIS["responses"].terminal
_TEXT_DELTAS: Final = {"response.output_text.delta": "output_text", "response.refusal.delta": "refusal"}
_TEXT_DONE: Final = {
    "response.output_text.done": ("output_text", "text"),
    "response.refusal.done": ("refusal", "refusal"),
}


class _Item:
    __slots__ = ("added_at", "done", "done_parts", "parts", "texts", "type")

    def __init__(self, type_: str, added_at: int) -> None:
        self.type = type_
        self.added_at = added_at
        self.done = False
        self.parts: dict[int, str] = {}  # content_index -> part type
        self.texts: dict[int, list[str]] = {}  # content_index -> deltas
        self.done_parts: set[int] = set()  # content indexes whose .done event came


class ResponsesChecker(GrammarChecker):
    """``ResponsesChecker(*, max_event_bytes=None)``: lint an OpenAI Responses event stream incrementally.

    ``feed(data)`` and ``close()`` return findings as ``StreamChecker``'s do; the codes are the
    framing ones plus ``API_CODES["responses"]``; ``max_event_bytes`` bounds an event as there. It
    raises what ``StreamChecker`` raises.
    """

    api = "responses"
    types = _RESPONSES_TYPES
    done_effect = "the openai SDK stops reading there and fastsse's fold skips it"
    codes = CODES
    stream = "a Responses stream"

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        super().__init__(max_event_bytes=max_event_bytes)
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
