# cython: language_level=3, freethreading_compatible=True, annotation_typing=False
# cython: embedsignature=True, embedsignature.format=clinic
"""Compiled SSE decoder: the same rules as ``sse/_decoder_py.py``, scanned with C pointers.

Lines are found with memchr (one cached search per terminator kind, so the cost is linear
whatever the chunking); a partial line, the event's data and its type live in growable C
buffers; a Python object is made only for each dispatched event.

Two compiled-only bases live here too, below every fold: ``Feed``, the one C entry point the
compiled driver hands each read to (``Decoder`` and so every fused stream, and the compiled
``BytesStream``, are one), and ``FusedStream``, the plumbing ``ChatStream`` and ``FoldStream``
(``ResponsesStream``, ``MessagesStream``) share: ``write``/``feed``/``close``, the checks and the
stamp around each scan, the exception that stopped the stream and the timing record in C arrays.
Their Python twins keep the same plumbing in ``chat/_fold_py.py`` and ``fold/_stream_py.py``.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr, memcpy

from .._native.clock cimport fastsse_monotonic_ns

from .._errors import UsageError, bad_input_type, event_limit, too_large
from .._timing import anchor_pair, build_timing
from ._fields import long_retry

cdef str _MESSAGE = "message"
cdef str _EMPTY = ""
cdef Py_ssize_t _KEEP_CAPACITY = 1 << 20  # larger buffers are freed after their event
cdef const unsigned char* _BOM = b"\xef\xbb\xbf"


cdef inline int _buf_reserve(Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t need = b.len + extra
    cdef Py_ssize_t cap
    cdef char* ptr
    if need <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 256
    if cap < need:
        cap = need
    ptr = <char*>PyMem_Realloc(b.ptr, cap)
    if ptr == NULL:
        raise MemoryError()
    b.ptr = ptr
    b.cap = cap
    return 0


cdef inline int _buf_append(Buf* b, const char* p, Py_ssize_t n) except -1:
    if n <= 0:
        return 0
    if b.len + n > b.cap:
        _buf_reserve(b, n)
    memcpy(b.ptr + b.len, p, n)
    b.len += n
    return 0


cdef inline void _buf_clear(Buf* b) noexcept:
    # Keep the allocation for the next event unless it grew past _KEEP_CAPACITY.
    b.len = 0
    if b.cap > _KEEP_CAPACITY:
        PyMem_Free(b.ptr)
        b.ptr = NULL
        b.cap = 0


cdef inline void _buf_free(Buf* b) noexcept:
    PyMem_Free(b.ptr)
    b.ptr = NULL
    b.len = 0
    b.cap = 0


cdef inline bint _is_data_line(const char* line, Py_ssize_t n) noexcept nogil:
    # "data:" at the start: the field is data, whatever follows.
    return n >= 5 and line[4] == b":" and line[0] == b"d" and line[1] == b"a" and line[2] == b"t" and line[3] == b"a"


cdef inline bint _is_event(object obj):
    # Events of both backends compare equal, so tests can compare them directly.
    cdef object cls = type(obj)
    return cls.__name__ == "Event" and cls.__module__.startswith("fastsse.")


@cython.final
@cython.freelist(64)
@cython.no_gc  # holds only str and int/None, so it cannot be part of a cycle: skip GC tracking
cdef class Event:
    """One dispatched SSE event: ``Event(data="", event="message", id="", retry=None)``.

    ``data`` is the joined ``data:`` lines, ``event`` the type (``"message"`` unless an ``event:``
    field said otherwise), ``id`` the last event id in effect when it was dispatched (``""`` if none),
    ``retry`` the last valid ``retry:`` value in effect (``None`` if none). An Event is an object
    read by attribute, not a tuple: it cannot be unpacked or indexed. ``match`` takes its fields
    by position in the same order (``case Event(data, "error"):``). Events compare equal by value,
    across backends too, and are not hashable.
    """

    cdef readonly str data
    cdef readonly str event
    cdef readonly str id
    cdef readonly object retry

    def __init__(self, data: str = "", event: str = "message", id: str = "", retry: int | None = None) -> None:
        self.data = data
        self.event = event
        self.id = id
        self.retry = retry

    def __eq__(self, other: object) -> bool:
        if not _is_event(other):
            return NotImplemented
        return (self.data, self.event, self.id, self.retry) == (other.data, other.event, other.id, other.retry)

    __hash__ = None
    __match_args__ = ("data", "event", "id", "retry")

    def __repr__(self) -> str:
        return f"Event(data={self.data!r}, event={self.event!r}, id={self.id!r}, retry={self.retry!r})"


cdef class Feed:
    """The base of every stream the compiled driver feeds from C (see ``sse/_decoder_c.pxd``);
    not used on its own."""

    cdef int _write(self, const char* p, Py_ssize_t n) except -1:
        raise TypeError(f"{type(self).__name__} is not fed from C")

    cdef int _write_bytes(self, bytes data) except -1:
        return self._write(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef class Decoder(Feed):
    """Incremental SSE decoder: ``feed`` bytes as they arrive, get complete events back.

    ``Decoder(*, max_event_bytes=None)``. With ``max_event_bytes=N``, a line longer than N bytes
    or an event whose data would pass N bytes is dropped: the decoder skips to the next blank line
    and goes on, finishes the rest of the chunk, then ``feed`` raises ``EventTooLarge`` whose
    ``events`` attribute holds every event that call completed, in order, so nothing parsed is lost.
    Memory stays within about 2 N bytes. The default is no limit (real image events exceed 8 MiB).

    One decoder per stream: an instance is not safe to share between threads.
    """

    def __cinit__(self, *args, **kwargs):
        self._line.ptr = NULL
        self._data.ptr = NULL
        self._type.ptr = NULL
        self._line.cap = self._data.cap = self._type.cap = 0
        self._limit = -1
        self._last_id = _EMPTY
        self._retry = None
        self._out = []
        self._reset_stream()

    def __init__(self, *, max_event_bytes: int | None = None) -> None:
        limit = event_limit(max_event_bytes, type(self).__name__)
        if limit is not None:
            self._limit = limit

    def __dealloc__(self):
        _buf_free(&self._line)
        _buf_free(&self._data)
        _buf_free(&self._type)

    cdef void _reset_event(self) noexcept:
        _buf_clear(&self._data)
        _buf_clear(&self._type)
        self._ndata = 0
        self._has_type = False

    cdef void _reset_stream(self) noexcept:
        _buf_clear(&self._line)
        self._reset_event()
        self._head_len = 0
        self._bom_done = False
        self._pending_cr = False
        self._discarding = False
        self._discard_partial = False
        self._in_event = False
        self._truncated = False
        self._overflowed = False
        self._stopped = False

    @property
    def last_event_id(self) -> str:
        """The last event id buffer: set by ``id:`` fields, kept across events."""
        return self._last_id

    @property
    def retry(self) -> int | None:
        """The last valid ``retry:`` value in milliseconds, or None."""
        return self._retry

    @property
    def truncated(self) -> bool:
        """After ``close()``: True if the stream ended inside an event (which was discarded)."""
        return self._truncated

    @cython.binding(False)  # a plain method descriptor: ~8 ns less per call than a cyfunction
    def feed(self, data, /):
        """Decode the next piece of the stream and return the events it completed.

        It raises TypeError if ``data`` is not a byte buffer (the decoder stays usable) and
        EventTooLarge as described on the class.
        """
        cdef list out
        self._out = []
        self._overflowed = False
        try:
            self._feed_object(data)
        finally:
            out = self._out
            self._out = None  # a fresh list per call; no second empty list just to drop it
        if self._overflowed:
            raise too_large(self._limit, out)
        return out

    def close(self):
        """End the stream. An unterminated event is discarded, as the spec says, so this returns
        ``[]``; ``truncated`` tells whether one was pending. The decoder then starts a new stream,
        keeping ``last_event_id`` and ``retry`` (as a reconnecting EventSource does)."""
        cdef bint truncated = self._line.len > 0 or self._head_len > 0 or self._in_event or self._discarding
        self._reset_stream()
        self._truncated = truncated
        return []

    cdef int _feed_object(self, object data) except -1:
        cdef Py_buffer view
        if type(data) is bytes:
            return self._scan(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise bad_input_type(data, self)
        try:
            PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        except BufferError:  # a non-contiguous memoryview
            data = bytes(data)
            return self._scan(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
        try:
            self._scan(<const char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
        return 0

    cdef int _on_event(self, const char* data, Py_ssize_t n, const char* etype, Py_ssize_t tn) except -1:
        """Called for every dispatched event; return 1 to stop scanning this stream."""
        cdef Event ev = Event.__new__(Event)
        ev.data = PyUnicode_DecodeUTF8(data, n, "replace")
        ev.event = PyUnicode_DecodeUTF8(etype, tn, "replace") if tn else _MESSAGE
        ev.id = self._last_id
        ev.retry = self._retry
        self._out.append(ev)
        return 0

    cdef int _on_comment(self, const char* line, Py_ssize_t n) except -1:
        """Called for every comment line (the relay forwards them); return 1 to stop scanning."""
        return 0

    cdef void _overflow(self, bint partial) noexcept:
        self._overflowed = True
        self._discarding = True
        self._discard_partial = partial
        _buf_clear(&self._line)
        self._reset_event()

    cdef int _scan(self, const char* p, Py_ssize_t n) except -1:
        cdef const char* stop = p + n
        cdef const char* lf = p - 1   # cached next LF at or after p (stop if none)
        cdef const char* cr = p - 1   # cached next CR at or after p (stop if none)
        cdef const char* eol
        cdef const char* nxt
        cdef const char* line
        cdef Py_ssize_t line_len
        cdef Py_ssize_t k
        if self._stopped or n <= 0:
            return 0
        if self._busy:
            raise UsageError("Decoder.feed() called again from inside its own callback")
        if not self._bom_done:
            # Hold up to three bytes until we know whether the stream opens with a UTF-8 BOM.
            while p < stop and self._head_len < 3:
                if (<const unsigned char*>p)[0] != _BOM[self._head_len]:
                    break
                self._head[self._head_len] = p[0]
                self._head_len += 1
                p += 1
            if self._head_len == 3:
                self._head_len = 0
                self._bom_done = True
            elif p == stop:
                return 0
            else:
                # Not a BOM: the held bytes are ordinary stream content.
                self._bom_done = True
                k = self._head_len
                self._head_len = 0
                if k:
                    self._scan(<const char*>self._head, k)
                    if self._stopped:
                        return 0
            lf = cr = p - 1
        if self._pending_cr:
            self._pending_cr = False
            if p < stop and p[0] == b"\n":
                p += 1
        self._busy = True
        try:
            while p < stop:
                if lf < p:
                    lf = <const char*>memchr(p, b"\n", stop - p)
                    if lf == NULL:
                        lf = stop
                if cr < p:
                    cr = <const char*>memchr(p, b"\r", stop - p)
                    if cr == NULL:
                        cr = stop
                eol = lf if lf < cr else cr
                if eol == stop:
                    # No terminator in the rest of the chunk: hold the partial line.
                    if self._discarding:
                        self._discard_partial = True
                    elif self._limit >= 0 and self._line.len + (stop - p) > self._limit:
                        self._overflow(True)
                    else:
                        _buf_append(&self._line, p, stop - p)
                    break
                if (
                    _is_data_line(p, eol - p)
                    and self._line.len == 0
                    and self._ndata == 0
                    and not self._has_type
                    and not self._discarding
                    and (self._limit < 0 or eol - p <= self._limit)
                ):
                    # The usual event, "data: <payload>" and a blank line, whole in this read:
                    # dispatched from the read itself, with nothing copied.
                    nxt = NULL
                    if eol[0] == b"\n":
                        if eol + 1 < stop and eol[1] == b"\n":
                            nxt = eol + 2
                    elif eol + 3 < stop and eol[1] == b"\n" and eol[2] == b"\r" and eol[3] == b"\n":
                        nxt = eol + 4
                    if nxt != NULL:
                        line = p + 5
                        if line < eol and line[0] == b" ":
                            line += 1
                        p = nxt
                        self._in_event = False
                        if self._on_event(line, eol - line, NULL, 0):
                            self._stopped = True
                            break
                        continue
                if eol[0] == b"\r":
                    if eol + 1 < stop:
                        nxt = eol + 2 if eol[1] == b"\n" else eol + 1
                    else:
                        self._pending_cr = True
                        nxt = eol + 1
                else:
                    nxt = eol + 1
                if self._discarding:
                    if eol == p and not self._discard_partial:
                        self._discarding = False
                        self._in_event = False
                        self._reset_event()
                    self._discard_partial = False
                    p = nxt
                    continue
                if self._line.len:
                    _buf_append(&self._line, p, eol - p)
                    line = self._line.ptr
                    line_len = self._line.len
                else:
                    line = p
                    line_len = eol - p
                p = nxt
                if self._limit >= 0 and line_len > self._limit:
                    self._overflow(False)
                    continue
                k = self._process(line, line_len)
                self._line.len = 0
                if k:
                    self._stopped = True
                    break
        finally:
            self._busy = False
        return 0

    cdef inline int _add_data(self, const char* value, Py_ssize_t value_len) except -1:
        cdef Py_ssize_t size = self._data.len + (1 if self._ndata else 0) + value_len
        if self._limit >= 0 and size > self._limit:
            self._overflow(False)
            return 0
        if size > self._data.cap:
            _buf_reserve(&self._data, size - self._data.len)
        if self._ndata:
            self._data.ptr[self._data.len] = b"\n"
            self._data.len += 1
        if value_len:
            memcpy(self._data.ptr + self._data.len, value, value_len)
            self._data.len += value_len
        self._ndata += 1
        return 0

    cdef int _process(self, const char* line, Py_ssize_t n) except -1:
        cdef const char* colon
        cdef const char* value
        cdef Py_ssize_t name_len, value_len, size, i
        cdef long long retry
        cdef int stop
        if n == 0:
            self._in_event = False
            if self._ndata == 0:
                self._reset_event()
                return 0
            try:
                stop = self._on_event(self._data.ptr, self._data.len, self._type.ptr, self._type.len)
            finally:
                self._reset_event()
            return stop
        if line[0] == b":":
            return self._on_comment(line, n)
        self._in_event = True
        if _is_data_line(line, n):
            # Most lines of a stream: no search for the colon.
            value = line + 5
            value_len = n - 5
            if value_len and value[0] == b" ":
                value += 1
                value_len -= 1
            return self._add_data(value, value_len)
        colon = <const char*>memchr(line, b":", n)
        if colon == NULL:
            name_len = n
            value = line + n
            value_len = 0
        else:
            name_len = colon - line
            value = colon + 1
            value_len = n - name_len - 1
            if value_len and value[0] == b" ":
                value += 1
                value_len -= 1
        if name_len == 4 and line[0] == b"d" and line[1] == b"a" and line[2] == b"t" and line[3] == b"a":
            return self._add_data(value, value_len)
        elif name_len == 5 and line[0] == b"e" and line[1] == b"v" and line[2] == b"e" and line[3] == b"n" and line[4] == b"t":
            self._type.len = 0
            _buf_append(&self._type, value, value_len)
            self._has_type = True
        elif name_len == 2 and line[0] == b"i" and line[1] == b"d":
            if value_len == 0 or memchr(value, 0, value_len) == NULL:
                self._last_id = PyUnicode_DecodeUTF8(value, value_len, "replace")
        elif name_len == 5 and line[0] == b"r" and line[1] == b"e" and line[2] == b"t" and line[3] == b"r" and line[4] == b"y":
            if value_len == 0:
                return 0
            for i in range(value_len):
                if value[i] < b"0" or value[i] > b"9":
                    return 0
            if value_len <= 18:
                retry = 0
                for i in range(value_len):
                    retry = retry * 10 + (value[i] - 48)
                self._retry = retry
            else:
                big = long_retry(value[:value_len])
                if big is not None:
                    self._retry = big
        return 0


cdef int _stamp(FusedStream self) except -1:
    cdef long long now = fastsse_monotonic_ns()
    cdef long long* grown
    if self._nreads == self._reads_cap:
        grown = <long long*>PyMem_Realloc(self._reads, (self._reads_cap * 2 + 64) * sizeof(long long))
        if grown is NULL:
            raise MemoryError()
        self._reads = grown
        self._reads_cap = self._reads_cap * 2 + 64
    self._reads[self._nreads] = now
    self._nreads += 1
    return 0


cdef inline int _write_from(FusedStream self, const char* p, Py_ssize_t n, object data) except -1:
    # ``write``: the checks and the stamp around the scan of ``p[:n]`` (the C entry point: no
    # bytes object, no call), or of the object ``data`` when ``p`` is NULL; 1 to go on, 0 once
    # stopped
    if self._finished or self._closed:
        return 0
    if self._writing:
        raise UsageError(f"{type(self).__name__}.write() called again from inside on_chunk")
    if self._timed:
        _stamp(self)  # as the bytes arrive, before any is parsed
    self._writing = True
    self._overflowed = False
    try:
        if p != NULL:
            self._scan(p, n)
        else:
            self._feed_object(data)
    finally:  # an on_chunk that raised is kept in _exception where it is caught
        self._writing = False
    if self._overflowed:
        self._too_large = True
        self._finished = True
        self._exception = too_large(self._limit, [])
        raise self._exception
    return 0 if self._finished else 1


cdef class FusedStream(Decoder):
    """The base of ``ChatStream`` and ``FoldStream`` (see ``sse/_decoder_c.pxd``); not used on
    its own."""

    def __init__(self, on_chunk=None, *, max_event_bytes=None, timing=False):
        Decoder.__init__(self, max_event_bytes=max_event_bytes)
        self._on_chunk = on_chunk
        self._timed = bool(timing)
        self._anchor = anchor_pair() if self._timed else [0, 0]

    def __dealloc__(self):
        PyMem_Free(self._reads)
        PyMem_Free(self._toks)

    @cython.binding(False)  # a plain method descriptor: ~8 ns less per call than a cyfunction
    def write(self, data: bytes | bytearray | memoryview, /) -> int | None:
        """Scan, parse and fold the next bytes: None to go on, 0 once the stream has stopped.

        It raises what ``on_chunk`` raised, EventTooLarge, TypeError and RuntimeError as
        described on the class.
        """
        return None if _write_from(self, NULL, 0, data) else 0

    cdef int _write(self, const char* p, Py_ssize_t n) except -1:
        return _write_from(self, p, n, None)

    cdef int _write_object(self, object data) except -1:
        return _write_from(self, NULL, 0, data)

    def feed(self, data: bytes | bytearray | memoryview, /) -> list[Event]:
        """``write`` under the Decoder's name: events are folded, so it returns ``[]``."""
        _write_from(self, NULL, 0, data)
        return []

    def close(self, *, truncated: bool = False) -> list[Event]:
        """Mark the end of the byte stream; returns ``[]`` (events are folded, not returned).
        ``truncated=True`` says the transfer broke (a transport error): without its terminal event
        the stream is then reported truncated even if it ended on an event boundary."""
        self._close(truncated)
        return []

    cdef int _close(self, bint truncated) except -1:
        if not self._closed:
            self._closed = True
            Decoder.close(self)
            # Bytes never scanned because the stream stopped do not make it truncated.
            self._eof_truncated = (self._truncated or truncated) and not self._finished
        return 0

    def timing(self):
        """The timing record so far (a new ``fastsse.Timing`` dict on every call), or None when
        the stream was made without ``timing=True``; the request stamps are left to a client."""
        arrays = self._timing_arrays()
        return None if arrays is None else build_timing(*arrays)

    def _timing_arrays(self):
        # With timing=True: (reads, token_reads, tokens, token_kinds, anchor), new lists.
        cdef Py_ssize_t i
        if not self._timed:
            return None
        return (
            [self._reads[i] for i in range(self._nreads)],
            [self._toks[i].read for i in range(self._ntoks)],
            [self._toks[i].count for i in range(self._ntoks)],
            [self._toks[i].kind for i in range(self._ntoks)],
            list(self._anchor),
        )

    cdef int _token(self, int kind, long long count) except -1:
        cdef TokenRec* grown
        cdef TokenRec* rec
        if self._ntoks == self._toks_cap:
            grown = <TokenRec*>PyMem_Realloc(self._toks, (self._toks_cap * 2 + 64) * sizeof(TokenRec))
            if grown is NULL:
                raise MemoryError()
            self._toks = grown
            self._toks_cap = self._toks_cap * 2 + 64
        rec = &self._toks[self._ntoks]
        self._ntoks += 1
        rec.read = self._nreads - 1
        rec.kind = kind
        rec.count = count
        return 0
