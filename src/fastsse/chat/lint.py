"""Conformance rules for OpenAI-style chat streams: ``StreamChecker`` and the framing rules every API's
linter shares (``fastsse.check`` is the face: ``check_stream``, ``checker(api)``).

It reports each way a stream departs from the shape OpenAI clients rely on (seed 000; the LocalAI,
ollama, sglang and vLLM bug class), with the byte offset of the offending event. ``CODES`` lists
every finding code with its severity; ``docs/conformance.md`` says what each one breaks in which client.

The checker scans lines itself rather than through ``fastsse.Decoder``: it needs byte offsets, line
endings, comments and field-only blocks, which a decoder rightly hides. Its event framing follows the
same WHATWG rules, and the tests hold the two to the same events on any input and any chunking.
"""

from __future__ import annotations

import re
from typing import Any, Final, NamedTuple, cast

import orjson

from .._errors import UsageError, event_limit
from ..sse import split_field
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

ERROR: Final = "error"
WARNING: Final = "warning"


class CodeInfo(NamedTuple):
    severity: str
    summary: str


# The one table of finding codes. docs/conformance.md mirrors it with the clients each code breaks.
CODES: Final[dict[str, CodeInfo]] = {
    # SSE framing
    "bom": CodeInfo(ERROR, "the stream starts with a UTF-8 byte order mark"),
    "cr-line-endings": CodeInfo(ERROR, "lines end in a lone CR"),
    "crlf-line-endings": CodeInfo(WARNING, "lines end in CRLF instead of LF"),
    "data-without-space": CodeInfo(WARNING, "a data: field has no space after the colon"),
    "multi-line-data": CodeInfo(WARNING, "one event's payload is spread over several data: lines"),
    "non-data-field": CodeInfo(WARNING, "an event:, id:, retry: or unknown field in a chat stream"),
    "field-only-event": CodeInfo(ERROR, "a block of fields with no data: line, ended by a blank line"),
    "invalid-utf8": CodeInfo(ERROR, "a payload is not valid UTF-8"),
    "missing-final-blank-line": CodeInfo(
        ERROR, "the stream ends after an event's lines without the blank line"
    ),
    "truncated": CodeInfo(ERROR, "the stream ends in the middle of a line (EOF inside an event)"),
    "empty-stream": CodeInfo(ERROR, "the stream holds no event at all"),
    "event-too-large": CodeInfo(ERROR, "an event or a line passes max_event_bytes: it was skipped unread"),
    "not-sse": CodeInfo(
        ERROR,
        "the input is not an event stream (an HTML page, a JSON document, binary data, a text with no field)",
    ),
    # payloads
    "invalid-json": CodeInfo(ERROR, "a data payload is not a JSON object (and not [DONE])"),
    "error-object": CodeInfo(ERROR, "an error object (or event: error) in the stream"),
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
    # HTTP (check --url only)
    "content-type": CodeInfo(ERROR, "the response is not text/event-stream"),
    "transfer-cut": CodeInfo(ERROR, "the transfer failed after the answer began (a cut, a timeout)"),
}


class Finding(NamedTuple):
    """One departure from the compliant stream shape.

    ``offset`` is the byte offset (in the raw stream, a BOM included) where the offending event or
    line starts; findings about what never came (``missing-done``...) point at the end of the stream.
    It is None only for HTTP-level findings such as ``content-type``.
    """

    code: str
    severity: str
    offset: int | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        """The finding as a JSON-ready dict (``code``, ``severity``, ``offset``, ``message``)."""
        return {"code": self.code, "severity": self.severity, "offset": self.offset, "message": self.message}


_EOL: Final = re.compile(rb"[\r\n]")
_BOM: Final = b"\xef\xbb\xbf"
SNIFF_BYTES: Final = 64  # how much of the start of a stream tells whether it is an event stream at all
_CONTROL: Final = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SHORT: Final = 80


def short(value: object) -> str:
    """``repr(value)`` cut to about 80 characters, for values quoted from a stream in a message."""
    text = repr(value)
    return text if len(text) <= _SHORT else text[: _SHORT - 1] + "\u2026"


