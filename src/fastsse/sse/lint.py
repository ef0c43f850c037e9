"""The SSE framing rules every API's linter shares: ``FramingChecker``, the checker base each API's
linter builds on (``chat/lint.py``, ``fold/lint.py``), and ``CODES``, the codes these rules report.

A ``FramingChecker`` reports what is wrong with the event stream itself, whatever the API: a BOM, CR
or CRLF line endings, ``data:`` without a space, fields no event needs, blocks with no data, a stream
cut inside a line or an event, an event past ``max_event_bytes``, an input that is not an event
stream at all (``not_sse``, ``NoFieldText``). Each subclass reads the payloads of the events it
dispatches (invalid UTF-8, invalid JSON, the API's own rules) and says what the end of the stream
lacks. ``fastsse.check`` is the face: ``check_stream``, ``checker(api)``.

The checker scans lines itself rather than through ``fastsse.Decoder``: it needs byte offsets, line
endings, comments and field-only blocks, which a decoder rightly hides. Its event framing follows the
same WHATWG rules, and the tests hold the two to the same events on any input and any chunking.
"""

from __future__ import annotations

import re
from typing import Any, Final, NamedTuple, cast

from .._errors import UsageError, event_limit
from ._fields import split_field

__all__ = [
    "CODES",
    "ERROR",
    "SNIFF_BYTES",
    "WARNING",
    "CodeInfo",
    "Finding",
    "FramingChecker",
    "NoFieldText",
    "not_sse",
]

ERROR: Final = "error"
WARNING: Final = "warning"


class CodeInfo(NamedTuple):
    severity: str
    summary: str


# The codes every API's linter reports (each API's table adds its own); docs/conformance.md mirrors
# them with the clients each code breaks.
CODES: Final[dict[str, CodeInfo]] = {
    # SSE framing
    "bom": CodeInfo(ERROR, "the stream starts with a UTF-8 byte order mark"),
    "cr-line-endings": CodeInfo(ERROR, "lines end in a lone CR"),
    "crlf-line-endings": CodeInfo(WARNING, "lines end in CRLF instead of LF"),
    "data-without-space": CodeInfo(WARNING, "a data: field has no space after the colon"),
    "multi-line-data": CodeInfo(WARNING, "one event's payload is spread over several data: lines"),
    "non-data-field": CodeInfo(WARNING, "an event:, id:, retry: or unknown field the API never sends"),
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
    # payloads: every API's events carry JSON objects
    "invalid-json": CodeInfo(ERROR, "a data payload is not a JSON object (and not [DONE])"),
    "error-object": CodeInfo(ERROR, "an error object (or event: error) in the stream"),
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


class FramingChecker(_Framer):
    """``FramingChecker(*, max_event_bytes=None)``: the SSE framing rules, the base every API's
    linter builds on (``StreamChecker`` for chat, ``GrammarChecker`` for Responses and Messages).

    ``feed(data)`` returns the findings the new bytes revealed; ``close()`` returns the ones only the
    end of the stream can tell (truncation, a missing final blank line...). ``findings`` holds all of
    them so far, in stream order. Any chunking gives the same findings. With ``max_event_bytes=N``
    an event whose data, or a line, passes N bytes is skipped unread up to the next blank line and
    reported (``event-too-large``), as ``Decoder`` drops it: the checker then holds at most about N
    bytes of any event, however large the stream's events are. The first 64 bytes are held until
    they tell whether the input is an event stream at all (their findings come with the feed that
    completes them, or with ``close``): an HTML page, a JSON document or binary data gives the one
    finding ``not-sse`` and nothing else. So does a text with no event and no SSE field (a README):
    ``close`` returns ``not-sse`` and ``findings`` then holds only it.

    A subclass reads each dispatched event's payload (``_event``), says what the end of the stream
    lacks (``_end_checks``; here only ``empty-stream``) and names its codes (``codes``, looked up
    before ``CODES``).

    It raises TypeError or ValueError for a ``max_event_bytes`` that is not a positive int or None;
    ``feed`` raises TypeError for anything but a byte buffer, and ValueError after ``close``.
    """

    codes: dict[str, CodeInfo] = CODES  # the API's table, looked up first; never mutated
    stream: str = "an SSE stream"  # what the messages call the stream: each API names its own

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        super().__init__(max_event_bytes=event_limit(max_event_bytes, type(self).__name__))
        self.findings: list[Finding] = []
        self.events = 0  # dispatched events, [DONE] included
        self._closed = False
        self._once: set[tuple[str, object]] = set()
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
        info = self.codes.get(code) or CODES[code]
        finding = Finding(code, info.severity, offset, message)
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
            raise UsageError(f"feed() after close(): a {type(self).__name__} lints one stream")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"{type(self).__name__}.feed() takes bytes, bytearray or memoryview, not {type(data).__name__}"
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
        self._field_line(offset, line)
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
            "non-data-field", offset, f"a {short(label)} field in {self.stream}{hint}", key=label
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

    # what each API adds

    def _field_line(self, offset: int, line: bytes) -> None:
        """A field line (neither blank nor a comment), before the framing rules read it."""

    def _event(self, offset: int, raw: bytes, etype: bytes | None) -> None:
        """One dispatched event's payload (``etype`` is None without an ``event:`` field)."""

    def _end_checks(self, end: int) -> None:
        """What the stream, ``end`` bytes long, lacks at its end."""
        if self.events == 0:
            self._report("empty-stream", end, "no event in the stream")
