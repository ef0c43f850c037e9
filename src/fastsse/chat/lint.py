"""Conformance rules for OpenAI-style chat streams: ``StreamChecker`` and ``CODES``, the SSE framing
rules every API shares (``fastsse.sse.lint``) with the chat chunk rules on top (``fastsse.check`` is
the face: ``check_stream``, ``checker(api)``).

It reports each way a stream departs from the shape OpenAI clients rely on (seed 000; the LocalAI,
ollama, sglang and vLLM bug class), with the byte offset of the offending event. ``CODES`` lists
every finding code with its severity; ``docs/conformance.md`` says what each one breaks in which client.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

# The framing rules' names, which this module has always exported.
from ..sse.lint import CODES as SSE_CODES
from ..sse.lint import (
    ERROR,
    SNIFF_BYTES,
    WARNING,
    CodeInfo,
    Finding,
    FramingChecker,
    NoFieldText,
    not_sse,
    short,
)
from ._result import INDEX_LIMIT

__all__ = [
    "CODES",
    "ERROR",
    "SNIFF_BYTES",
    "WARNING",
    "CodeInfo",
    "Finding",
    "NoFieldText",
    "StreamChecker",
    "not_sse",
]

_HTTP: Final = ("content-type", "transfer-cut")

# The one table of the chat linter's codes: the framing ones, then the chunk rules. docs/conformance.md
# mirrors it with the clients each code breaks.
CODES: Final[dict[str, CodeInfo]] = {
    # SSE framing and payloads: fastsse.sse.lint's
    **{code: info for code, info in SSE_CODES.items() if code not in _HTTP},
    # chunks
    "wrong-object": CodeInfo(ERROR, 'a chunk\'s "object" is not "chat.completion.chunk"'),
    "id-changed": CodeInfo(WARNING, "the chunk id changes mid-stream"),
    "created-changed": CodeInfo(WARNING, '"created" changes mid-stream'),
    "malformed-chunk": CodeInfo(
        ERROR, "a chunk lacks choices, a choice lacks index or delta, or a type is wrong"
    ),
    "empty-choices": CodeInfo(WARNING, "a chunk with choices: [] that is not the usage chunk"),
    "index-out-of-range": CodeInfo(
        ERROR, "a choice or tool-call index is negative or past 127: clients read it as another one"
    ),
    # choices
    "missing-role": CodeInfo(ERROR, "a choice never states its role"),
    "empty-initial-content": CodeInfo(WARNING, 'the first chunk of a choice carries "content": ""'),
    "role-repeated": CodeInfo(ERROR, "a role after the first chunk of a choice"),
    "empty-finish-reason": CodeInfo(ERROR, 'finish_reason is "" (it must be null or absent until the end)'),
    "delta-after-finish": CodeInfo(ERROR, "a delta or a second finish_reason after a choice finished"),
    "final-delta-not-empty": CodeInfo(WARNING, "the chunk with the finish_reason carries a non-empty delta"),
    "missing-finish-reason": CodeInfo(ERROR, "a choice never gets a non-null finish_reason"),
    "content-parts": CodeInfo(ERROR, "a delta's content is a list of parts, not a string"),
    "reasoning-field": CodeInfo(
        WARNING, "reasoning text only in reasoning_details, with no reasoning or reasoning_content beside it"
    ),
    # tool calls
    "empty-tool-calls": CodeInfo(ERROR, "a delta carries tool_calls: []"),
    "tool-calls-without-calls": CodeInfo(
        ERROR, 'finish_reason "tool_calls" in a choice that made no tool call'
    ),
    "tool-call-without-index": CodeInfo(ERROR, "a tool-call fragment has no integer index"),
    "tool-call-index-gap": CodeInfo(ERROR, "a new tool-call index skips one (the first is not 0, or a gap)"),
    "tool-call-repeated": CodeInfo(ERROR, "a tool call's id or name is sent again in a later fragment"),
    "tool-call-id-reused": CodeInfo(ERROR, "one tool-call id is used for two different calls"),
    "tool-call-incomplete": CodeInfo(ERROR, "a tool call never gets an id or a function name"),
    # end of stream
    "missing-done": CodeInfo(ERROR, "no data: [DONE] at the end"),
    "after-done": CodeInfo(ERROR, "an event or field after data: [DONE]"),
    "missing-usage": CodeInfo(
        ERROR, "no usage chunk although one was expected (expect_usage / include_usage)"
    ),
    # HTTP (check --url only): fastsse.sse.lint's
    **{code: SSE_CODES[code] for code in _HTTP},
}


class _ChoiceState:
    __slots__ = ("finished", "role", "tools")

    def __init__(self) -> None:
        self.role = False
        self.finished: str | None = None
        self.tools: dict[int, list[Any]] = {}  # tool-call index -> [id, name]


_SUBSTANTIVE: Final = ("content", "reasoning_content", "reasoning", "refusal")


def _detail_text(details: Any) -> bool:
    """Whether a ``reasoning_details`` list carries reasoning text (not only a signature or ids)."""
    return isinstance(details, list) and any(
        isinstance(part, dict) and any(isinstance(part.get(k), str) and part[k] for k in ("text", "summary"))
        for part in details
    )


class StreamChecker(FramingChecker):
    """``StreamChecker(*, expect_usage=False, max_event_bytes=None)``: lint a chat stream incrementally.

    ``feed(data)`` returns the findings the new bytes revealed; ``close()`` returns the ones only the
    end of the stream can tell (nothing after ``[DONE]``, truncation, choices never finished...).
    ``findings`` holds all of them so far, in stream order. Any chunking gives the same findings.
    With ``expect_usage=True`` a stream without a usage chunk is reported (``missing-usage``).
    With ``max_event_bytes=N`` an event whose data, or a line, passes N bytes is skipped unread up
    to the next blank line and reported (``event-too-large``), as ``Decoder`` drops it: the checker
    then holds at most about N bytes of any event, however large the stream's events are.
    The first 64 bytes are held until they tell whether the input is an event stream at all (their
    findings come with the feed that completes them, or with ``close``): an HTML page, a JSON
    document or binary data gives the one finding ``not-sse`` and nothing else. So does a text with
    no event and no SSE field (a README): ``close`` returns ``not-sse`` and ``findings`` then holds
    only it.

    It raises TypeError or ValueError for a ``max_event_bytes`` that is not a positive int or None;
    ``feed`` raises TypeError for anything but a byte buffer, and ValueError after ``close``.
    """

    codes = CODES
    stream = "a chat stream"

    def __init__(self, *, expect_usage: bool = False, max_event_bytes: int | None = None) -> None:
        super().__init__(max_event_bytes=max_event_bytes)
        self.expect_usage = expect_usage
        self._done_at: int | None = None
        self._usage = False
        self._first: dict[str, Any] = {}  # the first chunk's id and created
        self._choices: dict[int, _ChoiceState] = {}
        self._tool_ids: dict[str, tuple[int, int]] = {}

    # framing

    def _field_line(self, offset: int, line: bytes) -> None:
        if self._done_at is not None:
            self._report_once(
                "after-done", offset, "a field after data: [DONE]; clients stop reading at [DONE]"
            )

    # events

    def _event(self, offset: int, raw: bytes, etype: bytes | None) -> None:
        if b"\n" in raw:
            self._report_once("multi-line-data", offset, "a payload spread over several data: lines")
        if self._done_at is not None:
            return  # _field_line reported the first line after [DONE]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._report(
                "invalid-utf8", offset, f"the payload is not valid UTF-8 ({exc.reason} at byte {exc.start})"
            )
            text = raw.decode("utf-8", "replace")
        if text == "[DONE]":
            self._done_at = offset
            return
        try:
            chunk = orjson.loads(text)
        except orjson.JSONDecodeError:
            preview = text if len(text) <= 40 else text[:37] + "..."
            self._report("invalid-json", offset, f"the payload is not JSON: {preview!r}")
            return
        if etype == b"error" or (isinstance(chunk, dict) and chunk.get("error")):
            error = chunk.get("error") if isinstance(chunk, dict) else None
            message = error.get("message") if isinstance(error, dict) else error
            if message is None and isinstance(chunk, dict):
                message = chunk.get("message")  # the flat {"type": "error", "message": ...} form
            how = "an event: error" if etype == b"error" else "an error object"
            self._report("error-object", offset, f"{how} mid-stream: {short(message)}")
            return
        if not isinstance(chunk, dict):
            self._report(
                "invalid-json", offset, f"the payload is JSON but not an object: {type(chunk).__name__}"
            )
            return
        self._chunk(offset, chunk)

    def _chunk(self, offset: int, chunk: dict[str, Any]) -> None:
        if chunk.get("object") != "chat.completion.chunk":
            self._report_once(
                "wrong-object", offset, f'"object" is {chunk.get("object")!r}, not "chat.completion.chunk"'
            )
        for key, code in (("id", "id-changed"), ("created", "created-changed")):
            value = chunk.get(key)
            first = self._first.get(key)
            if first is None:
                self._first[key] = value
            elif value is not None and value != first:
                self._report_once(code, offset, f"{key} changes from {short(first)} to {short(value)}")
        if chunk.get("usage"):
            self._usage = True
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            self._report("malformed-chunk", offset, f"choices is {type(choices).__name__}, not a list")
            return
        if not choices and not chunk.get("usage"):
            self._report_once("empty-choices", offset, "choices: [] in a chunk without usage")
        for choice in choices:
            self._choice(offset, choice)

    def _choice(self, offset: int, choice: Any) -> None:
        if not isinstance(choice, dict) or type(choice.get("index")) is not int:
            self._report("malformed-chunk", offset, "a choice without an integer index")
            return
        index = choice["index"]
        if not 0 <= index < INDEX_LIMIT:
            self._report(
                "index-out-of-range",
                offset,
                f"choice index {index}: clients read it as another choice (Python's -1 is the last); "
                "folds and the relay drop it",
            )
            return
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            self._report("malformed-chunk", offset, f"choice {index} has no delta object")
            delta = {}
        state = self._choices.get(index)
        first = state is None
        if state is None:
            state = self._choices[index] = _ChoiceState()
        if first and delta.get("content") == "":
            self._report(
                "empty-initial-content", offset, f'choice {index}: the first chunk carries "content": ""'
            )
        if isinstance(delta.get("content"), list):
            self._report_once(
                "content-parts",
                offset,
                f"choice {index}: delta.content is a list of parts; clients that append strings break",
            )
        # reasoning_content and reasoning are the two names clients read (ChatChunkEncoder writes
        # either); reasoning_details alone (Snowflake) is invisible to them.
        if (
            _detail_text(delta.get("reasoning_details"))
            and not delta.get("reasoning")
            and not delta.get("reasoning_content")
        ):
            self._report_once(
                "reasoning-field",
                offset,
                f"choice {index}: reasoning text only in delta.reasoning_details; clients that read "
                "reasoning or reasoning_content see none",
            )
        if delta.get("role") is not None:
            if state.role or not first:
                self._report_once(
                    "role-repeated", offset, f"choice {index}: a role after its first chunk", key=index
                )
            state.role = True
        finish = choice.get("finish_reason")
        substantive = any(delta.get(k) for k in _SUBSTANTIVE) or bool(delta.get("tool_calls"))
        if state.finished is not None and (substantive or finish):
            self._report_once(
                "delta-after-finish",
                offset,
                f"choice {index}: a chunk after its finish_reason {state.finished!r}",
                key=index,
            )
        if "tool_calls" in delta:
            self._tool_calls(offset, index, state, delta["tool_calls"])
        if finish == "":
            self._report_once("empty-finish-reason", offset, f'choice {index}: finish_reason is ""')
        elif finish is not None:
            if not isinstance(finish, str):
                self._report("malformed-chunk", offset, f"choice {index}: finish_reason is {finish!r}")
                return
            if state.finished is None:
                state.finished = finish
            if any(v is not None for v in delta.values()):
                keys = ", ".join(k for k, v in delta.items() if v is not None)
                self._report_once(
                    "final-delta-not-empty",
                    offset,
                    f"choice {index}: the finish_reason chunk carries {keys}; it should be delta: {{}}",
                )
            if finish == "tool_calls" and not state.tools:
                self._report(
                    "tool-calls-without-calls",
                    offset,
                    f'choice {index}: finish_reason "tool_calls" with no tool call',
                )

    def _tool_calls(self, offset: int, index: int, state: _ChoiceState, calls: Any) -> None:
        if not isinstance(calls, list):
            if calls is not None:
                self._report("malformed-chunk", offset, f"choice {index}: tool_calls is not a list")
            return
        if not calls:
            self._report_once("empty-tool-calls", offset, f"choice {index}: tool_calls: []")
            return
        for call in calls:
            if not isinstance(call, dict):
                self._report("malformed-chunk", offset, f"choice {index}: a tool call is not an object")
                continue
            at = call.get("index")
            if type(at) is not int:
                self._report(
                    "tool-call-without-index", offset, f"choice {index}: a tool-call fragment without index"
                )
                continue
            if not 0 <= at < INDEX_LIMIT:
                self._report(
                    "index-out-of-range",
                    offset,
                    f"choice {index}: tool call index {at}: clients read it as another call; "
                    "folds and the relay drop it",
                )
                continue
            slot = state.tools.get(at)
            if slot is None:
                if at != len(state.tools):
                    self._report(
                        "tool-call-index-gap",
                        offset,
                        f"choice {index}: tool call index {at} while {len(state.tools)} is the next one",
                    )
                slot = state.tools[at] = [None, None]
            function = call.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            call_id = call.get("id")
            for pos, value, what in ((0, call_id, "id"), (1, name, "name")):
                if not value:
                    continue
                if slot[pos] is not None:
                    self._report_once(
                        "tool-call-repeated",
                        offset,
                        f"choice {index}: tool call {at} sends its {what} again; clients concatenate it",
                        key=(index, what),
                    )
                else:
                    slot[pos] = value
            if call_id:
                owner = self._tool_ids.get(call_id)
                if owner is None:
                    self._tool_ids[call_id] = (index, at)
                elif owner != (index, at):
                    self._report_once(
                        "tool-call-id-reused",
                        offset,
                        f"choice {index}: tool call {at} reuses id {call_id!r} of tool call {owner[1]}",
                        key=call_id,
                    )

    def _end_checks(self, end: int) -> None:
        if self.events == 0:
            self._report("empty-stream", end, "no event in the stream")
            return
        for index in sorted(self._choices):
            state = self._choices[index]
            if not state.role:
                self._report("missing-role", end, f"choice {index} never states its role")
            if state.finished is None:
                self._report("missing-finish-reason", end, f"choice {index} never gets a finish_reason")
            for at, (call_id, name) in sorted(state.tools.items()):
                if not call_id or not name:
                    lacks = " and ".join(w for w, v in (("id", call_id), ("name", name)) if not v)
                    self._report(
                        "tool-call-incomplete", end, f"choice {index}: tool call {at} has no {lacks}"
                    )
        if self.expect_usage and not self._usage:
            self._report("missing-usage", end, "no usage chunk (choices: [] with usage) before [DONE]")
        if self._done_at is None:
            self._report(
                "missing-done", end, "no data: [DONE]; clients waiting for it hang or report an error"
            )