def not_sse(head: bytes) -> str | None:
    """Why a stream starting with ``head`` (its first SNIFF_BYTES bytes) is not an event stream, or None.

    Only what no event stream starts with counts: a ``<`` (an HTML or XML page), a ``{`` or ``[`` (a
    JSON document), or a control character other than tab, CR and LF (binary data). An event stream's
    first line is a field, a comment or blank; leading blank lines and a BOM are skipped.
    """
    body = head[3:] if head.startswith(_BOM) else head
    body = body.lstrip(b" \t\r\n")
    if not body:
        return None
    first = body.splitlines()[0] if body[:1] not in (b"{", b"[") else body
    if body[:1] == b"<":
        return f"it starts like an HTML or XML page: {short(first.decode('utf-8', 'replace'))}"
    if body[:1] in (b"{", b"["):
        return f"it starts like a JSON document: {short(first.decode('utf-8', 'replace'))}"
    found = _CONTROL.search(body)
    if found:
        at = len(head) - len(body) + found.start()
        return (
            f"it looks like binary data (byte 0x{body[found.start()]:02x} at offset {at}): {short(body[:24])}"
        )
    return None


_FIELD_NAMES: Final = (b"data", b"event", b"id", b"retry")
_LINE_END: Final = re.compile(rb"[\r\n]")
_HEAD: Final = 48  # bytes of a line kept: enough for its field name and a quote in the message


class NoFieldText:
    """``NoFieldText()``: tells a text with no event (a README, a log) from a stream of comments.

    ``feed(data)`` it the input's bytes; after ``close()``, ``stray`` is the start of the first line
    that is neither blank, a comment nor a field of the spec (``data``, ``event``, ``id``, ``retry``),
    and ``field`` says whether any such field came. An input with no event and no field but a stray
    line is a text, not an event stream; one of comments only is a quiet stream. Memory is bounded
    (the head of one line), and it stops looking once a field came.
    """

    def __init__(self) -> None:
        self.field = False
        self.stray: bytes | None = None
        self.stray_line = 0  # 1-based line number of ``stray``
        self._line = bytearray()
        self._lines = 0
        self._first = True

    def feed(self, data: bytes | bytearray | memoryview, /) -> None:
        """Look at the next bytes of the input."""
        if self.field:
            return
        pieces = _LINE_END.split(bytes(data))
        for n, piece in enumerate(pieces):
            if n:
                self._end_line()
            room = _HEAD - len(self._line)
            if room > 0:
                self._line += piece[:room]

    def close(self) -> None:
        """End the input: its last line, unterminated, counts too."""
        if self._line:
            self._end_line()

    def not_a_stream(self) -> str | None:
        """Why the input, if it held no event, is a text rather than an event stream, or None."""
        if self.field or self.stray is None:
            return None
        text = self.stray.decode("utf-8", "replace")
        return f"it is text with no SSE field (line {self.stray_line}: {short(text)})"

    def _end_line(self) -> None:
        line = bytes(self._line)
        self._line.clear()
        self._lines += 1
        if self._first:
            self._first = False
            # a BOM, or the part of one a cut stream kept, is not text
            line = line[3:] if line.startswith(_BOM) else b"" if _BOM.startswith(line) else line
        if not line or line[:1] == b":" or self.field:
            return
        if line.split(b":", 1)[0] in _FIELD_NAMES:
            self.field = True
        elif self.stray is None:
            self.stray, self.stray_line = line, self._lines


LF, CRLF, CR = "LF", "CRLF", "CR"
_CR_BYTE, _LF_BYTE = 13, 10


