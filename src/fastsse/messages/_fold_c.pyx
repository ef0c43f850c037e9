# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""Compiled Messages fold and MessagesStream; ``messages/_fold_py.py`` is the readable twin and the
reference. Each payload goes through ``orjson.loads`` and one dispatch on the event type; text
and tool-input fragments are kept in per-block lists joined once, and tool input is parsed once
at ``content_block_stop``. MessagesStream subclasses the shared compiled FoldStream (a Decoder, in
``fold._stream_c``) and folds inside its event hook. The cold half (result assembly, the verdict)
is shared Python in ``messages/_result.py``.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItemWithError, PyDict_SetItem, PyDict_Size
from cpython.list cimport PyList_Append
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.unicode cimport PyUnicode_GET_LENGTH
from cpython.object cimport PyObject
from libc.string cimport memcmp

from ..fold._stream_c cimport D_ARGUMENTS, D_REASONING, D_TEXT, FastDelta, FoldCounters, FoldStream, check_payload, event_name
from .._native.done cimport payload_is_done
from .._native.reader cimport Span, decode, next_member, read_key, read_plain, read_string, read_uint, skip_ws, span_is

from ..fold import CONTENT, REASONING
from ..fold import MAX_INDEX, format_verdict_dict, is_done, joined
from ._result import BLOCK_OF_DELTA, build_message, event_error, start_content, tool_input
from ._result import make_verdict as _make_verdict
from ._result import token_kind as _token_kind

cdef long long _MAX_INDEX = MAX_INDEX
cdef int CONTENT_C = CONTENT
cdef int REASONING_C = REASONING

cdef enum:
    M_OTHER
    M_DELTA
    M_START
    M_STOP
    M_MESSAGE_DELTA
    M_MESSAGE_START
    M_MESSAGE_STOP
    M_PING
    M_ERROR

cdef dict _CODES = {
    "content_block_delta": M_DELTA,
    "content_block_start": M_START,
    "content_block_stop": M_STOP,
    "message_delta": M_MESSAGE_DELTA,
    "message_start": M_MESSAGE_START,
    "message_stop": M_MESSAGE_STOP,
    "ping": M_PING,
    "error": M_ERROR,
}


cdef inline long long _as_index(object value) noexcept:
    # The index a JSON integer names, or -1 (not an int, a bool, negative, past MAX_INDEX).
    cdef int overflow = 0
    cdef long long v
    if type(value) is not int:
        return -1
    v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or v < 0 or v > _MAX_INDEX:
        return -1
    return v


cdef inline object _get(dict d, str key):
    cdef PyObject* found = PyDict_GetItemWithError(d, key)
    return None if found is NULL else <object>found


cdef bint _is_done(object payload) except -1:
    # [DONE] is short: only a short payload pays for the Python check.
    if type(payload) is bytes:
        return payload_is_done(PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload))
    return len(payload) <= 64 and is_done(payload)


@cython.final
cdef class _Block:
    """One content block being assembled."""

    cdef public object index
    cdef public dict fields
    cdef public dict texts
    cdef public list json
    cdef public object input
    cdef public bint parsed
    cdef public list citations
    cdef public bint started
    cdef public bint stopped

    def __cinit__(self, index):
        self.index = index
        self.fields = {}
        self.texts = {}