class _Lines:
    """Split a byte stream into ``(offset, line, ending)`` with absolute offsets.

    ``ending`` is "LF", "CRLF", "CR", or None for an unterminated last line at close. A line ended by
    a CR at the end of a chunk waits for the next byte, since an LF there makes it one CRLF.
    """

    def __init__(self, limit: int | None = None) -> None:
        # With a limit, an unterminated line keeps only limit + 1 bytes (enough to know it is too
        # long) and ``long_line`` is set once, so an endless line costs no memory.
        self._limit = limit
        self.long_line = False
        self._pos = 0  # absolute offset of the next byte fed
        self._head = b""  # the first bytes, held until the BOM question is settled
        self._bom_done = False
        self.bom = False
        self._partial = bytearray()
        self._partial_start = 0
        self._cr_line: tuple[int, bytes] | None = None

    def feed(self, chunk: bytes) -> list[tuple[int, bytes, str | None]]:
        base = self._pos
        self._pos += len(chunk)
        if not self._bom_done:
            head = self._head + chunk
            if len(head) < 3 and _BOM.startswith(head):
                self._head = head
                return []
            self._bom_done = True
            self._head = b""
            base -= len(head) - len(chunk)
            if head.startswith(_BOM):
                self.bom = True
                head = head[3:]
                base += 3
            chunk = head
        out: list[tuple[int, bytes, str | None]] = []
        n = len(chunk)
        i = 0
        if self._cr_line is not None and n:
            start, line = self._cr_line
            self._cr_line = None
            if chunk[0] == _LF_BYTE:
                out.append((start, line, CRLF))
                i = 1
            else:
                out.append((start, line, CR))
        while i < n:
            m = _EOL.search(chunk, i)
            if m is None:
                if not self._partial:
                    self._partial_start = base + i
                if self._limit is None:
                    self._partial += chunk[i:]
                elif len(self._partial) <= self._limit:
                    self._partial += chunk[i : i + self._limit + 1 - len(self._partial)]
                    self.long_line = len(self._partial) > self._limit
                break
            end = m.start()
            if self._partial:
                start = self._partial_start
                if self._limit is not None and len(self._partial) > self._limit:
                    # too long already, and dropped whole: its end is not needed, and joining it
                    # would copy the limit's worth of bytes twice more
                    # (read only, as bytes would be)
                    line, self._partial = cast(bytes, self._partial), bytearray()
                else:
                    line = bytes(self._partial) + chunk[i:end]
                    self._partial.clear()
            else:
                start = base + i
                line = chunk[i:end]
            if chunk[end] == _LF_BYTE:
                out.append((start, line, LF))
                i = end + 1
            elif end + 1 == n:
                self._cr_line = (start, line)
                break
            elif chunk[end + 1] == _LF_BYTE:
                out.append((start, line, CRLF))
                i = end + 2
            else:
                out.append((start, line, CR))
                i = end + 1
        return out

    def close(self) -> list[tuple[int, bytes, str | None]]:
        out: list[tuple[int, bytes, str | None]] = []
        if self._head:  # the whole stream was a prefix of a BOM
            out.append((0, self._head, None))
            self._head = b""
        if self._cr_line is not None:
            out.append((*self._cr_line, CR))
            self._cr_line = None
        if self._partial:
            out.append((self._partial_start, bytes(self._partial), None))
            self._partial.clear()
        return out

    @property
    def position(self) -> int:
        return self._pos


class _Framer:
    """Lines to SSE blocks: the WHATWG dispatch rules, with offsets and framing facts kept.

    Subclasses get ``on_line`` for every line, ``on_event(offset, data, type)`` for each dispatched
    event (``type`` is None without an ``event:`` field) and ``on_fields(offset, names)`` for a block
    of fields with no data; all three are called in stream order, as soon as the line arrives.
    """

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        # The Decoder's rules: a line longer than the limit, or an event whose data would pass it,
        # is dropped up to the next blank line and ``overflowed`` is set for the caller to raise on.
        self.limit = max_event_bytes
        self.overflowed = False
        self._discarding = False
        self.lines = _Lines(max_event_bytes)
        self._reset()

    def _reset(self) -> None:
        self.start: int | None = None  # offset of the block's first field line
        self.data: list[bytes] | None = None
        self.type: bytes | None = None
        self.fields: list[bytes] = []  # distinct non-data field names, in order
        self._data_size = -1  # bytes of the joined data so far; -1 before the first data line

    def on_line(self, offset: int, line: bytes, ending: str | None) -> None:
        pass

    def on_event(self, offset: int, data: bytes, event_type: bytes | None) -> None:
        pass

    def on_fields(self, offset: int, names: list[bytes]) -> None:
        pass

    def _feed_lines(self, chunk: bytes) -> None:
        self._lines(self.lines.feed(chunk))
        if self.lines.long_line:  # after every complete line of the chunk: the open one is too long
            self.lines.long_line = False
            if not self._discarding:
                self._overflow(self.lines._partial_start)

    def _overflow(self, offset: int) -> None:
        """Drop the event in progress up to the next blank line; ``offset`` is the line that passed
        the limit (subclasses report it)."""
        self.overflowed = True
        self._discarding = True
        self._reset()

    def _close_lines(self) -> None:
        self._lines(self.lines.close())

    def _lines(self, lines: list[tuple[int, bytes, str | None]]) -> None:
        limit = self.limit
        for offset, line, ending in lines:
            if self._discarding:
                if not line and ending is not None:
                    self._discarding = False
                continue
            if limit is not None and len(line) > limit:
                self._overflow(offset)
                continue
            self.on_line(offset, line, ending)
            if ending is None:
                continue  # unterminated at EOF: the spec discards it, and with it the pending event
            if not line:
                start = self.start
                if self.data is not None:
                    data, event_type = b"\n".join(self.data), self.type
                    self._reset()
                    assert start is not None
                    self.on_event(start, data, event_type)
                elif self.fields:
                    names = self.fields
                    self._reset()
                    assert start is not None
                    self.on_fields(start, names)
                else:
                    self._reset()
                continue
            if line[0] == 0x3A:  # ':' comment
                continue
            if self.start is None:
                self.start = offset
            name, value = split_field(line)
            if name == b"data":
                size = self._data_size + 1 + len(value)
                if limit is not None and size > limit:
                    self._overflow(offset)
                    continue
                if self.data is None:
                    self.data = []
                self.data.append(value)
                self._data_size = size
            else:
                if name == b"event":
                    self.type = value
                if name not in self.fields and len(self.fields) < 16:  # 200 MiB of "id:" lines: one name
                    self.fields.append(name)

    @property
    def pending(self) -> bool:
        """A field line arrived since the last blank line (an event is in progress)."""
        return self.start is not None


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