@cython.final
cdef class MessagesAggregator(FoldCounters):
    """MessagesAggregator()
--

Folds the events of an Anthropic Messages stream into the message the API returns without
    streaming. One aggregator per stream; not safe to share between threads. See the Python twin
    (``fastsse.messages._fold_py.MessagesAggregator``) for the rules; both behave identically.
    """

    cdef dict _fields
    cdef dict _usage
    cdef dict _blocks
    cdef Py_ssize_t _high
    cdef bint _started
    cdef bint _terminal

    def __init__(self) -> None:
        self._fields = {}
        self._blocks = {}
        self._high = -1

    # Public API

    def feed(self, event: dict[str, Any], /) -> None:
        """Fold one parsed event. Something other than a dict is skipped and counted in ``skipped``."""
        if self._terminal or self._error is not None:
            self._ignored += 1
        elif type(event) is dict:
            self._take(<dict>event, None)
        else:
            self._skipped += 1

    def feed_data(self, payload: str | bytes | bytearray | memoryview, /) -> bool:
        """Parse one event's data and fold it: True if it was folded, False for a skipped or ignored
        payload. It raises TypeError if ``payload`` is not str or bytes-like."""
        if type(payload) is not bytes and type(payload) is not str:
            check_payload(payload)
        return self._fold(payload, None) is not None

    def feed_event(self, event: Any, /) -> bool:
        """Fold one SSE event (anything with ``event`` and ``data`` attributes); returns what
        ``feed_data`` returns. It raises TypeError if ``event.data`` is not str or bytes-like."""
        data = event.data
        check_payload(data)
        name = event.event
        return self._fold(data, name if name and name != "message" else None) is not None

    def result(self) -> dict[str, Any]:
        """The message folded so far: a new dict (and new lists) on every call."""
        return build_message(self._fields, self._usage, self._blocks, self._error)

    @property
    def terminal(self) -> str | None:
        """``"message_stop"`` once it arrived, else None."""
        return "message_stop" if self._terminal else None

    @property
    def deltas(self) -> int:
        """Content deltas folded so far."""
        return self._deltas

    @property
    def ignored(self) -> int:
        """Payloads ignored because they came after ``message_stop`` or an error."""
        return self._ignored

    # Internal entry points shared with MessagesStream

    cdef object _verdict(self, bint aborted, bint too_big, bint truncated):
        return _make_verdict(
            self._fields, self._usage, self._blocks, self._started, self._terminal, self._error,
            self._departures, self._skipped, self._ignored, self._malformed, aborted, too_big, truncated,
        )

    cdef object _fold(self, object payload, object name):
        if self._terminal or self._error is not None:
            self._ignored += 1
            return None
        if _is_done(payload):
            return None
        if name is None and type(payload) is bytes and self._fast(PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload), NULL, 0, NULL):
            return True
        return self._parse_take(payload, name)

    cdef int _fast(self, const char* data, Py_ssize_t n, const char* etype, Py_ssize_t tn, FastDelta* out) except -1:
        # The hot event, {"type": "content_block_delta", "index": N, "delta": {"type":
        # "text_delta" | "thinking_delta" | "input_json_delta", <its field>: "..."}}, read from its
        # bytes into a block that exists: 1 if folded. Anything else (other keys, a block never
        # started, an event line that disagrees, JSON orjson would refuse) answers 0 with nothing
        # changed, and the payload goes the orjson way, which records what the reader left.
        cdef const char* p = data
        cdef const char* end = data + n
        cdef Span key, kind, dkind, text, text_key
        cdef long long index = -1
        cdef bint more = True
        cdef bint inner = True
        cdef int seen = 0
        cdef int dseen = 0
        cdef PyObject* found
        cdef _Block b
        cdef object piece
        cdef int taken
        if tn and not (tn == 19 and memcmp(etype, b"content_block_delta", 19) == 0):
            return 0
        text.p = text_key.p = dkind.p = NULL
        text.n = text_key.n = dkind.n = 0
        p = skip_ws(p, end)
        if p >= end or p[0] != 123:
            return 0
        p = skip_ws(p + 1, end)
        while more:
            p = read_key(p, end, &key)
            if p == NULL:
                return 0
            if span_is(key, b"type", 4) and not seen & 1:
                seen |= 1
                p = read_plain(p, end, &kind)
                if p == NULL or not span_is(kind, b"content_block_delta", 19):
                    return 0
            elif span_is(key, b"index", 5) and not seen & 2:
                seen |= 2
                p = read_uint(p, end, &index)
            elif span_is(key, b"delta", 5) and not seen & 4:
                seen |= 4
                if p >= end or p[0] != 123:
                    return 0
                p = skip_ws(p + 1, end)
                while inner:
                    p = read_key(p, end, &key)
                    if p == NULL:
                        return 0
                    if span_is(key, b"type", 4) and not dseen & 1:
                        dseen |= 1
                        p = read_plain(p, end, &dkind)
                    elif not dseen & 2 and (
                        span_is(key, b"text", 4) or span_is(key, b"thinking", 8) or span_is(key, b"partial_json", 12)
                    ):
                        dseen |= 2
                        p = read_string(p, end, &text)
                        text_key = key
                    else:
                        return 0
                    if p == NULL:
                        return 0
                    p = next_member(p, end, &inner, c'}')
                    if p == NULL:
                        return 0
            else:
                return 0
            if p == NULL:
                return 0
            p = next_member(p, end, &more, c'}')
            if p == NULL:
                return 0
        if skip_ws(p, end) != end or seen != 7 or dseen != 3 or index > _MAX_INDEX:
            return 0
        if span_is(dkind, b"text_delta", 10):
            if not span_is(text_key, b"text", 4):
                return 0
        elif span_is(dkind, b"thinking_delta", 14):
            if not span_is(text_key, b"thinking", 8):
                return 0
        elif span_is(dkind, b"input_json_delta", 16):
            if not span_is(text_key, b"partial_json", 12):
                return 0
        else:
            return 0
        found = PyDict_GetItemWithError(self._blocks, <Py_ssize_t>index)
        if found is NULL:
            return 0
        piece = decode(text)
        if piece is None:
            return 0
        b = <_Block>found
        self._deltas += 1
        self._fast_count += 1
        if out != NULL:  # what a translator's sink carries on
            out.which = D_TEXT if text_key.n == 4 else D_REASONING if text_key.n == 8 else D_ARGUMENTS
            out.index = index
            out.text = text
        # 1 + the token kind (what the timing record counts): none for an empty fragment.
        taken = 1 if PyUnicode_GET_LENGTH(piece) == 0 else 1 + (REASONING_C if text_key.n == 8 else CONTENT_C)
        if text_key.n == 12:
            if b.json is None:
                b.json = [piece]
            else:
                PyList_Append(b.json, piece)
            return taken
        name = "text" if text_key.n == 4 else "thinking"
        found = PyDict_GetItemWithError(b.texts, name)
        if found is NULL:
            PyDict_SetItem(b.texts, name, [piece])
        else:
            PyList_Append(<list>found, piece)
        return taken

    cdef int _take(self, dict ev, object name) except -1:
        cdef object kind = _get(ev, "type")
        cdef PyObject* found
        cdef int code
        if type(kind) is not str:
            if kind is not None:
                self._malformed += 1
            if name is None:
                self._depart("untyped_event")
                return 0
            kind = name
        elif name is not None and name != kind:
            self._depart("type_mismatch")
        found = PyDict_GetItemWithError(_CODES, kind)
        code = M_OTHER if found is NULL else <int><object>found
        if code == M_DELTA:
            self._delta(ev)
        elif code == M_START:
            self._start(ev)
        elif code == M_STOP:
            self._stop(ev)
        elif code == M_MESSAGE_DELTA:
            self._message_delta(ev)
        elif code == M_MESSAGE_START:
            self._message_start(ev)
        elif code == M_MESSAGE_STOP:
            self._terminal = True
        elif code == M_ERROR:
            self._error = event_error(ev)
        elif code == M_OTHER:
            self._depart("unknown_event")
        return 0

    cdef Py_ssize_t _index(self, dict ev) except -1:
        cdef long long index = _as_index(_get(ev, "index"))
        if index >= 0:
            return <Py_ssize_t>index
        self._malformed += 1
        return self._high if self._high > 0 else 0

    cdef int _message_start(self, dict ev) except -1:
        if self._started:
            self._depart("message_start_twice")
        elif self._blocks:
            self._depart("message_start_late")
        self._started = True
        cdef object message = _get(ev, "message")
        if type(message) is not dict:
            self._malformed += 1
            return 0
        for key, value in (<dict>message).items():
            if value is None:
                continue
            if key == "usage":
                self._merge_usage(value)
            elif key == "content":
                kept, bad = start_content(value)
                self._fields[key] = kept
                self._malformed += bad
            else:
                self._fields[key] = value
        return 0

    cdef int _merge_usage(self, object usage) except -1:
        if type(usage) is not dict:
            self._malformed += 1
            return 0
        if self._usage is None:
            self._usage = {}
        for key, value in (<dict>usage).items():
            if value is not None:
                self._usage[key] = value
        return 0

    cdef int _message_delta(self, dict ev) except -1:
        cdef object delta = _get(ev, "delta")
        if type(delta) is dict:
            for key, value in (<dict>delta).items():
                if value is not None:
                    self._fields[key] = value
        elif delta is not None:
            self._malformed += 1
        usage = _get(ev, "usage")
        if usage is not None:
            self._merge_usage(usage)
        return 0

    cdef int _start(self, dict ev) except -1:
        cdef Py_ssize_t index = self._index(ev)
        cdef object block = _get(ev, "content_block")
        cdef _Block b
        if type(block) is not dict:
            self._malformed += 1  # no block to make: a content block always has a type
            return 0
        found = self._blocks.get(index)
        if found is None:
            b = _Block(index)
            self._blocks[index] = b
        else:
            b = <_Block>found
            if b.started:
                self._depart("block_started_twice")
        if index < self._high:
            self._depart("block_out_of_order")
        elif index > self._high:
            self._high = index
        b.started = True
        for key, value in (<dict>block).items():
            if key not in b.texts:
                b.fields[key] = value
        return 0

    cdef int _delta(self, dict ev) except -1:
        cdef Py_ssize_t index = self._index(ev)
        cdef object delta = _get(ev, "delta")
        cdef PyObject* found
        cdef _Block b
        cdef object piece
        if type(delta) is not dict:
            self._malformed += 1
            return 0
        dtype = _get(<dict>delta, "type")
        found = PyDict_GetItemWithError(self._blocks, index)
        if found is NULL:
            b = _Block(index)
            self._blocks[index] = b
            b.fields["type"] = BLOCK_OF_DELTA.get(dtype, "text") if type(dtype) is str else "text"
            self._depart("block_not_started")
            if index > self._high:
                self._high = index
        else:
            b = <_Block>found
        self._deltas += 1
        if PyDict_Size(<dict>delta) == 2:
            # The common shapes, {"type": "text_delta", "text": ...} and the thinking twin, without
            # walking the delta's items.
            piece = None
            if dtype == "text_delta":
                key = "text"
                piece = _get(<dict>delta, "text")
            elif dtype == "thinking_delta":
                key = "thinking"
                piece = _get(<dict>delta, "thinking")
            if type(piece) is str:
                found = PyDict_GetItemWithError(b.texts, key)
                if found is NULL:
                    PyDict_SetItem(b.texts, key, [piece])
                else:
                    PyList_Append(<list>found, piece)
                return 0
        if dtype == "input_json_delta":
            piece = _get(<dict>delta, "partial_json")
            if type(piece) is str:
                if b.json is None:
                    b.json = [piece]
                else:
                    PyList_Append(b.json, piece)
            elif piece is not None:
                self._malformed += 1
            return 0
        if dtype == "citations_delta":
            piece = _get(<dict>delta, "citation")
            if piece is not None:
                if b.citations is None:
                    b.citations = []
                PyList_Append(b.citations, piece)
            return 0
        for key, value in (<dict>delta).items():
            if key == "type" or value is None:
                continue
            if type(value) is str:
                found = PyDict_GetItemWithError(b.texts, key)
                if found is NULL:
                    PyDict_SetItem(b.texts, key, [value])
                else:
                    PyList_Append(<list>found, value)
            else:
                b.fields[key] = value
        return 0

    cdef int _stop(self, dict ev) except -1:
        cdef Py_ssize_t index = self._index(ev)
        found = self._blocks.get(index)
        if found is None:
            self._depart("block_not_started")
            return 0
        cdef _Block b = <_Block>found
        b.stopped = True
        if b.json is not None and not b.parsed:
            raw = joined(b.json)
            if (<str>raw).strip():
                ok, value = tool_input(raw)  # once, at the block's end
                if ok:
                    b.input = value
                    b.parsed = True
                else:
                    self._depart("unparsed_input")
        return 0