class StreamChecker(_Framer):
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

    def __init__(self, *, expect_usage: bool = False, max_event_bytes: int | None = None) -> None:
        super().__init__(max_event_bytes=event_limit(max_event_bytes, type(self).__name__))
        self.expect_usage = expect_usage
        self.findings: list[Finding] = []
        self.events = 0  # dispatched events, [DONE] included
        self._closed = False
        self._once: set[tuple[str, object]] = set()
        self._done_at: int | None = None
        self._usage = False
        self._first: dict[str, Any] = {}  # the first chunk's id and created
        self._choices: dict[int, _ChoiceState] = {}
        self._tool_ids: dict[str, tuple[int, int]] = {}
        self._new: list[Finding] = []
        self._partial_field = False  # the stream ended inside a field line
        self._partial_at = 0
        # The first SNIFF_BYTES bytes are held until they tell whether this is an event stream at
        # all; if not, one not-sse finding replaces the noise the lines would give.
        self._head: bytearray | None = bytearray()
        self._foreign = False
        self._fed = 0
        self._text = NoFieldText()  # a README fed by mistake: no event, no field, prose lines

    # reporting

    def _report(self, code: str, offset: int | None, message: str) -> None:
        finding = Finding(code, CODES[code].severity, offset, message)
        self.findings.append(finding)
        self._new.append(finding)

    def _report_once(self, code: str, offset: int | None, message: str, key: object = None) -> None:
        """Report ``code`` once per stream (or once per ``key``): one finding per cause, not per line."""
        if (code, key) not in self._once:
            self._once.add((code, key))
            self._report(code, offset, message)

    def _take(self) -> list[Finding]:
        new = self._new
        self._new = []
        return new

    # input

    def feed(self, data: bytes | bytearray | memoryview, /) -> list[Finding]:
        """Lint the next bytes of the stream; return the findings they revealed."""
        if self._closed:
            raise UsageError("feed() after close(): a StreamChecker lints one stream")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"StreamChecker.feed() takes bytes, bytearray or memoryview, not {type(data).__name__}"
            )
        self._fed += len(data) if not isinstance(data, memoryview) else data.nbytes
        if not self._text.field:
            self._text.feed(data)
        if self._head is not None:
            self._head += data
            if len(self._head) >= SNIFF_BYTES:
                self._sniff()  # which feeds the held bytes, this piece included
            return self._take()
        if not self._foreign:
            self._feed_lines(bytes(data))
        return self._take()

    def _sniff(self) -> None:
        assert self._head is not None
        head, self._head = bytes(self._head), None
        why = not_sse(head[:SNIFF_BYTES])
        if why is not None:
            self._foreign = True
            self._report("not-sse", 0, f"not an event stream: {why}")
        else:
            self._feed_lines(head)

    def close(self) -> list[Finding]:
        """End the stream; return the findings only its end reveals. A second call returns []."""
        if self._closed:
            return []
        self._closed = True
        if self._head is not None:
            self._sniff()
        if self._foreign:
            return self._take()
        self._close_lines()
        self._check_bom()
        if self._partial_field:
            self._report(
                "truncated", self._partial_at, "the stream ends in the middle of a line; the event is lost"
            )
        elif self.pending:
            self._report(
                "missing-final-blank-line",
                self.start,
                "the last event is not followed by a blank line, so compliant clients discard it",
            )
        self._end_checks(self.lines.position)
        self._text.close()
        why = self._text.not_a_stream() if self.events == 0 else None
        if why is not None:
            # one finding, as for a page or a document: the rest would describe how prose fails as SSE
            finding = Finding("not-sse", CODES["not-sse"].severity, 0, f"not an event stream: {why}")
            self.findings = [finding]
            self._new = [finding]
        return self._take()

    @property
    def size(self) -> int:
        """Bytes fed so far."""
        return self._fed

    def _overflow(self, offset: int) -> None:
        start = self.start if self.start is not None else offset
        super()._overflow(offset)
        self._report(
            "event-too-large",
            start,
            f"an event passes max_event_bytes={self.limit}; it was skipped unread, up to the next blank line",
        )

    def _check_bom(self) -> None:
        if self.lines.bom:
            self._report_once(
                "bom", 0, "the stream starts with a UTF-8 BOM; most Python clients then lose the first event"
            )

    # framing

    def on_line(self, offset: int, line: bytes, ending: str | None) -> None:
        """Framer hook: one line with its byte offset and ending (``None`` at the end of input)."""
        self._check_bom()
        if ending is None:
            self._partial_field = bool(line) and line[0] != 0x3A
            self._partial_at = self.start if self.start is not None else offset
            return
        if ending == CRLF:
            self._report_once(
                "crlf-line-endings", offset, "lines end in CRLF; clients that split on \\n\\n break"
            )
        elif ending == CR:
            self._report_once(
                "cr-line-endings", offset, "lines end in a lone CR; LF-only clients see no events"
            )
        if not line or line[0] == 0x3A:
            return
        if self._done_at is not None:
            self._report_once(
                "after-done", offset, "a field after data: [DONE]; clients stop reading at [DONE]"
            )
        if line == b"data":
            return  # a data field with an empty value
        if line.startswith(b"data:"):
            if len(line) > 5 and line[5] != 0x20:
                self._report_once(
                    "data-without-space",
                    offset,
                    "data: without a space; clients that strip 'data: ' misread it",
                )
            return
        name = line.split(b":", 1)[0]
        if name == b"event" and line[6:].lstrip(b" ") in (b"message", b"error"):
            return  # "error" is reported as error-object when its event dispatches
        label = name.decode("utf-8", "replace")
        hint = (
            " (openai-python then turns a later comment or blank line into an empty event)"
            if name == b"id"
            else ""
        )
        self._report_once(
            "non-data-field", offset, f"a {short(label)} field in a chat stream{hint}", key=label
        )

    def on_fields(self, offset: int, names: list[bytes]) -> None:
        """Framer hook: the field names of a block that ends without dispatching an event."""
        listed = ", ".join(sorted({n.decode("utf-8", "replace") for n in names}))
        self._report(
            "field-only-event",
            offset,
            f"a block with only {listed} and no data:; several clients dispatch it as an empty event",
        )

    def on_event(self, offset: int, data: bytes, event_type: bytes | None) -> None:
        """Framer hook: one dispatched event (its data joined, its ``event:`` type) at ``offset``."""
        self.events += 1
        self._event(offset, data, event_type)

    # events

    def _event(self, offset: int, raw: bytes, etype: bytes | None) -> None:
        if b"\n" in raw:
            self._report_once("multi-line-data", offset, "a payload spread over several data: lines")
        if self._done_at is not None:
            return  # on_line reported the first line after [DONE]
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