@cython.final
cdef class MessagesStream(FoldStream):
    """MessagesStream(on_chunk=None, *, max_event_bytes=None, timing=False)
--

Scans, parses and folds an Anthropic Messages stream in one pass, for pycurl's
    ``WRITEFUNCTION`` (or any push source); one per stream, not safe to share between threads.
    The protocol of ``ChatStream``; an ``error`` event stops the stream. See the Python twin
    (``fastsse.messages._fold_py.MessagesStream``).
    """

    def __init__(
        self, on_chunk: OnEvent | None = None, *, max_event_bytes: int | None = None, timing: bool = False
    ) -> None:
        FoldStream.__init__(self, on_chunk, max_event_bytes=max_event_bytes, timing=timing)
        self._agg = MessagesAggregator()

    def result(self) -> dict[str, Any]:
        """The folded message so far, with ``"verdict"`` (as plain data): a new dict on every call."""
        out = self._agg.result()
        out["verdict"] = format_verdict_dict(self.verdict)
        return out

    @property
    def aggregator(self) -> MessagesAggregator:
        """The ``MessagesAggregator`` this stream folds into."""
        return self._agg

    cdef int _on_event(self, const char* data, Py_ssize_t n, const char* etype, Py_ssize_t tn) except -1:
        cdef FastDelta delta
        cdef MessagesAggregator agg = <MessagesAggregator>self._agg
        cdef int taken
        if self._overflowed:
            return 1
        if agg._terminal or agg._error is not None:
            agg._ignored += 1
            return 0
        if payload_is_done(data, n):
            return 0
        if self._on_chunk is None:
            taken = agg._fast(data, n, etype, tn, NULL)
            if taken:
                if self._timed and taken > 1:
                    self._token(taken - 1, 1)
                return 0
        elif self._sink is not None:
            if self._sink.ready():
                taken = agg._fast(data, n, etype, tn, &delta)
                if taken:
                    if self._timed and taken > 1:
                        self._token(taken - 1, 1)
                    self._sink.take(&delta)
                    return 0
            self._sink.flush()
        return self._deliver(agg._parse_take(PyBytes_FromStringAndSize(data, n), event_name(etype, tn)))

    cdef int _kind(self, object event) except -1:
        return _token_kind(event)

    cdef bint _stops_on_error(self) except -1:
        # The Messages API ends a stream with its error event.
        return (<MessagesAggregator>self._agg)._error is not None

    cdef object _verdict_now(self):
        return (<MessagesAggregator>self._agg)._verdict(self._aborted, self._too_large, self._eof_truncated)
